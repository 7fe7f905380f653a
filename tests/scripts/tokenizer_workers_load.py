#!/usr/bin/python3
"""Load client for test_tokenizer_workers.sh (stdlib only).

  tokenizer_workers_load.py latency PORT MB     issue 9 section 3: idle baselines, then four
                                                MB-MiB prompts (two /generate, two
                                                /v1/chat/completions) while /health is sampled
                                                every 10 ms and small streaming requests measure
                                                their first token; exit 1 when a threshold fails
  tokenizer_workers_load.py batch PORT OUT      a batch /generate (greedy, input logprobs with
                                                ids) written to OUT as JSON
  tokenizer_workers_load.py drain PORT MB N     N large prompts, then prints DRAIN-SENT and waits
                                                for every answer (the test sends SIGTERM)

Prints one line per measurement.  Thresholds (the issue's, measured against
the same run's idle baseline because the test machine is shared and
loaded): /health p99 under load <= 20 ms + the idle p99; the median first-
token latency of the small requests under load <= the idle median + 50 ms.
"""
import http.client
import json
import statistics
import sys
import threading
import time

CTX_MSG = "is longer than the model's context length"


def conn(port, timeout=300):
    return http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)


def post(port, path, body):
    """status, parsed answer (or raw text)"""
    c = conn(port)
    c.request("POST", path, body, {"Content-Type": "application/json"})
    r = c.getresponse()
    d = r.read()
    c.close()
    try:
        return r.status, json.loads(d)
    except ValueError:
        return r.status, d.decode("utf-8", "replace")


def health_once(port):
    t = time.perf_counter()
    c = conn(port, 30)
    c.request("GET", "/health")
    r = c.getresponse()
    r.read()
    c.close()
    return r.status, time.perf_counter() - t


def first_token(port):
    """seconds from sending a small streaming /generate to its first token"""
    body = json.dumps({"text": "Once upon a time", "stream": True,
                       "sampling_params": {"max_new_tokens": 8, "temperature": 0}})
    c = conn(port, 60)
    t = time.perf_counter()
    c.request("POST", "/generate", body, {"Content-Type": "application/json"})
    r = c.getresponse()
    if r.status != 200:
        raise RuntimeError("small request: status %d %r" % (r.status, r.read()[:200]))
    dt = None
    while True:
        line = r.readline()
        if not line:
            break
        if line.startswith(b"data:") and dt is None and b"[DONE]" not in line:
            dt = time.perf_counter() - t
        if b"[DONE]" in line:
            break
    r.read()
    c.close()
    if dt is None:
        raise RuntimeError("small request: no token")
    return dt


def big_bodies(mb):
    words = "Once upon a time there was a little dog named Max who loved to run in the park . ".split()
    parts, n, i = [], 0, 0
    while n < mb * 1024 * 1024:
        w = words[i % len(words)] + ("" if i % 7 else str(i % 100))
        parts.append(w)
        n += len(w) + 1
        i += 1
    text = " ".join(parts)
    gen = json.dumps({"text": text, "sampling_params": {"max_new_tokens": 4}})
    chat = json.dumps({"model": "m", "max_tokens": 4, "messages": [{"role": "user", "content": text}]})
    return [("/generate", gen), ("/v1/chat/completions", chat)] * 2


def p99(v):
    v = sorted(v)
    return v[min(len(v) - 1, int(len(v) * 0.99))]


