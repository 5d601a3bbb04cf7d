#!/usr/bin/env python3
"""Generates a synthetic advisory-schema corpus for Ward's advisory benchmarks.

    gen-advisories.py --out DIR [--files N] [--advisories A] [--seed S]
    gen-advisories.py --json-batches DIR --group UID [--advisories A] [--seed S]

The first form writes N files `<package>.advisories.yaml` in the advisory-schema
format (shared/spec/advisory-schema.md) holding A advisories in all,
for `ward advisories import --group G DIR`. The second writes the same corpus as
ready-to-POST bodies of `POST /vulnerabilities/v1/advisories:import` (about
--batch-docs documents each, `parentId` = --group), exactly what the CLI would
send for those files, for `curl --data-binary @DIR/batch-0001.json`.

Defaults: 1,600 files (or A x 1,600 / 30,000 when only --advisories is given),
30,000 advisories, 1-5 events each (about 1.71 on average: ~51,000 events),
seed 1. Standard library only; the YAML is written by hand.

What the corpus looks like (deterministic for a seed):
- Packages with invented names, a language each (Go, Python, Java, npm, Rust,
  C), 1..some hundred advisories each (log-normal), subpackages.
- Event histories from a fixed set of stories (detection then fixed,
  a lone fixed, detection then false positive, ...) weighted so the event
  types come out in the proportions of advisory-schema.md's table:
  detection 44%, fixed 44%, false-positive 5.6%, pending-upstream-fix 3%,
  fix-not-planned 1.9%, true-positive 1.4%, analysis-not-planned none.
  Detections are scan/v1 (most), nvdapi or manual; all scans of one advisory
  report the same component (the advisory's), as the CLI takes the first.
- Timestamps between 2022-06-01 and 2025-10-31 (never in the future), in
  order within an advisory. CGA ids unique within the corpus.
- Two needles for list benchmarks, each on about --needle-rate (1%) of all
  advisories, disjoint: components whose name contains "yaml" (the `query`
  needle: nothing else in the searched text, artifact and component names and
  aliases, contains it) and the component `golang.org/x/net` (the
  `componentNames` needle: held by no other advisory).

Prints progress on stderr and, on stdout, one JSON line: counts (files,
advisories, events, events by type, detections by type, events per advisory,
latest event by type), the needles and how many advisories each matches, and
the batch files written.
"""

import argparse
import datetime as dt
import json
import math
import os
import random
import re
import sys
import time

ALPHABET = "23456789cfghjmpqrvwx"
CGA_SPACE = 20**12

QUERY_NEEDLE = "yaml"
COMPONENT_NEEDLE = "golang.org/x/net"

# ---------------------------------------------------------------------------
# Vocabulary. Package names are invented; component names are the libraries
# real scanners report (they are what one filters by).
# ---------------------------------------------------------------------------
SYLLABLES = [
    "tes", "sel", "late", "py", "rite", "nim", "bus", "quar", "tz", "lib", "cor", "vane", "mor", "dant",
    "kel", "pie", "stra", "tum", "ven", "tor", "zel", "cor", "bri", "ton", "fal", "con", "grav", "el",
    "hal", "cyon", "ion", "ic", "jun", "ip", "lum", "en", "mar", "ble", "nov", "a", "ob", "sid", "ian",
    "pel", "ican", "quil", "rho", "dium", "sta", "ble", "ter", "ra", "um", "bra", "vel", "lum", "wis",
    "ter", "xe", "non", "zeph", "yr", "arc", "tic", "bor", "eal", "cin", "der", "dri", "ft", "ech", "o",
    "fern", "glen", "har", "bor", "isle", "kite", "lark", "mist", "north", "oak", "pike", "reef", "sky",
]
FORMS = [
    ("{b}", 30), ("{b}-proxy", 4), ("{b}-operator", 5), ("{b}-controller", 3), ("lib{b}", 6),
    ("py3.12-{b}", 6), ("py3.11-{b}", 3), ("{b}-cli", 4), ("{b}-server", 4), ("{b}-agent", 3),
    ("{b}-{v}", 8), ("{b}-exporter", 3), ("nodejs-{b}", 2), ("{b}-plugins", 2), ("ruby3.2-{b}", 2),
]
LANGS = [("go", 45), ("python", 15), ("java", 10), ("npm", 8), ("rust", 5), ("c", 17)]
SUBPACKAGE_SUFFIXES = ["dev", "doc", "compat", "config", "bitnami", "iamguarded-compat", "tools", "static"]

