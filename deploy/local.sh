#!/usr/bin/env bash
# Start a Prefect server and a Dask scheduler with workers on this machine (loopback only), then
# print the environment that points `dpaudit run` / `dpaudit serve` at them. Ctrl-C stops everything.
#   deploy/local.sh [N_WORKERS]
# Environment: DPAUDIT_BIND (default 127.0.0.1), DPAUDIT_PREFECT_PORT (4200), DPAUDIT_DASK_PORT (8786),
# DPAUDIT_WORKER_MEMORY (4GiB); PREFECT_HOME (SQLite database) or
# PREFECT_SERVER_DATABASE_CONNECTION_URL (PostgreSQL, see docs/deploy.md) as Prefect reads them;
# PREFECT_UI_API_URL (the API address the UI's browser uses; default the server's own);
# DASK_DISTRIBUTED__COMM__TIMEOUTS__TCP (600s), MALLOC_TRIM_THRESHOLD_ and MALLOC_MMAP_THRESHOLD_
# (33554432, the workers'; see docs/deploy.md).
set -euo pipefail
cd "$(dirname "$0")/.."
N_WORKERS="${1:-2}"
HOST="${DPAUDIT_BIND:-127.0.0.1}"
PREFECT_PORT="${DPAUDIT_PREFECT_PORT:-4200}"
DASK_PORT="${DPAUDIT_DASK_PORT:-8786}"
export PREFECT_SERVER_ANALYTICS_ENABLED=false
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"   # scheduler and workers import dpaudit
BIN="${VIRTUAL_ENV:-$PWD/.venv}/bin"
# workers report their task runs to this server (without it each would start its own); the UI
# reads its API address from the server's settings, which know only Prefect's 4200 unless told
export PREFECT_API_URL="http://$HOST:$PREFECT_PORT/api"
export PREFECT_UI_API_URL="${PREFECT_UI_API_URL:-$PREFECT_API_URL}"
# a worker whose task holds the GIL for over Dask's 30 s default (an exact accounting on a busy
# machine) would be dropped by the scheduler: see docs/deploy.md, "Fault tolerance"
export DASK_DISTRIBUTED__COMM__TIMEOUTS__TCP="${DASK_DISTRIBUTED__COMM__TIMEOUTS__TCP:-600s}"
trap 'kill 0' EXIT
"$BIN/prefect" server start --host "$HOST" --port "$PREFECT_PORT" &
for _ in $(seq 120); do
  "$BIN/python" -c "import urllib.request as u; u.urlopen('$PREFECT_API_URL/health', timeout=2)" \
    2>/dev/null && break
  sleep 1
done
"$BIN/dask" scheduler --host "$HOST" --port "$DASK_PORT" --no-dashboard &
# the workers allocate as the ones a run starts do: with Dask's own thresholds (trim 64 KiB) a
# task's temporary arrays are faulted in page by page (docs/deploy.md; flows/runtime/dask_malloc.py)
export MALLOC_TRIM_THRESHOLD_="${MALLOC_TRIM_THRESHOLD_:-33554432}"
export MALLOC_MMAP_THRESHOLD_="${MALLOC_MMAP_THRESHOLD_:-33554432}"
"$BIN/dask" worker "tcp://$HOST:$DASK_PORT" --nthreads 1 --nworkers "$N_WORKERS" \
  --memory-limit "${DPAUDIT_WORKER_MEMORY:-4GiB}" --no-dashboard &
cat <<MSG
Prefect UI:      http://$HOST:$PREFECT_PORT
Dask scheduler:  tcp://$HOST:$DASK_PORT
In another shell:
  export PREFECT_API_URL=$PREFECT_API_URL
  .venv/bin/dpaudit run --scheduler tcp://$HOST:$DASK_PORT
  .venv/bin/dpaudit serve my.toml --cron "0 3 * * *"    # with cluster.scheduler in my.toml
MSG
wait
