#!/usr/bin/env bash
# Vulnerability reports benchmark: one organization with 200,000 imported OSV
# records (PyPI, 20,000 package names), then
#
#   1. import    POST /vulnerabilities/v1/osv:import, 1,000 records a request
#                (IMPORT_CONCURRENCY at a time): seconds and records/s; then
#                the background work the import queued (a `reeval` job per
#                package name) until the job queue is empty.
#   2. image     one image whose layer holds 2,000 Python distributions
#                (dist-info METADATA), pushed over /v2/ (blobs by POST + PUT,
#                then the manifest PUT): ms from the manifest PUT to the
#                report at GET /registry/v1/repos/{repo}/digests/{d}/vulnreport
#                (polled every POLL_MS), and the server's own `inventory read`
#                and `report computed` ms (ward::vulns log lines). The report's
#                matches are checked against what the generator made.
#   3. serving   wrk -t2 -c32 -d10s on that vulnreport GET beside
#                GET /iam/v2/groups/{org} in the same run: the ratio.
#   4. reeval    FLEET (10,000) images sharing one small layer (P and four
#                other packages; manifests differ by an annotation) pushed
#                PUSH_CONCURRENCY at a time, the queue drained (each image's
#                inventory and report); then P's advisory data changes, once
#                per REEVAL step, and the time until the job queue is empty
#                again and every fleet report is newer:
#                  osv       one of P's records re-imported with a newer
#                            `modified` and a range that now holds P's version
#                  advisory  a Ward advisory about P created (a detection event)
#   5. memory    the server's VmRSS and VmHWM (peak) at the end.
#
# Runs on SQLite; then again on PostgreSQL when WARD_BENCH_POSTGRES_URL is set
# (or, as for run.sh, WARD_DATABASE=postgres://…): an empty scratch database,
# checked with psql. The corpus comes from bench/gen-vulns.py (standard library
# only, deterministic per SEED), made once per run.
#
# Prints progress on stderr, then a report and, as the last line of stdout, a
# JSON summary (config, corpus, and per backend each phase's figures).
#
#   cargo build --release -p ward && BENCH_NO_BUILD=1 bench/vulns.sh
#   WARD_BENCH_POSTGRES_URL=postgres://postgres@127.0.0.1:5432/wardbench bench/vulns.sh
#   FLEET=1000 NAMES=2000 IMAGE_PACKAGES=200 DURATION=3s bench/vulns.sh   # a quick check
#
# Needs wrk (installed from Debian's packages if missing), curl, python3 with
# requests, and psql for PostgreSQL. Builds target/release/ward (cargo build
# --release -p ward) unless BENCH_NO_BUILD is set or WARD_BIN names another
# binary.
# Environment: WARD_BIN, BENCH_NO_BUILD, ONLY (sqlite|postgres), NAMES (20000),
# PER_NAME (10), AFFECT (0.05), IMAGE_PACKAGES (2000), FLEET (10000),
# FLEET_PACKAGES (5), SEED (1), IMPORT_CONCURRENCY (2), PUSH_CONCURRENCY (8),
# POLL_MS (20), REEVAL ("osv advisory"), DURATION (10s), WARMUP (2s),
# CONNECTIONS (32), THREADS (2), WARD_PORT (18121), NGINX_PORT (18122), WARD_BENCH_POSTGRES_URL,
# BENCH_DEBUG (keep the work directory: server logs, wrk.log, the corpus).
# See bench/README.md.
set -euo pipefail
cd "$(dirname "$0")/.."

WARD_BIN=${WARD_BIN:-target/release/ward}
ONLY=${ONLY:-}
NAMES=${NAMES:-20000}
PER_NAME=${PER_NAME:-10}
AFFECT=${AFFECT:-0.05}
IMAGE_PACKAGES=${IMAGE_PACKAGES:-2000}
FLEET=${FLEET:-10000}
FLEET_PACKAGES=${FLEET_PACKAGES:-5}
SEED=${SEED:-1}
IMPORT_CONCURRENCY=${IMPORT_CONCURRENCY:-2}
PUSH_CONCURRENCY=${PUSH_CONCURRENCY:-8}
POLL_MS=${POLL_MS:-20}
REEVAL=${REEVAL:-osv advisory}
DURATION=${DURATION:-10s}
WARMUP=${WARMUP:-2s}
CONNECTIONS=${CONNECTIONS:-32}
THREADS=${THREADS:-2}
WARD_PORT=${WARD_PORT:-18121}
NGINX_PORT=${NGINX_PORT:-18122}
PG_URL=${WARD_BENCH_POSTGRES_URL:-}
case "${WARD_DATABASE:-}" in postgres://* | postgresql://*) PG_URL=${PG_URL:-$WARD_DATABASE} ;; esac

say() { echo "$*" >&2; }
die() { say "vulns.sh: $*"; exit 1; }

case "$ONLY" in
  "") backends=(sqlite); [ -z "$PG_URL" ] || backends+=(postgres) ;;
  sqlite) backends=(sqlite) ;;
  postgres) [ -n "$PG_URL" ] || die "ONLY=postgres needs WARD_BENCH_POSTGRES_URL"; backends=(postgres) ;;
  *) die "ONLY must be sqlite or postgres, not '$ONLY'" ;;