COMPONENTS = {
    "go": ("go-module", [
        "stdlib", "golang.org/x/crypto", "golang.org/x/oauth2", "golang.org/x/text", "golang.org/x/sys",
        "google.golang.org/grpc", "google.golang.org/protobuf", "github.com/docker/docker",
        "github.com/opencontainers/runc", "github.com/containerd/containerd", "github.com/golang-jwt/jwt/v4",
        "github.com/hashicorp/go-retryablehttp", "github.com/go-jose/go-jose/v3", "github.com/moby/buildkit",
        "github.com/sirupsen/logrus", "k8s.io/kubernetes", "k8s.io/apimachinery", "helm.sh/helm/v3",
        "github.com/quic-go/quic-go", "go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp",
        "github.com/cloudflare/circl", "github.com/jackc/pgx/v5", "github.com/prometheus/client_golang",
        "github.com/go-git/go-git/v5", "github.com/rs/cors", "github.com/hashicorp/vault/api",
    ]),
    "python": ("python", [
        "urllib3", "requests", "jinja2", "setuptools", "cryptography", "certifi", "idna", "pip", "werkzeug",
        "aiohttp", "pillow", "tornado", "gunicorn", "django", "flask", "paramiko", "lxml", "protobuf",
        "sqlparse", "zipp",
    ]),
    "java": ("java-archive", [
        "com.fasterxml.jackson.core:jackson-databind", "io.netty:netty-codec-http", "io.netty:netty-handler",
        "org.apache.commons:commons-compress", "org.apache.commons:commons-text",
        "com.google.protobuf:protobuf-java", "org.eclipse.jetty:jetty-server", "ch.qos.logback:logback-core",
        "com.nimbusds:nimbus-jose-jwt", "org.bouncycastle:bcprov-jdk18on", "io.grpc:grpc-netty",
        "org.apache.avro:avro",
    ]),
    "npm": ("npm", [
        "braces", "cross-spawn", "semver", "ws", "path-to-regexp", "micromatch", "body-parser", "express",
        "tar", "undici", "follow-redirects", "axios", "nanoid", "cookie", "@babel/traverse",
    ]),
    "rust": ("rust-crate", ["h2", "openssl", "rustls", "tokio", "hyper", "time", "idna", "ring",
                            "crossbeam-channel", "url"]),
    "c": ("binary", ["zlib", "openssl", "curl", "libxml2", "expat", "sqlite", "libarchive", "pcre2", "glibc",
                     "busybox", "ncurses", "libtiff"]),
}
# The query needle: every component whose name contains QUERY_NEEDLE.
YAML_COMPONENTS = {
    "go": ["gopkg.in/yaml.v3", "gopkg.in/yaml.v2", "sigs.k8s.io/yaml", "github.com/goccy/go-yaml"],
    "python": ["pyyaml", "ruamel.yaml"],
    "java": ["org.yaml:snakeyaml"],
    "npm": ["js-yaml", "yaml"],
    "rust": ["serde_yaml", "yaml-rust"],
    "c": ["libyaml", "yaml-cpp"],
}

