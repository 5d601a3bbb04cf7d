#!/usr/bin/env bash
# The compass dataset: 1,000 groups, 10,000 identities, 20,000 role bindings
# and 100,000 repos (the largest table), seeded through the API; then the
# latency of a list's totalCount over the whole organization, cold (just
# after a write to the table) and warm (cached), and the server's resident
# memory (RSS now and its peak).
#
#   cargo build --release -p ward && bench/compass.sh
#   WARD_DATABASE=postgres://postgres@127.0.0.1:5432/wardbench bench/compass.sh   # an empty scratch database
#
# Prints a table and, as the last line of stdout, JSON. Needs python3.
set -euo pipefail
cd "$(dirname "$0")/.."

WARD_BIN=${WARD_BIN:-target/release/ward}
WARD_PORT=${WARD_PORT:-18084}
[ -x "$WARD_BIN" ] || { echo "compass.sh: $WARD_BIN not found: cargo build --release -p ward" >&2; exit 1; }
work=$(mktemp -d)
cleanup() {
  [ -n "${ward_pid:-}" ] && kill "$ward_pid" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

WARD_LOG=warn "$WARD_BIN" server --listen "127.0.0.1:$WARD_PORT" --data-dir "$work/data" \
  ${WARD_DATABASE:+--database "$WARD_DATABASE"} >"$work/ward.out" 2>"$work/ward.err" &
ward_pid=$!
for _ in $(seq 1 100); do grep -q listening "$work/ward.out" 2>/dev/null && break; sleep 0.1; done
api="http://127.0.0.1:$WARD_PORT"

echo "seeding 1,000 groups, 10,000 identities, 20,000 bindings, 100,000 repos…" >&2
result=$(python3 bench/compass.py "$api" "$(cat "$work/data/admin.token")")
rss_kb=$(awk '/^VmRSS:/ {print $2}' "/proc/$ward_pid/status")
hwm_kb=$(awk '/^VmHWM:/ {print $2}' "/proc/$ward_pid/status")
python3 - "$result" "$rss_kb" "$hwm_kb" "${WARD_DATABASE:+postgres}" <<'PY'
import json, sys
r = json.loads(sys.argv[1])
r["backend"] = sys.argv[4] or "sqlite"
r["rss_mb"] = round(int(sys.argv[2]) / 1024, 1)
r["peak_rss_mb"] = round(int(sys.argv[3]) / 1024, 1)
print(f"\ncompass dataset ({r['backend']}): seeded in {r['seed_s']} s", file=sys.stderr)
print(f"{'list over the organization':<28} {'rows':>8} {'cold ms':>9} {'warm p50 ms':>12}", file=sys.stderr)
for name, t in r["total_count_ms"].items():
    print(f"{name:<28} {r['rows'][name]:>8} {t['cold']:>9} {t['warm_p50']:>12}", file=sys.stderr)
print(f"server RSS {r['rss_mb']} MB (peak {r['peak_rss_mb']} MB); targets: totalCount <= 10 ms, RSS <= 100 MB", file=sys.stderr)
print(json.dumps(r))
PY
