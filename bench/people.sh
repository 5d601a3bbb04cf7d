#!/usr/bin/env bash
# People benchmark: the login start (a stateless 302 to the identity
# provider), creating an invite (a signed code and one insert), and a list of
# 50 of 1,000 invites, beside Ward's own floor (GET /ping/v2/ping) and nginx
# serving static JSON on loopback (the machine's ceiling). Prints requests/s
# and p50/p99 latency.
#
#   cargo build --release -p ward && bench/people.sh
#   WARD_DATABASE=postgres://postgres@127.0.0.1:5432/wardbench bench/people.sh   # an empty scratch database
#
# Needs wrk and nginx (installed from Debian's packages if missing) and
# python3 (it serves the identity provider's discovery document).
# Environment: WARD_BIN (target/release/ward), DURATION (10s), CONNECTIONS
# (32), THREADS (2), BENCH_DEBUG (keep the work directory).
set -euo pipefail
cd "$(dirname "$0")/.."

WARD_BIN=${WARD_BIN:-target/release/ward}
DURATION=${DURATION:-10s}
CONNECTIONS=${CONNECTIONS:-32}
THREADS=${THREADS:-2}
WARD_PORT=${WARD_PORT:-18181}
NGINX_PORT=${NGINX_PORT:-18182}
IDP_PORT=${IDP_PORT:-18183}

need() { command -v "$1" >/dev/null 2>&1; }
if ! need wrk || ! need nginx; then
  echo "installing wrk and nginx-light from Debian's packages…" >&2
  apt-get update -qq && apt-get install -y -qq wrk nginx-light >/dev/null
fi
[ -x "$WARD_BIN" ] || { echo "no $WARD_BIN: cargo build --release -p ward" >&2; exit 1; }

work=$(mktemp -d)
cleanup() {
  [ -n "${ward_pid:-}" ] && kill "$ward_pid" 2>/dev/null || true
  [ -n "${idp_pid:-}" ] && kill "$idp_pid" 2>/dev/null || true
  [ -f "$work/nginx.pid" ] && kill "$(cat "$work/nginx.pid")" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
[ -n "${BENCH_DEBUG:-}" ] && trap - EXIT

# The identity provider: only its discovery document is read by a login start.
idp="http://127.0.0.1:$IDP_PORT"
mkdir -p "$work/idp/.well-known"
cat >"$work/idp/.well-known/openid-configuration" <<JSON
{"issuer": "$idp", "authorization_endpoint": "$idp/authorize", "token_endpoint": "$idp/token", "jwks_uri": "$idp/jwks"}
JSON
python3 -m http.server "$IDP_PORT" --bind 127.0.0.1 --directory "$work/idp" >/dev/null 2>&1 &
idp_pid=$!

# Ward, quiet logs; --dev lets it read the provider over http on loopback.
WARD_LOG=warn "$WARD_BIN" server --dev --listen "127.0.0.1:$WARD_PORT" --data-dir "$work/data" \
  ${WARD_DATABASE:+--database "$WARD_DATABASE"} >"$work/ward.out" 2>"$work/ward.err" &
ward_pid=$!
for _ in $(seq 1 100); do grep -q listening "$work/ward.out" 2>/dev/null && break; sleep 0.1; done
for _ in $(seq 1 50); do curl -sf "$idp/.well-known/openid-configuration" >/dev/null && break; sleep 0.1; done
api="http://127.0.0.1:$WARD_PORT"
token=$(cat "$work/data/admin.token")

# An organization, its provider, a person who already belongs, a multi-use
# invite for them, and 1,000 invites to list.
eval "$(python3 - "$api" "$token" "$idp" <<'PY'
import json, sys, urllib.request
api, token, idp = sys.argv[1:4]
def call(method, path, body=None, tok=token):
    req = urllib.request.Request(api + path, method=method, data=json.dumps(body).encode() if body is not None else None,
                                 headers={"Authorization": "Bearer " + tok, "Content-Type": "application/json"})
    return json.load(urllib.request.urlopen(req))
viewer = call("GET", "/iam/v2/roles?name=viewer")["roles"][0]["uid"]
org = call("POST", "/iam/v2/groups", {"name": "bench"})["uid"]
provider = call("POST", f"/iam/v2/identityProviders/{org}", {"name": "sso", "defaultRole": viewer,
    "oidc": {"issuer": idp, "clientId": "ward", "clientSecret": "s", "pkceEnabled": True}})["uid"]
for i in range(1000):
    invite = call("POST", f"/iam/v2/groupInvites/{org}", {"roleUid": viewer, "ttl": "86400s"})
print(f"org={org} provider={provider} viewer={viewer}")
PY
)"