# Stories: event type sequences and their weight per 100 advisories. Tuned so
# that the type totals follow advisory-schema.md's table (per 100 advisories:
# detection 75.3, fixed 74.4, false-positive 9.5, pending-upstream-fix 5.2,
# fix-not-planned 3.2, true-positive 2.3) with 45/43/9/2/1 % of advisories
# holding 1/2/3/4/5 events (1.71 on average).
D, F, FP, TP, PUF, FNP = (
    "detection", "fixed", "false-positive-determination", "true-positive-determination",
    "pending-upstream-fix", "fix-not-planned",
)
STORIES = [
    ((F,), 25.0), ((D,), 14.0), ((FP,), 3.5), ((PUF,), 1.0), ((FNP,), 1.0), ((TP,), 0.5),
    ((D, F), 36.0), ((D, FP), 5.0), ((D, PUF), 0.5), ((D, FNP), 1.5),
    ((D, D, F), 3.0), ((D, PUF, F), 1.5), ((D, TP, F), 1.0), ((D, FNP, F), 0.5), ((D, D, FP), 1.0),
    ((F, D, F), 2.0),
    ((D, D, PUF, F), 1.0), ((D, TP, D, F), 0.5), ((D, F, D, F), 0.5),
    ((D, D, TP, PUF, F), 0.5), ((D, PUF, D, PUF, F), 0.5),
]
# Needle advisories need a scan: their story starts with a detection.
DETECTION_STORIES = [(s, w) for s, w in STORIES if s[0] == D]

FP_TYPES = [
    ("vulnerable-code-not-in-execution-path", 25), ("vulnerable-code-version-not-used", 20),
    ("component-vulnerability-mismatch", 20), ("vulnerable-code-not-included-in-package", 15),
    ("vulnerability-record-analysis-contested", 10), ("vulnerable-code-cannot-be-controlled-by-adversary", 6),
    ("inline-mitigations-exist", 4),
]
FP_NOTES = [
    "The vulnerable function in {c} is never called by {p}.",
    "{p} ships {c} only as a build-time dependency; nothing in the package loads it at run time.",
    "The record concerns a different project that shares the name {c}.",
    "Only the server side of {c} is affected; {p} uses the client.",
    "The affected code is behind a build tag that is off in our builds of {p}.",
    "Inputs to the affected parser come from the package's own configuration, not from users.",
    "The record's version range was wrong upstream; the version in {p} predates the bug.",
    "Upstream disputes the record, and the NVD entry is marked as disputed.",
]
TP_NOTES = [
    "The vulnerable code path in {c} is reachable from {p}'s public API.",
    "Confirmed with the upstream proof of concept against {p}.",
    "{p} passes untrusted input to {c} on every request.",
]
PUF_NOTES = [
    "Waiting for {c} to publish a release with the fix; {p} pins it through a transitive dependency.",
    "The fix is merged upstream but not released yet.",
    "Upstream is working on a fix; bumping {c} alone breaks {p}'s build.",
]
FNP_NOTES = [
    "{p} {v} is end of life upstream; users should move to the next version stream.",
    "The fix needs a major upgrade of {c} that {p} does not support.",
    "The affected plugin API is deprecated and will be removed instead.",
]

START = dt.datetime(2022, 6, 1, tzinfo=dt.timezone.utc)
END = dt.datetime(2025, 10, 31, tzinfo=dt.timezone.utc)


def weighted(rng, pairs):
    total = sum(w for _, w in pairs)
    x = rng.random() * total
    for v, w in pairs:
        x -= w
        if x < 0:
            return v
    return pairs[-1][0]


def base20(n, width):
    out = []
    for _ in range(width):
        n, r = divmod(n, 20)
        out.append(ALPHABET[r])
    return "".join(reversed(out))


def grouped(prefix, digits12):
    return f"{prefix}-{digits12[0:4]}-{digits12[4:8]}-{digits12[8:12]}"


class Ids:
    """CGA ids: an affine permutation of 0..20^12, so distinct indexes give distinct ids."""

    def __init__(self, rng):
        a = rng.randrange(CGA_SPACE) | 1
        while a % 5 == 0:
            a += 2
        self.a, self.b = a, rng.randrange(CGA_SPACE)

    def cga(self, i):
        return grouped("CGA", base20((self.a * i + self.b) % CGA_SPACE, 12))


