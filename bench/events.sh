#!/usr/bin/env bash
# Events benchmark: what the outbox costs a write, how fast deliveries drain,
# and that a dead sink slows nothing down.
#
#   1. durable group creates (wrk, 16 connections) with no subscription;
#   2. the same with one subscription whose sink is nginx answering 200 (every
#      create's event is delivered from the log), then the time until the
#      last delivery was made (deliveries/s), and each
#      delivery's latency from its event's time (Ce-Time) to nginx taking it;
#   2b. commit-to-delivery latency at a steady rate: 2,000 creates from one
#      client, another subscription and sink;
#   3. the same with the sink dead instead (a closed port): deliveries fail
#      and back off; the writes must not slow down, and the backlog holds at
#      its bound (10,000 events per subscription, the oldest skipped past it);
#   4. the dead sink comes back (nginx on its port): the backlog's drain
#      rate with no writes beside it, the deliverers' own ceiling.
# nginx's POST rate on the same machine is the sink's ceiling.
#
#   bench/events.sh                 # SQLite (default)
#   WARD_DATABASE=postgres://postgres@127.0.0.1:5432/wardbench_events bench/events.sh
#
# Needs wrk, nginx and python3. Environment: DURATION (default 10s), ROUNDS (4),
# BENCH_NO_BUILD (use the existing target/release/ward).
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-10s}
ROUNDS=${ROUNDS:-4}
WARD_PORT=${WARD_PORT:-18091}
SINK_PORT=${SINK_PORT:-18092}
DEAD_PORT=${DEAD_PORT:-18093}
LAT_PORT=${LAT_PORT:-18094}

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
  [ -f "$work/revived.pid" ] && kill "$(cat "$work/revived.pid")" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

WARD_LOG=warn ./target/release/ward server --listen "127.0.0.1:$WARD_PORT" --data-dir "$work/data" \
  --allow-insecure-sinks ${WARD_DATABASE:+--database "$WARD_DATABASE"} >"$work/ward.out" 2>"$work/ward.err" &
ward_pid=$!
for _ in $(seq 1 100); do grep -q listening "$work/ward.out" 2>/dev/null && break; sleep 0.1; done
api="http://127.0.0.1:$WARD_PORT"
token=$(cat "$work/data/admin.token")
auth=(-H "Authorization: Bearer $token" -H "Content-Type: application/json")

