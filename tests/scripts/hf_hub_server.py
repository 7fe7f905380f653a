#!/usr/bin/python3
"""A tiny stand-in for the Hugging Face hub, for tests/scripts/test_hub_download.sh.

Serves the files of one local model folder under the hub's URL layout, on
127.0.0.1 only, for a bounded time:

  GET  /api/models/{org}/{name}/revision/{rev}   {"sha": ..., "siblings": [{"rfilename": ...}]}
  HEAD|GET /{org}/{name}/resolve/{rev}/{file}    small files: 200 + ETag (git-style sha1)
                                                 LFS files (*.safetensors, *.bin, ...): 302 to
                                                 /cdn/{sha256} with X-Linked-Etag / X-Linked-Size
  GET  /cdn/{sha256}                             the bytes, with Range support (206 / 416)

Repos: REPO (public) and test/private (needs "Authorization: Bearer TOKEN").
Decoy files (pytorch_model.bin, model.gguf, onnx/model.onnx, README.md) are
listed too: a correct client never fetches them.  --cut FILE makes the first
GET of FILE stop halfway through (connection closed), to test resume.
Every request is appended to --log as "METHOD PATH range=R auth=A".
"""
import argparse
import hashlib
import json
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ap = argparse.ArgumentParser()
ap.add_argument("--model-dir", required=True)
ap.add_argument("--repo", default="test/TinyStories-656K")
ap.add_argument("--port-file", required=True)
ap.add_argument("--log", required=True)
ap.add_argument("--cut", action="append", default=[])
ap.add_argument("--token", default="secret")
ap.add_argument("--lifetime", type=float, default=120.0)
args = ap.parse_args()

LFS_SUFFIXES = (".safetensors", ".bin", ".gguf", ".onnx", ".pth")

files = {}  # name -> bytes
for name in sorted(os.listdir(args.model_dir)):
    path = os.path.join(args.model_dir, name)
    if os.path.isfile(path):
        with open(path, "rb") as f:
            files[name] = f.read()
files["pytorch_model.bin"] = b"decoy weights: must not be downloaded\n" * 10
files["model.gguf"] = b"decoy gguf\n"
files["onnx/model.onnx"] = b"decoy onnx\n"
files["README.md"] = b"# decoy readme\n"

sha256 = {n: hashlib.sha256(b).hexdigest() for n, b in files.items()}
gitsha = {n: hashlib.sha1(b"blob %d\0" % len(b) + b).hexdigest() for n, b in files.items()}
by_sha256 = {v: k for k, v in sha256.items()}
COMMIT = hashlib.sha1("".join(n + sha256[n] for n in sorted(files)).encode()).hexdigest()
REPOS = {args.repo: False, "test/private": True}  # name -> needs token
cut_pending = set(args.cut)
log_lock = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *a):  # quiet stderr; we keep our own log
        pass

    def _log(self):
        with log_lock, open(args.log, "a") as f:
            f.write("%s %s range=%s auth=%s\n" % (self.command, self.path,
                    self.headers.get("Range", "-"),
                    "yes" if self.headers.get("Authorization") else "no"))

    def _send(self, code, body=b"", headers=None, head=False):
        self.send_response(code)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def _error(self, code, msg, head=False):
        self._send(code, json.dumps({"error": msg}).encode(),
                   {"Content-Type": "application/json", "X-Error-Message": msg}, head)

    def _repo_ok(self, repo, head=False):
        if repo not in REPOS:
            self._error(404, "Repository not found", head)
            return False
        if REPOS[repo] and self.headers.get("Authorization") != "Bearer " + args.token:
            self._error(401, "Invalid credentials", head)
            return False
        return True

    def _body(self, name, head):
        data = files[name]
        size = len(data)
        start = 0
        rng = self.headers.get("Range")
        hdrs = {"ETag": '"%s"' % (sha256[name] if name.endswith(LFS_SUFFIXES) else gitsha[name]),
                "Accept-Ranges": "bytes", "Content-Type": "application/octet-stream"}
        code = 200
        if rng:
            if not rng.startswith("bytes=") or not rng[6:].endswith("-"):
                return self._error(400, "only open ranges supported", head)
            start = int(rng[6:-1])
            if start >= size:
                hdrs["Content-Range"] = "bytes */%d" % size
                return self._send(416, b"", hdrs, head)
            code = 206
            hdrs["Content-Range"] = "bytes %d-%d/%d" % (start, size - 1, size)
        body = data[start:]
        if head:
            return self._send(code, body, hdrs, head=True)
        if name in cut_pending:
            cut_pending.discard(name)
            self.send_response(code)
            for k, v in hdrs.items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body[: len(body) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        self._send(code, body, hdrs)

    def _handle(self, head):
        self._log()
        p = self.path.split("?", 1)[0]
        parts = p.strip("/").split("/")
        if len(parts) >= 6 and parts[0] == "api" and parts[1] == "models" and parts[4] == "revision":
            repo = parts[2] + "/" + parts[3]
            rev = "/".join(parts[5:])
            if not self._repo_ok(repo, head):
                return
            if rev not in ("main", COMMIT):
                return self._error(404, "Revision Not Found", head)
            info = {"id": repo, "sha": COMMIT,
                    "siblings": [{"rfilename": n} for n in sorted(files)]}
            return self._send(200, json.dumps(info).encode(),
                              {"Content-Type": "application/json"}, head)
        if len(parts) >= 5 and parts[2] == "resolve":
            repo = parts[0] + "/" + parts[1]
            rev, name = parts[3], "/".join(parts[4:])
            if not self._repo_ok(repo, head):
                return
            if rev not in ("main", COMMIT):
                return self._error(404, "Revision Not Found", head)
            if name not in files:
                return self._error(404, "Entry not found", head)
            if name.endswith(LFS_SUFFIXES):
                return self._send(302, b"", {
                    "Location": "/cdn/" + sha256[name],
                    "X-Linked-Etag": '"%s"' % sha256[name],
                    "X-Linked-Size": str(len(files[name])),
                    "X-Repo-Commit": COMMIT,
                    "ETag": '"%s"' % gitsha[name]}, head)
            return self._body(name, head)
        if len(parts) == 2 and parts[0] == "cdn" and parts[1] in by_sha256:
            return self._body(by_sha256[parts[1]], head)
        return self._error(404, "not found", head)

    def do_GET(self):
        self._handle(False)

    def do_HEAD(self):
        self._handle(True)


srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
srv.daemon_threads = True
with open(args.port_file + ".tmp", "w") as f:
    f.write(str(srv.server_address[1]))
os.rename(args.port_file + ".tmp", args.port_file)
t = threading.Timer(args.lifetime, srv.shutdown)
t.daemon = True
t.start()
srv.serve_forever()