def ghsa(rng):
    return grouped("GHSA", "".join(rng.choice(ALPHABET) for _ in range(12)))


def cve(rng):
    year = weighted(rng, [(2018, 3), (2019, 4), (2020, 6), (2021, 9), (2022, 14), (2023, 20), (2024, 26),
                          (2025, 18)])
    n = rng.randrange(1000, 10000) if rng.random() < 0.3 else rng.randrange(10000, 60000)
    return f"CVE-{year}-{n}"


def go_id(rng, year):
    return f"GO-{year}-{rng.randrange(1000, 10000)}"


def rfc3339(t):
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


# ---------------------------------------------------------------------------
# The model: packages, advisories, events (schema-level dicts).
# ---------------------------------------------------------------------------
def package_names(rng, n, forbidden):
    names, seen = [], set()
    attempts = 0
    while len(names) < n:
        attempts += 1
        if attempts > n * 200:
            sys.exit("gen-advisories: could not invent enough distinct package names")
        k = 2 if rng.random() < 0.8 else 3
        base = "".join(rng.choice(SYLLABLES) for _ in range(k))
        if len(base) < 4:
            continue
        form = weighted(rng, FORMS)
        name = form.format(b=base, v=f"{rng.randrange(1, 4)}.{rng.randrange(0, 30)}")
        if name in seen or any(f in name for f in forbidden):
            continue
        seen.add(name)
        names.append(name)
    return names


def split_counts(rng, total, n):
    """n counts >= 1 summing to total, log-normally skewed (largest remainder)."""
    if total < n:
        sys.exit(f"gen-advisories: {total} advisories cannot fill {n} files (at least one each)")
    weights = [math.exp(rng.gauss(0, 1.3)) for _ in range(n)]
    s = sum(weights)
    extra = total - n
    raw = [w / s * extra for w in weights]
    counts = [1 + int(r) for r in raw]
    left = total - sum(counts)
    order = sorted(range(n), key=lambda i: raw[i] - int(raw[i]), reverse=True)
    for i in order[:left]:
        counts[i] += 1
    # Stay below the server's 5,000 advisories per document.
    for i in range(n):
        while counts[i] > 5000:
            j = rng.randrange(n)
            if counts[j] < 4000:
                counts[i] -= 1
                counts[j] += 1
    return counts


def version(rng):
    return f"{rng.randrange(0, 4)}.{rng.randrange(0, 40)}.{rng.randrange(0, 25)}"


def component_version(rng, lang):
    if lang == "go":
        return f"v0.{rng.randrange(1, 40)}.{rng.randrange(0, 10)}" if rng.random() < 0.6 else \
            f"v{rng.randrange(1, 5)}.{rng.randrange(0, 30)}.{rng.randrange(0, 12)}"
    if lang == "c":
        return f"{rng.randrange(1, 4)}.{rng.randrange(0, 20)}"
    return f"{rng.randrange(0, 6)}.{rng.randrange(0, 40)}.{rng.randrange(0, 15)}"


def location(rng, lang, pkg, sub, comp, ver):
    short = comp.rsplit("/", 1)[-1].split(":")[-1]
    if lang == "go":
        return f"/usr/bin/{sub}"
    if lang == "python":
        return f"/usr/lib/python3.12/site-packages/{short}-{ver}.dist-info/METADATA"
    if lang == "java":
        return f"/usr/share/java/{pkg}/lib/{short}-{ver}.jar"
    if lang == "npm":
        return f"/usr/lib/node_modules/{pkg}/node_modules/{comp}/package.json"
    if lang == "rust":
        return f"/usr/bin/{sub}"
    return f"/usr/lib/lib{short.removeprefix('lib')}.so.{ver}"


