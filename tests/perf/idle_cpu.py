#!/usr/bin/python3
"""CPU used by an `sglc serve` process while idle and between sparse requests.

Starts the server with the given extra arguments, then reads utime + stime
of the process (all threads) from /proc/<pid>/stat over two windows:
  idle     SECONDS with no request at all
  sparse   SECONDS with one short /generate (4 prompt tokens, N new tokens)
           every GAP ms, sent one after the other (the server is idle
           between them)
and prints CPU seconds per wall second (1.0 = one core busy) for each.
Not a test: a measurement for docs/notes/ctl.md (--sleep-on-idle).

Usage: idle_cpu.py BIN MODEL SECONDS GAP_MS NEW_TOKENS [serve args...]
"""
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request


def cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        parts = f.read().rsplit(")", 1)[1].split()
    # fields 14, 15 (utime, stime) are parts[11], parts[12] after the comm
    return (int(parts[11]) + int(parts[12])) / os.sysconf("SC_CLK_TCK")


def worker_cpu_s(pid):
    """CPU seconds of the compute pool's worker threads (named sglc-worker)."""
    tot = 0.0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                if f.read().strip() != "sglc-worker":
                    continue
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                parts = f.read().rsplit(")", 1)[1].split()
            tot += (int(parts[11]) + int(parts[12])) / os.sysconf("SC_CLK_TCK")
        except OSError:
            pass
    return tot


def main():
    binp, model, secs, gap_ms, new = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
    extra = sys.argv[6:]
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    p = subprocess.Popen([binp, "serve", "--model-path", model, "--host", "127.0.0.1", "--port", str(port)] + extra,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                urllib.request.urlopen(url + "/health", timeout=1).read()
                break
            except Exception:
                time.sleep(0.1)
        time.sleep(1.0)
        c0, t0 = cpu_s(p.pid), time.time()
        time.sleep(secs)
        idle = (cpu_s(p.pid) - c0) / (time.time() - t0)
        body = json.dumps({"input_ids": [1, 147, 201, 97],
                           "sampling_params": {"max_new_tokens": new, "temperature": 0, "ignore_eos": True}}).encode()
        n = 0
        c0, w0, t0 = cpu_s(p.pid), worker_cpu_s(p.pid), time.time()
        while time.time() - t0 < secs:
            req = urllib.request.Request(url + "/generate", data=body, headers={"Content-Type": "application/json"})
            urllib.request.urlopen(req, timeout=30).read()
            n += 1
            time.sleep(gap_ms / 1000)
        sparse = (cpu_s(p.pid) - c0) / (time.time() - t0)
        used = sparse * (time.time() - t0)
        wused = worker_cpu_s(p.pid) - w0
        print(json.dumps({"args": extra, "idle_cpu": round(idle, 4), "sparse_cpu": round(sparse, 4),
                          "cpu_ms_per_request": round(1000 * used / max(n, 1), 2),
                          "worker_cpu_ms_per_request": round(1000 * wused / max(n, 1), 2),
                          "requests": n, "gap_ms": gap_ms, "new_tokens": new, "seconds": secs}))
    finally:
        p.terminate()
        p.wait()


if __name__ == "__main__":
    main()
