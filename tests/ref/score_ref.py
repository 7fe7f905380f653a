#!/usr/bin/python3
"""The scoring routes (/v1/score, /v1/rerank, /v1/classify) of a running
`sglc serve` against an independent PyTorch reference.

DESIGN
  Reference: tests/ref/torch_ref.py runs the backbone (its own forward,
  no transformers); the heads are written here:
    - /v1/score: next-token log_softmax after query + item (item + query
      with item_first) at the label ids; exp, or a softmax over the
      labels' logprobs (apply_softmax).  Multi-item (the server runs with
      --multi-item-scoring-delimiter D): one pass over
      query D item1 D ... D itemN D as SGLang's FlashInfer path runs it
      (forward_masked: a segment -- a delimiter and its item -- attends to
      the query and itself; each delimiter at the query's last position,
      item tokens from the query's length on), item k's scores at the row
      before delimiter k+1; the check first shows that a plain causal pass,
      and each query+D+item scored alone, would both score differently.
    - sequence classifiers (HF GenericForSequenceClassification): the last
      token's final-normed hidden state times score.weight (num_labels, H);
      /v1/classify probs = softmax, label = id2label[argmax]; /v1/rerank
      score = the first output, sorted high to low, top_n, documents.
    - decoder-only rerankers (a chat template saying the answer can only be
      "yes" or "no", as Qwen3-Reranker's): p(yes) / (p(yes) + p(no)) of
      the next token after the template rendered by hand for [query,
      document] (+ instruct).
  Tiny classifiers (`build`): Qwen3ForSequenceClassification from the
  Qwen3-0.6B config (3 labels with names) and LlamaForSequenceClassification
  from Llama-3.2-1B (1 label, a cross-encoder reranker), shrunk like
  make_tiny_model.py's models, vocabulary 2048 with TinyStories-656K's
  tokenizer copied in (text inputs).  Written to OUT/<name>/ with a
  causal twin (same backbone, architectures ...ForCausalLM, no score
  head) the reference loads through torch_ref.

Usage: score_ref.py build OUT SHARED
       score_ref.py score URL MODEL_DIR [--multi D]   (a generation server)
       score_ref.py classify URL MODEL_DIR            (a classifier server)
       score_ref.py template FILE                     (write a Qwen3-Reranker-style chat template)
       score_ref.py rerank-decoder URL MODEL_DIR      (a generation server with that template)
       score_ref.py same URL FILE NAME                (a classifier server: its raw head scores
                                                       written to FILE, or, when FILE exists,
                                                       within 1e-5 relative of those)
Prints ok/FAIL lines; exit 1 on any failure.
"""
import copy
import json
import math
import os
import shutil
import sys
import urllib.error
import urllib.request
import zlib

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools"))
import safetensors_np  # noqa: E402
import torch_ref  # noqa: E402

FAIL = []
TOL = 1e-4


def report(ok, msg):
    print(("ok   " if ok else "FAIL ") + msg, flush=True)
    if not ok:
        FAIL.append(msg)


