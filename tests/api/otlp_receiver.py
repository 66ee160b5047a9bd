"""An OTLP/HTTP trace receiver for tests/api/tracing.rs.

It decodes each export with `opentelemetry-proto` (the OpenTelemetry project's own Python
bindings, not code of this repository), so a malformed export fails here, not in our parser.
Every span received is appended to OUT as one JSON line; every request as one line of
REQUESTS (path, content type, the headers the test looks for). The listening port is printed
on stdout once the server is ready.

    python otlp_receiver.py OUT REQUESTS [PORT]
"""

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.trace.v1.trace_pb2 import Span

OUT, REQUESTS = sys.argv[1], sys.argv[2]
PORT = int(sys.argv[3]) if len(sys.argv) > 3 else 0


def value(v):
    kind = v.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [value(x) for x in v.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: value(kv.value) for kv in v.kvlist_value.values}
    return getattr(v, kind)


def attributes(kvs):
    return {kv.key: value(kv.value) for kv in kvs}


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        with open(REQUESTS, "a", encoding="utf-8") as f:
            f.write(
                json.dumps(
                    {
                        "path": self.path,
                        "content_type": self.headers.get("content-type"),
                        "x_test_key": self.headers.get("x-test-key"),
                    }
                )
                + "\n"
            )
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        lines = []
        for rs in request.resource_spans:
            resource = attributes(rs.resource.attributes)
            for ss in rs.scope_spans:
                for span in ss.spans:
                    lines.append(
                        {
                            "service": resource.get("service.name"),
                            "scope": ss.scope.name,
                            "trace_id": span.trace_id.hex(),
                            "span_id": span.span_id.hex(),
                            "parent_span_id": span.parent_span_id.hex(),
                            "trace_state": span.trace_state,
                            "name": span.name,
                            "kind": Span.SpanKind.Name(span.kind),
                            "status": span.status.code,
                            "start": span.start_time_unix_nano,
                            "end": span.end_time_unix_nano,
                            "attributes": attributes(span.attributes),
                        }
                    )
        with open(OUT, "a", encoding="utf-8") as f:
            for line in lines:
                f.write(json.dumps(line) + "\n")
        reply = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", PORT), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
