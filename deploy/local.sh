#!/usr/bin/env bash
# Start a Prefect server and a Dask scheduler with workers on this machine (loopback only), then
# print the environment that points `dpaudit run` at them. Stop everything with Ctrl-C.
#   deploy/local.sh [N_WORKERS]
set -euo pipefail
cd "$(dirname "$0")/.."
N_WORKERS="${1:-2}"
HOST="${DPAUDIT_BIND:-127.0.0.1}"
export PREFECT_SERVER_ANALYTICS_ENABLED=false
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
BIN="${VIRTUAL_ENV:-$PWD/.venv}/bin"
trap 'kill 0' EXIT
"$BIN/prefect" server start --host "$HOST" --port 4200 &
"$BIN/dask" scheduler --host "$HOST" --port 8786 --no-dashboard &
sleep 3
"$BIN/dask" worker "tcp://$HOST:8786" --nthreads 1 --nworkers "$N_WORKERS" --memory-limit 4GiB \
  --no-dashboard &
cat <<MSG
Prefect UI:      http://$HOST:4200
Dask scheduler:  tcp://$HOST:8786
In another shell:
  export PREFECT_API_URL=http://$HOST:4200/api
  .venv/bin/dpaudit run --scheduler tcp://$HOST:8786
MSG
wait
