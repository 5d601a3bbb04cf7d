#!/usr/bin/env bash
# Advisories benchmark: importing an advisory-schema corpus with the CLI, and
# listing pages of 50 from 100,000 advisories with the filters a UI uses,
# beside nginx serving the same page as a static file (the machine's ceiling).
#
#   1. import   `ward advisories import --group G corpus/` of a generated corpus
#               (1,600 files, 30,000 advisories, ~51,000 events) into a fresh
#               Ward on SQLite: seconds, advisories/s, events/s, server RSS
#               (now and peak) and database size afterwards.
#   2. list     a fresh Ward seeded with 100,000 advisories (1-5 events each,
#               ~171,000 events) by POSTing import bodies with curl; the events
#               of APPROVE_ADVISORIES advisories approved (see below); then wrk
#               on GET /vulnerabilities/v2/advisories?uidp.descendantsOf=ORG&pageSize=50
#                 plain            (all 100,000 match)
#                 &query=yaml      (a substring in ~1% of advisories' component names)
#                 &latestEventType=EVENT_TYPE_FILTER_FIXED   (~1.1%: see below)
#                 &componentNames=golang.org/x/net           (~1%)
#               and nginx serving the plain page's bytes from a file.
#               Runs on SQLite, then again on PostgreSQL when
#               WARD_BENCH_POSTGRES_URL is set (an empty scratch database; like
#               run.sh, WARD_DATABASE=postgres://… is taken too).
#
# Approvals: imported events are PENDING, and latestEventType matches the type
# of an advisory's latest *approved* event, so without approvals it matches
# nothing. The admin wrote every event and nobody reviews their own, so a second
# identity approves: a pull-token identity (`ward registry pull-token create`,
# the one kind of identity whose token Ward's CLI mints without an outside OIDC
# issuer) bound to advisories.approver at the org, its token from /sts/exchange.
# It approves every event of the first APPROVE_ADVISORIES advisories in list
# order (uids are random, so a random sample), oldest first within an advisory,
# advisories in parallel (xargs + curl). latestEventType=FIXED is therefore
# measured on that approved subset: about 72% of those advisories end in a fix,
# ~1,080 of 100,000 with the default 1,500.
#
# Prints progress on stderr, then a report and, as the last line of stdout, a
# JSON summary (config, import, and per backend the seeding, the approvals and
# each scenario's req/s, p50, p99, errors and matches).
#
#   cargo build --release -p ward && bench/advisories.sh
#   ONLY=import bench/advisories.sh        # the import only (also ONLY=list)
#   WARD_BENCH_POSTGRES_URL=postgres://postgres@127.0.0.1:5432/wardbench bench/advisories.sh
#   DURATION=3s LIST_ADVISORIES=20000 APPROVE_ADVISORIES=300 bench/advisories.sh   # a quick check
#
# Needs wrk and nginx (installed from Debian's packages if missing), curl,
# python3 and xargs; psql only to check that the PostgreSQL database is empty
# and to report its size. The Ward binary is not built here.
# Environment: WARD_BIN (target/release/ward), ONLY, DURATION (10s), WARMUP (2s),
# CONNECTIONS (32), THREADS (2), WRK_TIMEOUT (10s), FILES (1600), ADVISORIES
# (30000), LIST_ADVISORIES (100000), APPROVE_ADVISORIES (1500), SEED (1),
# SEED_CONCURRENCY (2 POSTs at a time), APPROVE_CONCURRENCY (8), WARD_PORT
# (18111), NGINX_PORT (18112), WARD_BENCH_POSTGRES_URL, BENCH_DEBUG (keep the
# work directory: server logs, wrk.log, the corpus). See bench/README.md.
set -euo pipefail
cd "$(dirname "$0")/.."

