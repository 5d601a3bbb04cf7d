#!/usr/bin/env bash
# Registry benchmark: Ward's /v2/ against CNCF distribution 2.8.2 (Debian's
# docker-registry) on the same image, on loopback, in alternating runs
# (ward, distribution, ward, distribution, … for ROUNDS rounds):
#
#   1. manifest GET by tag          (wrk, Accept: OCI image manifest)
#   2. manifest HEAD by tag         (ApacheBench `ab -i`: wrk stalls on HEAD)
#   3. tags/list of a repo with 1,000 tags
#   4. 1 MiB blob GET               (req/s and MiB/s = req/s × 1 MiB)
#   5. 100 MiB blob push            (POST + monolithic PUT with curl; PUSHES
#                                    distinct random files; MiB/s over all)
#
# Prints a table (mean of the rounds, each round in brackets, and ward /
# distribution per scenario) and, as the last line of stdout, a JSON summary.
#
#   cargo build --release -p ward && bench/registry.sh
#   ONLY=distribution bench/registry.sh     # one side only (also: ONLY=ward)
#
# Needs wrk, ab and docker-registry (installed from Debian's packages if missing),
# curl, python3 and sha256sum. The Ward binary is not built here.
# Environment: WARD_BIN (default target/release/ward; when it is missing and
# ONLY is unset, only distribution runs), ONLY, ROUNDS (2), DURATION (10s),
# WARMUP (2s), CONNECTIONS (32), THREADS (2), PUSHES (5), PUSH_MIB (100),
# TAGS (1000, at most 1000), WARD_PORT (18091), DIST_PORT (18092),
# BENCH_DEBUG (keep the work directory and the servers' logs). See
# bench/README.md.
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-2}
DURATION=${DURATION:-10s}
WARMUP=${WARMUP:-2s}
CONNECTIONS=${CONNECTIONS:-32}
THREADS=${THREADS:-2}
PUSHES=${PUSHES:-5}
PUSH_MIB=${PUSH_MIB:-100}
TAGS=${TAGS:-1000}
WARD_PORT=${WARD_PORT:-18091}
DIST_PORT=${DIST_PORT:-18092}
WARD_BIN=${WARD_BIN:-target/release/ward}
DIST_BIN=${DIST_BIN:-/usr/bin/docker-registry}
ONLY=${ONLY:-}
OCI_MANIFEST=application/vnd.oci.image.manifest.v1+json

say() { echo "$*" >&2; }
die() { say "registry.sh: $*"; exit 1; }

case "$ONLY" in
  "") registries=(ward distribution) ;;
  ward | distribution) registries=("$ONLY") ;;
  *) die "ONLY must be ward or distribution, not '$ONLY'" ;;
esac
if [ ! -x "$WARD_BIN" ] && [[ " ${registries[*]} " == *" ward "* ]]; then
  [ "$ONLY" = ward ] && die "$WARD_BIN not found: run 'cargo build --release -p ward' (or set WARD_BIN)"
  say "registry.sh: $WARD_BIN not found, so distribution runs alone; build Ward with 'cargo build --release -p ward' (or set WARD_BIN)"
  registries=(distribution)
fi
# One tags/list page: Ward answers at most 1,000 tags a page, distribution all.
(( TAGS >= 1 && TAGS <= 1000 )) || die "TAGS must be 1..1000 (one tags/list page)"

need() { command -v "$1" >/dev/null 2>&1; }
missing=()
need wrk || missing+=(wrk)
need ab || missing+=(apache2-utils)
if [[ " ${registries[*]} " == *" distribution "* ]] && [ ! -x "$DIST_BIN" ]; then
  [ "$DIST_BIN" = /usr/bin/docker-registry ] || die "$DIST_BIN not found"
  missing+=(docker-registry)
