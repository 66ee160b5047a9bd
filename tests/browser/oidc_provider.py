"""A small OpenID Connect provider for the console's sign-in test (tests/browser/main.rs): the
authorization code flow with PKCE (S256) for one public client, as an identity provider runs it
for a single-page app. Tokens are RS256 JWTs signed with PyJWT and cryptography (libraries this
project did not write); the server under test verifies them through the JWKS published here.

  python oidc_provider.py PORT AUDIENCE CLIENT_ID REDIRECT_URI SUBJECT ROLE [TOKEN_HOST]

Serves on 127.0.0.1:PORT, issuer http://127.0.0.1:PORT:
  GET  /.well-known/openid-configuration   discovery (CORS: any origin)
  GET  /jwks                               the public key
  GET  /authorize                          checks client_id, redirect_uri (exact), S256
                                           challenge; signs SUBJECT in at once (no login page)
                                           and redirects back with a single-use code and state
  POST /token                              code + code_verifier (+ client_id, redirect_uri)
                                           -> {"access_token", "token_type", "expires_in"}
                                           with `roles: [ROLE]` (ROLE "-" for none); CORS
TOKEN_HOST (default 127.0.0.1) names the token endpoint's host in discovery: `localhost` puts it
on another origin than the issuer's. SUBJECT `nonascii` gets an access token no HTTP header can
carry. Prints "ready" once listening; every request is logged to stderr.
"""
import base64
import hashlib
import json
import secrets
import sys
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

PORT = int(sys.argv[1])
AUDIENCE, CLIENT_ID, REDIRECT_URI, SUBJECT, ROLE = sys.argv[2:7]
TOKEN_HOST = sys.argv[7] if len(sys.argv) > 7 else "127.0.0.1"
ISSUER = f"http://127.0.0.1:{PORT}"
KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
PEM = KEY.private_bytes(
    serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
)
JWK = RSAAlgorithm.to_jwk(KEY.public_key(), as_dict=True)
JWK.update({"kid": "console-test", "alg": "RS256", "use": "sig"})
# code -> (challenge, redirect_uri)
CODES = {}


def s256(verifier: str) -> str:
    digest = hashlib.sha256(verifier.encode()).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


class Handler(BaseHTTPRequestHandler):
    def log_message(self, fmt, *args):
        sys.stderr.write("oidc: " + (fmt % args) + "\n")

    def cors(self):
        self.send_header("Access-Control-Allow-Origin", "*")
        self.send_header("Access-Control-Allow-Methods", "GET, POST")
        self.send_header("Access-Control-Allow-Headers", "content-type")

    def reply(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.cors()
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_OPTIONS(self):
        self.send_response(204)
        self.cors()
        self.end_headers()

    def do_GET(self):
        url = urllib.parse.urlsplit(self.path)
        q = dict(urllib.parse.parse_qsl(url.query))
        if url.path == "/.well-known/openid-configuration":
            return self.reply(200, {
                "issuer": ISSUER,
                "authorization_endpoint": f"{ISSUER}/authorize",
                "token_endpoint": f"http://{TOKEN_HOST}:{PORT}/token",
                "jwks_uri": f"{ISSUER}/jwks",
                "response_types_supported": ["code"],
                "code_challenge_methods_supported": ["S256"],
                "grant_types_supported": ["authorization_code"],
            })
        if url.path == "/jwks":
            return self.reply(200, {"keys": [JWK]})
        if url.path == "/authorize":
            if q.get("client_id") != CLIENT_ID or q.get("redirect_uri") != REDIRECT_URI:
                return self.reply(400, {"error": "invalid_client"})
            if q.get("response_type") != "code" or q.get("code_challenge_method") != "S256":
                return self.reply(400, {"error": "invalid_request"})
            if not q.get("code_challenge") or not q.get("state"):
                return self.reply(400, {"error": "invalid_request"})
            code = secrets.token_urlsafe(24)
            CODES[code] = (q["code_challenge"], q["redirect_uri"])
            target = REDIRECT_URI + ("&" if "?" in REDIRECT_URI else "?") + urllib.parse.urlencode(
                {"code": code, "state": q["state"]}
            )
            self.send_response(302)
            self.send_header("Location", target)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return None
        return self.reply(404, {"error": "not_found"})

    def do_POST(self):
        url = urllib.parse.urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        form = dict(urllib.parse.parse_qsl(self.rfile.read(length).decode()))
        if url.path != "/token":
            return self.reply(404, {"error": "not_found"})
        if form.get("grant_type") != "authorization_code" or form.get("client_id") != CLIENT_ID:
            return self.reply(400, {"error": "invalid_request"})
        found = CODES.pop(form.get("code", ""), None)  # single use
        if found is None:
            return self.reply(400, {"error": "invalid_grant"})
        challenge, redirect_uri = found
        if form.get("redirect_uri") != redirect_uri or s256(form.get("code_verifier", "")) != challenge:
            return self.reply(400, {"error": "invalid_grant"})
        now = int(time.time())
        claims = {"iss": ISSUER, "aud": AUDIENCE, "sub": SUBJECT, "iat": now, "exp": now + 600}
        if ROLE != "-":
            claims["roles"] = [ROLE]
        token = jwt.encode(claims, PEM, algorithm="RS256", headers={"kid": "console-test"})
        if SUBJECT == "nonascii":
            token = token + "\u2026"

        return self.reply(200, {"access_token": token, "token_type": "Bearer", "expires_in": 600})


server = ThreadingHTTPServer(("127.0.0.1", PORT), Handler)
print("ready", flush=True)
server.serve_forever()
