#!/usr/bin/env bash
# Set up from scratch, then run every check: lint, types, JS unit tests, Python tests (with the
# real jupyter server, kernels and headless Chromium).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --test

echo "==> ruff and mypy"
ruff check .
ruff format --check .
mypy

echo "==> JS: typecheck and unit tests"
(cd js && npm run typecheck --silent && npm test --silent)

echo "==> Python tests"
python -m pytest -p no:cacheprovider "$@"
