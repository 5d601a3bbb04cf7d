#!/usr/bin/env bash
# Ward load benchmark: GET a group by uid and list 50 with totalCount on a seeded
# tree of 10,001 groups, against nginx serving a static JSON response on loopback
# as the machine's ceiling; durable creates (16 connections); and token
# exchanges (/sts/exchange for a static-keys identity with an RS256 token).
# Prints requests/s and p50/p99 latency.
#
#   bench/run.sh                 # SQLite (default)
#   WARD_DATABASE=postgres://postgres@127.0.0.1:5432/wardbench bench/run.sh   # PostgreSQL (an empty scratch database)
#
# Needs wrk and nginx (installed from Debian's packages if missing) and python3.
# Prints a table, then (the last line of stdout) a JSON summary. Instructions
# per request, which do not move with the machine's load: bench/callgrind.sh.
# Environment: DURATION (default 10s), CONNECTIONS (default 32), THREADS (default 2),
# BENCH_NO_BUILD (use the existing target/release/ward).
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-10s}
CONNECTIONS=${CONNECTIONS:-32}
THREADS=${THREADS:-2}
WARD_PORT=${WARD_PORT:-18081}
NGINX_PORT=${NGINX_PORT:-18082}

need() { command -v "$1" >/dev/null 2>&1; }
if ! need wrk || ! need nginx; then
  echo "installing wrk and nginx-light from Debian's packages…" >&2
  apt-get update -qq && apt-get install -y -qq wrk nginx-light >/dev/null
fi

[ -n "${BENCH_NO_BUILD:-}" ] || cargo build --release -q -p ward
work=$(mktemp -d)
cleanup() {
  [ -n "${ward_pid:-}" ] && kill "$ward_pid" 2>/dev/null || true
  [ -f "$work/nginx.pid" ] && kill "$(cat "$work/nginx.pid")" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
[ -n "${BENCH_DEBUG:-}" ] && trap - EXIT

# Ward, quiet logs.
WARD_LOG=warn ./target/release/ward server --listen "127.0.0.1:$WARD_PORT" --data-dir "$work/data" \
  ${WARD_DATABASE:+--database "$WARD_DATABASE"} >"$work/ward.out" 2>"$work/ward.err" &
ward_pid=$!
for _ in $(seq 1 100); do grep -q listening "$work/ward.out" 2>/dev/null && break; sleep 0.1; done
api="http://127.0.0.1:$WARD_PORT"
token=$(cat "$work/data/admin.token")

echo "seeding 1 + 100 + 100×99 = 10,001 groups…" >&2
start=$(date +%s.%N)
seed=$(python3 bench/seed.py "$api" "$token" 100 99)
end=$(date +%s.%N)
org=$(echo "$seed" | python3 -c 'import json,sys; print(json.load(sys.stdin)["org"])')
child=$(echo "$seed" | python3 -c 'import json,sys; print(json.load(sys.stdin)["child"])')
leaf=$(echo "$seed" | python3 -c 'import json,sys; print(json.load(sys.stdin)["leaf"])')
seed_rate=$(python3 -c "print(f'{10001/($end-$start):.0f}')")

# nginx: the same size of JSON as a group, static.
body=$(curl -s -H "Authorization: Bearer $token" "$api/iam/v2/groups/$leaf")
mkdir -p "$work/nginx"
cat >"$work/nginx.conf" <<NGINX
worker_processes 2;
pid $work/nginx.pid;
error_log $work/nginx/error.log;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path $work/nginx; proxy_temp_path $work/nginx; fastcgi_temp_path $work/nginx;
  uwsgi_temp_path $work/nginx; scgi_temp_path $work/nginx;
  server {
    listen 127.0.0.1:$NGINX_PORT;
    location / { default_type application/json; return 200 '$body'; }
  }
}
NGINX
nginx -c "$work/nginx.conf"
for _ in $(seq 1 50); do curl -sf "http://127.0.0.1:$NGINX_PORT/" >/dev/null && break; sleep 0.1; done

# Creates: POST a group (the same small body) under one team.
cat >"$work/create.lua" <<'LUA'
wrk.method = "POST"
wrk.body = '{"name":"bench-create"}'
wrk.headers["Content-Type"] = "application/json"
LUA

# The exchange: a static-keys identity (RSA-2048 JWKS) and an RS256 token for it.
exchange=$(python3 bench/exchange.py "$api" "$token" "$org" "$work")
x_identity=$(echo "$exchange" | python3 -c 'import json,sys; print(json.load(sys.stdin)["identity"])')
x_token=$(echo "$exchange" | python3 -c 'import json,sys; print(json.load(sys.stdin)["token"])')
curl -sf -H "Authorization: Bearer $x_token" "$api/sts/exchange?identity=$x_identity" >/dev/null \
  || { echo "run.sh: the benchmark's token exchange fails" >&2; exit 1; }

