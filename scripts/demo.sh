#!/usr/bin/env bash
# Set up from scratch and open JupyterLab on the demo notebooks with the offline demo model.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
echo "==> starting JupyterLab (offline demo model; no API key needed)"
exec jupyter lab --notebook-dir=notebooks "$@"
