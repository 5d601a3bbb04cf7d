#!/usr/bin/env python3
"""Seeds a Ward server with a tree of groups: 1 org, N children, M grandchildren each.

Usage: seed.py API TOKEN CHILDREN GRANDCHILDREN
Prints JSON {"org": uid, "child": uid-of-one-child, "leaf": uid-of-one-grandchild}.
Standard library only, concurrent requests through a thread pool.
"""
import json
import sys
import urllib.request
from concurrent.futures import ThreadPoolExecutor

api, token, children, grandchildren = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])


def create(parent, name):
    path = f"{api}/iam/v2/groups" + (f"/{parent}" if parent else "")
    req = urllib.request.Request(
        path,
        data=json.dumps({"name": name}).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.load(r)["uid"]


org = create(None, "bench-org")
with ThreadPoolExecutor(max_workers=16) as pool:
    kids = list(pool.map(lambda i: create(org, f"team-{i:03d}"), range(children)))
    leaves = list(
        pool.map(lambda a: create(a[0], f"svc-{a[1]:03d}"), [(k, j) for k in kids for j in range(grandchildren)])
    )
print(json.dumps({"org": org, "child": kids[len(kids) // 2], "leaf": leaves[len(leaves) // 2]}))
