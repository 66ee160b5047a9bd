"""A webhook receiver for bench/events.sh: answers every POST 204 at once (keep-alive), checks
nothing. With VERIFY=1 it verifies each signature with the standardwebhooks library first (the
cost a real receiver pays). Usage: webhook_sink.py PORT [SECRET]"""
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

port = int(sys.argv[1])
secret = sys.argv[2] if len(sys.argv) > 2 else None
verify = None
if secret:
    from standardwebhooks import Webhook

    verify = Webhook(secret).verify


class Sink(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        if verify:
            verify(body, dict(self.headers))
        self.send_response(204)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


ThreadingHTTPServer.daemon_threads = True
ThreadingHTTPServer(("127.0.0.1", port), Sink).serve_forever()
