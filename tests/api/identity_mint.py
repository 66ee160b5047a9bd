"""Mints keys and tokens for tests/api/identity.rs with PyJWT and cryptography (libraries this
project did not write). Reads a JSON list of requests on stdin, prints a JSON list of results.

  {"op": "keygen", "kty": "RSA" | "EC" | "OKP", "kid": "k1"}
      -> {"private_pem": "...", "public_pem": "...", "jwk": {...public JWK with kid...}}
  {"op": "sign", "alg": "RS256", "private_pem": "...", "headers": {...}, "payload": {...}}
      -> "<token>"
  {"op": "hs256_raw", "secret": "...", "headers": {...}, "payload": {...}}
      -> "<token>" (HMAC by hand: PyJWT rightly refuses a PEM key as an HMAC secret)
  {"op": "unsigned", "payload": {...}}
      -> "<token>" with alg none and an empty signature
"""
import base64
import hashlib
import hmac
import json
import sys

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from jwt.algorithms import ECAlgorithm, OKPAlgorithm, RSAAlgorithm


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def compact(header: dict, payload: dict) -> str:
    return b64(json.dumps(header).encode()) + "." + b64(json.dumps(payload).encode())


def keygen(req):
    kty = req["kty"]
    if kty == "RSA":
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        jwk = RSAAlgorithm.to_jwk(key.public_key(), as_dict=True)
        jwk["alg"] = "RS256"
    elif kty == "EC":
        key = ec.generate_private_key(ec.SECP256R1())
        jwk = ECAlgorithm.to_jwk(key.public_key(), as_dict=True)
    else:
        key = ed25519.Ed25519PrivateKey.generate()
        jwk = OKPAlgorithm.to_jwk(key.public_key(), as_dict=True)
    jwk["kid"] = req["kid"]
    jwk["use"] = "sig"
    private_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    public_pem = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    ).decode()
    return {"private_pem": private_pem, "public_pem": public_pem, "jwk": jwk}


def run(req):
    op = req["op"]
    if op == "keygen":
        return keygen(req)
    if op == "sign":
        return jwt.encode(
            req["payload"], req["private_pem"], algorithm=req["alg"], headers=req.get("headers")
        )
    if op == "hs256_raw":
        header = {"alg": "HS256", "typ": "JWT", **req.get("headers", {})}
        signing_input = compact(header, req["payload"])
        mac = hmac.new(req["secret"].encode(), signing_input.encode(), hashlib.sha256).digest()
        return signing_input + "." + b64(mac)
    if op == "unsigned":
        return compact({"alg": "none", "typ": "JWT", **req.get("headers", {})}, req["payload"]) + "."
    raise SystemExit(f"unknown op {op}")


print(json.dumps([run(r) for r in json.load(sys.stdin)]))
