"""A fake serving backend for test_bench_serving.sh: answers /v1/models,
/generate, /v1/completions and /v1/chat/completions with SSE chunks at known
times (first after 100 ms, then every 50 ms; the native stream's third chunk
carries two tokens), and records each request body in BODIES_FILE so the
test can check which fields a client sends.  Usage: PORT BODIES_FILE."""
import json
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PORT, BODIES = int(sys.argv[1]), sys.argv[2]


class H(BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def do_GET(self):
        if self.path in ("/v1/models", "/health"):
            b = json.dumps({"object": "list", "data": [{"id": "fake-model", "object": "model"}]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(b)))
            self.end_headers()
            self.wfile.write(b)
        else:
            self.send_error(404)

    def do_POST(self):
        n = int(self.headers.get("Content-Length", 0))
        body = json.loads(self.rfile.read(n))
        with open(BODIES, "a") as f:
            f.write(json.dumps({"path": self.path, "body": body}) + "\n")
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()

        def send(obj):
            self.wfile.write(b"data: " + (obj if isinstance(obj, bytes) else json.dumps(obj).encode()) + b"\n\n")
            self.wfile.flush()

        if self.path == "/generate":
            # 4 tokens in 3 chunks: 1 @100 ms, 1 @150 ms, 2 @200 ms
            text = ""
            for ct, word in ((1, "a"), (2, " b"), (4, " c d")):
                time.sleep(0.1 if ct == 1 else 0.05)
                text += word
                send({"text": text, "meta_info": {"prompt_tokens": 5, "completion_tokens": ct}})
        else:
            chat = self.path == "/v1/chat/completions"
            if chat:
                send({"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]})
            for i in range(4):  # 4 tokens, one per chunk: @100, 150, 200, 250 ms
                time.sleep(0.1 if i == 0 else 0.05)
                piece = " t%d" % i
                send({"choices": [{"index": 0, "delta": {"content": piece}} if chat else {"index": 0, "text": piece}]})
            send({"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 4, "total_tokens": 9}})
        send(b"[DONE]")


ThreadingHTTPServer(("127.0.0.1", PORT), H).serve_forever()