class Package:
    def __init__(self, rng, name):
        self.name = name
        self.lang = weighted(rng, LANGS)
        self.version = version(rng)
        self.release = rng.randrange(0, 12)
        k = weighted(rng, [(0, 40), (1, 30), (2, 18), (3, 12)])
        self.subpackages = [name] + [f"{name}-{s}" for s in rng.sample(SUBPACKAGE_SUFFIXES, k)]
        self.vendor = re.sub(r"^(lib|py3\.1[12]-|nodejs-|ruby3\.2-)", "", name).split("-")[0]
        self.time = START + dt.timedelta(seconds=rng.randrange(int((END - START).total_seconds() * 0.8)))


def pick_component(rng, pkg, needle):
    """(name, type, lang) of an advisory's component."""
    if needle == "component":
        return COMPONENT_NEEDLE, "go-module", "go"
    lang = pkg.lang
    if rng.random() < 0.12:  # Go binaries, vendored libraries: any package may ship any language.
        lang = weighted(rng, LANGS)
    ctype, pool = COMPONENTS[lang]
    if needle == "query":
        return rng.choice(YAML_COMPONENTS[lang]), ctype, lang
    # Zipf-ish: the first names of a pool are the usual suspects.
    i = min(int(rng.paretovariate(1.1)) - 1, len(pool) - 1)
    return pool[i] if rng.random() < 0.7 else rng.choice(pool), ctype, lang


def note(rng, notes, pkg, comp):
    return rng.choice(notes).format(p=pkg.name, c=comp or pkg.name, v=pkg.version)


def make_advisory(rng, ids, index, pkg, needle):
    story = weighted(rng, DETECTION_STORIES if needle else STORIES)
    has_scan_first = needle is not None
    comp, ctype, clang = pick_component(rng, pkg, needle)
    sub = rng.choice(pkg.subpackages) if rng.random() < 0.45 else pkg.name
    cver = component_version(rng, clang)
    cloc = location(rng, clang, pkg.name, sub, comp, cver)
    comp_id = "%016x" % rng.getrandbits(64)

    # Aliases.
    r = rng.random()
    if r < 0.70:
        aliases = [cve(rng)]
    elif r < 0.85:
        aliases = [cve(rng), ghsa(rng)]
    elif r < 0.97:
        aliases = [ghsa(rng)]
    else:
        aliases = []
    if ctype == "go-module" and rng.random() < 0.3:
        aliases.append(go_id(rng, rng.randrange(2021, 2026)))

    # Times: from the package's time on, strictly increasing (a minute apart
    # at least), the whole history moved back if it would end after END.
    gaps = [int(rng.expovariate(1 / (6 * 86400))) + 60 for _ in story]
    t = pkg.time + dt.timedelta(seconds=rng.randrange(0, 90 * 86400))
    overshoot = (t + dt.timedelta(seconds=sum(gaps)) - END).total_seconds()
    if overshoot > 0:
        t -= dt.timedelta(seconds=overshoot + rng.randrange(3600, 30 * 86400))
    events = []
    first_detection = True
    for kind, gap in zip(story, gaps):
        t += dt.timedelta(seconds=gap)
        ev = {"timestamp": rfc3339(t), "type": kind}
        if kind == D:
            if has_scan_first and first_detection:
                dtype = "scan/v1"
            elif first_detection:
                dtype = weighted(rng, [("scan/v1", 75), ("nvdapi", 18), ("manual", 7)])
            else:
                dtype = weighted(rng, [("scan/v1", 90), ("manual", 10)])
            first_detection = False
            if dtype == "scan/v1":
                ev["data"] = {"type": "scan/v1", "data": {
                    "subpackageName": sub, "componentID": comp_id, "componentName": comp,
                    "componentVersion": cver, "componentType": ctype, "componentLocation": cloc,
                    "scanner": "grype",
                }}
            elif dtype == "nvdapi":
                cpe = f"cpe:2.3:a:{pkg.vendor}:{pkg.vendor}"
                ev["data"] = {"type": "nvdapi", "data": {
                    "cpeSearched": f"{cpe}:*:*:*:*:*:*:*:*", "cpeFound": f"{cpe}:{pkg.version}:*:*:*:*:*:*:*"}}
            elif rng.random() < 0.97:
                ev["data"] = {"type": "manual"}
            # else: a manual detection written without data
        elif kind == F:
            ev["data"] = {"fixed-version": ""}  # set by number_fixes, in time order
        elif kind == FP:
            d = {"type": weighted(rng, FP_TYPES)}
            if rng.random() < 0.8:
                d["note"] = note(rng, FP_NOTES, pkg, comp)
            ev["data"] = d
        elif kind == TP:
            if rng.random() < 0.6:
                ev["data"] = {"note": note(rng, TP_NOTES, pkg, comp)}
        elif kind == PUF:
            ev["data"] = {"note": note(rng, PUF_NOTES, pkg, comp)}
        elif kind == FNP:
            ev["data"] = {"note": note(rng, FNP_NOTES, pkg, comp)}
        events.append(ev)
    return {"id": ids.cga(index), "aliases": aliases, "events": events}


