#!/usr/bin/env bash
# Set up from scratch, then run every check: lint, types, JS unit tests, Python tests (with the
# real jupyter server, kernels and headless Chromium).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --test
# The tools the tests start (jupyter, neta-jupyter) come from the project virtualenv too.
export PATH="$PWD/.venv/bin:$PATH"

echo "==> import contracts (docs/architecture.md: layers, no cycles, framework fences)"
.venv/bin/lint-imports

echo "==> ruff and mypy"
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy

echo "==> JS: typecheck and unit tests"
(cd js && npm run typecheck --silent && npm test --silent)

echo "==> docs (Sphinx, warnings as errors)"
bash scripts/docs.sh -q

# The wheel as users install it, in a fresh virtualenv (SMOKE=0 skips it, for a quick local run).
if [[ "${SMOKE:-1}" != "0" ]]; then
  echo "==> the installed product: sdist and wheel, a fresh virtualenv, smoke/"
  start=$SECONDS
  bash scripts/smoke.sh
  echo "==> smoke: $((SECONDS - start)) s"
fi

echo "==> Python tests"
# The slowest tests are listed: what to look at first when the suite grows slow.
.venv/bin/python -m pytest -p no:cacheprovider --durations=40 "$@"