fi
if [ ${#missing[@]} -gt 0 ]; then
  say "installing ${missing[*]} from Debian's packages…"
  apt-get update -qq && apt-get install -y -qq "${missing[@]}" >/dev/null
fi
for tool in curl python3 sha256sum; do need "$tool" || die "$tool is needed"; done

work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  if [ -n "${BENCH_DEBUG:-}" ]; then say "kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---------------------------------------------------------------------------
# The image: a config blob, one 1 MiB layer and an OCI manifest over them.
# ---------------------------------------------------------------------------
img=$work/image
mkdir -p "$img"
digest() { echo "sha256:$(sha256sum "$1" | cut -d' ' -f1)"; }
printf '{"architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":["sha256:%s"]},"config":{"Labels":{"bench":"%s"}}}' \
  "$(head -c 32 /dev/urandom | sha256sum | cut -d' ' -f1)" "$(date +%s%N)" >"$img/config.json"
head -c $((1024 * 1024)) /dev/urandom >"$img/layer"
config_digest=$(digest "$img/config.json")
layer_digest=$(digest "$img/layer")
printf '{"schemaVersion":2,"mediaType":"%s","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"%s","size":%d},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"%s","size":%d}]}' \
  "$OCI_MANIFEST" "$config_digest" "$(stat -c %s "$img/config.json")" "$layer_digest" "$(stat -c %s "$img/layer")" \
  >"$img/manifest.json"
manifest_digest=$(digest "$img/manifest.json")
# The push files: made once; each push run rewrites their first bytes, so
# every push sends a blob neither registry holds.
for i in $(seq 1 "$PUSHES"); do head -c $((PUSH_MIB * 1024 * 1024)) /dev/urandom >"$work/push$i"; done

# ---------------------------------------------------------------------------
# Per-registry settings, set by use(): base URL, image name, auth header.
# ---------------------------------------------------------------------------
declare -A BASE NAME TOKEN
use() {
  reg=$1
  base=${BASE[$reg]}
  name=${NAME[$reg]}
  auth=()
  [ -n "${TOKEN[$reg]:-}" ] && auth=(-H "Authorization: Bearer ${TOKEN[$reg]}")
  return 0
}
# curl against the current registry: curl_reg ARGS… (adds auth, no retries).
curl_reg() { curl -sS ${auth[@]+"${auth[@]}"} "$@"; }

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

start_ward() {
  port_free "$WARD_PORT" || die "something already listens on 127.0.0.1:$WARD_PORT (set WARD_PORT)"
  WARD_LOG=${WARD_LOG:-warn} "$WARD_BIN" server --listen "127.0.0.1:$WARD_PORT" --data-dir "$work/ward" \
    >"$work/ward.out" 2>"$work/ward.err" &
  pids+=($!)
  local pid=$! api="http://127.0.0.1:$WARD_PORT"
  for _ in $(seq 1 300); do [ -s "$work/ward/admin.token" ] && break; sleep 0.1; done
  [ -s "$work/ward/admin.token" ] || { cat "$work/ward.err" >&2; die "Ward did not start"; }
  TOKEN[ward]=$(cat "$work/ward/admin.token")
  wait_ready "$pid" "$api/v2/" -H "Authorization: Bearer ${TOKEN[ward]}" \
    || { cat "$work/ward.err" >&2; die "Ward's /v2/ did not answer 200"; }
  local org
  org=$(curl -sS -f -X POST -H "Authorization: Bearer ${TOKEN[ward]}" -H 'Content-Type: application/json' \
    "$api/iam/v2/groups" -d '{"name":"bench"}' | python3 -c 'import json,sys; print(json.load(sys.stdin)["uid"])') \
    || die "could not create Ward's organization"
  BASE[ward]=$api
  NAME[ward]=$org/app
}

start_distribution() {
  port_free "$DIST_PORT" || die "something already listens on 127.0.0.1:$DIST_PORT (set DIST_PORT)"
  mkdir -p "$work/dist"
  # Like Debian's /etc/docker/registry/config.yml (filesystem storage and the
  # in-memory blob descriptor cache), without auth and without access logs.
  cat >"$work/dist.yml" <<YAML
version: 0.1
log:
  level: error
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: $work/dist
  cache:
    blobdescriptor: inmemory
http:
  addr: 127.0.0.1:$DIST_PORT
YAML
  "$DIST_BIN" serve "$work/dist.yml" >"$work/dist.out" 2>"$work/dist.err" &
  pids+=($!)
  wait_ready "$!" "http://127.0.0.1:$DIST_PORT/v2/" || { cat "$work/dist.err" >&2; die "distribution did not start"; }
  BASE[distribution]=http://127.0.0.1:$DIST_PORT
  NAME[distribution]=bench/app
}

# push_blob FILE DIGEST: POST an upload session, then PUT the whole file to it.
push_blob() {
  local file=$1 d=$2 loc code
  loc=$(curl_reg -o /dev/null -D - -X POST -H 'Content-Length: 0' "$base/v2/$name/blobs/uploads/" |
    tr -d '\r' | sed -n 's/^[Ll]ocation: //p')
  [ -n "$loc" ] || die "$reg: no upload Location for $name"
  case "$loc" in /*) loc=$base$loc ;; esac
  case "$loc" in *\?*) loc="$loc&digest=$d" ;; *) loc="$loc?digest=$d" ;; esac
  code=$(curl_reg -o /dev/null -w '%{http_code}' -X PUT -H 'Content-Type: application/octet-stream' -H 'Expect:' \
    -T "$file" "$loc")
  [ "$code" = 201 ] || die "$reg: blob PUT answered $code"
}

seed() {
  say "seeding $reg: config, 1 MiB layer, manifest, $TAGS tags on $name"
  push_blob "$img/config.json" "$config_digest"
  push_blob "$img/layer" "$layer_digest"
  local first last codes
  first=$(printf '%04d' 0)
  last=$(printf '%04d' $((TAGS - 1)))
  # One curl, one connection: PUT the manifest to every tag t0000…
  codes=$(curl_reg -X PUT -H "Content-Type: $OCI_MANIFEST" --data-binary @"$img/manifest.json" \
    -o /dev/null -w '%{http_code}\n' "$base/v2/$name/manifests/t[$first-$last]" | sort | uniq -c | tr -s ' ')
  [ "$codes" = " $TAGS 201" ] || die "$reg: tagging answered (count code): $codes"
  # Check what the scenarios read.
  local got
  got=$(curl_reg -f -H "Accept: $OCI_MANIFEST" "$base/v2/$name/manifests/t0000" | sha256sum | cut -d' ' -f1)
  [ "sha256:$got" = "$manifest_digest" ] || die "$reg: manifest GET returned other bytes"
  got=$(curl_reg -f "$base/v2/$name/tags/list" |
    python3 -c 'import json,sys; print(len(json.load(sys.stdin)["tags"] or []))')
  [ "$got" = "$TAGS" ] || die "$reg: tags/list returned $got tags, not $TAGS"
  got=$(curl_reg -f "$base/v2/$name/blobs/$layer_digest" | sha256sum | cut -d' ' -f1)
  [ "sha256:$got" = "$layer_digest" ] || die "$reg: layer GET returned other bytes"
}

# ---------------------------------------------------------------------------
# Measurements. Each appends one JSON line to $work/results.jsonl.
# ---------------------------------------------------------------------------
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

# bench_wrk ROUND SCENARIO PATH [WRK ARGS…]
bench_wrk() {
  local round=$1 scenario=$2 url=$base$3 out rps p50 p99 errs
  shift 3
  wrk -t"$THREADS" -c"$CONNECTIONS" -d"$WARMUP" ${auth[@]+"${auth[@]}"} "$@" "$url" >/dev/null
  out=$(wrk -t"$THREADS" -c"$CONNECTIONS" -d"$DURATION" --latency ${auth[@]+"${auth[@]}"} "$@" "$url")
  printf '== %s round %s %s\n%s\n' "$reg" "$round" "$scenario" "$out" >>"$work/wrk.log"
  read -r rps p50 p99 errs < <(echo "$out" | parse_wrk)
  record "$round" "$scenario" "$rps" "$p50" "$p99" "$errs"
}

# record ROUND SCENARIO RPS P50 P99 ERRORS
record() {
  [ "$6" = 0 ] || say "  warning: $6 failed or non-2xx responses (see wrk.log with BENCH_DEBUG=1)"
  say "  $(printf '%-12s %-14s %10s req/s  p50 %8s ms  p99 %8s ms' "$reg" "$2" "$3" "$4" "$5")"
  printf '{"registry":"%s","round":%d,"scenario":"%s","rps":%s,"p50_ms":%s,"p99_ms":%s,"errors":%d}\n' \
    "$reg" "$1" "$2" "$3" "$4" "$5" "$6" >>"$work/results.jsonl"
}

secs() { # 10s / 2m / 10 → seconds, for ab
  case "$1" in *s) echo "${1%s}" ;; *m) echo $((${1%m} * 60)) ;; *h) echo $((${1%h} * 3600)) ;; *) echo "$1" ;; esac
}

# bench_ab ROUND SCENARIO PATH [AB ARGS…]: like bench_wrk, with ApacheBench,
# for HEAD (wrk 4.1 waits for a HEAD response's Content-Length of body and
# stalls). One client thread, HTTP/1.0 keep-alive, CONNECTIONS connections.
bench_ab() {
  local round=$1 scenario=$2 url=$base$3 out rps p50 p99 errs
  shift 3
  ab -q -r -k -c"$CONNECTIONS" -t"$(secs "$WARMUP")" -n 10000000 ${auth[@]+"${auth[@]}"} "$@" "$url" >/dev/null 2>&1
  out=$(ab -q -r -k -c"$CONNECTIONS" -t"$(secs "$DURATION")" -n 10000000 -e "$work/ab.csv" \
    ${auth[@]+"${auth[@]}"} "$@" "$url" 2>&1)
  printf '== %s round %s %s\n%s\n' "$reg" "$round" "$scenario" "$out" >>"$work/wrk.log"
  read -r rps p50 p99 errs < <(echo "$out" | CSV="$work/ab.csv" python3 -c '
import csv, os, re, sys
t = sys.stdin.read()
rps = float(re.search(r"Requests per second:\s+([\d.]+)", t).group(1))
pct = {int(float(r[0])): float(r[1]) for r in list(csv.reader(open(os.environ["CSV"])))[1:]}
failed = int(re.search(r"Failed requests:\s+(\d+)", t).group(1))
non2xx = re.search(r"Non-2xx responses:\s+(\d+)", t)
done = int(re.search(r"Complete requests:\s+(\d+)", t).group(1))
kept = int(re.search(r"Keep-Alive requests:\s+(\d+)", t).group(1))
if kept < done:
    print(f"  warning: only {kept} of {done} requests reused a connection", file=sys.stderr)
print(f"{rps:.1f} {pct[50]:.3f} {pct[99]:.3f} {failed + (int(non2xx.group(1)) if non2xx else 0)}")')
  record "$round" "$scenario" "$rps" "$p50" "$p99" "$errs"
}

# bench_push ROUND: PUSHES pushes of distinct PUSH_MIB MiB blobs, one after another.
bench_push() {
  local round=$1 i total=0 t0 t1 mibs
  declare -a ds
  for i in $(seq 1 "$PUSHES"); do
    head -c 64 /dev/urandom | dd of="$work/push$i" conv=notrunc status=none
    ds[i]=$(digest "$work/push$i")
  done
  for i in $(seq 1 "$PUSHES"); do
    t0=$(date +%s%N)
    push_blob "$work/push$i" "${ds[i]}"
    t1=$(date +%s%N)
    total=$((total + t1 - t0))
  done
  [ "$(curl_reg -s -o /dev/null -w '%{http_code}' -I "$base/v2/$name/blobs/${ds[PUSHES]}")" = 200 ] ||
    die "$reg: pushed blob not found"
  mibs=$(python3 -c "print(f'{$PUSHES * $PUSH_MIB / ($total / 1e9):.1f}')")
  say "  $(printf '%-12s %-14s %10s MiB/s  (%d × %d MiB in %.2f s)' "$reg" blob_push "$mibs" "$PUSHES" "$PUSH_MIB" \
    "$(python3 -c "print($total / 1e9)")")"
  printf '{"registry":"%s","round":%d,"scenario":"blob_push","mib_s":%s,"seconds":%s}\n' \
    "$reg" "$round" "$mibs" "$(python3 -c "print(round($total / 1e9, 3))")" >>"$work/results.jsonl"
}

# ---------------------------------------------------------------------------
# Run.
# ---------------------------------------------------------------------------
for r in "${registries[@]}"; do
  "start_$r"
  use "$r"
  seed
done
: >"$work/results.jsonl"
for round in $(seq 1 "$ROUNDS"); do
  for r in "${registries[@]}"; do
    use "$r"
    say "round $round: $reg"
    bench_wrk "$round" manifest_get "/v2/$name/manifests/t0500" -H "Accept: $OCI_MANIFEST"
    bench_ab "$round" manifest_head "/v2/$name/manifests/t0500" -i -H "Accept: $OCI_MANIFEST"
    bench_wrk "$round" tags_list "/v2/$name/tags/list"
    bench_wrk "$round" blob_get "/v2/$name/blobs/$layer_digest"
    bench_push "$round"
  done
done

dist_version=$("$DIST_BIN" --version 2>/dev/null | awk '{print $NF}' || true)
RESULTS=$work/results.jsonl ROUNDS=$ROUNDS THREADS=$THREADS CONNECTIONS=$CONNECTIONS DURATION=$DURATION \
  PUSHES=$PUSHES PUSH_MIB=$PUSH_MIB TAGS=$TAGS WARD_BIN=$WARD_BIN DIST_VERSION=$dist_version CORES=$(nproc) \
  python3 - <<'PY'
import json, os
from statistics import mean

env = os.environ
rows = [json.loads(l) for l in open(env["RESULTS"])]
regs = [r for r in ("ward", "distribution") if any(x["registry"] == r for x in rows)]
scenarios = [
    ("manifest_get", "manifest GET by tag", "rps"),
    ("manifest_head", "manifest HEAD by tag", "rps"),
    ("tags_list", f"tags/list ({env['TAGS']} tags)", "rps"),
    ("blob_get", "1 MiB blob GET", "rps"),
    ("blob_push", f"{env['PUSH_MIB']} MiB blob push ({env['PUSHES']} per round)", "mib_s"),
]
summary = {
    "config": {
        "rounds": int(env["ROUNDS"]), "threads": int(env["THREADS"]), "connections": int(env["CONNECTIONS"]),
        "duration": env["DURATION"], "pushes": int(env["PUSHES"]), "push_mib": int(env["PUSH_MIB"]),
        "tags": int(env["TAGS"]), "cores": int(env["CORES"]), "ward_bin": env["WARD_BIN"] if "ward" in regs else None,
        "distribution_version": env["DIST_VERSION"] if "distribution" in regs else None,
    },
    "scenarios": {},
}
print(f"\nRegistry benchmark (wrk -t{env['THREADS']} -c{env['CONNECTIONS']} -d{env['DURATION']}; "
      f"{env['ROUNDS']} alternating rounds; {env['CORES']} cores; distribution {env['DIST_VERSION']})")
print("figures are the mean of the rounds, each round in brackets; latencies in ms\n")
hdr = f"{'scenario':<36} {'registry':<13} {'req/s':>9} {'MiB/s':>9} {'p50':>8} {'p99':>8}  rounds"
print(hdr)
print("-" * len(hdr))
for key, label, metric in scenarios:
    out = {}
    for reg in regs:
        rs = sorted((x for x in rows if x["registry"] == reg and x["scenario"] == key), key=lambda x: x["round"])
        if not rs:
            continue
        s = {}
        if metric == "rps":
            s["rps"] = round(mean(x["rps"] for x in rs), 1)
            s["p50_ms"] = round(mean(x["p50_ms"] for x in rs), 3)
            s["p99_ms"] = round(mean(x["p99_ms"] for x in rs), 3)
            s["errors"] = sum(x["errors"] for x in rs)
            if key == "blob_get":
                s["mib_s"] = s["rps"]  # 1 MiB per request
        else:
            s["mib_s"] = round(mean(x["mib_s"] for x in rs), 1)
        s["rounds"] = [{k: v for k, v in x.items() if k not in ("registry", "scenario")} for x in rs]
        out[reg] = s
        per = " / ".join(f"{x[metric]:.0f}" for x in rs)
        rps = f"{s['rps']:.0f}" if "rps" in s else "-"
        mib = f"{s['mib_s']:.0f}" if "mib_s" in s else "-"
        p50 = f"{s['p50_ms']:.2f}" if "p50_ms" in s else "-"
        p99 = f"{s['p99_ms']:.2f}" if "p99_ms" in s else "-"
        err = f"  ({s['errors']} errors)" if s.get("errors") else ""
        print(f"{label:<36} {reg:<13} {rps:>9} {mib:>9} {p50:>8} {p99:>8}  [{per}]{err}")
    if len(out) == 2 and out["distribution"][metric] > 0:
        out["ratio_ward_over_distribution"] = round(out["ward"][metric] / out["distribution"][metric], 3)
    out["metric"] = metric
    summary["scenarios"][key] = out
if len(regs) == 2:
    print("\nward / distribution (above 1: Ward is faster):")
    for key, label, metric in scenarios:
        print(f"  {label:<36} {summary['scenarios'][key]['ratio_ward_over_distribution']:6.2f}  ({metric})")
print()
print(json.dumps(summary, separators=(",", ":")))
PY
