#!/usr/bin/env bash
# Set up from scratch and open JupyterLab on the demo notebooks with the offline demo model.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
echo "==> starting JupyterLab (offline demo model; no API key needed)"
extra=()
# Jupyter refuses to run as root unless told; containers and CI machines often are root.
if [[ "$(id -u)" == "0" ]]; then extra+=(--allow-root); fi
exec .venv/bin/jupyter lab --notebook-dir=notebooks "${extra[@]}" "$@"