def number_fixes(pkg, advisories):
    """Orders a package's advisories by their first event and gives its fixes
    successive package releases (`<version>-r<N>`) in time order."""
    advisories.sort(key=lambda a: a["events"][0]["timestamp"])
    fixes = sorted((e for a in advisories for e in a["events"] if e["type"] == F), key=lambda e: e["timestamp"])
    for e in fixes:
        pkg.release += 1
        e["data"]["fixed-version"] = f"{pkg.version}-r{pkg.release}"


def first_scan(adv):
    for e in adv["events"]:
        d = e.get("data") or {}
        if e["type"] == D and d.get("type") == "scan/v1":
            return d["data"]
    return None


# ---------------------------------------------------------------------------
# Writers.
# ---------------------------------------------------------------------------
NUMBERISH = re.compile(r"[-+]?(\d[\d_]*)?(\.[\d_]*)?([eE][-+]?\d+)?|0[xXoObB][0-9a-fA-F_]+")
PLAIN = re.compile(r"[A-Za-z0-9/][A-Za-z0-9._/+-]*")
RESERVED = {"true", "false", "yes", "no", "on", "off", "null", "y", "n", "~"}
TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")


def scalar(s):
    """A YAML scalar for string s: plain when it cannot read as anything but
    that string, else double-quoted (JSON's escapes are YAML's)."""
    if TIMESTAMP.fullmatch(s):
        return s  # as the corpus writes them; the CLI reads the text as written
    if PLAIN.fullmatch(s) and not NUMBERISH.fullmatch(s) and s.lower() not in RESERVED:
        return s
    return json.dumps(s, ensure_ascii=False)


def yaml_document(pkg_name, schema_version, advisories):
    out = [f"schema-version: {schema_version}", "", "package:", f"  name: {scalar(pkg_name)}", "", "advisories:"]
    if not advisories:
        out[-1] = "advisories: []"
    for i, a in enumerate(advisories):
        if i:
            out.append("")
        out.append(f"  - id: {a['id']}")
        if a["aliases"]:
            out.append("    aliases:")
            out.extend(f"      - {scalar(x)}" for x in a["aliases"])
        else:
            out.append("    aliases: []")
        out.append("    events:")
        for e in a["events"]:
            out.append(f"      - timestamp: {e['timestamp']}")
            out.append(f"        type: {e['type']}")
            d = e.get("data")
            if d is None:
                continue
            out.append("        data:")
            for k, v in d.items():
                if isinstance(v, dict):
                    out.append(f"          {k}:")
                    out.extend(f"            {kk}: {scalar(vv)}" for kk, vv in v.items())
                else:
                    out.append(f"          {k}: {scalar(v)}")
    return "\n".join(out) + "\n"


FP_V1 = {name: name.replace("-", "_").upper() for name, _ in FP_TYPES}
JSON_KEY = {D: "detection", F: "fixed", FP: "falsePositiveDetermination", TP: "truePositiveDetermination",
            PUF: "pendingUpstreamFix", FNP: "fixNotPlanned", "analysis-not-planned": "analysisNotPlanned"}


