#!/usr/bin/env bash
# Install everything from scratch: the JS widget bundle, then the package with its test extras.
# Usage: scripts/setup.sh [--test]   (--test also installs Chromium for the browser tests)
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ "${1:-}" == "--test" ]] && ! command -v chromium >/dev/null 2>&1; then
  if [[ "$(id -u)" == "0" ]] && command -v apt-get >/dev/null 2>&1; then
    echo "==> installing Chromium for the browser tests (apt-get)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    echo "==> Chromium is missing and cannot be installed here; browser tests will be skipped"
  fi
fi

echo "==> building the widget (npm ci && npm run build)"
(cd js && npm ci --no-audit --no-fund --loglevel=error && npm run build --silent)

echo "==> installing neta_jupyter (pip install -e .[dev])"
python -m pip install --quiet --disable-pip-version-check -e ".[dev]"
