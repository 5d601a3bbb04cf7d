#!/usr/bin/env python3
"""Sets up the token-exchange benchmark: a static-keys identity whose JWKS
holds a fresh RSA-2048 public key, and an RS256 identity token for it, valid
for an hour, with Ward's issuer as its audience.

Usage: exchange.py API TOKEN PARENT WORKDIR
Prints JSON {"identity": uid, "token": jwt}. Standard library and the openssl
command only (the key is made and used by openssl; python handles the JSON).
"""
import base64
import json
import re
import subprocess
import sys
import time
import urllib.request

api, admin, parent, work = sys.argv[1:5]


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def call(method, path, body=None, token=admin):
    req = urllib.request.Request(
        api + path,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        method=method,
    )
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.load(r)


key = f"{work}/exchange-key.pem"
subprocess.run(["openssl", "genrsa", "-out", key, "2048"], check=True, capture_output=True)
text = subprocess.run(["openssl", "rsa", "-in", key, "-noout", "-text"], check=True, capture_output=True, text=True).stdout
modulus = re.search(r"modulus:\n((?:\s+[0-9a-f:]+\n)+)", text).group(1)
n = bytes.fromhex(re.sub(r"[\s:]", "", modulus)).lstrip(b"\0")
jwks = {"keys": [{"kty": "RSA", "alg": "RS256", "use": "sig", "kid": "bench", "n": b64url(n), "e": "AQAB"}]}

issuer = call("GET", "/.well-known/openid-configuration")["issuer"]
identity = call(
    "POST",
    f"/iam/v2/identities/{parent}",
    {
        "name": "bench-exchange",
        "staticKeys": {"issuer": "https://ci.bench.example", "subject": "bench-job", "issuerKeys": json.dumps(jwks)},
    },
)["uid"]

now = int(time.time())
header = b64url(json.dumps({"alg": "RS256", "typ": "JWT", "kid": "bench"}).encode())
claims = b64url(
    json.dumps(
        {"iss": "https://ci.bench.example", "sub": "bench-job", "aud": issuer, "iat": now, "exp": now + 3600}
    ).encode()
)
signing_input = f"{header}.{claims}".encode()
sig = subprocess.run(["openssl", "dgst", "-sha256", "-sign", key], input=signing_input, check=True, capture_output=True).stdout
print(json.dumps({"identity": identity, "token": f"{header}.{claims}.{b64url(sig)}"}))
