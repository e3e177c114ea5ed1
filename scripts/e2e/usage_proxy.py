"""A recording reverse proxy for the real-model end-to-end test.

Forwards every request to the model server unchanged and appends the usage object of every
response it relays (whole JSON or SSE chunks) to a JSONL file, so the test can compare what the
server reported with what baton journaled. Loopback only; standard library only.
"""
import http.client
import http.server
import json
import sys

UPSTREAM_PORT = int(sys.argv[1])
LISTEN_PORT = int(sys.argv[2])
LOG_PATH = sys.argv[3]


def record(usage):
    with open(LOG_PATH, "a", encoding="utf-8") as log:
        log.write(json.dumps(usage, sort_keys=True) + "\n")


class Proxy(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def _forward(self, method):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        upstream = http.client.HTTPConnection("127.0.0.1", UPSTREAM_PORT, timeout=600)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
        upstream.request(method, self.path, body=body, headers=headers)
        resp = upstream.getresponse()
        data = resp.read()
        content_type = resp.getheader("Content-Type", "")
        usage = None
        if "text/event-stream" in content_type:
            for line in data.decode("utf-8", "replace").splitlines():
                if line.startswith("data:") and line[5:].strip() not in ("", "[DONE]"):
                    chunk = json.loads(line[5:])
                    usage = chunk.get("usage") or usage
            record({"stream": True, "usage": usage})
        elif self.path.endswith("/chat/completions"):
            record({"stream": False, "usage": json.loads(data).get("usage")})
        self.send_response(resp.status)
        for key, value in resp.getheaders():
            if key.lower() not in ("transfer-encoding", "content-length", "connection"):
                self.send_header(key, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self._forward("GET")

    def do_POST(self):
        self._forward("POST")


http.server.ThreadingHTTPServer(("127.0.0.1", LISTEN_PORT), Proxy).serve_forever()