esac
for r in $REEVAL; do case "$r" in osv | advisory) ;; *) die "REEVAL lists osv and/or advisory, not '$r'" ;; esac; done

need() { command -v "$1" >/dev/null 2>&1; }
if ! need wrk || ! need nginx; then
  say "installing wrk and nginx-light from Debian's packages…"
  apt-get update -qq && apt-get install -y -qq wrk nginx-light >/dev/null
fi
for tool in curl python3; do need "$tool" || die "$tool is needed"; done
python3 -c 'import requests' 2>/dev/null || die "python3 needs requests (pip install requests)"

if [ -z "${BENCH_NO_BUILD:-}" ] && [ "$WARD_BIN" = target/release/ward ]; then
  say "building target/release/ward (BENCH_NO_BUILD=1 skips)…"
  cargo build --release -q -p ward
fi
[ -x "$WARD_BIN" ] || die "$WARD_BIN not found: run 'cargo build --release -p ward' (or set WARD_BIN)"

if [[ " ${backends[*]} " == *" postgres "* ]]; then
  need psql || die "PostgreSQL needs psql (to check the database is empty and to watch the job queue)"
  tables=$(psql "$PG_URL" -XAtqc \
    "SELECT count(*) FROM pg_tables WHERE schemaname NOT IN ('pg_catalog', 'information_schema')") ||
    die "cannot connect to $PG_URL with psql"
  [ "$tables" = 0 ] || die "$PG_URL must name an empty scratch database (it holds $tables tables):
  recreate it, e.g. dropdb wardbench && createdb wardbench"
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
record() { echo "$1" >>"$work/results.jsonl"; }
json_get() {
  python3 -c '
import json, sys
v = json.load(sys.stdin)
for k in sys.argv[1:]:
    v = v[int(k)] if isinstance(v, list) else v[k]
print(v)' "$@"
}
port_free() { ! curl -s -o /dev/null --max-time 1 "http://127.0.0.1:$1/"; }

# ---------------------------------------------------------------------------
# The driver: every phase that talks to Ward beyond wrk. Each subcommand
# prints one JSON result line. Environment: API, TOKEN, ORG, CORPUS, DB (the
# SQLite file or the PostgreSQL URL), LOG (the server's stderr), BACKEND.
# ---------------------------------------------------------------------------
cat >"$work/drive.py" <<'PY'
import concurrent.futures as cf
import datetime as dt
import glob
import json
import os
import re
import sqlite3
import subprocess
import sys
import threading
import time

import requests

env = os.environ
API, TOKEN, ORG, CORPUS, DB, LOG = (env[k] for k in ("API", "TOKEN", "ORG", "CORPUS", "DB", "LOG"))
POLL = int(env.get("POLL_MS", "20")) / 1000
META = json.load(open(os.path.join(CORPUS, "meta.json")))
OCI = "application/vnd.oci.image.manifest.v1+json"
local = threading.local()


def session():
    s = getattr(local, "s", None)
    if s is None:
        s = local.s = requests.Session()
        s.headers["Authorization"] = "Bearer " + TOKEN
    return s


def say(*a):
    print(*a, file=sys.stderr, flush=True)


def out(kind, **kw):
    print(json.dumps({"kind": kind, "backend": env["BACKEND"], **kw}))


# --- the job queue -----------------------------------------------------------
_db = None


def jobs():
    """Rows in the jobs table (0: all background work is done)."""
    global _db
    if DB.startswith("postgres"):
        r = subprocess.run(["psql", DB, "-XAtqc", "SELECT count(*) FROM jobs"], capture_output=True, text=True)
        return int(r.stdout.strip() or -1)
    if _db is None:
        _db = sqlite3.connect(f"file:{DB}?mode=ro", uri=True, timeout=10, isolation_level=None)
    return _db.execute("SELECT COUNT(*) FROM jobs").fetchone()[0]


def sql(q):
    if DB.startswith("postgres"):
        r = subprocess.run(["psql", DB, "-XAtqc", q], capture_output=True, text=True, check=True)
        return r.stdout.strip()
    jobs()
    return _db.execute(q).fetchone()[0]


def drain(limit=900):
    """Polls the queue until it is empty: (seconds, largest count seen)."""
    t0, peak = time.time(), 0
    poll = POLL if not DB.startswith("postgres") else max(POLL, 0.05)
    while True:
        n = jobs()
        peak = max(peak, n)
        if n == 0:
            return time.time() - t0, peak
        if time.time() - t0 > limit:
            raise SystemExit(f"the job queue still holds {n} jobs after {limit} s")
        time.sleep(poll)


# --- the server's ward::vulns log lines ----------------------------------------
ANSI = re.compile(r"\x1b\[[0-9;]*m")
LINE = re.compile(r"^(\S+)\s+INFO\s+ward::vulns:\s+(report computed|inventory read|reports re-evaluated)\b(.*)$")