# An nginx taking POSTs and answering 200, started as `name` (its pid in
# $work/name.pid), one server per "port log" pair; each logs the time it
# took a request and the event's Ce-Time.
sink() {
  local name=$1 servers=""
  shift
  while [ $# -gt 0 ]; do
    servers+="server { listen 127.0.0.1:$1; access_log $work/$2 lat; location / { return 200 'ok'; } } "
    shift 2
  done
  cat >"$work/$name.conf" <<NGINX
worker_processes 1;
pid $work/$name.pid;
error_log $work/nginx/$name-error.log;
events { worker_connections 1024; }
http {
  log_format lat '\$msec \$http_ce_time';
  client_body_temp_path $work/nginx; proxy_temp_path $work/nginx; fastcgi_temp_path $work/nginx;
  uwsgi_temp_path $work/nginx; scgi_temp_path $work/nginx;
  $servers
}
NGINX
  nginx -c "$work/$name.conf"
}
mkdir -p "$work/nginx"
sink nginx "$SINK_PORT" sink.log "$LAT_PORT" lat.log
for _ in $(seq 1 50); do curl -sf -X POST "http://127.0.0.1:$SINK_PORT/" >/dev/null && break; sleep 0.1; done

json() { python3 -c "import json,sys; print(json.load(sys.stdin)$1)"; }
org=$(curl -sf "${auth[@]}" -d '{"name":"events-bench"}' "$api/iam/v2/groups" | json '["uid"]')
team=$(curl -sf "${auth[@]}" -d '{"name":"team"}' "$api/iam/v2/groups/$org" | json '["uid"]')
cat >"$work/create.lua" <<'LUA'
wrk.method = "POST"
wrk.body = '{"name":"bench-create"}'
wrk.headers["Content-Type"] = "application/json"
LUA
cat >"$work/post.lua" <<'LUA'
wrk.method = "POST"
wrk.body = '{"actor":{"subject":"x"},"body":{}}'
wrk.headers["Content-Type"] = "application/json"
LUA

# wrk → "rps p99_ms non2xx"
run() {
  wrk -t2 -c16 -d"$DURATION" --latency "$@" | tee -a "$work/wrk.log" | python3 -c '
import re, sys
t = sys.stdin.read()
def ms(s):
    v, u = re.match(r"([\d.]+)(us|ms|s)", s).groups()
    return float(v) * {"us": 0.001, "ms": 1, "s": 1000}[u]
rps = float(re.search(r"Requests/sec:\s+([\d.]+)", t).group(1))
p99 = ms(re.search(r"^\s+99%\s+(\S+)", t, re.M).group(1))
errs = re.search(r"Non-2xx or 3xx responses: (\d+)", t)
print(f"{rps:.0f} {p99:.2f} {errs.group(1) if errs else 0}")'
}
status() { curl -sf -H "Authorization: Bearer $token" "$api/events/v1/deliveries/$1"; }

read -r sink_rps sink_p99 _ < <(run -s "$work/post.lua" "http://127.0.0.1:$SINK_PORT/")
# Without and with a subscription over ROUNDS rounds, in turn first (ABBA:
# every create makes the team larger and the machine drifts, and both land
# on each side alike); the medians are compared.
median() { tr ' ' '\n' | sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
nones="" lives="" ratios="" delivered=0 drain_s=0
without() {
  read -r none_rps none_p99 none_err < <(run -H "Authorization: Bearer $token" -s "$work/create.lua" "$api/iam/v2/groups/$team")
}
with_sink() {
  sub=$(curl -sf "${auth[@]}" -d "{\"sink\":\"http://127.0.0.1:$SINK_PORT/hook\"}" "$api/events/v2/subscriptions/$org" | json '["uid"]')
  sleep 1
  before=$(status "$sub" | json '.get("delivered", "0")')
  start=$(date +%s.%N)
  read -r live_rps live_p99 live_err < <(run -H "Authorization: Bearer $token" -s "$work/create.lua" "$api/iam/v2/groups/$team")
  # Drain: until nothing is pending.
  for _ in $(seq 1 600); do
    st=$(status "$sub")
    pending=$(echo "$st" | json '.get("pending", "0")')
    [ "$pending" = "0" ] && break
    sleep 0.2
  done
  end=$(date +%s.%N)
  after=$(status "$sub" | json '.get("delivered", "0")')
  delivered=$((delivered + after - before))
  drain_s=$(python3 -c "print($drain_s + $end - $start)")
  curl -sf -X DELETE -H "Authorization: Bearer $token" "$api/events/v2/subscriptions/$sub" >/dev/null
}
for round in $(seq 1 "$ROUNDS"); do
  if [ $((round % 2)) = 1 ]; then without; with_sink; else with_sink; without; fi
  echo "round $round: no subscription $none_rps/s, one subscription $live_rps/s" >&2
  nones+=" $none_rps" lives+=" $live_rps" ratios+=" $(python3 -c "print(f'{$live_rps/$none_rps:.2f}')")"
done
none_rps=$(echo $nones | median) live_rps=$(echo $lives | median)
drain_rate=$(python3 -c "print(f'{$delivered/$drain_s:.0f}')")

# Latency percentiles (ms) of a sink's access log: nginx's time of taking
# each delivery minus the event's time (Ce-Time).
latency() {
  python3 - "$1" <<'PY'
import sys, datetime
lat = []
for line in open(sys.argv[1]):
    parts = line.split()
    if len(parts) != 2 or parts[1] == "-":
        continue
    t = datetime.datetime.fromisoformat(parts[1].replace("Z", "+00:00")).timestamp()
    lat.append((float(parts[0]) - t) * 1000)
lat.sort()
q = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))] if lat else 0
print(f"{q(0.5):.1f} {q(0.99):.1f} {len(lat)}")
PY
}
read -r load_p50 load_p99 _ < <(latency "$work/sink.log")