WARD_BIN=${WARD_BIN:-target/release/ward}
ONLY=${ONLY:-}
DURATION=${DURATION:-10s}
WARMUP=${WARMUP:-2s}
CONNECTIONS=${CONNECTIONS:-32}
THREADS=${THREADS:-2}
WRK_TIMEOUT=${WRK_TIMEOUT:-10s}
FILES=${FILES:-1600}
ADVISORIES=${ADVISORIES:-30000}
LIST_ADVISORIES=${LIST_ADVISORIES:-100000}
APPROVE_ADVISORIES=${APPROVE_ADVISORIES:-1500}
SEED=${SEED:-1}
SEED_CONCURRENCY=${SEED_CONCURRENCY:-2}
APPROVE_CONCURRENCY=${APPROVE_CONCURRENCY:-8}
WARD_PORT=${WARD_PORT:-18111}
NGINX_PORT=${NGINX_PORT:-18112}
PG_URL=${WARD_BENCH_POSTGRES_URL:-}
case "${WARD_DATABASE:-}" in postgres://* | postgresql://*) PG_URL=${PG_URL:-$WARD_DATABASE} ;; esac

say() { echo "$*" >&2; }
die() { say "advisories.sh: $*"; exit 1; }

case "$ONLY" in "" | import | list) ;; *) die "ONLY must be import or list, not '$ONLY'" ;; esac
[ -x "$WARD_BIN" ] || die "$WARD_BIN not found: run 'cargo build --release -p ward' (or set WARD_BIN)"

need() { command -v "$1" >/dev/null 2>&1; }
if [ "$ONLY" != import ] && { ! need wrk || ! need nginx; }; then
  say "installing wrk and nginx-light from Debian's packages…"
  apt-get update -qq && apt-get install -y -qq wrk nginx-light >/dev/null
fi
for tool in curl python3 xargs; do need "$tool" || die "$tool is needed"; done

if [ -n "$PG_URL" ] && [ "$ONLY" != import ]; then
  if need psql; then
    tables=$(psql "$PG_URL" -XAtqc \
      "SELECT count(*) FROM pg_tables WHERE schemaname NOT IN ('pg_catalog', 'information_schema')") ||
      die "cannot connect to WARD_BENCH_POSTGRES_URL with psql"
    [ "$tables" = 0 ] || die "WARD_BENCH_POSTGRES_URL must name an empty scratch database (it holds $tables tables):
  recreate it, e.g. dropdb wardbench && createdb wardbench"
  else
    say "advisories.sh: psql not found: not checking that the PostgreSQL database is empty (it must be)"
  fi
fi

work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  if [ -n "${BENCH_DEBUG:-}" ]; then say "kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
: >"$work/results.jsonl"

now_ns() { date +%s%N; }
secs_since() { python3 -c "print(round(($(now_ns) - $1) / 1e9, 3))"; }
# json_get KEY…: reads JSON on stdin, prints obj[KEY][KEY]… (a list index may be a number).
json_get() {
  python3 -c '
import json, sys
v = json.load(sys.stdin)
for k in sys.argv[1:]:
    v = v[int(k)] if isinstance(v, list) else v[k]
print(v)' "$@"
}
# record JSON: one result line.
record() { echo "$1" >>"$work/results.jsonl"; }

wait_ready() { # wait_ready PID URL [ARGS…]: until URL answers 200
  local pid=$1 url=$2
  shift 2
  for _ in $(seq 1 300); do
    kill -0 "$pid" 2>/dev/null || return 1
    [ "$(curl -s -o /dev/null -w '%{http_code}' "$@" "$url")" = 200 ] && return 0
    sleep 0.1
  done
  return 1
}
port_free() { ! curl -s -o /dev/null --max-time 1 "http://127.0.0.1:$1/"; }

# ---------------------------------------------------------------------------
# Ward: a fresh server per part, as registry.sh starts it: a new data dir, the
# admin token the server writes there, an organization `bench` made over the
# IAM API. Sets api, data, db, token, token_file, token_ns, ward_pid, org.
# ---------------------------------------------------------------------------
start_ward() { # start_ward LABEL [POSTGRES_URL]
  local label=$1
  db=${2:-}
  data=$work/$label
  api="http://127.0.0.1:$WARD_PORT"
  port_free "$WARD_PORT" || die "something already listens on 127.0.0.1:$WARD_PORT (set WARD_PORT)"
  # WARD_DATABASE is also the server's own variable: unset, so SQLite is SQLite.
  env -u WARD_DATABASE WARD_LOG="${WARD_LOG:-warn}" "$WARD_BIN" server --listen "127.0.0.1:$WARD_PORT" \
    --data-dir "$data" ${db:+--database "$db"} >"$work/$label.out" 2>"$work/$label.err" &
  ward_pid=$!
  pids+=("$ward_pid")
  for _ in $(seq 1 300); do [ -s "$data/admin.token" ] && break; sleep 0.1; done
  [ -s "$data/admin.token" ] || { cat "$work/$label.err" >&2; die "Ward did not start"; }
  token_file=$data/admin.token
  token=$(cat "$token_file")
  token_ns=$(now_ns)
  wait_ready "$ward_pid" "$api/v2/" -H "Authorization: Bearer $token" ||
    { cat "$work/$label.err" >&2; die "Ward did not answer"; }
  org=$(curl -sS -f -X POST -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
    "$api/iam/v2/groups" -d '{"name":"bench"}' | json_get uid) || die "could not create Ward's organization"
}