def v1_advisory(pkg_name, a):
    """The v1 Advisory the CLI makes of an advisory-schema advisory (ward-cli yaml.rs)."""
    events = []
    for e in a["events"]:
        d = e.get("data") or {}
        kind = e["type"]
        if kind == D:
            dd = d.get("data") or {}
            dtype = d.get("type") or "manual"
            if dtype == "scan/v1":
                payload = {"scanv1": {
                    "subpackageName": dd.get("subpackageName", ""), "componentId": dd.get("componentID", ""),
                    "componentName": dd.get("componentName", ""), "componentVersion": dd.get("componentVersion", ""),
                    "componentType": dd.get("componentType", ""),
                    "componentLocation": dd.get("componentLocation", ""), "scanner": dd.get("scanner", "")}}
            elif dtype == "nvdapi":
                payload = {"nvdapi": {"cpeSearched": dd.get("cpeSearched", ""), "cpeFound": dd.get("cpeFound", "")}}
            else:
                payload = {"manual": {}}
        elif kind == F:
            payload = {"fixedVersion": d.get("fixed-version", "")}
        elif kind == FP:
            payload = {"type": FP_V1[d["type"]], "note": d.get("note", "")}
        else:
            payload = {"note": d.get("note", "")}
        events.append({"timestamp": e["timestamp"], JSON_KEY[kind]: payload})
    scan = first_scan(a)
    out = {"advisoryId": a["id"], "aliases": a["aliases"],
           "artifactName": (scan or {}).get("subpackageName") or pkg_name,
           "artifactType": "apk", "artifactArchitecture": ""}
    if scan:
        out["componentName"] = scan.get("componentName", "")
        out["componentType"] = scan.get("componentType", "")
        out["componentLocation"] = scan.get("componentLocation", "")
    out["events"] = events
    return out


def search_text(pkg_name, a):
    """What the server's `query` filter searches (ward-store search_text)."""
    scan = first_scan(a) or {}
    artifact = scan.get("subpackageName") or pkg_name
    return "\n".join([artifact, scan.get("componentName", "")] + a["aliases"]).lower()


