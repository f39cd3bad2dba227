#!/usr/bin/env bash
# Try runs shared by two Jupyter servers: one redis-server (append-only file, fsync always) and two
# JupyterLab servers on ports 8888 and 8889 storing runs in it. Start a run in one, follow it,
# answer it or stop it in the other; kill one (kill -9 its pid) mid-run and the other takes it over.
# Both keep attachments in one shared directory; a run started from a notebook goes on in the
# server whose kernel it uses, wherever it is answered or resumed.
# Everything lives in a temporary directory, removed at the end (Ctrl-C stops all three).
set -euo pipefail
cd "$(dirname "$0")/.."
jupyter="${JUPYTER:-.venv/bin/jupyter}"
[[ -x "$jupyter" ]] || { bash scripts/setup.sh; jupyter=.venv/bin/jupyter; }
command -v redis-server >/dev/null || { echo "redis-server is needed (apt-get install redis-server)"; exit 1; }
work="$(mktemp -d -t neta-two-servers.XXXXXX)"
pids=()
stop() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap stop EXIT
redis-server --port 0 --unixsocket "$work/redis.sock" --dir "$work" --save '' \
  --appendonly yes --appendfsync always --maxmemory-policy noeviction >"$work/redis.log" 2>&1 &
pids+=($!)
until [[ -S "$work/redis.sock" ]]; do sleep 0.1; done
extra=()
if [[ "$(id -u)" == "0" ]]; then extra+=(--allow-root); fi
token="$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
mkdir -p "$work/notebooks" "$work/attachments"
cp notebooks/*.ipynb "$work/notebooks/"
for port in 8888 8889; do
  NETA_STORE_URL="unix://$work/redis.sock" NETA_ATTACHMENT_DIR="$work/attachments" \
    "$jupyter" lab --no-browser \
    --port="$port" --port-retries=0 --IdentityProvider.token="$token" \
    --notebook-dir="$work/notebooks" --NetaApp.data_dir="$work/data-$port" \
    "${extra[@]}" >"$work/server-$port.log" 2>&1 &
  pids+=($!)
  echo "==> server on port $port: pid $!, log $work/server-$port.log"
done
echo "==> open http://127.0.0.1:8888/lab?token=$token and http://127.0.0.1:8889/lab?token=$token"
echo "==> runs are in Redis: redis-cli -s $work/redis.sock --scan --pattern 'neta:*'"
wait