# nginx: a static JSON answer of about an invite's size.
mkdir -p "$work/nginx"
body=$(curl -s -H "Authorization: Bearer $token" "$api/iam/v2/groupInvites?uidp.descendants_of=$org&page_size=1")
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

cat >"$work/invite.lua" <<LUA
wrk.method = "POST"
wrk.body = '{"roleUid": "$viewer", "ttl": "86400s"}'
wrk.headers["Content-Type"] = "application/json"
LUA

# wrk → "rps p50 p99 non2xx3xx" (latencies in ms).
run() {
  local url=$1 tok=$2; shift 2
  local out
  out=$(wrk -t"$THREADS" -c"$CONNECTIONS" -d"$DURATION" --latency -H "Authorization: Bearer $tok" "$@" "$url")
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

challenge=$(python3 -c 'import base64,hashlib; print(base64.urlsafe_b64encode(hashlib.sha256(b"v"*43).digest()).rstrip(b"=").decode())')
start_url="$api/oauth?idp_id=$provider&redirect=http%3A%2F%2F127.0.0.1%3A1%2Fcallback&state=s&code_challenge=$challenge&code_challenge_method=S256"
curl -s -o /dev/null "$start_url"   # warm the discovery cache

read -r n_rps n_p50 n_p99 n_err < <(run "http://127.0.0.1:$NGINX_PORT/" "$token")
read -r p_rps p_p50 p_p99 p_err < <(run "$api/ping/v2/ping" "$token")
read -r o_rps o_p50 o_p99 o_err < <(run "$start_url" "$token")
read -r l_rps l_p50 l_p99 l_err < <(run "$api/iam/v2/groupInvites?uidp.descendants_of=$org&page_size=50" "$token")
read -r r_rps r_p50 r_p99 r_err < <(run "$api/iam/v2/groupInvites/$org" "$token" -s "$work/invite.lua")

backend=${WARD_DATABASE:+postgres}
printf '\nWard people benchmark (%s; wrk -t%s -c%s -d%s; %s cores)\n\n' "${backend:-sqlite}" "$THREADS" "$CONNECTIONS" "$DURATION" "$(nproc)"
printf '%-52s %10s %9s %9s %7s\n' scenario 'req/s' 'p50 ms' 'p99 ms' 'non-2xx'
printf '%-52s %10s %9s %9s %7s\n' 'nginx static JSON (ceiling)' "$n_rps" "$n_p50" "$n_p99" "$n_err"
printf '%-52s %10s %9s %9s %7s\n' 'GET /ping/v2/ping (Ward floor)' "$p_rps" "$p_p50" "$p_p99" "$p_err"
printf '%-52s %10s %9s %9s %7s\n' 'GET /oauth (login start, 302)' "$o_rps" "$o_p50" "$o_p99" "$o_err"
printf '%-52s %10s %9s %9s %7s\n' 'list 50 of 1,000 invites' "$l_rps" "$l_p50" "$l_p99" "$l_err"
printf '%-52s %10s %9s %9s %7s\n' 'create an invite (sign a code, one insert)' "$r_rps" "$r_p50" "$r_p99" "$r_err"
