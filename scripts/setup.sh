#!/usr/bin/env bash
# Install everything from scratch into the project's own virtualenv (.venv/ at the repo root, reused
# when present): the JS widget bundle and the side panel, then the package with its test extras.
# Nothing is installed outside .venv/ except, with --test as root, Debian's chromium and redis-server.
# Usage: scripts/setup.sh [--test]   (--test also installs Chromium and Redis for their tests)
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ "${1:-}" == "--test" ]]; then
  missing=()
  command -v chromium >/dev/null 2>&1 || missing+=(chromium)
  command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
  if ((${#missing[@]})); then
    if [[ "$(id -u)" == "0" ]] && command -v apt-get >/dev/null 2>&1; then
      echo "==> installing ${missing[*]} for the browser and Redis tests (apt-get)"
      apt-get update -qq
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
    else
      echo "==> ${missing[*]} missing and cannot be installed here; their tests will be skipped"
    fi
  fi
fi

if [[ ! -x .venv/bin/python ]]; then
  echo "==> creating the project virtualenv (.venv/)"
  "${PYTHON:-python3}" -m venv .venv
fi

echo "==> building the widget and the side panel (npm ci && npm run build)"
(cd js && npm ci --no-audit --no-fund --loglevel=error && npm run build --silent >/dev/null)

echo "==> installing neta_jupyter into .venv (pip install -e .[dev])"
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e ".[dev]"

# The wheel installs the panel's prebuilt extension into share/jupyter/labextensions; an editable
# install links it there instead (as `jupyter labextension develop` does), so a rebuild shows.
labextensions=".venv/share/jupyter/labextensions"
mkdir -p "$labextensions"
rm -rf "$labextensions/neta-jupyter"
ln -s "$PWD/neta_jupyter/labextension" "$labextensions/neta-jupyter"