def post(url, path, body):
    req = urllib.request.Request(url + path, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


# ----------------------------------------------------------------------------
# tiny classifiers

CLASSIFIERS = {
    "qwen3-cls": ("configs/Qwen__Qwen3-0.6B/config.json", "Qwen3",
                  dict(hidden_size=64, num_attention_heads=4, num_key_value_heads=2, head_dim=32,
                       intermediate_size=192,
                       id2label={"0": "negative", "1": "neutral", "2": "positive"},
                       label2id={"negative": 0, "neutral": 1, "positive": 2})),
    "llama-rerank": ("configs/meta-llama__Llama-3.2-1B-Instruct/config.json", "Llama",
                     dict(hidden_size=64, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                          intermediate_size=192, rope_scaling=None, id2label={"0": "LABEL_0"},
                          label2id={"LABEL_0": 0}, tie_word_embeddings=False)),
}
VOCAB = 2048


def build(out, shared):
    tokdir = os.path.join(shared, "models", "TinyStories-656K")
    for name, (base_rel, fam, ov) in CLASSIFIERS.items():
        with open(os.path.join(shared, "models", base_rel)) as f:
            cfg = json.load(f)
        cfg.update(copy.deepcopy(ov))
        cfg.update(num_hidden_layers=2, vocab_size=VOCAB, bos_token_id=1, eos_token_id=2,
                   torch_dtype="float32", architectures=[fam + "ForSequenceClassification"])
        rng = np.random.RandomState(zlib.crc32(name.encode()) & 0x7FFFFFFF)
        H, NH, KV, D, I = (cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"],
                           cfg["head_dim"], cfg["intermediate_size"])

        def lin(o, i):
            return (rng.standard_normal((o, i)) / np.sqrt(i)).astype(np.float32)

        def norm(n):
            return (1.0 + 0.2 * rng.standard_normal(n)).astype(np.float32)

        w = {"model.embed_tokens.weight": (0.1 * rng.standard_normal((VOCAB, H))).astype(np.float32)}
        for li in range(2):
            p = f"model.layers.{li}."
            w[p + "input_layernorm.weight"] = norm(H)
            w[p + "post_attention_layernorm.weight"] = norm(H)
            w[p + "self_attn.q_proj.weight"] = lin(NH * D, H)
            w[p + "self_attn.k_proj.weight"] = lin(KV * D, H)
            w[p + "self_attn.v_proj.weight"] = lin(KV * D, H)
            w[p + "self_attn.o_proj.weight"] = lin(H, NH * D)
            w[p + "mlp.gate_proj.weight"] = lin(I, H)
            w[p + "mlp.up_proj.weight"] = lin(I, H)
            w[p + "mlp.down_proj.weight"] = lin(H, I)
            if fam == "Qwen3":
                w[p + "self_attn.q_norm.weight"] = norm(D)
                w[p + "self_attn.k_norm.weight"] = norm(D)
        w["model.norm.weight"] = norm(H)
        nl = len(cfg["id2label"])
        score = 3.0 * lin(nl, H)
        d = os.path.join(out, name)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(os.path.join(d, "twin"))
        safetensors_np.write(os.path.join(d, "model.safetensors"), dict(w, **{"score.weight": score}),
                             dtype="F32", metadata={"format": "pt"})
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(cfg, f, indent=2)
        for fn in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
            shutil.copy(os.path.join(tokdir, fn), d)
        twin = dict(cfg, architectures=[fam + "ForCausalLM"], tie_word_embeddings=True)
        safetensors_np.write(os.path.join(d, "twin", "model.safetensors"), w, dtype="F32",
                             metadata={"format": "pt"})
        with open(os.path.join(d, "twin", "config.json"), "w") as f:
            json.dump(twin, f, indent=2)
        np.save(os.path.join(d, "twin", "score.npy"), score)
        print(d)
    return 0


# ----------------------------------------------------------------------------
# /v1/score


def next_logprobs(m, ids):
    m.reset()
    lg = m.forward(list(ids))[-1].double()
    return torch.log_softmax(lg, -1)


@torch.no_grad()
def forward_masked(m, ids, pos, allowed):
    """torch_ref.Model's forward (Llama: no biases, qk-norm or window) over
    the whole sequence with explicit rope positions pos (n,) and attention
    mask allowed (n, n) -- SGLang's multi-item scoring pass.  log_softmax
    rows (n, V)."""
    cfg = m.cfg
    n = len(ids)
    cos, sin = torch_ref.rope_cos_sin(cfg, torch.tensor(pos), max(pos) + 1)
    cos, sin = cos[:, None, :].to(m.cdt), sin[:, None, :].to(m.cdt)
    x = m.embed[torch.tensor(ids, dtype=torch.long)]
    NH, KV, D = cfg.n_heads, cfg.n_kv, cfg.head_dim
    for L in m.layers:
        h = m.rmsnorm(x, L["in_norm"])
        q, k, v = (h @ L["wq"].T).view(n, NH, D), (h @ L["wk"].T).view(n, KV, D), (h @ L["wv"].T).view(n, KV, D)
        q = q * cos + torch_ref.rotate_half(q) * sin
        k = k * cos + torch_ref.rotate_half(k) * sin
        K, V = k.repeat_interleave(NH // KV, dim=1), v.repeat_interleave(NH // KV, dim=1)
        sc = torch.einsum("qhd,khd->hqk", q, K) / math.sqrt(D)
        sc = sc.masked_fill(~allowed[None], float("-inf"))
        att = torch.einsum("hqk,khd->qhd", torch.softmax(sc, -1), V).reshape(n, NH * D)
        x = x + att @ L["wo"].T
        h = m.rmsnorm(x, L["post_norm"])
        x = x + (torch.nn.functional.silu(h @ L["gate"].T) * (h @ L["up"].T)) @ L["down"].T
    x = m.rmsnorm(x, m.norm)
    return torch.log_softmax((x @ m.lm_head.T).double(), -1)


def multi_item_ref(m, ids, d, labels, sgl=True):
    """Scores of items 1..N of query D item1 D ... itemN D.  sgl: SGLang's
    pass (FlashInfer multi-item mask: a segment -- a delimiter and the item
    after it -- sees the query and itself; positions rewritten: each
    delimiter at the query's last position, item tokens from the query's
    length on); else a plain causal pass with natural positions."""
    n = len(ids)
    dp = [i for i, t in enumerate(ids) if t == d]
    q = dp[0]
    seg = [-1] * n
    pos = list(range(n))
    for k, p0 in enumerate(dp):
        end = dp[k + 1] if k + 1 < len(dp) else n
        for j in range(p0, end):
            seg[j] = k
            if sgl:
                pos[j] = q - 1 + (j - p0)
    i = torch.arange(n)
    causal = i[None, :] <= i[:, None]
    if sgl:
        s = torch.tensor(seg)
        allowed = causal & ((i[None, :] < q) | (s[None, :] == s[:, None]))
    else:
        allowed = causal
    lg = forward_masked(m, ids, pos, allowed)
    return [[math.exp(float(lg[p - 1][t])) for t in labels] for p in dp[1:]]


def to_scores(lp, labels, softmax):
    v = torch.tensor([float(lp[t]) for t in labels], dtype=torch.float64)
    return (torch.softmax(v, 0) if softmax else v.exp()).tolist()


def close(got, ref):
    """Scores agree within TOL relative (probabilities of a 2048-token
    vocabulary are ~1e-3: an absolute bound would say little)."""
    return (isinstance(got, list) and len(got) == len(ref) and
            all(len(g) == len(r) and all(abs(a - b) <= TOL * abs(b) + 1e-9 for a, b in zip(g, r))
                for g, r in zip(got, ref)))


def worst(got, ref):
    """Largest relative difference."""
    try:
        return max(abs(a - b) / max(abs(b), 1e-12) for g, r in zip(got, ref) for a, b in zip(g, r))
    except (TypeError, ValueError):
        return float("nan")


def cmd_score(url, mdir, multi):
    m = torch_ref.Model(mdir, "float32")
    query = [1, 320, 451, 88, 1203, 77, 9]
    items = [[33, 901, 14], [250], [777, 12, 1500, 6, 41], [33, 901, 15]]
    labels = [29, 300, 1024, 2047]
    if multi is None:
        for sm in (False, True):
            for first in (False, True):
                ref = [to_scores(next_logprobs(m, (it + query) if first else (query + it)), labels, sm)
                       for it in items]
                st, o = post(url, "/v1/score", {"query": query, "items": items, "label_token_ids": labels,
                                                "apply_softmax": sm, "item_first": first, "model": "tiny"})
                ok = st == 200 and close(o.get("scores"), ref) and o.get("object") == "scoring" and \
                    o.get("model") == "tiny"
                report(ok, f"/v1/score ids apply_softmax={sm} item_first={first}: max rel |d| "
                           f"{worst(o.get('scores') if st == 200 else None, ref):.2g} (status {st})")
        # text: the server's own tokenization of query + item (its /tokenize), reference on those ids
        q, its = "Once upon a time", [" there was a cat", " the sun"]
        refs = []
        for it in its:
            st, t = post(url, "/tokenize", {"prompt": q + it})
            refs.append(to_scores(next_logprobs(m, t["tokens"]), labels, False))
        st, o = post(url, "/v1/score", {"query": q, "items": its, "label_token_ids": labels})
        report(st == 200 and close(o.get("scores"), refs),
               f"/v1/score text: max rel |d| {worst(o.get('scores') if st == 200 else None, refs):.2g}")
        st, o = post(url, "/v1/score", {"query": q, "items": " there was a cat", "label_token_ids": labels})
        report(st == 200 and close(o.get("scores"), refs[:1]), "/v1/score text, items a single string")
        bad = [({"query": query, "items": items}, "label_token_ids must be provided"),
               ({"query": query, "label_token_ids": labels}, "items must be provided"),
               ({"query": query, "items": items, "label_token_ids": [5, 2048]},
                "Token ID 2048 is out of vocabulary (vocab size: 2048)"),
               ({"query": "text", "items": items, "label_token_ids": labels},
                "Invalid combination of query/items types for score_request."),
               ({"query": query, "items": ["a"], "label_token_ids": labels},
                "Invalid combination of query/items types for score_request.")]
        for body, msg in bad:
            st, o = post(url, "/v1/score", body)
            report(st == 400 and (o or {}).get("message") == msg, f"/v1/score 400 {msg!r} (got {st} {o})")
        st, o = post(url, "/v1/score", {"query": query, "items": [], "label_token_ids": labels})
        report(st == 200 and o.get("scores") == [], "/v1/score empty items -> scores []")
        st, o = post(url, "/v1/rerank", {"query": "a", "documents": ["b"]})
        report(st == 400 and "embedding model" in (o or {}).get("message", ""),
               f"/v1/rerank on a generation model: 400 ({st})")
        st, o = post(url, "/v1/classify", {"input": "a"})
        report(st == 400, f"/v1/classify on a generation model: 400 ({st})")
        return
    d = multi
    comb = list(query)
    for it in items:
        comb += [d] + it
    comb += [d]
    ref = multi_item_ref(m, comb, d, labels)
    # the reference's own check: with a plain causal mask and natural
    # positions, forward_masked is torch_ref's forward
    m.reset()
    lg = torch.log_softmax(m.forward(comb).double(), -1)
    pos = [i for i, t in enumerate(comb) if t == d]
    plain = [[math.exp(float(lg[p - 1][t])) for t in labels] for p in pos[1:]]
    report(worst(multi_item_ref(m, comb, d, labels, sgl=False), plain) < 1e-9,
           "reference: forward_masked with a causal mask = torch_ref's forward")
    # each feature must matter: the mask, and SGLang's positions
    report(worst(plain, ref) > 100 * TOL,
           f"multi-item: plain causal scoring differs from SGLang's pass by {worst(plain, ref):.2g} relative "
           f"(> {100 * TOL:g} needed for the test to bite)")
    alone = [to_scores(next_logprobs(m, query + [d] + it), labels, False) for it in items]
    report(worst(alone, ref) > 100 * TOL,
           f"multi-item: each query+D+item alone (natural positions) differs from SGLang's pass by "
           f"{worst(alone, ref):.2g} relative (> {100 * TOL:g} needed)")
    st, o = post(url, "/v1/score", {"query": query, "items": items, "label_token_ids": labels})
    report(st == 200 and close(o.get("scores"), ref),
           f"/v1/score multi-item ids, one pass: max rel |d| {worst(o.get('scores') if st == 200 else None, ref):.2g} "
           f"(status {st})")
    st, o2 = post(url, "/v1/score", {"query": query, "items": items, "label_token_ids": labels,
                                     "apply_softmax": True})
    sref = [torch.softmax(torch.log(torch.tensor(r, dtype=torch.float64)), 0).tolist() for r in ref]
    report(st == 200 and close(o2.get("scores"), sref), "/v1/score multi-item apply_softmax")
    # text: query D item1 D ... with D's text; the reference splits the
    # server's tokenization of that text at the delimiters
    q, its = "Once upon a time", [" there was a cat", " the sun", " a big red ball"]
    st, t = post(url, "/detokenize", {"tokens": [d], "skip_special_tokens": False})
    dtext = t.get("text", "") if st == 200 else ""
    st, t = post(url, "/tokenize", {"prompt": q + dtext + dtext.join(its) + dtext})
    ids = t["tokens"]
    dp = [i for i, x in enumerate(ids) if x == d]
    tref = multi_item_ref(m, ids, d, labels) if len(dp) == len(its) + 1 else []
    st, o = post(url, "/v1/score", {"query": q, "items": its, "label_token_ids": labels})
    report(len(tref) == len(its) and st == 200 and close(o.get("scores"), tref),
           f"/v1/score multi-item text (delimiter text {dtext!r}): max rel |d| "
           f"{worst(o.get('scores') if st == 200 else None, tref):.2g} (status {st})")
    st, o = post(url, "/v1/score", {"query": query, "items": [[5, d, 6]], "label_token_ids": labels})
    report(st == 500 and "Expected 2 input_token_ids_logprobs" in (o or {}).get("message", ""),
           f"/v1/score multi-item: an item holding the delimiter is refused ({st})")


# ----------------------------------------------------------------------------
# classifiers


def cmd_classify(url, mdir):
    with open(os.path.join(mdir, "config.json")) as f:
        cfg = json.load(f)
    id2label = cfg["id2label"]
    tw = os.path.join(mdir, "twin")
    m = torch_ref.Model(tw, "float32")
    W = torch.from_numpy(np.load(os.path.join(tw, "score.npy"))).double()

    def head(ids):
        m.reset()
        return (m.forward(list(ids), hidden=True)[-1].double() @ W.T)

    def tok(text):
        st, t = post(url, "/tokenize", {"prompt": text})
        return t["tokens"]

    name = cfg["architectures"][0]
    texts = ["The cat sat on the mat.", "A dog ran to the park and played all day long."]
    ids_list = [[1, 40, 99, 7], [1, 1500, 3, 3, 3, 77, 2000]]
    if len(id2label) > 1:
        for inp, refs_ids in ((texts, [tok(t) for t in texts]), (texts[0], [tok(texts[0])]),
                              (ids_list[0], [ids_list[0]]), (ids_list, ids_list)):
            st, o = post(url, "/v1/classify", {"input": inp, "model": "x"})
            ok = st == 200 and len(o.get("data", [])) == len(refs_ids)
            err = 0.0
            for k, ids in enumerate(refs_ids if ok else []):
                lg = head(ids)
                p = torch.softmax(lg, 0).tolist()
                dk = o["data"][k]
                err = max(err, max(abs(a - b) for a, b in zip(dk["probs"], p)))
                ok &= (dk["index"] == k and dk["num_classes"] == len(p) and
                       dk["label"] == id2label[str(int(torch.argmax(lg)))])
            ok &= st == 200 and o.get("object") == "list" and o["id"].startswith("classify-") and \
                o["usage"]["prompt_tokens"] == sum(len(x) for x in refs_ids)
            report(ok and err <= TOL, f"{name} /v1/classify {type(inp).__name__} input: probs max |d| "
                                      f"{err:.2g}, labels, usage (status {st})")
        st, o = post(url, "/classify", {"input": texts[1]})
        report(st == 200 and o["data"][0]["label"] == id2label[str(int(torch.argmax(head(tok(texts[1])))))],
               "/classify (the route without /v1)")
        for body, msg in (({"input": ""}, "Input cannot be empty"), ({"input": []}, "Input cannot be empty"),
                          ({"input": "   "}, "Input cannot be empty or whitespace only"),
                          ({"input": ["a", " "]}, "Input at index 1 cannot be empty or whitespace only"),
                          ({"input": ["a", 3]}, "All items in input list must be strings"),
                          ({"input": [3, "a"]}, "All items in input list must be integers"),
                          ({"input": [3, -1]}, "Token ID at index 1 must be non-negative")):
            st, o = post(url, "/v1/classify", body)
            report(st == 400 and (o or {}).get("message") == msg, f"/v1/classify 400 {msg!r} ({st})")
    q = "Where did the cat sit?"
    docs = ["The cat sat on the mat.", "It rained all day.", "A small cat sat near the window.", "Blue."]
    qi = tok(q)
    sc = []
    for dd in docs:
        st, t = post(url, "/tokenize", {"prompt": dd, "add_special_tokens": False})
        sc.append(float(head(qi + t["tokens"])[0]))
    order = sorted(range(len(docs)), key=lambda i: -sc[i])
    st, o = post(url, "/v1/rerank", {"query": q, "documents": docs})
    ok = st == 200 and isinstance(o, list) and [x["index"] for x in o] == order and \
        all(abs(x["score"] - sc[x["index"]]) <= TOL and x["document"] == docs[x["index"]] and
            x["meta_info"]["prompt_tokens"] > 0 for x in o)
    report(ok, f"{name} /v1/rerank: scores = head[0] of query+document, sorted (status {st})")
    st, o = post(url, "/v1/rerank", {"query": q, "documents": docs, "top_n": 2, "return_documents": False})
    report(st == 200 and [x["index"] for x in o] == order[:2] and all("document" not in x for x in o),
           "/v1/rerank top_n 2, return_documents false")
    for body, msg in (({"query": "", "documents": ["a"]}, "Query cannot be empty"),
                      ({"query": "  ", "documents": ["a"]}, "Query cannot be empty or whitespace only"),
                      ({"query": "q", "documents": []}, "Documents cannot be empty"),
                      ({"query": "q", "documents": ["a", ""]}, "Each document must be a non-empty string"),
                      ({"query": "q", "documents": [" "]}, "Each document cannot be empty or whitespace only"),
                      ({"query": "q", "documents": ["a"], "top_n": 0},
                       "Value error, parameter top_n should be larger than 0.")):
        st, o = post(url, "/v1/rerank", body)
        report(st == 400 and (o or {}).get("message") == msg, f"/v1/rerank 400 {msg!r} ({st})")
    st, o = post(url, "/v1/score", {"query": [1], "items": [[2]], "label_token_ids": [3]})
    report(st == 400, f"/v1/score on a classifier (embedding mode): 400 ({st})")


def cmd_same(url, path, name):
    """The raw scores of a classifier server (/v1/rerank: head[0] of
    query + document, unsorted by index) and its /v1/classify probs, on
    fixed token-id inputs: written to path, or compared with what path
    holds (a one-process server's) within 1e-5 relative (--tp-size /
    --pp-size must give the same numbers as one process)."""
    docs = ["The cat sat on the mat.", "It rained all day.", "A small cat sat near the window.", "Blue."]
    st, o = post(url, "/v1/rerank", {"query": "Where did the cat sit?", "documents": docs})
    got = {"rerank": [x["score"] for x in sorted(o, key=lambda x: x["index"])] if st == 200 else None}
    st2, o2 = post(url, "/v1/classify", {"input": [[1, 40, 99, 7], [1, 1500, 3, 3, 3, 77, 2000]]})
    got["classify"] = [d["probs"] for d in o2["data"]] if st2 == 200 else None
    if not os.path.exists(path):
        ok = got["rerank"] is not None and got["classify"] is not None
        report(ok, f"{name}: reference scores written (status {st}, {st2})")
        if ok:
            with open(path, "w") as f:
                json.dump(got, f)
        return
    with open(path) as f:
        ref = json.load(f)
    for key in ("rerank", "classify"):
        a = np.array(ref[key], dtype=np.float64)
        b = np.array(got[key], dtype=np.float64) if got[key] is not None else None
        e = float(np.max(np.abs(a - b)) / max(float(np.max(np.abs(a))), 1e-30)) \
            if b is not None and a.shape == b.shape else float("inf")
        report(e <= 1e-5, f"{name}: {key} = one process within {e:.3g} relative (tol 1e-5)")


RERANK_TEMPLATE = (
    "<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and the "
    "Instruct provided. Note that the answer can only be \"yes\" or \"no\".<|im_end|>\n<|im_start|>user\n"
    "<Instruct>: {{ instruct | default('Given a web search query, retrieve relevant passages that answer "
    "the query') }}\n<Query>: {{ messages[0]['content'] }}\n<Document>: {{ messages[1]['content'] }}"
    "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n")


def render_rerank(query, doc, instruct=None):
    """RERANK_TEMPLATE rendered by hand (the reference does not use a Jinja
    engine): Jinja drops the template's one trailing newline
    (keep_trailing_newline=False, also in SGLang's jinja2.Environment)."""
    ins = instruct or "Given a web search query, retrieve relevant passages that answer the query"
    return ("<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and "
            "the Instruct provided. Note that the answer can only be \"yes\" or \"no\".<|im_end|>\n"
            f"<|im_start|>user\n<Instruct>: {ins}\n<Query>: {query}\n<Document>: {doc}<|im_end|>\n"
            "<|im_start|>assistant\n<think>\n\n</think>\n")


def cmd_rerank_decoder(url, mdir):
    """A generation model served with a Qwen3-Reranker-style chat template:
    /v1/rerank scores p(yes) / (p(yes) + p(no)) of the next token after each
    rendered [query, document] prompt (SGLang's text_decoder path)."""
    m = torch_ref.Model(mdir, "float32")
    st, t = post(url, "/tokenize", {"prompt": "yes", "add_special_tokens": False})
    yes = t["tokens"]
    st, t = post(url, "/tokenize", {"prompt": "no", "add_special_tokens": False})
    no = t["tokens"]
    report(len(yes) == 1 and len(no) == 1, f"yes/no are single tokens ({yes}, {no})")
    q, docs = "what do cats eat", ["Cats eat fish and mice.", "The stock market fell.", "Dogs bark."]
    for ins in (None, "Find the passage about animals"):
        sc = []
        for d in docs:
            st, t = post(url, "/tokenize", {"prompt": render_rerank(q, d, ins)})
            lp = next_logprobs(m, t["tokens"])
            py, pn = math.exp(float(lp[yes[0]])), math.exp(float(lp[no[0]]))
            sc.append(py / (py + pn))
        order = sorted(range(len(docs)), key=lambda i: -sc[i])
        body = {"query": q, "documents": docs}
        if ins:
            body["instruct"] = ins
        st, o = post(url, "/v1/rerank", body)
        err = max(abs(x["score"] - sc[x["index"]]) for x in o) if st == 200 else float("nan")
        report(st == 200 and [x["index"] for x in o] == order and err <= 1e-4 and
               all(x["document"] == docs[x["index"]] and x["meta_info"] is None for x in o),
               f"decoder reranker (instruct {ins!r}): scores p(yes)/(p(yes)+p(no)) max |d| {err:.2g}, order")


def main():
    a = sys.argv[1:]
    torch.set_num_threads(1)
    if a[0] == "build":
        return build(a[1], a[2])
    if a[0] == "score":
        cmd_score(a[1], a[2], int(a[4]) if len(a) > 4 and a[3] == "--multi" else None)
    elif a[0] == "classify":
        cmd_classify(a[1], a[2])
    elif a[0] == "template":
        with open(a[1], "w") as f:
            f.write(RERANK_TEMPLATE)
        return 0
    elif a[0] == "rerank-decoder":
        cmd_rerank_decoder(a[1], a[2])
    elif a[0] == "same":
        cmd_same(a[1], a[2], a[3])
    if FAIL:
        print(f"{len(FAIL)} check(s) failed")
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
