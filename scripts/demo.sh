#!/usr/bin/env bash
# Set up from scratch and open JupyterLab on the demo notebooks with the offline demo model.
#
# JupyterLab opens a working copy of notebooks/ in demo-notebooks/ (made on the first run, kept
# after: what you did there stays yours, and the tracked notebooks stay as they are). A notebook
# added to notebooks/ since is copied in; one you have already is left alone. Delete
# demo-notebooks/ to start over. `--no-setup` (first argument) skips the set-up when .venv/ is
# ready; other arguments go to `jupyter lab`.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ "${1:-}" == "--no-setup" ]]; then
  shift
else
  bash scripts/setup.sh
fi
copy=demo-notebooks
mkdir -p "$copy"
for notebook in notebooks/*; do
  [[ -e "$copy/$(basename "$notebook")" ]] || cp -R "$notebook" "$copy/"
done
echo "==> starting JupyterLab on $copy/, a working copy of notebooks/ (offline demo model; no API key needed)"
extra=()
# Jupyter refuses to run as root unless told; containers and CI machines often are root.
if [[ "$(id -u)" == "0" ]]; then extra+=(--allow-root); fi
exec .venv/bin/jupyter lab --notebook-dir="$copy" "${extra[@]}" "$@"
