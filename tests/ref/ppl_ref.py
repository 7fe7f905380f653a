#!/usr/bin/python3
"""Independent perplexity of a token sequence, llama.cpp's method, on the
PyTorch reference forward (tests/ref/torch_ref.py).

DESIGN
  Written from llama.cpp's description of llama-perplexity, not from sglc:
  the ids (the whole file tokenized with BOS first) are cut into
  len(ids) // ctx windows of ctx tokens; each window is run from an empty
  KV cache at positions 0..ctx-1 with its first token replaced by BOS
  (--bos, -1 keeps it); the logits at positions ctx//2 .. ctx-2 score the
  next token with -log_softmax (float64); ppl = exp(mean).  Needs at
  least 2 * ctx ids, as llama.cpp does.

CLI
  ppl_ref.py --model-path DIR --ids FILE [--ctx-size 256] [--bos 1]
             [--chunks N] [--compute float32|float64]
  FILE holds {"ids": [...]} (the output line of `sglc tokenize`).
  Prints {"tokens", "chunks", "tokens_scored", "nll_mean", "ppl"} as JSON.
"""
import argparse
import json
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_ref  # noqa: E402


def perplexity(model, ids, ctx, bos, chunks=-1):
    if len(ids) < 2 * ctx:
        raise torch_ref.RefError(f"{len(ids)} ids; a context of {ctx} needs at least {2 * ctx}")
    n_chunk = len(ids) // ctx
    if chunks >= 0:
        n_chunk = min(n_chunk, chunks)
    first = ctx // 2
    total, count = 0.0, 0
    for c in range(n_chunk):
        w = list(ids[c * ctx:(c + 1) * ctx])
        if bos >= 0:
            w[0] = bos
        model.reset()
        logits = model.forward(w).double()                 # (ctx, vocab)
        lp = torch.log_softmax(logits[first:ctx - 1], dim=-1)
        tgt = torch.tensor(ids[c * ctx + first + 1:(c + 1) * ctx], dtype=torch.long)
        total += float(-lp.gather(1, tgt[:, None]).sum())
        count += ctx - 1 - first
    mean = total / count
    return {"tokens": len(ids), "chunks": n_chunk, "tokens_scored": count, "nll_mean": mean,
            "ppl": math.exp(mean)}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model-path", required=True)
    ap.add_argument("--ids", required=True, help='JSON file {"ids": [...]}')
    ap.add_argument("--ctx-size", type=int, default=256)
    ap.add_argument("--bos", type=int, default=None, help="BOS id (default: config bos_token_id)")
    ap.add_argument("--chunks", type=int, default=-1)
    ap.add_argument("--compute", choices=["float32", "float64"], default="float64")
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args(argv)
    try:
        torch.set_num_threads(a.threads)
        with open(a.ids) as f:
            ids = json.load(f)["ids"]
        m = torch_ref.Model(a.model_path, "float32", a.compute)
        bos = a.bos
        if bos is None:
            with open(os.path.join(a.model_path, "config.json")) as f:
                b = json.load(f).get("bos_token_id")
            bos = b if isinstance(b, int) else -1
        print(json.dumps(perplexity(m, ids, a.ctx_size, bos, a.chunks)))
    except (torch_ref.RefError, OSError, KeyError, json.JSONDecodeError) as e:
        print(f"ppl_ref: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