stop_ward() {
  kill "$ward_pid" 2>/dev/null || true
  wait "$ward_pid" 2>/dev/null || true
  local keep=() p
  for p in "${pids[@]}"; do [ "$p" = "$ward_pid" ] || keep+=("$p"); done
  pids=(${keep[@]+"${keep[@]}"})
}

# The admin token lives an hour: past 40 minutes, mint a new one.
fresh_token() {
  (($(now_ns) - token_ns < 2400 * 1000000000)) && return 0
  say "  (minting a fresh admin token)"
  env -u WARD_DATABASE "$WARD_BIN" admin token --data-dir "$data" ${db:+--database "$db"} >"$token_file.new" ||
    die "ward admin token failed"
  mv "$token_file.new" "$token_file"
  token=$(cat "$token_file")
  token_ns=$(now_ns)
}

rss_kib() { awk -v k="$1:" '$1 == k {print $2}' "/proc/$ward_pid/status"; } # rss_kib VmRSS|VmHWM
db_bytes() {
  if [ -z "$db" ]; then
    du -cb "$data"/ward.db* 2>/dev/null | awk 'END {print $1}'
  elif need psql; then
    psql "$db" -XAtqc 'SELECT pg_database_size(current_database())' 2>/dev/null || echo null
  else
    echo null
  fi
}