# wrk → "rps p50 p99" (latencies in ms). run URL [connections] [wrk args…]
# BEARER (default: the admin token) is the token sent.
run() {
  local out url=$1 conns=${2:-$CONNECTIONS}
  shift; shift || true
  out=$(wrk -t"$THREADS" -c"$conns" -d"$DURATION" --latency -H "Authorization: Bearer ${BEARER:-$token}" "$@" "$url")
  echo "$out" >>"$work/wrk.log"
  echo "$out" | python3 -c '
import re, sys
t = sys.stdin.read()
def ms(s):
    v, u = re.match(r"([\d.]+)(us|ms|s)", s).groups()
    return float(v) * {"us": 0.001, "ms": 1, "s": 1000}[u]
rps = float(re.search(r"Requests/sec:\s+([\d.]+)", t).group(1))
p50 = ms(re.search(r"^\s+50%\s+(\S+)", t, re.M).group(1))
p99 = ms(re.search(r"^\s+99%\s+(\S+)", t, re.M).group(1))
errs = re.search(r"Non-2xx or 3xx responses: (\d+)", t)
print(f"{rps:.0f} {p50:.2f} {p99:.2f} {errs.group(1) if errs else 0}")'
}

read -r n_rps n_p50 n_p99 n_err < <(run "http://127.0.0.1:$NGINX_PORT/")
read -r g_rps g_p50 g_p99 g_err < <(run "$api/iam/v2/groups/$leaf")
read -r l_rps l_p50 l_p99 l_err < <(run "$api/iam/v2/groups?uidp.descendants_of=$org&page_size=50")
read -r c_rps c_p50 c_p99 c_err < <(run "$api/iam/v2/groups?uidp.descendants_of=$child&page_size=50&order_by=name")
read -r w_rps w_p50 w_p99 w_err < <(run "$api/iam/v2/groups/$child" 16 -s "$work/create.lua")
read -r x_rps x_p50 x_p99 x_err < <(BEARER=$x_token run "$api/sts/exchange?identity=$x_identity")

backend=${WARD_DATABASE:+postgres}
printf '\nWard benchmark (%s; wrk -t%s -c%s -d%s; %s cores)\n' "${backend:-sqlite}" "$THREADS" "$CONNECTIONS" "$DURATION" "$(nproc)"
printf 'seeding: 10,001 creates at %s creates/s (16 concurrent clients)\n\n' "$seed_rate"
printf '%-52s %10s %9s %9s %7s\n' scenario 'req/s' 'p50 ms' 'p99 ms' 'non-2xx'
printf '%-52s %10s %9s %9s %7s\n' 'nginx static JSON (ceiling)' "$n_rps" "$n_p50" "$n_p99" "$n_err"
printf '%-52s %10s %9s %9s %7s\n' 'GET /iam/v2/groups/{uid}' "$g_rps" "$g_p50" "$g_p99" "$g_err"
printf '%-52s %10s %9s %9s %7s\n' 'list 50, descendants_of org (10,001 match)' "$l_rps" "$l_p50" "$l_p99" "$l_err"
printf '%-52s %10s %9s %9s %7s\n' 'list 50 by name, descendants_of team (100 match)' "$c_rps" "$c_p50" "$c_p99" "$c_err"
printf '%-52s %10s %9s %9s %7s\n' 'create a group (16 connections, durable)' "$w_rps" "$w_p50" "$w_p99" "$w_err"
printf '%-52s %10s %9s %9s %7s\n' '/sts/exchange (static keys, RS256)' "$x_rps" "$x_p50" "$x_p99" "$x_err"
python3 -c "print(f'\nGET / nginx = {$g_rps/$n_rps:.2f} (target >= 0.45); creates = {$w_rps:.0f}/s (target >= 3000); exchanges = {$x_rps:.0f}/s (target >= 3000)')" >&2
# The machine-readable summary: the last line of stdout.
python3 -c '
import json, sys
a = sys.argv[1:]
names = ["nginx", "get_by_uid", "list_50_total_count", "list_50_by_name", "create", "exchange"]
out = {"backend": a[0], "seed_creates_per_s": float(a[1]), "scenarios": {}}
for i, n in enumerate(names):
    rps, p50, p99, err = a[2 + 4 * i: 6 + 4 * i]
    out["scenarios"][n] = {"rps": float(rps), "p50_ms": float(p50), "p99_ms": float(p99), "non_2xx": int(err)}
out["get_over_nginx"] = round(float(a[6]) / float(a[2]), 3)
print(json.dumps(out))' "${backend:-sqlite}" "$seed_rate" \
  "$n_rps" "$n_p50" "$n_p99" "$n_err" "$g_rps" "$g_p50" "$g_p99" "$g_err" \
  "$l_rps" "$l_p50" "$l_p99" "$l_err" "$c_rps" "$c_p50" "$c_p99" "$c_err" "$w_rps" "$w_p50" "$w_p99" "$w_err" \
  "$x_rps" "$x_p50" "$x_p99" "$x_err"