def log_events(since, what, digest=None):
    """[(epoch, fields)] of `what` lines logged at or after `since`."""
    evs = []
    with open(LOG, errors="replace") as f:
        for raw in f:
            m = LINE.match(ANSI.sub("", raw).strip())
            if not m or m.group(2) != what:
                continue
            t = dt.datetime.fromisoformat(m.group(1).replace("Z", "+00:00")).timestamp()
            if t < since:
                continue
            fields = dict(re.findall(r'(\w+)=("[^"]*"|\S+)', m.group(3)))
            fields = {k: v.strip('"') for k, v in fields.items()}
            if digest and fields.get("digest") != digest:
                continue
            evs.append((t, fields))
    return evs


def log_summary(since, what):
    evs = log_events(since, what)
    if not evs:
        return None
    ms = sorted(int(f.get("ms", 0)) for _, f in evs)
    return {"count": len(evs), "sum_ms": sum(ms), "p50_ms": ms[len(ms) // 2], "p99_ms": ms[int(len(ms) * 0.99)],
            "max_ms": ms[-1], "first_s": round(evs[0][0] - since, 3), "last_s": round(evs[-1][0] - since, 3)}


# --- OCI ---------------------------------------------------------------------
def push_blob(repo, data, digest):
    s = session()
    r = s.post(f"{API}/v2/{repo}/blobs/uploads/", headers={"Content-Length": "0"})
    if r.status_code != 202:
        raise SystemExit(f"blob upload POST answered {r.status_code}: {r.text[:300]}")
    loc = r.headers["Location"]
    if loc.startswith("/"):
        loc = API + loc
    loc += ("&" if "?" in loc else "?") + "digest=" + digest
    r = s.put(loc, data=data, headers={"Content-Type": "application/octet-stream"})
    if r.status_code != 201:
        raise SystemExit(f"blob PUT answered {r.status_code}: {r.text[:300]}")


def put_manifest(repo, ref, body):
    r = session().put(f"{API}/v2/{repo}/manifests/{ref}", data=body, headers={"Content-Type": OCI})
    if r.status_code != 201:
        raise RuntimeError(f"manifest PUT answered {r.status_code}: {r.text[:300]}")
    return r.headers.get("Docker-Content-Digest")


def make_repo(name):
    r = session().post(f"{API}/registry/v1/repos/{ORG}", json={"name": name})
    if r.status_code != 200:
        raise SystemExit(f"creating repo {name} answered {r.status_code}: {r.text[:300]}")
    return r.json()["id"]


def report(repo_uid, digest):
    return session().get(f"{API}/registry/v1/repos/{repo_uid}/digests/{digest}/vulnreport")


def read(path):
    with open(path, "rb") as f:
        return f.read()


def ts_ms(s):
    return dt.datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp() * 1000


# --- phases --------------------------------------------------------------------
def do_import():
    files = sorted(glob.glob(os.path.join(CORPUS, "batches", "batch-*.json")))
    conc = int(env.get("IMPORT_CONCURRENCY", "2"))
    sums = {"created": 0, "updated": 0, "unchanged": 0, "rejected": 0}
    failed, reasons, slowest = [], [], 0.0
    lock = threading.Lock()

    def one(path):
        nonlocal slowest
        body = read(path).replace(b"@@GROUP@@", ORG.encode(), 1)
        t = time.time()
        r = session().post(f"{API}/vulnerabilities/v1/osv:import", data=body,
                           headers={"Content-Type": "application/json"})
        el = time.time() - t
        with lock:
            slowest = max(slowest, el)
            if r.status_code != 200:
                failed.append(f"{os.path.basename(path)}: {r.status_code} {r.text[:200]}")
                return
            j = r.json()
            for k in sums:
                sums[k] += int(j.get(k, 0) or 0)
            reasons.extend(f"{x.get('advisoryId')}: {x.get('reason')}" for x in j.get("results", [])
                           if x.get("outcome") in ("REJECTED", 4))

    t0 = time.time()
    with cf.ThreadPoolExecutor(conc) as ex:
        list(ex.map(one, files))
    secs = time.time() - t0
    if failed or sums["rejected"]:
        say(f"  warning: {len(failed)} of {len(files)} imports failed, {sums['rejected']} records rejected")
        for x in (failed + reasons)[:5]:
            say("    " + x)
    say(f"   imported {sums['created']:,} records in {secs:.1f} s ({META['records'] / secs:,.0f} records/s); "
        f"draining the queued work…")
    queued = jobs()
    drain_s, peak = drain()
    out("import", records=META["records"], requests=len(files), concurrency=conc, seconds=round(secs, 3),
        records_per_s=round(META["records"] / secs, 1), slowest_request_s=round(slowest, 3),
        failed_requests=len(failed), jobs_after_import=queued, drain_s=round(drain_s, 3), **sums)


def do_image():
    d = os.path.join(CORPUS, "image")
    m = META["image"]
    repo_uid = make_repo("app")
    repo = f"{ORG}/app"
    t = time.time()
    push_blob(repo, read(os.path.join(d, "config.json")), m["config"])
    push_blob(repo, read(os.path.join(d, "layer.tar.gz")), m["layer"])
    blobs_ms = (time.time() - t) * 1000
    body = read(os.path.join(d, "manifest.json"))
    wall0 = time.time()
    t0 = time.perf_counter()
    digest = put_manifest(repo, "latest", body)
    put_ms = (time.perf_counter() - t0) * 1000
    polls = 0
    while True:
        r = report(repo_uid, digest)
        polls += 1
        if r.status_code == 200:
            break
        if r.status_code != 503 or time.perf_counter() - t0 > 120:
            raise SystemExit(f"vulnreport answered {r.status_code}: {r.text[:300]}")
        time.sleep(POLL)
    ready_ms = (time.perf_counter() - t0) * 1000
    time.sleep(0.2)  # the log line follows the stored report
    rep = r.json()
    got = len(rep.get("vulnerabilityMatches", []))
    want = m["expected_matches"]
    if got != want:
        say(f"  warning: the report shows {got} matches, the generator made {want}")
    inv = log_events(wall0 - 1, "inventory read", digest)
    rc = log_events(wall0 - 1, "report computed", digest)
    inv_f = inv[-1][1] if inv else {}
    rc_f = rc[-1][1] if rc else {}
    say(f"   manifest PUT {put_ms:.1f} ms; report served {ready_ms:.0f} ms after the PUT began "
        f"({polls} polls); {got} matches; server: inventory {inv_f.get('ms', '?')} ms, report {rc_f.get('ms', '?')} ms")
    out("image", repo_uid=repo_uid, digest=digest, packages=m["packages"], blobs_ms=round(blobs_ms, 1),
        put_ms=round(put_ms, 2), ready_ms=round(ready_ms, 1), polls=polls, poll_ms=POLL * 1000, matches=got,
        expected_matches=want, report_bytes=len(r.content),
        inventory_packages=int(inv_f["packages"]) if "packages" in inv_f else None,
        inventory_ms=int(inv_f["ms"]) if "ms" in inv_f else None,
        report_ms=int(rc_f["ms"]) if "ms" in rc_f else None,
        report_log_matches=int(rc_f["matches"]) if "matches" in rc_f else None)


def do_fleet():
    n = int(env.get("FLEET", "10000"))
    conc = int(env.get("PUSH_CONCURRENCY", "8"))
    d = os.path.join(CORPUS, "fleet")
    m = META["fleet"]
    repo_uid = make_repo("fleet")
    repo = f"{ORG}/fleet"
    push_blob(repo, read(os.path.join(d, "config.json")), m["config"])
    push_blob(repo, read(os.path.join(d, "layer.tar.gz")), m["layer"])
    base = json.loads(read(os.path.join(d, "manifest.json")))
    digests = [None] * n
    errors = []

    def one(k):
        body = json.dumps({**base, "annotations": {"dev.ward.bench.fleet": str(k)}}, separators=(",", ":")).encode()
        try:
            digests[k] = put_manifest(repo, f"f{k:05d}", body)
        except Exception as e:  # noqa: BLE001 - counted and reported
            errors.append(str(e))

    wall0 = time.time()
    with cf.ThreadPoolExecutor(conc) as ex:
        list(ex.map(one, range(n)))
    push_s = time.time() - wall0
    if errors:
        say(f"  warning: {len(errors)} of {n} manifest PUTs failed: {errors[0]}")
    say(f"   pushed {n - len(errors):,} manifests in {push_s:.1f} s ({(n - len(errors)) / push_s:,.0f}/s, "
        f"{conc} at a time); draining inventories and reports…")
    queued = jobs()
    drain_s, peak = drain()
    total_s = time.time() - wall0
    inv = log_summary(wall0, "inventory read")
    rep = log_summary(wall0, "report computed")
    sample = [k for k in (0, n // 2, n - 1) if digests[k]]
    got = [len(report(repo_uid, digests[k]).json().get("vulnerabilityMatches", [])) for k in sample]
    if any(g != m["expected_matches"] for g in got):
        say(f"  warning: fleet reports show {got} matches, the generator made {m['expected_matches']}")
    say(f"   queue empty {drain_s:.1f} s after the last push ({total_s:.1f} s after the first); "
        f"inventories {inv and inv['count']}, reports {rep and rep['count']}")
    json.dump({"repo_uid": repo_uid, "digests": digests}, open(os.path.join(env["WORK"], "fleet.json"), "w"))
    out("fleet", images=n, pushed=n - len(errors), concurrency=conc, push_s=round(push_s, 3),
        pushes_per_s=round((n - len(errors)) / push_s, 1), jobs_after_push=queued, drain_after_push_s=round(drain_s, 3),
        until_empty_s=round(total_s, 3), images_per_s=round(n / total_s, 1), inventory_log=inv, report_log=rep,
        sample_matches=got, expected_matches=m["expected_matches"])


def do_reeval(via):
    f = json.load(open(os.path.join(env["WORK"], "fleet.json")))
    repo_uid, digests = f["repo_uid"], [d for d in f["digests"] if d]
    m = META["fleet"]
    sample = [digests[0], digests[len(digests) // 2], digests[-1]]
    before = [report(repo_uid, d).json() for d in sample]
    now = dt.datetime.now(dt.timezone.utc)
    wall0 = time.time()
    if via == "osv":
        rec = json.load(open(os.path.join(CORPUS, "update-record.json")))
        rec["modified"] = now.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        r = session().post(f"{API}/vulnerabilities/v1/osv:import",
                           json={"parentId": ORG, "records": [json.dumps(rec)], "source": "bench"})
        ok = r.status_code == 200 and int(r.json().get("updated", 0) or 0) == 1
    else:
        stamp = (now - dt.timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
        r = session().post(f"{API}/vulnerabilities/v1/advisories", json={"parentId": ORG, "advisory": {
            "artifactName": m["p"], "artifactType": "pypi", "componentName": m["p"], "componentType": "pypi",
            "aliases": ["CVE-2026-424242"], "events": [{"timestamp": stamp, "detection": {"manual": {}}}]}})
        ok = r.status_code == 200
    change_ms = (time.time() - wall0) * 1000
    if not ok:
        raise SystemExit(f"the {via} change answered {r.status_code}: {r.text[:400]}")
    queued = jobs()
    drain_s, peak = drain()
    total_s = time.time() - wall0
    since_ms = int(wall0 * 1000)
    rewritten = int(sql(f"SELECT COUNT(*) FROM vuln_reports WHERE repo_uid = '{repo_uid}' AND create_time >= {since_ms}"))
    after = [report(repo_uid, d).json() for d in sample]
    newer = all(ts_ms(a["reportGeneration"]) >= since_ms for a in after)
    mb = [len(b.get("vulnerabilityMatches", [])) for b in before]
    ma = [len(a.get("vulnerabilityMatches", [])) for a in after]
    rep = log_summary(wall0, "report computed")
    merged = log_summary(wall0, "reports re-evaluated")
    if not newer or rewritten != len(digests):
        say(f"  warning: {rewritten} of {len(digests)} fleet reports rewritten; sampled reports newer: {newer}")
    say(f"   {via}: change answered in {change_ms:.0f} ms; queue empty {total_s:.2f} s after it "
        f"({len(digests) / total_s:,.0f} images/s); {rewritten:,} reports rewritten; "
        f"sampled matches {mb} -> {ma}")
    out("reeval", via=via, images=len(digests), change_ms=round(change_ms, 1), jobs_after_change=queued,
        peak_jobs=peak, seconds=round(total_s, 3), images_per_s=round(len(digests) / total_s, 1),
        reports_rewritten=rewritten, sample_newer=newer, sample_matches_before=mb, sample_matches_after=ma,
                report_log=rep, reeval_log=merged)


cmd = sys.argv[1]
if cmd == "import":
    do_import()
elif cmd == "image":
    do_image()
elif cmd == "fleet":
    do_fleet()
elif cmd == "reeval":
    do_reeval(sys.argv[2])
elif cmd == "drain":
    print(json.dumps(drain()))
else:
    raise SystemExit(f"unknown step {cmd}")
PY

# ---------------------------------------------------------------------------
# Ward: a fresh server per backend, its ward::vulns lines at INFO (the
# per-inventory and per-report timings), everything else at WARN.
# ---------------------------------------------------------------------------
start_ward() { # start_ward BACKEND [POSTGRES_URL]
  local backend=$1
  db=${2:-}
  data=$work/data-$backend
  log=$work/ward-$backend.err
  api="http://127.0.0.1:$WARD_PORT"
  port_free "$WARD_PORT" || die "something already listens on 127.0.0.1:$WARD_PORT (set WARD_PORT)"
  # WARD_DATABASE is also the server's own variable: unset, so SQLite is SQLite.
  env -u WARD_DATABASE NO_COLOR=1 WARD_LOG="${WARD_LOG:-warn,ward::vulns=info}" "$WARD_BIN" server \
    --listen "127.0.0.1:$WARD_PORT" --data-dir "$data" ${db:+--database "$db"} >"$work/ward-$backend.out" 2>"$log" &
  ward_pid=$!
  pids+=("$ward_pid")
  for _ in $(seq 1 300); do [ -s "$data/admin.token" ] && break; sleep 0.1; done
  [ -s "$data/admin.token" ] || { cat "$log" >&2; die "Ward did not start"; }
  token=$(cat "$data/admin.token")
  for _ in $(seq 1 300); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $token" "$api/v2/")" = 200 ] && break
    kill -0 "$ward_pid" 2>/dev/null || { cat "$log" >&2; die "Ward exited"; }
    sleep 0.1
  done
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

rss_kib() { awk -v k="$1:" '$1 == k {print $2}' "/proc/$ward_pid/status"; } # rss_kib VmRSS|VmHWM
db_bytes() {
  if [ -z "$db" ]; then
    du -cb "$data"/ward.db* 2>/dev/null | awk 'END {print $1}'
  else
    psql "$db" -XAtqc 'SELECT pg_database_size(current_database())' 2>/dev/null || echo null
  fi
}

drive() { # drive STEP [ARG]: runs a driver step, records its result line
  local line
  line=$(API=$api TOKEN=$token ORG=$org CORPUS=$work/corpus DB=${db:-$data/ward.db} LOG=$log BACKEND=$backend \
    WORK=$work POLL_MS=$POLL_MS FLEET=$FLEET IMPORT_CONCURRENCY=$IMPORT_CONCURRENCY PUSH_CONCURRENCY=$PUSH_CONCURRENCY \
    python3 "$work/drive.py" "$@") || die "driver step '$*' failed"
  record "$line"
  echo "$line"
}

parse_wrk() { # stdin: wrk output → "rps p50 p99 errors"
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

bench_wrk() { # bench_wrk SCENARIO URL [ACCEPT_ENCODING]
  local scenario=$1 url=$2 enc=${3:-identity} out rps p50 p99 errs bytes
  bytes=$(curl -sS -o /dev/null -w '%{size_download}' -H "Authorization: Bearer $token" -H "Accept-Encoding: $enc" "$url")
  wrk -t"$THREADS" -c"$CONNECTIONS" -d"$WARMUP" -H "Authorization: Bearer $token" -H "Accept-Encoding: $enc" "$url" >/dev/null
  out=$(wrk -t"$THREADS" -c"$CONNECTIONS" -d"$DURATION" --latency -H "Authorization: Bearer $token" -H "Accept-Encoding: $enc" "$url")
  printf '== %s %s\n%s\n' "$backend" "$scenario" "$out" >>"$work/wrk.log"
  read -r rps p50 p99 errs < <(echo "$out" | parse_wrk)
  [ "$errs" = 0 ] || say "  warning: $errs failed or non-2xx responses (see wrk.log with BENCH_DEBUG=1)"
  say "   $(printf '%-10s %10s req/s  p50 %8s ms  p99 %8s ms  (%s bytes)' "$scenario" "$rps" "$p50" "$p99" "$bytes")"
  record "{\"kind\":\"wrk\",\"backend\":\"$backend\",\"scenario\":\"$scenario\",\"rps\":$rps,\"p50_ms\":$p50,\"p99_ms\":$p99,\"errors\":$errs,\"bytes\":$bytes}"
}

# The machine's ceiling for a response of the report's size: nginx sending
# the same bytes from a file (sendfile), measured with the same wrk.
static_report() { # static_report URL: serves URL's plain body, benches it, stops
  local root=$work/nginx pid
  mkdir -p "$root"
  chmod 755 "$work" "$root" # nginx workers may run as another user
  curl -sS -f -H "Authorization: Bearer $token" -H 'Accept-Encoding: identity' -o "$root/report.json" "$1"
  chmod 644 "$root/report.json"
  port_free "$NGINX_PORT" || die "something already listens on 127.0.0.1:$NGINX_PORT (set NGINX_PORT)"
  cat >"$root/nginx.conf" <<NGINX
daemon off;
worker_processes 2;
pid $root/nginx.pid;
error_log $root/error.log;
events { worker_connections 1024; }
http {
  access_log off;
  sendfile on;
  client_body_temp_path $root; proxy_temp_path $root; fastcgi_temp_path $root; uwsgi_temp_path $root; scgi_temp_path $root;
  server { listen 127.0.0.1:$NGINX_PORT; location = /report.json { default_type application/json; root $root; } }
}
NGINX
  nginx -c "$root/nginx.conf" &
  pid=$!
  for _ in $(seq 1 100); do curl -sf -o /dev/null "http://127.0.0.1:$NGINX_PORT/report.json" && break; sleep 0.1; done
  bench_wrk nginx-static "http://127.0.0.1:$NGINX_PORT/report.json"
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

mem() { # mem LABEL
  record "{\"kind\":\"memory\",\"backend\":\"$backend\",\"at\":\"$1\",\"rss_kib\":$(rss_kib VmRSS),\"peak_rss_kib\":$(rss_kib VmHWM),\"db_bytes\":$(db_bytes)}"
}

bench_backend() { # bench_backend BACKEND [POSTGRES_URL]
  backend=$1
  local img t0
  say "== $backend: a fresh Ward"
  start_ward "$backend" "${2:-}"
  say "   importing ${NAMES}×${PER_NAME} OSV records, $IMPORT_CONCURRENCY requests at a time…"
  drive import >/dev/null
  mem import
  say "   pushing the $IMAGE_PACKAGES-package image…"
  img=$(drive image)
  mem image
  say "   serving: wrk -t$THREADS -c$CONNECTIONS -d$DURATION after a $WARMUP warm-up"
  local report_url="$api/registry/v1/repos/$(echo "$img" | json_get repo_uid)/digests/$(echo "$img" | json_get digest)/vulnreport"
  bench_wrk vulnreport "$report_url"
  # What every real client asks for (curl --compressed, browsers, Python
  # requests, Go): the report's cached gzip.
  bench_wrk vulnreport-gzip "$report_url" gzip
  bench_wrk group "$api/iam/v2/groups/$org"
  static_report "$report_url"
  say "   the fleet: $FLEET images sharing one layer, $PUSH_CONCURRENCY pushes at a time…"
  drive fleet >/dev/null
  mem fleet
  for via in $REEVAL; do
    say "   re-evaluation after a change about P ($via)…"
    drive reeval "$via" >/dev/null
  done
  mem end
  stop_ward
}

# ---------------------------------------------------------------------------
# Run.
# ---------------------------------------------------------------------------
run_t0=$(date +%s)
say "generating the corpus (gen-vulns.py: $NAMES names × $PER_NAME records, $IMAGE_PACKAGES-package image, seed $SEED)…"
t0=$(date +%s%N)
python3 bench/gen-vulns.py --out "$work/corpus" --names "$NAMES" --per-name "$PER_NAME" --affect "$AFFECT" \
  --image-packages "$IMAGE_PACKAGES" --fleet-packages "$FLEET_PACKAGES" --seed "$SEED" >"$work/corpus.json" ||
  die "gen-vulns.py failed"
cp "$work/corpus.json" "$work/corpus/meta.json"
say "   done in $(( ($(date +%s%N) - t0) / 1000000 )) ms: $(python3 -c '
import json, sys
m = json.load(open(sys.argv[1]))
n, hold, mb, want = m["records"], m["affecting"], m["body_bytes"] / 2**20, m["image"]["expected_matches"]
print(f"{n:,} records ({hold:,} hold their package version), {mb:.0f} MiB of import bodies; "
      f"the image must show {want:,} matches")' "$work/corpus.json")"

for b in "${backends[@]}"; do
  case "$b" in
    sqlite) bench_backend sqlite ;;
    postgres) bench_backend postgres "$PG_URL" ;;
  esac
done

RESULTS=$work/results.jsonl CORPUS=$work/corpus.json THREADS=$THREADS CONNECTIONS=$CONNECTIONS DURATION=$DURATION \
  WARMUP=$WARMUP CORES=$(nproc) WARD_BIN=$WARD_BIN FLEET=$FLEET POLL_MS=$POLL_MS IMPORT_CONCURRENCY=$IMPORT_CONCURRENCY \
  PUSH_CONCURRENCY=$PUSH_CONCURRENCY WALL_S=$(($(date +%s) - run_t0)) python3 - <<'PY'
import json, os

env = os.environ
rows = [json.loads(l) for l in open(env["RESULTS"]) if l.strip()]
corpus = json.load(open(env["CORPUS"]))
summary = {
    "config": {"threads": int(env["THREADS"]), "connections": int(env["CONNECTIONS"]), "duration": env["DURATION"],
               "warmup": env["WARMUP"], "cores": int(env["CORES"]), "ward_bin": env["WARD_BIN"],
               "fleet": int(env["FLEET"]), "poll_ms": int(env["POLL_MS"]),
               "import_concurrency": int(env["IMPORT_CONCURRENCY"]), "push_concurrency": int(env["PUSH_CONCURRENCY"]),
               "wall_s": int(env["WALL_S"])},
    "corpus": {k: corpus[k] for k in ("seed", "names", "records", "affecting", "batches", "body_bytes")},
    "targets": {"report_ms": 100, "vulnreport_over_group": 0.3, "reeval_10000_s": 2, "peak_rss_mib": 250},
    "backends": {},
}
mib = lambda kib: kib / 1024
yes = lambda ok: "met" if ok else "NOT met"
for backend in ("sqlite", "postgres"):
    mine = [r for r in rows if r.get("backend") == backend]
    if not mine:
        continue
    one = lambda kind, **kw: next((r for r in mine if r["kind"] == kind and all(r.get(k) == v for k, v in kw.items())), None)
    imp, img, fleet = one("import"), one("image"), one("fleet")
    wv, wg = one("wrk", scenario="vulnreport"), one("wrk", scenario="group")
    wz = one("wrk", scenario="vulnreport-gzip")
    wn = one("wrk", scenario="nginx-static")
    reevals = [r for r in mine if r["kind"] == "reeval"]
    mems = {r["at"]: r for r in mine if r["kind"] == "memory"}
    strip = lambda r: {k: v for k, v in (r or {}).items() if k not in ("kind", "backend")}
    out = {"import": strip(imp), "image": strip(img),
           "serving": {"vulnreport": strip(wv), "vulnreport_gzip": strip(wz), "group": strip(wg),
                       "nginx_static": strip(wn)},
           "fleet": strip(fleet), "reeval": {r["via"]: strip(r) for r in reevals},
           "memory": {k: strip(v) for k, v in mems.items()}}
    ratio = round(wv["rps"] / wg["rps"], 3) if wv and wg and wg["rps"] else None
    out["serving"]["ratio"] = ratio
    ratio_gzip = round(wz["rps"] / wg["rps"], 3) if wz and wg and wg["rps"] else None
    out["serving"]["ratio_gzip"] = ratio_gzip
    ceiling = round(wn["rps"] / wg["rps"], 3) if wn and wg and wg["rps"] else None
    out["serving"]["nginx_over_group"] = ceiling
    out["serving"]["vulnreport_over_nginx"] = round(wv["rps"] / wn["rps"], 3) if wn and wv and wn["rps"] else None
    summary["backends"][backend] = out

    print(f"\nVulnerability reports ({backend}; {env['CORES']} cores; wrk -t{env['THREADS']} -c{env['CONNECTIONS']} "
          f"-d{env['DURATION']})")
    print(f"corpus: {corpus['records']:,} OSV records over {corpus['names']:,} PyPI names "
          f"({corpus['affecting']:,} hold their package's installed version), seed {corpus['seed']}\n")
    print(f"{'phase':<52} {'figure':<46} target")
    row = lambda a, b, c="": print(f"{a:<52} {b:<46} {c}")
    if imp:
        row(f"import ({imp['requests']} requests × 1,000 records, {imp['concurrency']} at a time)",
            f"{imp['seconds']:.1f} s = {imp['records_per_s']:,.0f} records/s")
        row("  then the reeval jobs it queued, drained", f"{imp['drain_s']:.1f} s ({imp['jobs_after_import']:,} queued when it ended)")
    if img:
        rm = img.get("report_ms")
        row(f"image: manifest PUT → report served ({img['packages']:,} packages)",
            f"{img['ready_ms']:.0f} ms (PUT {img['put_ms']:.1f} ms, poll {img['poll_ms']:.0f} ms)")
        row("  server: inventory read / report computed",
            f"{img.get('inventory_ms')} ms / {rm} ms", f"≤ 100 ms computation: {yes(rm is not None and rm <= 100)}")
        row("  matches (generator's count)", f"{img['matches']:,} ({img['expected_matches']:,}); "
            f"{img['report_bytes'] / 1024:.0f} KiB")
    if wv and wg:
        row("vulnreport GET", f"{wv['rps']:,.0f} req/s, p50 {wv['p50_ms']:.2f}, p99 {wv['p99_ms']:.2f} ms")
        row("GET /iam/v2/groups/{org}", f"{wg['rps']:,.0f} req/s, p50 {wg['p50_ms']:.2f}, p99 {wg['p99_ms']:.2f} ms")
        row("  vulnreport / group", f"{ratio:.3f}", f"≥ 0.3: {yes(ratio >= 0.3)}")
    if wn and wg:
        row("nginx sending the same bytes from a file", f"{wn['rps']:,.0f} req/s, p50 {wn['p50_ms']:.2f}, "
            f"p99 {wn['p99_ms']:.2f} ms ({wn['bytes'] / 1024:.0f} KiB)")
        row("  nginx / group (the machine's ceiling)", f"{ceiling:.3f}")
        if wv:
            row("  vulnreport / nginx", f"{wv['rps'] / wn['rps']:.3f}")
    if wz and wg:
        row("vulnreport GET, Accept-Encoding: gzip", f"{wz['rps']:,.0f} req/s, p50 {wz['p50_ms']:.2f}, "
            f"p99 {wz['p99_ms']:.2f} ms ({wz['bytes'] / 1024:.0f} KiB)")
        row("  vulnreport (gzip) / group", f"{ratio_gzip:.3f}", f"≥ 0.3: {yes(ratio_gzip >= 0.3)}")
    if fleet:
        row(f"fleet: {fleet['pushed']:,} manifest PUTs ({fleet['concurrency']} at a time)",
            f"{fleet['push_s']:.1f} s = {fleet['pushes_per_s']:,.0f}/s")
        il, rl = fleet.get("inventory_log") or {}, fleet.get("report_log") or {}
        row("  queue empty (inventory + report per image)",
            f"{fleet['until_empty_s']:.1f} s after the first PUT ({fleet['drain_after_push_s']:.1f} s after the last)")
        if il and rl:
            row("  server ms per image: inventory / report (p50, p99)",
                f"{il['p50_ms']}, {il['p99_ms']} / {rl['p50_ms']}, {rl['p99_ms']}")
    for r in reevals:
        rl = r.get("report_log") or {}
        row(f"re-evaluation of {r['images']:,} images ({r['via']} change about P)",
            f"{r['seconds']:.2f} s = {r['images_per_s']:,.0f} images/s",
            f"≤ 2 s: {yes(r['seconds'] <= 2 and r['reports_rewritten'] == r['images'])}" if r["images"] >= 10000
            else "(the target: 10,000 in ≤ 2 s)")
        if rl:
            row("  server: report computed, summed / p50 / max",
                f"{rl['sum_ms'] / 1000:.2f} s / {rl['p50_ms']} ms / {rl['max_ms']} ms ({rl['count']:,} reports)")
        ml = r.get("reeval_log") or {}
        if ml:
            row("  server: re-evaluated chunks (256 images), summed / p50 / max",
                f"{ml['sum_ms'] / 1000:.2f} s / {ml['p50_ms']} ms / {ml['max_ms']} ms ({ml['count']:,} chunks)")
        row("  reports rewritten; sampled matches before → after",
            f"{r['reports_rewritten']:,}; {r['sample_matches_before']} → {r['sample_matches_after']}")
    end = mems.get("end")
    if end:
        # VmHWM is kept lazily by the kernel: the peak is the largest of every sample.
        peak = max(max(m["peak_rss_kib"], m["rss_kib"]) for m in mems.values())
        out["peak_rss_kib"] = peak
        row("server RSS at the end (peak)", f"{mib(end['rss_kib']):.1f} MiB ({mib(peak):.1f} MiB = {peak * 1024 / 1e6:.0f} MB)",
            f"≤ 250 MB peak: {yes(peak * 1024 <= 250e6)}")
        if end.get("db_bytes") is not None:
            row("database size at the end", f"{end['db_bytes'] / 2**20:.0f} MiB")
    for at in ("import", "image", "fleet"):
        m = mems.get(at)
        if m:
            row(f"  RSS after {at} (peak so far)", f"{mib(m['rss_kib']):.1f} MiB ({mib(m['peak_rss_kib']):.1f} MiB)")
print(f"\nwhole run: {int(env['WALL_S']) / 60:.1f} min")
print()
print(json.dumps(summary, separators=(",", ":")))
PY