# ---------------------------------------------------------------------------
# 1. Import with the CLI.
# ---------------------------------------------------------------------------
bench_import() {
  say "== import: generating $FILES files, $ADVISORIES advisories (seed $SEED)…"
  local gen t0 secs rc=0 line
  gen=$(python3 bench/gen-advisories.py --out "$work/corpus" --files "$FILES" --advisories "$ADVISORIES" \
    --seed "$SEED") || die "gen-advisories.py failed"
  start_ward import
  say "   ward advisories import --group $org corpus/ …"
  t0=$(now_ns)
  WARD_API=$api WARD_TOKEN_FILE=$token_file "$WARD_BIN" advisories import --group "$org" "$work/corpus/" \
    >"$work/import.out" 2>"$work/import.err" || rc=$?
  secs=$(secs_since "$t0")
  line=$(grep -E '^created [0-9]+, updated [0-9]+, unchanged [0-9]+, rejected [0-9]+' "$work/import.err" | tail -1 || true)
  if [ "$rc" != 0 ] || [ -z "$line" ]; then
    say "  warning: the import exited $rc; its last words:"
    tail -5 "$work/import.err" >&2
  fi
  local counted
  counted=$(curl -sS -f -H "Authorization: Bearer $token" \
    "$api/vulnerabilities/v2/advisories?uidp.descendantsOf=$org&pageSize=1" | json_get totalCount) || counted=null
  local result
  result=$(GEN="$gen" LINE="$line" SECS="$secs" RC="$rc" RSS="$(rss_kib VmRSS)" HWM="$(rss_kib VmHWM)" \
    DB="$(db_bytes)" LISTED="$counted" python3 -c '
import json, os, re
g = json.loads(os.environ["GEN"])
m = re.match(r"created (\d+), updated (\d+), unchanged (\d+), rejected (\d+)", os.environ["LINE"])
c = dict(zip(("created", "updated", "unchanged", "rejected"), map(int, m.groups()))) if m else {}
secs = float(os.environ["SECS"])
db = os.environ["DB"]
print(json.dumps({"kind": "import", "backend": "sqlite", "files": g["files"], "advisories": g["advisories"],
    "events": g["events"], "seconds": secs, **c, "exit_code": int(os.environ["RC"]),
    "listed": None if os.environ["LISTED"] == "null" else int(os.environ["LISTED"]),
    "advisories_per_s": round(g["advisories"] / secs, 1), "events_per_s": round(g["events"] / secs, 1),
    "rss_kib": int(os.environ["RSS"]), "peak_rss_kib": int(os.environ["HWM"]),
    "db_bytes": None if db == "null" else int(db)}))')
  record "$result"
  say "   $(echo "$result" | python3 -c '
import json, sys
r = json.load(sys.stdin)
created, rejected = r.get("created", "?"), r.get("rejected", "?")
created = f"{created:,}" if isinstance(created, int) else created
secs, rate = r["seconds"], r["advisories_per_s"]
rss, peak = r["rss_kib"] / 1024, r["peak_rss_kib"] / 1024
print(f"{created} created, {rejected} rejected in {secs:.2f} s = {rate:,.0f} advisories/s; "
      f"server RSS {rss:.1f} MiB (peak {peak:.1f} MiB)")')"
  stop_ward
}

# ---------------------------------------------------------------------------
# 2. Lists.
# ---------------------------------------------------------------------------
nginx_pid=
start_nginx() {
  [ -z "$nginx_pid" ] || return 0
  mkdir -p "$work/nginx/root"
  # nginx workers may run as another user: they need to reach the file.
  chmod 755 "$work" "$work/nginx" "$work/nginx/root"
  cat >"$work/nginx/nginx.conf" <<NGINX
daemon off;
worker_processes 2;
pid $work/nginx/nginx.pid;
error_log $work/nginx/error.log;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path $work/nginx; proxy_temp_path $work/nginx; fastcgi_temp_path $work/nginx;
  uwsgi_temp_path $work/nginx; scgi_temp_path $work/nginx;
  server {
    listen 127.0.0.1:$NGINX_PORT;
    location = /page.json { default_type application/json; root $work/nginx/root; }
  }
}
NGINX
  port_free "$NGINX_PORT" || die "something already listens on 127.0.0.1:$NGINX_PORT (set NGINX_PORT)"
  echo '{}' >"$work/nginx/root/page.json"
  chmod 644 "$work/nginx/root/page.json"
  nginx -c "$work/nginx/nginx.conf" &
  nginx_pid=$!
  pids+=("$nginx_pid")
  wait_ready "$nginx_pid" "http://127.0.0.1:$NGINX_PORT/page.json" || { cat "$work/nginx/error.log" >&2; die "nginx did not start"; }
}

parse_wrk() { # stdin: wrk output → "rps p50 p99 errors" (as registry.sh)
  python3 -c '
import re, sys
t = sys.stdin.read()
def ms(s):
    v, u = re.match(r"([\d.]+)(us|ms|s|m)", s).groups()
    return float(v) * {"us": 0.001, "ms": 1, "s": 1000, "m": 60000}[u]
rps = float(re.search(r"Requests/sec:\s+([\d.]+)", t).group(1))
p50 = ms(re.search(r"^\s+50%\s+(\S+)", t, re.M).group(1))
p99 = ms(re.search(r"^\s+99%\s+(\S+)", t, re.M).group(1))
errs = re.search(r"Non-2xx or 3xx responses: (\d+)", t)
sock = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", t)
n = (int(errs.group(1)) if errs else 0) + (sum(map(int, sock.groups())) if sock else 0)
print(f"{rps:.1f} {p50:.3f} {p99:.3f} {n}")'
}

# bench_wrk BACKEND SCENARIO URL MATCHES BYTES: warm-up, then the measurement.
bench_wrk() {
  local backend=$1 scenario=$2 url=$3 matches=$4 bytes=$5 out rps p50 p99 errs
  local args=(-t"$THREADS" -c"$CONNECTIONS" --timeout "$WRK_TIMEOUT" -H "Authorization: Bearer $token")
  wrk "${args[@]}" -d"$WARMUP" "$url" >/dev/null
  out=$(wrk "${args[@]}" -d"$DURATION" --latency "$url")
  printf '== %s %s\n%s\n' "$backend" "$scenario" "$out" >>"$work/wrk.log"
  read -r rps p50 p99 errs < <(echo "$out" | parse_wrk)
  [ "$errs" = 0 ] || say "  warning: $errs failed or non-2xx responses (see wrk.log with BENCH_DEBUG=1)"
  say "  $(printf '%-9s %-14s %10s req/s  p50 %8s ms  p99 %8s ms  (%s match, %s bytes)' \
    "$backend" "$scenario" "$rps" "$p50" "$p99" "${matches/null/-}" "$bytes")"
  record "{\"kind\":\"wrk\",\"backend\":\"$backend\",\"scenario\":\"$scenario\",\"rps\":$rps,\"p50_ms\":$p50,\"p99_ms\":$p99,\"errors\":$errs,\"matches\":$matches,\"bytes\":$bytes}"
}