# Steady: one client, 2,000 creates, its own subscription and sink.
org2=$(curl -sf "${auth[@]}" -d '{"name":"events-latency"}' "$api/iam/v2/groups" | json '["uid"]')
lat_sub=$(curl -sf "${auth[@]}" -d "{\"sink\":\"http://127.0.0.1:$LAT_PORT/hook\"}" "$api/events/v2/subscriptions/$org2" | json '["uid"]')
python3 - "$api" "$token" "$org2" <<'PY'
import json, sys, urllib.request
api, token, org = sys.argv[1:]
for i in range(2000):
    req = urllib.request.Request(f"{api}/iam/v2/groups/{org}", data=json.dumps({"name": f"g{i}"}).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    urllib.request.urlopen(req).read()
PY
for _ in $(seq 1 100); do
  [ "$(status "$lat_sub" | json '.get("pending", "0")')" = "0" ] && break
  sleep 0.1
done
read -r lat_p50 lat_p99 lat_n < <(latency "$work/lat.log")
curl -sf -X DELETE -H "Authorization: Bearer $token" "$api/events/v2/subscriptions/$lat_sub" >/dev/null

dead=$(curl -sf "${auth[@]}" -d "{\"sink\":\"http://127.0.0.1:$DEAD_PORT/hook\"}" "$api/events/v2/subscriptions/$org" | json '["uid"]')
read -r dead_rps dead_p99 dead_err < <(run -H "Authorization: Bearer $token" -s "$work/create.lua" "$api/iam/v2/groups/$team")
dead_pending=$(status "$dead" | json '.get("pending", "0")')
rss=$(ps -o rss= -p "$ward_pid" | awk '{print int($1/1024)}')

# The dead sink comes back: its backlog drains with no writes beside it,
# the deliverers' own ceiling (the rate between nginx taking the first and
# the last of them; the wait before is the sink's back-off).
sink revived "$DEAD_PORT" revived.log
for _ in $(seq 1 1200); do
  [ "$(status "$dead" | json '.get("pending", "0")')" = "0" ] && break
  sleep 0.1
done
read -r backlog_n backlog_rate < <(python3 - "$work/revived.log" <<'PY'
import sys
t = sorted(float(l.split()[0]) for l in open(sys.argv[1]) if l.strip())
span = (t[-1] - t[0]) if len(t) > 1 else 0
print(len(t), f"{len(t) / span:.0f}" if span else "0")
PY
)
kill "$(cat "$work/revived.pid")" 2>/dev/null || true

backend=${WARD_DATABASE:+postgres}
printf '\nWard events benchmark (%s; wrk -t2 -c16 -d%s; %s cores)\n\n' "${backend:-sqlite}" "$DURATION" "$(nproc)"
printf '%-58s %10s %9s %7s\n' scenario 'req/s' 'p99 ms' 'non-2xx'
printf '%-58s %10s %9s %7s\n' 'nginx taking a POST (the sink'"'"'s ceiling)' "$sink_rps" "$sink_p99" 0
printf '%-58s %10s %9s %7s\n' "create a group, no subscription (median of $ROUNDS)" "$none_rps" "$none_p99" "$none_err"
printf '%-58s %10s %9s %7s\n' "create a group, one subscription (nginx sink; median)" "$live_rps" "$live_p99" "$live_err"
printf '%-58s %10s %9s %7s\n' 'create a group, one subscription (dead sink)' "$dead_rps" "$dead_p99" "$dead_err"
printf 'per round: no subscription%s; one subscription%s; ratios%s\n' "$nones" "$lives" "$ratios"
printf '\n%s deliveries over the rounds, the last of each delivered %.1f s after its writes began (summed): %s deliveries/s\n' \
  "$delivered" "$drain_s" "$drain_rate"
printf 'latency, event to sink, under the 16-writer load: p50 %s ms, p99 %s ms\n' "$load_p50" "$load_p99"
printf 'latency, event to sink, one writer (%s events): p50 %s ms, p99 %s ms\n' "$lat_n" "$lat_p50" "$lat_p99"
printf 'dead sink: %s deliveries pending after the run (bound 10,000); server RSS %s MB\n' "$dead_pending" "$rss"
printf 'the dead sink back: its backlog of %s delivered at %s deliveries/s (no writes beside)\n' "$backlog_n" "$backlog_rate"
python3 -c "print(f'with a subscription / without = {$live_rps/$none_rps:.2f}; dead sink / without = {$dead_rps/$none_rps:.2f}')" >&2
python3 -c '
import json, sys
a = sys.argv[1:]
print(json.dumps({"backend": a[0], "sink_post_rps": float(a[1]), "creates_no_subscription": float(a[2]),
  "creates_one_subscription": float(a[3]), "creates_dead_sink": float(a[4]), "delivered": int(a[5]),
  "deliveries_per_s": float(a[6]), "dead_sink_pending": int(a[7]), "rss_mb": int(a[8]),
  "latency_load_p50_ms": float(a[9]), "latency_load_p99_ms": float(a[10]),
  "latency_steady_p50_ms": float(a[11]), "latency_steady_p99_ms": float(a[12]),
  "backlog_delivered": int(a[13]), "backlog_deliveries_per_s": float(a[14])}))' \
  "${backend:-sqlite}" "$sink_rps" "$none_rps" "$live_rps" "$dead_rps" "$delivered" "$drain_rate" "$dead_pending" "$rss" \
  "$load_p50" "$load_p99" "$lat_p50" "$lat_p99" "$backlog_n" "$backlog_rate"
