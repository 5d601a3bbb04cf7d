#!/usr/bin/env bash
# Instructions per request: the server's own CPU work for a GET by uid, a list
# of 50 with totalCount, and a create, counted by valgrind's callgrind over a
# fixed number of requests. Unlike req/s, the count does not move with the
# machine's load, so a regression shows as a number.
#
#   cargo build --release -p ward && bench/callgrind.sh
#   REQUESTS=500 SEED_GROUPS=2001 bench/callgrind.sh     # a quicker run
#
# Seeds a fresh data directory with a normal server (1 org, 100 teams, the
# rest spread under them: SEED_GROUPS groups in all), then restarts the server under
# callgrind on it and, per scenario, zeroes the counters, sends REQUESTS
# requests one after another on one keep-alive connection (python's
# http.client) and dumps the counters. Prints a table and, as the last line of
# stdout, JSON: {"scenario": {"requests": N, "instructions": total,
# "per_request": total/N}}. With BENCH_DEBUG=1 the work directory (and the
# callgrind.out files, for callgrind_annotate) is kept.
#
# Needs valgrind (installed from Debian's packages if missing) and python3.
# Environment: WARD_BIN (target/release/ward), REQUESTS (2000), SEED_GROUPS (10001),
# WARD_PORT (18083), BENCH_DEBUG, WARD_FLAGS (extra server flags, e.g.
# `--metrics-listen 127.0.0.1:0`; OTEL_* variables pass through).
set -euo pipefail
cd "$(dirname "$0")/.."

WARD_BIN=${WARD_BIN:-target/release/ward}
REQUESTS=${REQUESTS:-2000}
SEED_GROUPS=${SEED_GROUPS:-10001}
WARD_PORT=${WARD_PORT:-18083}
[ -x "$WARD_BIN" ] || { echo "callgrind.sh: $WARD_BIN not found: cargo build --release -p ward" >&2; exit 1; }
if ! command -v valgrind >/dev/null || ! command -v callgrind_control >/dev/null; then
  echo "installing valgrind from Debian's packages…" >&2
  apt-get update -qq && apt-get install -y -qq valgrind >/dev/null
fi

work=$(mktemp -d)
cleanup() {
  [ -n "${ward_pid:-}" ] && kill "$ward_pid" 2>/dev/null || true
  wait 2>/dev/null || true
  [ -n "${BENCH_DEBUG:-}" ] || rm -rf "$work"
}
trap cleanup EXIT
api="http://127.0.0.1:$WARD_PORT"

start_ward() { # [wrapper…]
  # shellcheck disable=SC2086 # WARD_FLAGS is a list of flags
  "$@" "$WARD_BIN" server --listen "127.0.0.1:$WARD_PORT" --data-dir "$work/data" ${WARD_FLAGS:-} \
    >"$work/ward.out" 2>"$work/ward.err" &
  ward_pid=$!
  for _ in $(seq 1 600); do grep -q listening "$work/ward.out" 2>/dev/null && return; sleep 0.1; done
  echo "callgrind.sh: the server did not start; see $work/ward.err" >&2
  exit 1
}

# Seed with a normal server.
WARD_LOG=warn start_ward env
token=$(cat "$work/data/admin.token")
teams=100
per_team=$(( (SEED_GROUPS - 1 - teams) / teams ))
echo "seeding 1 + $teams + $teams×$per_team groups…" >&2
seed=$(python3 bench/seed.py "$api" "$token" "$teams" "$per_team")
kill "$ward_pid"; wait "$ward_pid" 2>/dev/null || true

# The same server under callgrind; each scenario zeroes the counts first.
WARD_LOG=warn start_ward valgrind --tool=callgrind \
  --callgrind-out-file="$work/callgrind.out.%p" -q
token=$(cat "$work/data/admin.token")

python3 - "$api" "$token" "$REQUESTS" "$seed" "$ward_pid" "$work" <<'PY'
import http.client, json, subprocess, sys, urllib.parse, glob, os
api, token, n, seed, pid, work = sys.argv[1], sys.argv[2], int(sys.argv[3]), json.loads(sys.argv[4]), sys.argv[5], sys.argv[6]
host = urllib.parse.urlparse(api)
conn = http.client.HTTPConnection(host.hostname, host.port, timeout=600)
auth = {"Authorization": f"Bearer {token}"}

def req(method, path, body=None):
    headers = dict(auth)
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    conn.request(method, path, body=data, headers=headers)
    r = conn.getresponse()
    payload = r.read()
    if r.status != 200:
        sys.exit(f"{method} {path}: {r.status} {payload[:200]!r}")

def total(name):
    # `callgrind_control -d` writes a dump of the counts since the last zeroing.
    before = set(glob.glob(f"{work}/callgrind.out.*"))
    subprocess.run(["callgrind_control", "-d", name, pid], check=True, capture_output=True)
    new = sorted(set(glob.glob(f"{work}/callgrind.out.*")) - before, key=os.path.getmtime)
    for line in open(new[-1]):
        if line.startswith("summary:") or line.startswith("totals:"):
            return int(line.split()[1])
    sys.exit("no totals in the callgrind dump")

scenarios = [
    ("get_by_uid", lambda i: req("GET", f"/iam/v2/groups/{seed['leaf']}")),
    ("list_50_total_count", lambda i: req("GET", f"/iam/v2/groups?uidp.descendants_of={seed['org']}&page_size=50")),
    ("list_50_by_name", lambda i: req("GET", f"/iam/v2/groups?uidp.descendants_of={seed['child']}&page_size=50&order_by=name")),
    ("create", lambda i: req("POST", f"/iam/v2/groups/{seed['child']}", {"name": f"cg-{i:06d}"})),
]
out = {}
for name, run in scenarios:
    if name != "create":
        for _ in range(20):  # warm the caches outside the count
            run(0)
    subprocess.run(["callgrind_control", "-z", pid], check=True, capture_output=True)
    for i in range(n):
        run(i)
    t = total(name)
    out[name] = {"requests": n, "instructions": t, "per_request": t // n}
    print(f"{name:<24} {n:>7} requests {t:>16,} instructions {t // n:>12,} per request", file=sys.stderr)
print(json.dumps(out))
PY
