#!/usr/bin/python3
"""A tiny random-weight Qwen3 with the REAL Qwen3 tokenizer (151,669 tokens,
byte-level BPE, the real chat template), for tests whose outputs must be
able to spell anything (JSON, regexes): the trained TinyStories vocabulary
has no '{'.  Built with tests/ref/make_tiny_model.py's config shrink and
seeded weights, vocabulary widened to Qwen3's 151,936 rows, BF16, tied
embeddings; eos = <|im_end|>.  Cached by a stamp of this file and the
generator.

usage: make_tiny_tok_model.py OUT_DIR SHARED_DIR    (prints the model folder)
"""
import hashlib
import json
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "ref"))
import make_tiny_model as mtm  # noqa: E402

out, shared = sys.argv[1], sys.argv[2]
d = os.path.join(out, "qwen3-tok")
tokdir = os.path.join(shared, "models", "tokenizers", "qwen3")
base = json.load(open(os.path.join(shared, "models", "configs", "Qwen__Qwen3-0.6B", "config.json")))
mtm.VOCAB = 151936
_, overrides, _ = mtm.SPECS["qwen3"]
cfg = mtm.tiny_config(base, overrides)
cfg["bos_token_id"] = None
cfg["eos_token_id"] = 151645
cfg["tie_word_embeddings"] = True
me = b"".join(open(p, "rb").read() for p in (__file__, mtm.__file__))
stamp = hashlib.sha256(me + json.dumps(cfg, sort_keys=True).encode()).hexdigest()
sp = os.path.join(d, "stamp")
if not (os.path.exists(sp) and open(sp).read().strip() == stamp):
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    w = mtm.make_weights("qwen3-tok", cfg)
    mtm.safetensors_np.write(os.path.join(d, "model.safetensors"), w, dtype="BF16", metadata={"format": "pt"})
    json.dump(dict(cfg, torch_dtype="bfloat16"), open(os.path.join(d, "config.json"), "w"), indent=2)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(tokdir, f), d)
    open(sp, "w").write(stamp + "\n")
print(d)
