#!/usr/bin/env python3
"""Seeds the compass dataset through the API and measures totalCount at scale.

Usage: compass.py API TOKEN
Seeds 1 organization with 999 teams under it (1,000 groups), 10,000
identities (about 10 per team), 20,000 role bindings (each identity bound as
viewer on two teams), and 100,000 repos (about 100 per team), the largest
table. Then lists each table over the organization with page_size=1, so the
page is trivial and the time is mostly the count's:

- cold: the first list after a write to the table (the count is taken again);
- warm_p50: the median of 50 more (the count is served from the cache).

Prints JSON {"seed_s": …, "rows": {…}, "total_count_ms": {table: {"cold": …,
"warm_p50": …}}} on stdout. Standard library only; 16 client threads on
keep-alive connections.
"""
import http.client
import json
import statistics
import sys
import threading
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor

api, token = sys.argv[1], sys.argv[2]
url = urllib.parse.urlparse(api)
local = threading.local()


def call(method, path, body=None, fresh=False):
    conn = getattr(local, "conn", None)
    if conn is None or fresh:
        conn = local.conn = http.client.HTTPConnection(url.hostname, url.port, timeout=120)
    headers = {"Authorization": f"Bearer {token}"}
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    try:
        conn.request(method, path, body=data, headers=headers)
        r = conn.getresponse()
    except (BrokenPipeError, ConnectionResetError, http.client.RemoteDisconnected):
        # The server closes a keep-alive connection idle past its header-read
        # timeout; the request never reached it.
        if fresh:
            raise
        return call(method, path, body, fresh=True)
    payload = r.read()
    if r.status != 200:
        sys.exit(f"{method} {path}: {r.status} {payload[:300]!r}")
    return json.loads(payload) if payload else {}


def parallel(fn, items):
    with ThreadPoolExecutor(max_workers=16) as pool:
        return list(pool.map(fn, items))


start = time.time()
org = call("POST", "/iam/v2/groups", {"name": "compass"})["uid"]
teams = parallel(lambda i: call("POST", f"/iam/v2/groups/{org}", {"name": f"team-{i:03d}"})["uid"], range(999))
viewer = call("GET", "/iam/v2/roles?name=viewer&uidp.in_root=true")["roles"][0]["uid"]
identities = parallel(
    lambda i: call(
        "POST",
        f"/iam/v2/identities/{teams[i % len(teams)]}",
        {"name": f"bot-{i:05d}", "claimMatch": {"issuer": "https://ci.compass.example", "subject": f"job-{i}"}},
    )["uid"],
    range(10_000),
)
parallel(
    lambda i: call(
        "POST",
        f"/iam/v2/roleBindings/{teams[(i // 2 + i % 2) % len(teams)]}",
        {"identityUid": identities[i // 2], "roleUid": viewer},
    ),
    range(20_000),
)
parallel(lambda i: call("POST", f"/registry/v2/repos/{teams[i % len(teams)]}", {"name": f"repo-{i:06d}"}), range(100_000))
seed_s = time.time() - start

lists = {
    "repos": f"/registry/v2/repos?uidp.descendants_of={org}&page_size=1",
    "identities": f"/iam/v2/identities?uidp.descendants_of={org}&page_size=1",
    "role_bindings": f"/iam/v2/roleBindings?uidp.descendants_of={org}&page_size=1",
    "groups": f"/iam/v2/groups?uidp.descendants_of={org}&page_size=1",
}
rows, timings = {}, {}
# A write to each table, so that the first list after it counts again.
touch = {
    "repos": lambda: call("POST", f"/registry/v2/repos/{teams[0]}", {"name": "touch"}),
    "identities": lambda: call(
        "POST", f"/iam/v2/identities/{teams[0]}", {"name": "touch", "claimMatch": {"issuer": "https://t.example", "subject": "t"}}
    ),
    "role_bindings": lambda: call("POST", f"/iam/v2/roleBindings/{teams[2]}", {"identityUid": identities[0], "roleUid": viewer}),
    "groups": lambda: call("POST", f"/iam/v2/groups/{org}", {"name": "touch"}),
}
for name, path in lists.items():
    touch[name]()
    t = time.perf_counter()
    page = call("GET", path)
    cold = (time.perf_counter() - t) * 1000
    warm = []
    for _ in range(50):
        t = time.perf_counter()
        call("GET", path)
        warm.append((time.perf_counter() - t) * 1000)
    rows[name] = page["totalCount"]
    timings[name] = {"cold": round(cold, 2), "warm_p50": round(statistics.median(warm), 2)}
print(json.dumps({"seed_s": round(seed_s, 1), "rows": rows, "total_count_ms": timings}))
