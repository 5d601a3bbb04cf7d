#!/usr/bin/env python3
"""Generates bench/vulns.sh's data, deterministically per --seed (standard
library only):

- OSV records (PyPI): --names package names, --per-name records each
  (200,000 over 20,000 names by default), as ready-to-POST
  `osv:import` bodies of --batch records (OUT/batches/batch-NNNN.json;
  records shuffled across batches as a feed's id order would be; the
  parentId is --group, by default a placeholder vulns.sh replaces, so one
  corpus serves every server of a run). Every name has a held version (the
  one an image installs); each record's ranges include it with probability
  --affect (5%), else exclude it, in varied shapes: introduced/fixed,
  introduced/last_affected, two intervals, an enumerated `versions` list,
  `fixed` equal to the held version.
- The image: a gzip tar layer with --image-packages Python distributions
  (`usr/lib/python3.12/site-packages/<name>-<ver>.dist-info/METADATA`,
  names drawn from the records' names; a tenth written as a wheel would,
  capitalized with underscores, so that matching must normalize), its OCI
  config and manifest (OUT/image/).
- The fleet: one small layer shared by every fleet image (--fleet-packages
  distributions, the first being P, none of them in the image), its config
  (OUT/fleet/); vulns.sh makes each fleet manifest distinct by an
  annotation. OUT/update-record.json is one record of P that does not
  affect P's held version, rewritten so that it does (vulns.sh re-imports
  it with a newer `modified`).

Prints a JSON summary: counts, the matches the image and a fleet image must
show (records whose ranges hold the installed version), P and its version.
"""

import argparse
import gzip
import hashlib
import io
import json
import os
import random
import sys
import tarfile

SYLLABLES = [
    "py", "flask", "django", "aio", "http", "json", "yaml", "tox", "req", "url", "lib", "cli", "core", "fast",
    "sql", "auth", "jwt", "crypt", "zip", "xml", "web", "api", "graph", "mock", "test", "log", "cache", "redis",
    "boto", "cloud", "data", "frame", "plot", "num", "sci", "tensor", "torch", "grpc", "proto", "socket",
]
SITE = "usr/lib/python3.12/site-packages"
CVSS = [
    "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H",
    "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:N/A:N",
    "CVSS:3.1/AV:N/AC:H/PR:N/UI:R/S:U/C:L/I:L/A:N",
    "CVSS:3.1/AV:L/AC:L/PR:L/UI:N/S:U/C:N/I:N/A:H",
    "CVSS:3.1/AV:N/AC:L/PR:L/UI:N/S:C/C:L/I:L/A:N",
    "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:N/I:N/A:L",
]
WORDS = ("denial of service via crafted input, improper validation of a header, path traversal in the "
         "archive extractor, regular expression backtracking, unsafe deserialization of cached data, "
         "cross-site scripting in the admin view, open redirect after login, request smuggling").split(", ")


def vstr(v):
    return ".".join(map(str, v))


def below(rng, v):
    """A version strictly lower than v (v's middle part is at least 1)."""
    a, b, c = v
    return rng.choice([(a, b - 1, rng.randrange(10)), (a, rng.randrange(b), 0)] + ([(a - 1, rng.randrange(20), 0)] if a > 1 else []))


def above(rng, v):
    a, b, c = v
    return rng.choice([(a, b, c + 1 + rng.randrange(3)), (a, b + 1, 0), (a + 1, 0, 0)])


def ranges_for(rng, v, affects):
    """(ranges, versions) of one affected[] entry, holding v iff affects."""
    eco = lambda events: [{"type": "ECOSYSTEM", "events": events}]
    if affects:
        kind = rng.randrange(5)
        if kind == 0:
            return eco([{"introduced": "0"}, {"fixed": vstr(above(rng, v))}]), None
        if kind == 1:
            return eco([{"introduced": vstr(below(rng, v))}, {"fixed": vstr(above(rng, v))}]), None
        if kind == 2:
            return eco([{"introduced": vstr(below(rng, v))}, {"last_affected": vstr(rng.choice([v, above(rng, v)]))}]), None
        if kind == 3:  # two intervals, the second opening at v itself
            lo = below(rng, v)
            return eco([{"introduced": "0"}, {"fixed": vstr(lo)}, {"introduced": vstr(v)}, {"fixed": vstr(above(rng, v))}]), None
        return None, sorted({vstr(below(rng, v)), vstr(v), vstr(above(rng, v))})
    kind = rng.randrange(6)
    if kind == 0:
        return eco([{"introduced": "0"}, {"fixed": vstr(below(rng, v))}]), None
    if kind == 1:  # fixed at exactly the held version: not affected
        return eco([{"introduced": vstr(below(rng, v))}, {"fixed": vstr(v)}]), None
    if kind == 2:
        hi = above(rng, v)
        return eco([{"introduced": vstr(hi)}, {"fixed": vstr(above(rng, hi))}]), None
    if kind == 3:
        return eco([{"introduced": "0"}, {"last_affected": vstr(below(rng, v))}]), None
    if kind == 4:  # two intervals around v
        hi = above(rng, v)
        return eco([{"introduced": "0"}, {"fixed": vstr(below(rng, v))}, {"introduced": vstr(hi)},
                    {"fixed": vstr(above(rng, hi))}]), None
    lo = below(rng, v)
    return None, sorted({vstr(lo), vstr(above(rng, v))})


