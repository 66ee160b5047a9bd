"""A webhook receiver for tests/api/events.rs: every POST to /hook is verified with the
`standardwebhooks` library from PyPI (a library this project did not write); verified events
are recorded (id, type, data), refused ones too. The test steers it through /control:
mode `ok` (200), `fail` (500), `redirect` (307 to itself), `slow` (sleeps `delay` seconds, then 200) or `down` (drops the
connection without an answer); `fail_types`, event types answered 500 whatever the mode; and
`secret`, which replaces the one given at start.

Usage: python webhook_receiver.py SECRET  — prints the port it listens on, then serves.
"""

import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from standardwebhooks import Webhook

SECRET = sys.argv[1]
WEBHOOK = Webhook(SECRET)
LOCK = threading.Lock()
STATE = {"mode": "ok", "delay": 0.0, "fail_types": []}
# Every attempt: {id, verified, status, start, end}; verified deliveries: {id, type, data,
# timestamp}; refused: {id, error}.
ATTEMPTS = []
VERIFIED = []
REFUSED = []


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, status, body=b"{}"):
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path == "/control/state":
            with LOCK:
                body = json.dumps(
                    {"attempts": ATTEMPTS, "verified": VERIFIED, "refused": REFUSED, **STATE}
                ).encode()
            self.reply(200, body)
        else:
            self.reply(404)

    def do_POST(self):
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length)
        if self.path == "/control/mode":
            global WEBHOOK
            wanted = json.loads(body)
            with LOCK:
                if "secret" in wanted:
                    WEBHOOK = Webhook(wanted["secret"])
                STATE["mode"] = wanted["mode"]
                STATE["delay"] = float(wanted.get("delay", 0))
                STATE["fail_types"] = list(wanted.get("fail_types", []))
            self.reply(200)
            return
        if self.path != "/hook":
            self.reply(404)
            return
        start = time.time()
        with LOCK:
            mode, delay, fail_types = STATE["mode"], STATE["delay"], STATE["fail_types"]
        if mode == "redirect":
            with LOCK:
                ATTEMPTS.append({"id": self.headers.get("webhook-id"), "verified": False,
                                 "status": 307, "start": start, "end": time.time()})
            self.send_response(307)
            self.send_header("location", "/hook")
            self.send_header("content-length", "0")
            self.end_headers()
            return
        if mode == "down":
            # No answer at all: the connection is closed under the sender.
            self.close_connection = True
            self.connection.shutdown(2)
            return
        headers = {k: v for k, v in self.headers.items()}
        try:
            with LOCK:
                webhook = WEBHOOK
            payload = webhook.verify(body, headers)
        except Exception as e:  # the library's refusal, whatever its class
            with LOCK:
                REFUSED.append({"id": headers.get("webhook-id"), "error": f"{type(e).__name__}: {e}"})
                ATTEMPTS.append({"id": headers.get("webhook-id"), "verified": False, "status": 401,
                                 "start": start, "end": time.time()})
            self.reply(401)
            return
        if mode == "slow":
            time.sleep(delay)
        status = 500 if mode == "fail" or payload.get("type") in fail_types else 200
        with LOCK:
            ATTEMPTS.append({"id": headers["webhook-id"], "verified": True, "status": status,
                             "start": start, "end": time.time()})
            if status == 200:
                VERIFIED.append({"id": headers["webhook-id"], "type": payload["type"],
                                 "timestamp": payload["timestamp"], "data": payload["data"],
                                 "webhook_timestamp": headers["webhook-timestamp"]})
        self.reply(status)


def main():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
