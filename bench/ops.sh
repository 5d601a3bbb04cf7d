#!/usr/bin/env bash
# What metrics and tracing cost: GET /iam/v2/groups/{uid} (wrk) against the
# same data served three ways, alternated over ROUNDS rounds in one run:
#   plain   - no --metrics-listen, no OTLP (logs at warn, as in bench/run.sh)
#   metrics - --metrics-listen, scraped once a second during the run
#   traced  - --metrics-listen and OTEL_EXPORTER_OTLP_ENDPOINT pointing at a
#             real OTLP/gRPC sink (bench/otlp_sink.py), every request traced
# Prints req/s per round and the medians' ratios (target: >= 0.95).
#
#   BENCH_NO_BUILD=1 bench/ops.sh
#
# Needs wrk, python3 with opentelemetry-proto and grpcio (PYTHON, default
# target/ward-venv/bin/python). Environment: DURATION (default 10s),
# CONNECTIONS (32), THREADS (2), ROUNDS (3).
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-10s}
CONNECTIONS=${CONNECTIONS:-32}
THREADS=${THREADS:-2}
ROUNDS=${ROUNDS:-3}
PYTHON=${PYTHON:-target/ward-venv/bin/python}
PORT=18091
METRICS=18092
SINK=18093

[ -n "${BENCH_NO_BUILD:-}" ] || cargo build --release -q -p ward
work=$(mktemp -d)
cleanup() {
  [ -n "${ward_pid:-}" ] && kill "$ward_pid" 2>/dev/null || true
  [ -n "${sink_pid:-}" ] && kill "$sink_pid" 2>/dev/null || true
  [ -n "${scrape_pid:-}" ] && kill "$scrape_pid" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

start() { # start MODE
  local mode=$1
  local env=(WARD_LOG=warn)
  local flags=()
  if [ "$mode" != plain ]; then flags+=(--metrics-listen "127.0.0.1:$METRICS"); fi
  if [ "$mode" = traced ]; then env+=(OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$SINK"); fi
  env "${env[@]}" ./target/release/ward server --listen "127.0.0.1:$PORT" --data-dir "$work/data" "${flags[@]}" \
    >"$work/ward.out" 2>>"$work/ward.err" &
  ward_pid=$!
  for _ in $(seq 1 100); do grep -q listening "$work/ward.out" 2>/dev/null && break; sleep 0.1; done
  if [ "$mode" != plain ]; then
    (while sleep 1; do curl -s "http://127.0.0.1:$METRICS/metrics" >/dev/null || true; done) &
    scrape_pid=$!
  fi
}
stop() {
  [ -n "${scrape_pid:-}" ] && { kill "$scrape_pid" 2>/dev/null || true; wait "$scrape_pid" 2>/dev/null || true; scrape_pid=; }
  kill "$ward_pid"; wait "$ward_pid" 2>/dev/null || true; ward_pid=
}

"$PYTHON" bench/otlp_sink.py "$SINK" >"$work/sink.out" &
sink_pid=$!

start plain
api="http://127.0.0.1:$PORT"
token=$(cat "$work/data/admin.token")
seed=$(python3 bench/seed.py "$api" "$token" 10 9)
leaf=$(echo "$seed" | python3 -c 'import json,sys; print(json.load(sys.stdin)["leaf"])')
stop

rps() {
  wrk -t"$THREADS" -c"$CONNECTIONS" -d"$DURATION" -H "Authorization: Bearer $(cat "$work/data/admin.token")" \
    "$api/iam/v2/groups/$leaf" | awk '/Requests\/sec/ {print int($2)}'
}
declare -A results
for r in $(seq 1 "$ROUNDS"); do
  for mode in plain metrics traced; do
    start "$mode"
    curl -sf -H "Authorization: Bearer $(cat "$work/data/admin.token")" "$api/iam/v2/groups/$leaf" >/dev/null
    results[$mode]+="$(rps) "
    stop
  done
done
kill "$sink_pid"; wait "$sink_pid" 2>/dev/null || true; sink_pid=
spans=$(cat "$work/sink.out")
printf 'GET /iam/v2/groups/{uid} (wrk -t%s -c%s -d%s, %s rounds; %s cores)\n' "$THREADS" "$CONNECTIONS" "$DURATION" "$ROUNDS" "$(nproc)"
for mode in plain metrics traced; do printf '%-8s %s\n' "$mode" "${results[$mode]}"; done
printf 'spans received by the OTLP sink: %s\n' "$spans"
python3 - "${results[plain]}" "${results[metrics]}" "${results[traced]}" <<'PY'
import statistics, sys
p, m, t = (statistics.median(int(x) for x in a.split()) for a in sys.argv[1:])
print(f"median req/s: plain {p:.0f}, metrics {m:.0f} ({m/p:.3f}x), metrics+traces {t:.0f} ({t/p:.3f}x); target >= 0.95x")
PY