def latency(port, mb):
    # idle baselines (after a few warm-up requests)
    for _ in range(3):
        first_token(port)
    idle_ttft = statistics.median(first_token(port) for _ in range(7))
    idle_h = []
    for _ in range(200):
        st, dt = health_once(port)
        if st != 200:
            raise RuntimeError("idle /health: status %d" % st)
        idle_h.append(dt)
        time.sleep(0.01)
    print("idle: first token median %.1f ms, /health p99 %.1f ms" % (idle_ttft * 1e3, p99(idle_h) * 1e3))

    bodies = big_bodies(mb)
    results = [None] * len(bodies)
    done = threading.Event()
    sent = [threading.Event() for _ in bodies]

    def big(i):
        path, body = bodies[i]
        try:
            c = conn(port)
            c.putrequest("POST", path)
            c.putheader("Content-Type", "application/json")
            c.putheader("Content-Length", str(len(body)))
            c.endheaders()
            c.send(body.encode())
            sent[i].set()
            r = c.getresponse()
            d = r.read()
            results[i] = (r.status, d.decode("utf-8", "replace"))
        except Exception as e:  # an unanswered request
            results[i] = (0, repr(e))
        sent[i].set()

    health, health_err = [], []

    def sampler():
        while not done.is_set():
            try:
                st, dt = health_once(port)
                (health if st == 200 else health_err).append(dt if st == 200 else st)
            except Exception as e:
                health_err.append(repr(e))
            time.sleep(0.01)

    t0 = time.perf_counter()
    ths = [threading.Thread(target=big, args=(i,)) for i in range(len(bodies))]
    hs = threading.Thread(target=sampler)
    hs.start()
    for t in ths:
        t.start()
    for e in sent:
        e.wait()
    ttft, loaded = [], 0
    for _ in range(6):
        busy = any(r is None for r in results)
        dt = first_token(port)
        if busy and any(r is None for r in results):
            ttft.append(dt)  # measured while the big prompts were still in the workers
        time.sleep(0.15)
    for t in ths:
        t.join()
    done.set()
    hs.join()
    window = time.perf_counter() - t0
    ok = True
    for i, (st, txt) in enumerate(results):
        good = st == 400 and CTX_MSG in txt
        print("big %d %s: %d %s" % (i, bodies[i][0], st, txt[:120]))
        ok &= good
    if health_err:
        print("FAIL /health errors: %r" % health_err[:5])
        ok = False
    hp99 = p99(health) if health else float("inf")
    hlim = 0.020 + p99(idle_h)
    print("load window %.1f s: /health n=%d p50 %.1f ms p99 %.1f ms max %.1f ms (limit %.1f ms)" % (
        window, len(health), statistics.median(health) * 1e3 if health else -1, hp99 * 1e3,
        max(health) * 1e3 if health else -1, hlim * 1e3))
    if hp99 > hlim:
        print("FAIL /health p99 %.1f ms > %.1f ms" % (hp99 * 1e3, hlim * 1e3))
        ok = False
    if len(ttft) < 2:
        print("FAIL only %d small requests ran while the big prompts were in the workers" % len(ttft))
        ok = False
    else:
        med = statistics.median(ttft)
        tlim = idle_ttft + 0.050
        print("small under load: first token median %.1f ms max %.1f ms over %d (limit %.1f ms)" % (
            med * 1e3, max(ttft) * 1e3, len(ttft), tlim * 1e3))
        if med > tlim:
            print("FAIL small request first token %.1f ms > %.1f ms" % (med * 1e3, tlim * 1e3))
            ok = False
    return 0 if ok else 1


def batch(port, out):
    texts = ["Once upon a time", "Lily saw a big red ball.", "The dog ran to the park and",
             "One day, a little bird", "Tom and Sue were friends.", "x"]
    body = json.dumps({"text": texts, "return_logprob": True, "logprob_start_len": 0,
                       "sampling_params": {"max_new_tokens": 4, "temperature": 0}})
    st, d = post(port, "/generate", body)
    if st != 200:
        print("FAIL batch: %d %r" % (st, d))
        return 1
    keep = [{"output_ids": x["output_ids"],
             "input_ids": [t[1] for t in x["meta_info"]["input_token_logprobs"]],
             "prompt_tokens": x["meta_info"]["prompt_tokens"]} for x in d]
    json.dump(keep, open(out, "w"))
    print("batch: %d prompts, %d input ids" % (len(keep), sum(len(k["input_ids"]) for k in keep)))
    return 0


def drain(port, mb, n):
    bodies = (big_bodies(mb) * n)[:n]
    results = [None] * n
    sent = [threading.Event() for _ in range(n)]

    def big(i):
        path, body = bodies[i]
        try:
            c = conn(port)
            c.putrequest("POST", path)
            c.putheader("Content-Type", "application/json")
            c.putheader("Content-Length", str(len(body)))
            c.endheaders()
            c.send(body.encode())
            sent[i].set()
            r = c.getresponse()
            results[i] = (r.status, r.read().decode("utf-8", "replace"))
        except Exception as e:
            results[i] = (0, repr(e))
        sent[i].set()

    ths = [threading.Thread(target=big, args=(i,)) for i in range(n)]
    for t in ths:
        t.start()
    for e in sent:
        e.wait()
    time.sleep(0.2)
    print("DRAIN-SENT", flush=True)
    for t in ths:
        t.join()
    ok = True
    for st, txt in results:
        print("drain: %d %s" % (st, txt[:100]))
        ok &= (st == 400 and CTX_MSG in txt) or (st == 503 and "shutting down" in txt)
    return 0 if ok else 1


if __name__ == "__main__":
    mode, port = sys.argv[1], int(sys.argv[2])
    if mode == "latency":
        sys.exit(latency(port, int(sys.argv[3])))
    if mode == "batch":
        sys.exit(batch(port, sys.argv[3]))
    if mode == "drain":
        sys.exit(drain(port, int(sys.argv[3]), int(sys.argv[4])))
    sys.exit("unknown mode " + mode)