def digest(b):
    return "sha256:" + hashlib.sha256(b).hexdigest()


def layer(files):
    """A deterministic gzip tar of {path: bytes}: (gzip bytes, diff id)."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as t:
        for path, data in files:
            ti = tarfile.TarInfo(path)
            ti.size, ti.mtime, ti.mode = len(data), 1700000000, 0o644
            t.addfile(ti, io.BytesIO(data))
    raw = raw.getvalue()
    return gzip.compress(raw, compresslevel=6, mtime=0), digest(raw)


def write_image(out, pkgs, label):
    """pkgs: [(metadata name, version)] → OUT/{config.json,layer.tar.gz,manifest.json}; returns digests."""
    os.makedirs(out, exist_ok=True)
    files = []
    for name, ver in pkgs:
        meta = (f"Metadata-Version: 2.1\nName: {name}\nVersion: {ver}\nSummary: {name} for the Ward benchmark\n"
                f"License: MIT\nRequires-Python: >=3.8\n\nLong description.\n").encode()
        files.append((f"{SITE}/{name}-{ver}.dist-info/METADATA", meta))
    gz, diff_id = layer(files)
    config = json.dumps({"architecture": "amd64", "os": "linux", "config": {"Labels": {"bench": label}},
                         "rootfs": {"type": "layers", "diff_ids": [diff_id]}}, separators=(",", ":")).encode()
    manifest = json.dumps({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": digest(config), "size": len(config)},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": digest(gz), "size": len(gz)}],
    }, separators=(",", ":")).encode()
    for fname, data in (("config.json", config), ("layer.tar.gz", gz), ("manifest.json", manifest)):
        with open(os.path.join(out, fname), "wb") as f:
            f.write(data)
    return {"config": digest(config), "layer": digest(gz), "layer_bytes": len(gz), "manifest": digest(manifest)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--group", default="@@GROUP@@",
                    help="the bodies' parentId (default a placeholder vulns.sh replaces with the organization's uid)")
    ap.add_argument("--names", type=int, default=20000)
    ap.add_argument("--per-name", type=int, default=10)
    ap.add_argument("--affect", type=float, default=0.05)
    ap.add_argument("--image-packages", type=int, default=2000)
    ap.add_argument("--fleet-packages", type=int, default=5)
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    if a.image_packages + a.fleet_packages > a.names:
        sys.exit("gen-vulns.py: --names must exceed --image-packages + --fleet-packages")
    rng = random.Random(a.seed)
    n = len(SYLLABLES)
    combos = rng.sample(range(n ** 3), a.names)
    names = [f"{SYLLABLES[c // n // n]}{SYLLABLES[c // n % n]}-{SYLLABLES[c % n]}" for c in combos]
    held = [(1 + rng.randrange(4), 1 + rng.randrange(15), rng.randrange(10)) for _ in names]

    records, affected_by = [], [0] * a.names
    ghsa = "23456789cfghjmpqrvwx"
    seen_ids = set()
    for i, name in enumerate(names):
        for j in range(a.per_name):
            k = len(records)
            while True:
                if rng.random() < 0.6:
                    rid = "GHSA-" + "-".join("".join(rng.choice(ghsa) for _ in range(4)) for _ in range(3))
                else:
                    rid = f"PYSEC-{2015 + k % 11}-{k}"
                if rid not in seen_ids:
                    seen_ids.add(rid)
                    break
            affects = rng.random() < a.affect
            affected_by[i] += affects
            ranges, versions = ranges_for(rng, held[i], affects)
            entry = {"package": {"ecosystem": "PyPI", "name": name, "purl": f"pkg:pypi/{name}"}}
            if ranges:
                entry["ranges"] = ranges
            if versions:
                entry["versions"] = versions
            month, day = 1 + rng.randrange(12), 1 + rng.randrange(28)
            rec = {
                "schema_version": "1.6.0",
                "id": rid,
                "modified": f"2025-{month:02d}-{day:02d}T{rng.randrange(24):02d}:00:00Z",
                "published": f"{2015 + k % 11}-{month:02d}-{day:02d}T00:00:00Z",
                "aliases": [f"CVE-{2015 + k % 11}-{100000 + k}"],
                "summary": f"{rng.choice(WORDS).capitalize()} in {name}",
                "details": f"{name} before the fixed version is affected by {rng.choice(WORDS)}; "
                           f"an attacker can exploit it remotely. Upgrade to a fixed release.",
                "affected": [entry],
                "references": [{"type": "ADVISORY", "url": f"https://github.com/advisories/{rid}"},
                               {"type": "PACKAGE", "url": f"https://pypi.org/project/{name}/"}],
            }
            if rng.random() < 0.8:
                rec["severity"] = [{"type": "CVSS_V3", "score": rng.choice(CVSS)}]
            else:
                rec["database_specific"] = {"severity": rng.choice(["LOW", "MODERATE", "HIGH", "CRITICAL"])}
            records.append((i, affects, rec))

    # The image and the fleet: disjoint name sets.
    picks = rng.sample(range(a.names), a.image_packages + a.fleet_packages)
    image_idx, fleet_idx = picks[:a.image_packages], picks[a.image_packages:]
    # P: a fleet name with a record that does not affect its held version.
    p_rec = next(((i, r) for i, aff, r in records if i == fleet_idx[0] and not aff), None)
    if p_rec is None:
        sys.exit("gen-vulns.py: P has no unaffecting record; try another --seed")

    def wheel_name(name):  # what a wheel's METADATA may say for it
        return "_".join(w.capitalize() for w in name.split("-"))

    def pkgs(idx):
        return [(wheel_name(names[i]) if rng.random() < 0.1 else names[i], vstr(held[i])) for i in idx]

    image_pkgs = pkgs(image_idx)
    image = write_image(os.path.join(a.out, "image"), image_pkgs, "image")
    fleet = write_image(os.path.join(a.out, "fleet"), pkgs(fleet_idx), "fleet")

    # The update: P's record, now affecting P's held version (fixed just above it).
    upd = json.loads(json.dumps(p_rec[1]))
    upd["affected"][0].pop("versions", None)
    upd["affected"][0]["ranges"] = [{"type": "ECOSYSTEM", "events": [
        {"introduced": "0"}, {"fixed": vstr(above(rng, held[fleet_idx[0]]))}]}]
    with open(os.path.join(a.out, "update-record.json"), "w") as f:
        json.dump(upd, f)

    # Import bodies, records shuffled (a feed is ordered by id, not by package).
    order = list(range(len(records)))
    rng.shuffle(order)
    bdir = os.path.join(a.out, "batches")
    os.makedirs(bdir, exist_ok=True)
    total = 0
    nb = 0
    for b in range(0, len(order), a.batch):
        body = json.dumps({"parentId": a.group, "source": "bench",
                           "records": [json.dumps(records[x][2], separators=(",", ":")) for x in order[b:b + a.batch]]},
                          separators=(",", ":")).encode()
        with open(os.path.join(bdir, f"batch-{nb:04d}.json"), "wb") as f:
            f.write(body)
        total += len(body)
        nb += 1

    print(json.dumps({
        "seed": a.seed, "names": a.names, "records": len(records), "affecting": sum(affected_by),
        "batches": nb, "batch_records": a.batch, "body_bytes": total,
        "image": {"packages": a.image_packages, "expected_matches": sum(affected_by[i] for i in image_idx),
                  "wheel_style_names": sum(n != names[i] for (n, _), i in zip(image_pkgs, image_idx)), **image},
        "fleet": {"packages": a.fleet_packages, "expected_matches": sum(affected_by[i] for i in fleet_idx),
                  "expected_matches_after_update": sum(affected_by[i] for i in fleet_idx) + 1,
                  "p": names[fleet_idx[0]], "p_version": vstr(held[fleet_idx[0]]), "update_id": upd["id"], **fleet},
    }))


if __name__ == "__main__":
    main()
