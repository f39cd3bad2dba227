#!/usr/bin/env bash
# Build the documentation into docs/_build/html with Sphinx, every warning an error (-W), every
# reference to a missing page or section too (-n), reporting them all before failing
# (--keep-going). The build executes the demo notebooks with the offline demo model and needs no
# network. Extra arguments go to sphinx-build (e.g. -q).
set -euo pipefail
cd "$(dirname "$0")/.."
[[ -x .venv/bin/python ]] || bash scripts/setup.sh
if ! .venv/bin/python -c "import myst_nb, pydata_sphinx_theme" 2>/dev/null; then
  echo "==> installing the docs extra (pip install -e .[docs])"
  .venv/bin/python -m pip install --quiet --disable-pip-version-check -e ".[docs]"
fi
# The kernels the notebooks run in, and what they start, come from the project virtualenv.
export PATH="$PWD/.venv/bin:$PATH"
start=$SECONDS
.venv/bin/python -m sphinx -W --keep-going -n -b html docs docs/_build/html "$@"
echo "==> docs built in $((SECONDS - start)) s: docs/_build/html/index.html"
