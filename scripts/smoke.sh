#!/usr/bin/env bash
# The installed product, as users get it: build the sdist and the wheel as a release does (the
# wheel from the sdist, so the widget is built from source in a fresh folder), install the wheel
# into a fresh virtualenv with no extras and run smoke/ against a server started from it; then,
# with each extra installed, the tests of what it adds (smoke/test_extras.py).
# Usage: scripts/smoke.sh [WORKDIR]   (default: a temporary folder, removed at the end)
set -euo pipefail
SECONDS=0
cd "$(dirname "$0")/.."
repo="$PWD"
work="${1:-$(mktemp -d)}"
[[ -n "${1:-}" ]] || trap 'rm -rf "$work"' EXIT
# Nothing of the checkout may leak into what is tested.
unset PYTHONPATH
extras=(redis)

echo "==> smoke: building the sdist and the wheel (python -m build)"
rm -rf "$work/dist"
.venv/bin/python -m build --outdir "$work/dist" . >"$work/build.log" 2>&1 || {
  tail -50 "$work/build.log"
  exit 1
}
wheel=$(ls "$work"/dist/*.whl)
echo "    built in $SECONDS s"

echo "==> smoke: a fresh virtualenv with $(basename "$wheel"), no extras"
rm -rf "$work/venv"
"${PYTHON:-python3}" -m venv "$work/venv"
pip=("$work/venv/bin/python" -m pip install --quiet --disable-pip-version-check)
# With the smoke suite's own tool (pytest), not the package's test extra: one resolve.
"${pip[@]}" "$wheel" "pytest>=8"
echo "    installed at $SECONDS s"

run_smoke() {
  # From outside the checkout, so that only the installed package can be imported.
  local extra="$1"
  shift
  (cd "$work" && SMOKE_EXTRAS="$extra" "$work/venv/bin/python" -m pytest -q -c "$repo/smoke/pytest.ini" \
    --rootdir "$repo/smoke" --basetemp "$work/pytest-${extra:-plain}" "$@")
}
run_smoke "" "$repo/smoke"
echo "    no extras passed at $SECONDS s"
for extra in "${extras[@]}"; do
  # Only what the extra adds (smoke/test_extras.py): the rest of the install is the same and has
  # passed above.
  echo "==> smoke: with the [$extra] extra"
  "${pip[@]}" "${wheel}[$extra]"
  run_smoke "$extra" "$repo/smoke/test_extras.py"
  echo "    [$extra] passed at $SECONDS s"
done