# ---------------------------------------------------------------------------
def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", help="directory for <package>.advisories.yaml files")
    ap.add_argument("--json-batches", metavar="DIR", help="write import request bodies here instead of YAML")
    ap.add_argument("--group", help="parentId of the import requests (with --json-batches)")
    ap.add_argument("--files", type=int, help="files (documents); default 1,600, or advisories x 1,600 / 30,000")
    ap.add_argument("--advisories", type=int, default=30000, help="advisories in all (default 30,000)")
    ap.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    ap.add_argument("--needle-rate", type=float, default=0.01,
                    help="share of advisories holding each needle (default 0.01)")
    ap.add_argument("--batch-docs", type=int, default=100, help="documents per import body (default 100)")
    ap.add_argument("--batch-bytes", type=int, default=16 << 20,
                    help="start a new body beyond this many bytes (default 16 MiB; the server takes 32 MiB)")
    args = ap.parse_args()
    if bool(args.out) == bool(args.json_batches):
        ap.error("give exactly one of --out DIR and --json-batches DIR")
    if args.json_batches and not args.group:
        ap.error("--json-batches needs --group UID (the import's parentId)")
    if not 0 <= args.needle_rate <= 0.5:
        ap.error("--needle-rate must be between 0 and 0.5 (two disjoint needles)")
    if args.advisories < 1:
        ap.error("--advisories must be at least 1")
    files = args.files if args.files is not None else max(1, round(args.advisories * 1600 / 30000))
    if files < 1:
        ap.error("--files must be at least 1")

    t0 = time.monotonic()
    rng = random.Random(args.seed)
    ids = Ids(random.Random(f"cga-{args.seed}"))
    # Only the YAML draws this: both outputs hold the same advisories.
    sv_rng = random.Random(f"schema-version-{args.seed}")
    names = package_names(rng, files, forbidden=[QUERY_NEEDLE, COMPONENT_NEEDLE])
    counts = split_counts(rng, args.advisories, files)
    names.sort()

    stats = {
        "events_by_type": {}, "detections_by_type": {}, "events_per_advisory": {},
        "latest_event_by_type": {},
    }

    def bump(table, key):
        stats[table][key] = stats[table].get(key, 0) + 1

    out_dir = args.out or args.json_batches
    os.makedirs(out_dir, exist_ok=True)
    if os.listdir(out_dir):
        sys.exit(f"gen-advisories: {out_dir} is not empty")

    index = 0
    events_total = 0
    query_matches = component_matches = 0
    batch, batch_bytes, batches = [], 0, []
    next_report = 20000

    def flush():
        nonlocal batch, batch_bytes
        if not batch:
            return
        path = os.path.join(out_dir, f"batch-{len(batches) + 1:04d}.json")
        with open(path, "w") as f:
            f.write('{"parentId":' + json.dumps(args.group) + ',"documents":[' + ",".join(batch) + "]}")
        batches.append({"file": os.path.basename(path), "documents": len(batch), "bytes": os.path.getsize(path)})
        batch, batch_bytes = [], 0

    for name, count in zip(names, counts):
        pkg = Package(rng, name)
        advisories = []
        for _ in range(count):
            r = rng.random()
            needle = "query" if r < args.needle_rate else "component" if r < 2 * args.needle_rate else None
            advisories.append(make_advisory(rng, ids, index, pkg, needle))
            index += 1
        number_fixes(pkg, advisories)
        for a in advisories:
            n = len(a["events"])
            events_total += n
            bump("events_per_advisory", str(n))
            for e in a["events"]:
                bump("events_by_type", e["type"])
                if e["type"] == D:
                    bump("detections_by_type", (e.get("data") or {}).get("type", "manual (no data)"))
            bump("latest_event_by_type", a["events"][-1]["type"])
            if QUERY_NEEDLE in search_text(name, a):
                query_matches += 1
            if (first_scan(a) or {}).get("componentName") == COMPONENT_NEEDLE:
                component_matches += 1
        source = f"{name}.advisories.yaml"
        if args.out:
            sv = weighted(sv_rng, [("2.0.2", 90), ("2.0.1", 8), ('"2"', 2)])
            with open(os.path.join(out_dir, source), "w") as f:
                f.write(yaml_document(name, sv, advisories))
        else:
            doc = json.dumps({"source": source, "package": name,
                              "advisories": [v1_advisory(name, a) for a in advisories]},
                             separators=(",", ":"), ensure_ascii=False)
            if batch and (len(batch) >= args.batch_docs or batch_bytes + len(doc) > args.batch_bytes):
                flush()
            batch.append(doc)
            batch_bytes += len(doc)
        if index >= next_report:
            print(f"  … {index:,} advisories", file=sys.stderr)
            next_report += 20000
    flush()

    summary = {
        "seed": args.seed,
        "format": "json-batches" if args.json_batches else "advisory-schema-yaml",
        "dir": out_dir,
        "files": files,
        "advisories": index,
        "events": events_total,
        **{k: dict(sorted(v.items(), key=lambda kv: -kv[1])) for k, v in stats.items()},
        "needles": {
            "query": {"substring": QUERY_NEEDLE, "matches": query_matches},
            "component": {"name": COMPONENT_NEEDLE, "matches": component_matches},
        },
        "largest_file_advisories": max(counts),
        "seconds": round(time.monotonic() - t0, 2),
    }
    if args.json_batches:
        summary["group"] = args.group
        summary["batches"] = len(batches)
        summary["batch_bytes_max"] = max(b["bytes"] for b in batches)
    print(f"gen-advisories: {files:,} {'documents' if args.json_batches else 'files'}, {index:,} advisories, "
          f"{events_total:,} events ({events_total / index:.2f} per advisory) in {summary['seconds']} s",
          file=sys.stderr)
    print(json.dumps(summary, separators=(",", ":")))


if __name__ == "__main__":
    main()