# page URL FILE: GET as the admin into FILE; prints totalCount (non-200: dies).
page() {
  local code
  code=$(curl -sS -o "$2" -w '%{http_code}' -H "Authorization: Bearer $token" "$1")
  [ "$code" = 200 ] || die "GET $1 answered $code: $(head -c 300 "$2")"
  json_get totalCount <"$2"
}

bench_list() { # bench_list BACKEND [POSTGRES_URL]
  local backend=$1 gen t0 secs dir=$work/batches-$1
  say "== list ($backend): a fresh Ward, $LIST_ADVISORIES advisories"
  start_ward "list-$backend" "${2:-}"
  gen=$(python3 bench/gen-advisories.py --json-batches "$dir" --group "$org" --advisories "$LIST_ADVISORIES" \
    --seed "$SEED") || die "gen-advisories.py failed"
  local nbatches
  nbatches=$(echo "$gen" | json_get batches)
  say "   seeding: $nbatches import bodies, $SEED_CONCURRENCY at a time…"

  # Seed: POST every body; keep each answer next to it.
  t0=$(now_ns)
  # shellcheck disable=SC2016 # expanded by the inner bash
  find "$dir" -name 'batch-*.json' | sort |
    API=$api TOKEN=$token xargs -P "$SEED_CONCURRENCY" -n 1 bash -c '
      curl -sS -o "$1.resp" -w "%{http_code}\n" -X POST -H "Authorization: Bearer $TOKEN" \
        -H "Content-Type: application/json" --data-binary @"$1" "$API/vulnerabilities/v1/advisories:import" ||
        true' _ >"$work/seed-codes-$backend"
  secs=$(secs_since "$t0")
  local listed
  fresh_token
  listed=$(page "$api/vulnerabilities/v2/advisories?uidp.descendantsOf=$org&pageSize=1" "$work/one.json")
  local result
  result=$(GEN="$gen" DIR="$dir" CODES="$work/seed-codes-$backend" SECS="$secs" LISTED="$listed" \
    RSS="$(rss_kib VmRSS)" HWM="$(rss_kib VmHWM)" DB="$(db_bytes)" BACKEND="$backend" CONC="$SEED_CONCURRENCY" \
    python3 -c '
import glob, json, os, sys
g = json.loads(os.environ["GEN"])
codes = open(os.environ["CODES"]).read().split()
sums = {"created": 0, "updated": 0, "unchanged": 0, "rejected": 0}
reasons = []
for p in sorted(glob.glob(os.path.join(os.environ["DIR"], "*.resp"))):
    try:
        r = json.load(open(p))
    except ValueError:
        reasons.append(open(p).read(300))
        continue
    for k in sums:
        sums[k] += int(r.get(k, 0) or 0)
    reasons += [str(x.get("advisoryId")) + ": " + str(x.get("reason")) for x in r.get("results", [])
                if x.get("outcome") in ("REJECTED", 4)][:3]
bad = [c for c in codes if c != "200"]
created, rejected, wanted = sums["created"], sums["rejected"], g["advisories"]
if bad or rejected or created != wanted:
    print(f"  warning: {len(bad)} of {len(codes)} imports failed (codes {sorted(set(bad))}), "
          f"{rejected} advisories rejected, {created} of {wanted} created", file=sys.stderr)
    for r in reasons[:5]:
        print(f"    {r}", file=sys.stderr)
secs = float(os.environ["SECS"])
db = os.environ["DB"]
print(json.dumps({"kind": "seed", "backend": os.environ["BACKEND"], "advisories": g["advisories"],
    "events": g["events"], "documents": g["files"], "requests": len(codes), "failed_requests": len(bad),
    "concurrency": int(os.environ["CONC"]), **sums, "listed": int(os.environ["LISTED"]), "seconds": secs,
    "advisories_per_s": round(g["advisories"] / secs, 1), "events_per_s": round(g["events"] / secs, 1),
    "rss_kib": int(os.environ["RSS"]), "peak_rss_kib": int(os.environ["HWM"]),
    "db_bytes": None if db == "null" else int(db), "needles": g["needles"]}))')
  record "$result"
  say "   seeded in $secs s; $listed advisories listed under the org"

  approve "$backend"

  # The scenarios: matches (totalCount) and the page's size, then wrk.
  fresh_token
  local base="$api/vulnerabilities/v2/advisories?uidp.descendantsOf=$org&pageSize=50"
  local q_needle c_needle
  q_needle=$(echo "$gen" | json_get needles query substring)
  c_needle=$(echo "$gen" | json_get needles component name)
  local -a names=(plain query latest_fixed component)
  local -A urls=(
    [plain]="$base"
    [query]="$base&query=$q_needle"
    [latest_fixed]="$base&latestEventType=EVENT_TYPE_FILTER_FIXED"
    [component]="$base&componentNames=$c_needle"
  )
  local -A matches bytes
  local s
  for s in "${names[@]}"; do
    matches[$s]=$(page "${urls[$s]}" "$work/page-$s.json")
    bytes[$s]=$(stat -c %s "$work/page-$s.json")
  done
  local want
  want=$(echo "$gen" | json_get needles query matches)
  [ "${matches[query]}" = "$want" ] || say "  warning: query=$q_needle matches ${matches[query]}, the generator made $want"
  want=$(echo "$gen" | json_get needles component matches)
  [ "${matches[component]}" = "$want" ] ||
    say "  warning: componentNames=$c_needle matches ${matches[component]}, the generator made $want"
  [ "${matches[latest_fixed]}" = "$approved_fixed" ] ||
    say "  warning: latestEventType=FIXED matches ${matches[latest_fixed]}, expected $approved_fixed from the approvals"

  start_nginx
  cp "$work/page-plain.json" "$work/nginx/root/page.json"
  chmod 644 "$work/nginx/root/page.json"
  say "   measuring (wrk -t$THREADS -c$CONNECTIONS -d$DURATION after a $WARMUP warm-up)…"
  bench_wrk "$backend" nginx_static "http://127.0.0.1:$NGINX_PORT/page.json" null "${bytes[plain]}"
  for s in "${names[@]}"; do
    bench_wrk "$backend" "$s" "${urls[$s]}" "${matches[$s]}" "${bytes[$s]}"
  done
  record "{\"kind\":\"server\",\"backend\":\"$backend\",\"rss_kib\":$(rss_kib VmRSS),\"peak_rss_kib\":$(rss_kib VmHWM)}"
  stop_ward
}

# approve BACKEND: a second identity approves every event of the first
# APPROVE_ADVISORIES advisories (see the header). Sets approved_fixed.
approve() {
  local backend=$1 pt user password role issuer approver t0 secs
  approved_fixed=0
  [ "$APPROVE_ADVISORIES" -gt 0 ] || return 0
  fresh_token
  pt=$(WARD_API=$api WARD_TOKEN_FILE=$token_file "$WARD_BIN" registry -o json pull-token create --group "$org" \
    --ttl 2h) || die "could not create the approver identity (ward registry pull-token create)"
  user=$(echo "$pt" | json_get username)
  password=$(echo "$pt" | json_get password)
  role=$(curl -sS -f -H "Authorization: Bearer $token" "$api/iam/v2/roles?name=advisories.approver" |
    json_get roles 0 uid) || die "no built-in role advisories.approver"
  curl -sS -f -o /dev/null -X POST -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
    "$api/iam/v2/roleBindings/$org" -d "{\"identityUid\":\"$user\",\"roleUid\":\"$role\"}" ||
    die "could not bind advisories.approver"
  issuer=$(curl -sS -f "$api/.well-known/openid-configuration" | json_get issuer)
  approver=$(curl -sS -f -H "Authorization: Bearer $password" "${issuer%/}/sts/exchange?identity=$user" |
    json_get token) || die "the approver's token exchange failed"

  # The sample: the first APPROVE_ADVISORIES advisories (pages of 200), one
  # line of event uids (oldest first) per advisory.
  local sample
  sample=$(API=$api TOKEN=$token ORG=$org N=$APPROVE_ADVISORIES OUT="$work/approve-$backend.txt" python3 -c '
import json, os, urllib.parse, urllib.request
env = os.environ
want, token, seen, fixed, events = int(env["N"]), "", 0, 0, 0
with open(env["OUT"], "w") as out:
    while seen < want:
        q = {"uidp.descendantsOf": env["ORG"], "pageSize": min(200, want - seen)}
        if token:
            q["pageToken"] = token
        req = urllib.request.Request(env["API"] + "/vulnerabilities/v2/advisories?" + urllib.parse.urlencode(q),
                                     headers={"Authorization": "Bearer " + env["TOKEN"]})
        page = json.load(urllib.request.urlopen(req, timeout=60))
        for a in page.get("advisories", []):
            evs = sorted(a.get("events", []), key=lambda e: e.get("createTime", ""))
            if not evs:
                continue
            out.write(" ".join(e["uid"] for e in evs) + "\n")
            seen += 1
            events += len(evs)
            fixed += "fixed" in evs[-1]
        token = page.get("nextPageToken", "")
        if not token:
            break
print(seen, events, fixed)')
  local n_adv n_ev
  read -r n_adv n_ev approved_fixed <<<"$sample"
  say "   approving $n_ev events of $n_adv advisories as a second identity, $APPROVE_CONCURRENCY advisories at a time…"
  t0=$(now_ns)
  # shellcheck disable=SC2016 # expanded by the inner bash
  API=$api TOKEN=$approver xargs -P "$APPROVE_CONCURRENCY" -L 1 bash -c '
    for e; do
      curl -sS -o /dev/null -w "%{http_code}\n" -X PUT -H "Authorization: Bearer $TOKEN" \
        -H "Content-Type: application/json" --data "{\"status\":\"APPROVED\"}" \
        "$API/vulnerabilities/v1/advisory_events/$e" || true
    done' _ <"$work/approve-$backend.txt" >"$work/approve-codes-$backend"
  secs=$(secs_since "$t0")
  local ok total
  total=$(wc -l <"$work/approve-codes-$backend")
  ok=$(grep -cx 200 "$work/approve-codes-$backend" || true)
  [ "$ok" = "$total" ] || say "  warning: $((total - ok)) of $total approvals failed: $(sort "$work/approve-codes-$backend" | uniq -c | tr -s ' ' | tr '\n' ';')"
  say "   approved $ok events in $secs s; $approved_fixed of the $n_adv advisories now end in an approved fix"
  record "{\"kind\":\"approve\",\"backend\":\"$backend\",\"advisories\":$n_adv,\"events\":$n_ev,\"approved\":$ok,\"seconds\":$secs,\"latest_fixed\":$approved_fixed,\"concurrency\":$APPROVE_CONCURRENCY}"
}

# ---------------------------------------------------------------------------
# Run.
# ---------------------------------------------------------------------------
[ "$ONLY" = list ] || bench_import
if [ "$ONLY" != import ]; then
  bench_list sqlite
  [ -z "$PG_URL" ] || bench_list postgres "$PG_URL"
fi

RESULTS=$work/results.jsonl THREADS=$THREADS CONNECTIONS=$CONNECTIONS DURATION=$DURATION WARMUP=$WARMUP \
  SEED=$SEED WARD_BIN=$WARD_BIN CORES=$(nproc) APPROVE_ADVISORIES=$APPROVE_ADVISORIES python3 - <<'PY'
import json, os

env = os.environ
rows = [json.loads(l) for l in open(env["RESULTS"]) if l.strip()]
summary = {
    "config": {"threads": int(env["THREADS"]), "connections": int(env["CONNECTIONS"]), "duration": env["DURATION"],
               "warmup": env["WARMUP"], "seed": int(env["SEED"]), "cores": int(env["CORES"]),
               "ward_bin": env["WARD_BIN"], "approve_advisories": int(env["APPROVE_ADVISORIES"])},
}
mib = lambda kib: f"{kib / 1024:.1f} MiB"
size = lambda b: "-" if b is None else f"{b / 2**20:.1f} MiB"

imp = next((r for r in rows if r["kind"] == "import"), None)
if imp:
    summary["import"] = {k: v for k, v in imp.items() if k != "kind"}
    print(f"\nAdvisory import (sqlite; `ward advisories import`, {env['CORES']} cores)")
    print(f"corpus:  {imp['files']:,} files, {imp['advisories']:,} advisories, {imp['events']:,} events")
    created = imp.get("created")
    created = "?" if created is None else f"{created:,}"
    print(f"import:  {created} created, {imp.get('rejected', '?')} rejected in {imp['seconds']:.2f} s"
          f" = {imp['advisories_per_s']:,.0f} advisories/s ({imp['events_per_s']:,.0f} events/s)")
    print(f"server:  RSS {mib(imp['rss_kib'])} after the import (peak {mib(imp['peak_rss_kib'])}); "
          f"database {size(imp['db_bytes'])}")

labels = {
    "nginx_static": "nginx static JSON (the plain page, from a file)",
    "plain": "page of 50, descendantsOf org",
    "query": "page of 50, query=<substring>",
    "latest_fixed": "page of 50, latestEventType=FIXED",
    "component": "page of 50, componentNames=<name>",
}
summary["list"] = {}
for backend in ("sqlite", "postgres"):
    seed = next((r for r in rows if r["kind"] == "seed" and r["backend"] == backend), None)
    if not seed:
        continue
    appr = next((r for r in rows if r["kind"] == "approve" and r["backend"] == backend), None)
    srv = next((r for r in rows if r["kind"] == "server" and r["backend"] == backend), None)
    runs = [r for r in rows if r["kind"] == "wrk" and r["backend"] == backend]
    out = {"seed": {k: v for k, v in seed.items() if k not in ("kind", "backend")},
           "approve": {k: v for k, v in (appr or {}).items() if k not in ("kind", "backend")},
           "server": {k: v for k, v in (srv or {}).items() if k not in ("kind", "backend")},
           "scenarios": {r["scenario"]: {k: v for k, v in r.items() if k not in ("kind", "backend", "scenario")}
                         for r in runs}}
    n = out["scenarios"].get("nginx_static", {}).get("rps")
    for s in out["scenarios"].values():
        if n and s is not out["scenarios"].get("nginx_static"):
            s["ratio_to_nginx"] = round(s["rps"] / n, 3)
    summary["list"][backend] = out
    q, c = seed["needles"]["query"], seed["needles"]["component"]
    print(f"\nAdvisory lists ({backend}; wrk -t{env['THREADS']} -c{env['CONNECTIONS']} -d{env['DURATION']}; "
          f"{env['CORES']} cores)")
    print(f"seeding: {seed['advisories']:,} advisories, {seed['events']:,} events in {seed['requests']} imports "
          f"({seed['concurrency']} at a time): {seed['seconds']:.1f} s = {seed['advisories_per_s']:,.0f} advisories/s; "
          f"{seed['created']:,} created, {seed['rejected']} rejected; database {size(seed['db_bytes'])}, "
          f"server RSS {mib(seed['rss_kib'])}")
    if appr:
        print(f"reviews: {appr['approved']:,} of {appr['events']:,} events approved (every event of the first "
              f"{appr['advisories']:,} advisories) in {appr['seconds']:.1f} s; "
              f"latestEventType=FIXED selects {appr['latest_fixed']:,} of them")
    print(f"filters: query={q['substring']} ({q['matches']:,} advisories), componentNames={c['name']} "
          f"({c['matches']:,})\n")
    print(f"{'scenario':<50} {'matches':>8} {'KiB':>6} {'req/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'errors':>6}")
    for key, label in labels.items():
        r = out["scenarios"].get(key)
        if not r:
            continue
        m = "-" if r["matches"] is None else f"{r['matches']:,}"
        print(f"{label:<50} {m:>8} {r['bytes'] / 1024:>6.0f} {r['rps']:>9.0f} {r['p50_ms']:>8.2f} "
              f"{r['p99_ms']:>8.2f} {r['errors']:>6}")
    if n:
        print("Ward / nginx: " + ", ".join(f"{k} {v['ratio_to_nginx']:.2f}" for k, v in out["scenarios"].items()
                                           if "ratio_to_nginx" in v))
    if srv:
        print(f"server RSS after the runs: {mib(srv['rss_kib'])} (peak {mib(srv['peak_rss_kib'])})")
print()
print(json.dumps(summary, separators=(",", ":")))
PY
