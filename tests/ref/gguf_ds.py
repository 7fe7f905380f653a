#!/usr/bin/python3
"""GGUF for DeepSeek V2 / V3 (llama.cpp's general.architecture "deepseek2"):
an independent check of what `sglc quantize` writes, and the round trip
HF -> GGUF -> sglc against the safetensors run and the PyTorch reference.

DESIGN
  The layout expected here is written out from llama.cpp's converter
  (conversion/deepseek.py DeepseekV2Model, conversion/base.py TextModel
  .set_gguf_parameters, gguf-py constants.py), not from sglc's tables:
    - names: attn_q (q_lora_rank null) or attn_q_a / attn_q_a_norm /
      attn_q_b, attn_kv_a_mqa, attn_kv_a_norm, attn_output, attn_norm,
      ffn_norm, dense ffn_{gate,up,down}, router ffn_gate_inp,
      exp_probs_b.bias (V3's e_score_correction_bias), experts stacked in
      ffn_{gate,up,down}_exps, shared experts ffn_{gate,up,down}_shexp;
      no q/k rope permutation;
    - kv_b_proj split: attn_k_b ne [nope, kvr, n_head] = per head the k
      rows transposed, attn_v_b ne [kvr, v, n_head] = the v rows; no
      attn_kv_b;
    - keys: head_count_kv 1, key_length kvr + rope, value_length kvr,
      key_length_mla nope + rope, value_length_mla v, kv_lora_rank,
      q_lora_rank only when set, rope.dimension_count = qk_rope_head_dim,
      leading_dense_block_count, expert_{count, used_count,
      feed_forward_length, shared_count, weights_scale, gating_func (1
      softmax / 2 sigmoid), group_count, group_used_count},
      expert_weights_norm only when true, yarn type / factor / original
      context / beta fast & slow / yarn_log_multiplier = 0.1 mscale_all_dim;
      integers as u32, floats as f32, the norm flag as bool.
  legacy: the same file in the form converters wrote before llama.cpp
  PR 12801 (one attn_kv_b per layer, key_length / value_length = the
  per-head nope + rope / v, no *_mla keys, head_count_kv = n_head), made
  here from the split file's bytes: both forms hold the same weights.
  drop: the file without one tensor (a clear-error check).
  dequant-hf: the file's values (quantized types decoded by gguf_quants.py,
  kv_b_proj rebuilt from the halves) as an F32 safetensors folder.

Usage: gguf_ds.py run [--sglc BIN] [--cache DIR] [--only a,b]   (the test)
       gguf_ds.py check MODEL_DIR FILE.gguf
       gguf_ds.py legacy IN.gguf OUT.gguf | drop IN.gguf OUT.gguf TENSOR
       gguf_ds.py dequant-hf MODEL_DIR FILE.gguf OUT_DIR
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tools"))
import safetensors_np  # noqa: E402
import gguf_np  # noqa: E402

U32, F32T, BOOL, STR, ARR = 4, 6, 7, 8, 9
_SIZE = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


# ---- a GGUF file with its raw pieces, and a writer -------------------------

class Raw:
    """kv: ordered {key: (type, raw value bytes)}; tensors: ordered
    {name: (ne, ggml type, raw data bytes)}; value(key) decodes."""

    def __init__(self, path):
        b = open(path, "rb").read()
        assert b[:4] == b"GGUF"
        self.version = struct.unpack_from("<I", b, 4)[0]
        nt, nkv = struct.unpack_from("<QQ", b, 8)
        p = 24
        self.kv = {}

        def skip(t, p):
            if t == STR:
                return p + 8 + struct.unpack_from("<Q", b, p)[0]
            if t == ARR:
                et, n = struct.unpack_from("<IQ", b, p)
                p += 12
                for _ in range(n):
                    p = skip(et, p)
                return p
            return p + _SIZE[t]
        for _ in range(nkv):
            n = struct.unpack_from("<Q", b, p)[0]
            k = b[p + 8:p + 8 + n].decode()
            p += 8 + n
            t = struct.unpack_from("<I", b, p)[0]
            q = skip(t, p + 4)
            self.kv[k] = (t, b[p + 4:q])
            p = q
        infos = []
        for _ in range(nt):
            n = struct.unpack_from("<Q", b, p)[0]
            name = b[p + 8:p + 8 + n].decode()
            p += 8 + n
            nd = struct.unpack_from("<I", b, p)[0]
            ne = list(struct.unpack_from(f"<{nd}Q", b, p + 4))
            p += 4 + 8 * nd
            ty, off = struct.unpack_from("<IQ", b, p)
            p += 12
            infos.append((name, ne, ty, off))
        align = self.value("general.alignment") if "general.alignment" in self.kv else 32
        data = (p + align - 1) // align * align
        self.tensors = {}
        for name, ne, ty, off in infos:
            self.tensors[name] = (ne, ty, b[data + off:data + off + nbytes(ty, ne)])

    def value(self, k):
        t, raw = self.kv[k]
        if t == STR:
            return raw[8:].decode()
        if t == ARR:
            return "<array>"
        return struct.unpack("<" + {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?",
                                    10: "Q", 11: "q", 12: "d"}[t], raw)[0]

    def set(self, k, t, v):
        fmt = {U32: "<I", F32T: "<f", BOOL: "<?"}[t]
        self.kv[k] = (t, struct.pack(fmt, v))

    def write(self, path):
        out = [b"GGUF", struct.pack("<IQQ", 3, len(self.tensors), len(self.kv))]
        for k, (t, raw) in self.kv.items():
            kb = k.encode()
            out += [struct.pack("<Q", len(kb)), kb, struct.pack("<I", t), raw]
        off = 0
        for name, (ne, ty, data) in self.tensors.items():
            nb = name.encode()
            out += [struct.pack("<Q", len(nb)), nb, struct.pack("<I", len(ne)), struct.pack(f"<{len(ne)}Q", *ne),
                    struct.pack("<IQ", ty, off)]
            off += (len(data) + 31) // 32 * 32
        head = b"".join(out)
        body = [head, b"\0" * ((-len(head)) % 32)]
        for _, (_, _, data) in self.tensors.items():
            body += [data, b"\0" * ((-len(data)) % 32)]
        with open(path, "wb") as f:
            f.write(b"".join(body))


def nbytes(ty, ne):
    n = int(np.prod(ne))
    if ty in (0,):
        return 4 * n
    if ty in (1, 30):
        return 2 * n
    import gguf_quants
    bs, nb = gguf_quants.TYPES[gguf_np._QNAMES[ty]][:2]
    return n // bs * nb


# ---- what llama.cpp's converter writes -------------------------------------

ATTN = {"self_attn.q_proj": "attn_q", "self_attn.q_a_proj": "attn_q_a", "self_attn.q_a_layernorm": "attn_q_a_norm",
        "self_attn.q_b_proj": "attn_q_b", "self_attn.kv_a_proj_with_mqa": "attn_kv_a_mqa",
        "self_attn.kv_a_layernorm": "attn_kv_a_norm", "self_attn.o_proj": "attn_output",
        "input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm",
        "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down",
        "mlp.gate": "ffn_gate_inp", "mlp.shared_experts.gate_proj": "ffn_gate_shexp",
        "mlp.shared_experts.up_proj": "ffn_up_shexp", "mlp.shared_experts.down_proj": "ffn_down_shexp"}


def gguf_names(n):
    """(GGUF names, expert index or None) the converter gives HF tensor n (two for kv_b_proj)."""
    p = n.split(".")
    if n == "model.embed_tokens.weight":
        return ["token_embd.weight"], None
    if n == "lm_head.weight":
        return ["output.weight"], None
    if n == "model.norm.weight":
        return ["output_norm.weight"], None
    if n.endswith("mlp.gate.e_score_correction_bias"):
        return [f"blk.{p[2]}.exp_probs_b.bias"], None
    if ".mlp.experts." in n:
        return [f"blk.{p[2]}.ffn_{p[6].split('_')[0]}_exps.weight"], int(p[5])
    if n.endswith("self_attn.kv_b_proj.weight"):
        return [f"blk.{p[2]}.attn_k_b.weight", f"blk.{p[2]}.attn_v_b.weight"], None
    return [f"blk.{p[2]}.{ATTN['.'.join(p[3:-1])]}.{p[-1]}"], None


def expected_tensors(cfg, hf):
    """{gguf name: f32 array (numpy shape = ne reversed)} the converter writes."""
    nh, nope = cfg["num_attention_heads"], cfg["qk_nope_head_dim"]
    want, stacks = {}, {}
    for n, w in hf.items():
        w = np.asarray(w, np.float32)
        gns, e = gguf_names(n)
        if n == "lm_head.weight" and cfg.get("tie_word_embeddings", False):
            continue
        if e is not None:
            stacks.setdefault(gns[0], {})[e] = w
        elif len(gns) == 2:  # kv_b_proj: per head [k (nope) | v] rows
            kvb = w.reshape(nh, -1, w.shape[1])
            want[gns[0]] = np.ascontiguousarray(kvb[:, :nope, :].transpose(0, 2, 1))
            want[gns[1]] = np.ascontiguousarray(kvb[:, nope:, :])
        else:
            want[gns[0]] = w
    for gn, d in stacks.items():
        want[gn] = np.stack([d[e] for e in range(len(d))])
    return want


def expected_keys(cfg):
    """{key: (gguf type, value)} of the deepseek2 hyper-parameters."""
    A = "deepseek2."
    rope, kvr = cfg["qk_rope_head_dim"], cfg["kv_lora_rank"]
    v3 = cfg["architectures"][0] == "DeepseekV3ForCausalLM"
    norm = bool(cfg.get("norm_topk_prob")) and cfg.get("num_experts_per_tok", 1) > 1
    scale = cfg.get("routed_scaling_factor", 1.0)
    if not v3 and norm:
        scale = 1.0  # HF's V2 does not scale normalized weights; llama.cpp applies the key always
    k = {"block_count": (U32, cfg["num_hidden_layers"]), "context_length": (U32, cfg["max_position_embeddings"]),
         "embedding_length": (U32, cfg["hidden_size"]), "feed_forward_length": (U32, cfg["intermediate_size"]),
         "attention.head_count": (U32, cfg["num_attention_heads"]), "attention.head_count_kv": (U32, 1),
         "attention.key_length": (U32, kvr + rope), "attention.value_length": (U32, kvr),
         "attention.key_length_mla": (U32, cfg["qk_nope_head_dim"] + rope),
         "attention.value_length_mla": (U32, cfg["v_head_dim"]), "attention.kv_lora_rank": (U32, kvr),
         "attention.layer_norm_rms_epsilon": (F32T, cfg.get("rms_norm_eps", 1e-6)),
         "rope.dimension_count": (U32, rope), "rope.freq_base": (F32T, cfg.get("rope_theta", 10000.0)),
         "leading_dense_block_count": (U32, cfg.get("first_k_dense_replace", 0)),
         "vocab_size": (U32, cfg["vocab_size"]),
         "expert_count": (U32, cfg["n_routed_experts"]), "expert_used_count": (U32, cfg["num_experts_per_tok"]),
         "expert_feed_forward_length": (U32, cfg["moe_intermediate_size"]),
         "expert_shared_count": (U32, cfg.get("n_shared_experts") or 0),
         "expert_weights_scale": (F32T, scale),
         "expert_gating_func": (U32, 2 if cfg.get("scoring_func") == "sigmoid" else 1),
         "expert_group_count": (U32, cfg.get("n_group", 1)), "expert_group_used_count": (U32, cfg.get("topk_group", 1))}
    if cfg.get("q_lora_rank"):
        k["attention.q_lora_rank"] = (U32, cfg["q_lora_rank"])
    if norm:
        k["expert_weights_norm"] = (BOOL, True)
    rs = cfg.get("rope_scaling") or {}
    if rs.get("type", rs.get("rope_type")) == "yarn":
        k["rope.scaling.type"] = (STR, "yarn")
        k["rope.scaling.factor"] = (F32T, rs["factor"])
        k["rope.scaling.original_context_length"] = (U32, rs["original_max_position_embeddings"])
        for hk, gk in (("beta_fast", "yarn_beta_fast"), ("beta_slow", "yarn_beta_slow")):
            if hk in rs:
                k["rope.scaling." + gk] = (F32T, rs[hk])
        if "mscale_all_dim" in rs:
            k["rope.scaling.yarn_log_multiplier"] = (F32T, 0.1 * rs["mscale_all_dim"])
    return {A + key: val for key, val in k.items()}


def check(model_dir, path):
    """None if FILE (F32, written from MODEL_DIR) is what the converter writes, else the difference."""
    cfg = json.load(open(os.path.join(model_dir, "config.json")))
    hf, _ = safetensors_np.read(os.path.join(model_dir, "model.safetensors"))
    g = Raw(path)
    if g.value("general.architecture") != "deepseek2":
        return f"general.architecture {g.value('general.architecture')!r}", None
    want = expected_tensors(cfg, hf)
    if set(want) != set(g.tensors):
        return f"tensor names differ: {sorted(set(want) ^ set(g.tensors))[:6]}", None
    for gn, w in want.items():
        ne, ty, data = g.tensors[gn]
        if ty != 0:
            return f"{gn}: type {ty}, the check wants an F32 file", None
        if list(reversed(ne)) != list(w.shape):
            return f"{gn}: ne {ne}, want {list(reversed(w.shape))}", None
        got = np.frombuffer(data, "<f4").reshape(w.shape)
        if not np.array_equal(got, w):
            return f"{gn}: values differ (max |d| {np.abs(got - w).max():.3g})", None
    keys = expected_keys(cfg)
    for k, (t, v) in keys.items():
        if k not in g.kv:
            return f"key {k} missing", None
        if g.kv[k][0] != t:
            return f"key {k}: GGUF type {g.kv[k][0]}, want {t}", None
        got = g.value(k)
        if (t == F32T and abs(got - v) > 1e-6 * max(1.0, abs(v))) or (t != F32T and got != v):
            return f"key {k} = {got!r}, config.json gives {v!r}", None
    extra = [k for k in g.kv if k.startswith("deepseek2.") and k not in keys]
    if extra:
        return f"keys llama.cpp's converter does not write: {extra}", None
    n_split = sum(1 for n in want if n.endswith("_b.weight"))
    return None, (f"{len(want)} tensors under llama.cpp's names with their values ({n_split} attn_k_b / "
                  f"attn_v_b halves of kv_b_proj, no attn_kv_b), {len(keys)} deepseek2 keys with their types")


def legacy(src, dst):
    """The split file rewritten in the pre-PR-12801 form (attn_kv_b; see DESIGN)."""
    g = Raw(src)
    nh = g.value("deepseek2.attention.head_count")
    rope = g.value("deepseek2.rope.dimension_count")
    kl, vl = g.value("deepseek2.attention.key_length_mla"), g.value("deepseek2.attention.value_length_mla")
    nope = kl - rope
    out = {}
    for name, (ne, ty, data) in g.tensors.items():
        if name.endswith(".attn_v_b.weight"):
            continue
        if name.endswith(".attn_k_b.weight"):
            il = name.split(".")[1]
            kb = dequant_raw(g, name)                       # (nh, kvr, nope)
            vb = dequant_raw(g, f"blk.{il}.attn_v_b.weight")  # (nh, v, kvr)
            kvb = np.concatenate([kb.transpose(0, 2, 1), vb], axis=1).reshape(nh * (nope + vl), -1)
            out[f"blk.{il}.attn_kv_b.weight"] = ([kvb.shape[1], kvb.shape[0]], 0,
                                                  np.ascontiguousarray(kvb, "<f4").tobytes())
            continue
        out[name] = (ne, ty, data)
    g.tensors = out
    del g.kv["deepseek2.attention.key_length_mla"], g.kv["deepseek2.attention.value_length_mla"]
    g.set("deepseek2.attention.key_length", U32, kl)
    g.set("deepseek2.attention.value_length", U32, vl)
    g.set("deepseek2.attention.head_count_kv", U32, nh)
    g.write(dst)


def dequant_raw(g, name):
    ne, ty, data = g.tensors[name]
    shape = list(reversed(ne))
    if ty == 0:
        return np.frombuffer(data, "<f4").reshape(shape).astype(np.float32)
    if ty == 1:
        return np.frombuffer(data, "<f2").astype(np.float32).reshape(shape)
    if ty == 30:
        return safetensors_np.bf16_bits_to_f32(np.frombuffer(data, "<u2")).reshape(shape)
    import gguf_quants
    return gguf_quants.dequantize(gguf_np._QNAMES[ty], data).reshape(shape)


def drop(src, dst, tensor):
    g = Raw(src)
    del g.tensors[tensor]
    g.write(dst)


def dequant_hf(model_dir, path, out):
    """The file's values under the HF names, as an F32 folder (what sglc must compute from it)."""
    cfg = json.load(open(os.path.join(model_dir, "config.json")))
    hf, _ = safetensors_np.read(os.path.join(model_dir, "model.safetensors"))
    g = Raw(path)
    nh, nope = cfg["num_attention_heads"], cfg["qk_nope_head_dim"]
    res, types, cache = {}, {}, {}

    def get(gn):
        if gn not in cache:
            cache[gn] = dequant_raw(g, gn)
            types[g.tensors[gn][1]] = types.get(g.tensors[gn][1], 0) + 1
        return cache[gn]
    for n in hf:
        gns, e = gguf_names(n)
        if n == "lm_head.weight" and gns[0] not in g.tensors:
            gns = ["token_embd.weight"]
        if len(gns) == 2:
            kb, vb = get(gns[0]), get(gns[1])
            res[n] = np.concatenate([kb.transpose(0, 2, 1), vb], axis=1).reshape(nh * (nope + cfg["v_head_dim"]), -1)
        else:
            res[n] = get(gns[0]) if e is None else get(gns[0])[e]
    os.makedirs(out, exist_ok=True)
    safetensors_np.write(os.path.join(out, "model.safetensors"),
                         {k: np.ascontiguousarray(v, np.float32) for k, v in res.items()})
    cfg["torch_dtype"] = "float32"
    json.dump(cfg, open(os.path.join(out, "config.json"), "w"))
    return ", ".join(f"{gguf_np._QNAMES.get(t, {0: 'f32', 1: 'f16', 30: 'bf16'}.get(t, t))} x{c}"
                     for t, c in sorted(types.items()))


# ---- the test ---------------------------------------------------------------

def run(argv):
    import argparse
    import torch
    import ds_ref
    import golden
    import make_tiny_ds
    ap = argparse.ArgumentParser()
    ap.add_argument("--sglc", default=os.environ.get("SGLC_BIN", os.path.join(ROOT, "build", "sglc")))
    ap.add_argument("--cache", default=os.path.join(ROOT, "build", "tiny-models"))
    ap.add_argument("--shared", default=os.environ.get("SGLC_SHARED", os.path.join(ROOT, "..", "shared")))
    ap.add_argument("--only")
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    report, rel = golden.report, golden.rel_err
    names = a.only.split(",") if a.only else ["deepseek-v2-lite", "deepseek-v2", "deepseek-v3"]
    n_prompt, n_new = 64, 32
    td = tempfile.mkdtemp(prefix="gguf_ds.")

    def quantize(md, out, *args):
        p = subprocess.run([a.sglc, "quantize", "--model-path", md, "--output", out] + list(args),
                           capture_output=True, text=True, timeout=600)
        if p.returncode:
            raise golden.SglcError(f"quantize {' '.join(args)}: {p.stderr.strip()[-400:]}")

    def sglc(md, n=n_new, env=None, dtype="float32"):
        old = dict(os.environ)
        os.environ.update(env or {})
        try:
            ids, lg = golden.run_sglc(a.sglc, md, prompt, n, dtype)
        finally:
            os.environ.clear()
            os.environ.update(old)
        return ids, lg.reshape(n_prompt, -1)

    def moe_bound(tag, got, want):
        """test_gguf.sh's in-place bound for MoE models: median per-position
        max|d| / max|logit| <= 0.1 and >= 80% of the argmaxes equal."""
        e = np.abs(got - want).max(1) / np.abs(want).max(1)
        agree = float((got.argmax(1) == want.argmax(1)).mean())
        report(np.median(e) <= 0.1 and agree >= 0.8,
               f"{tag}: per position max|d|/max|logit| median {np.median(e):.3g} (max {e.max():.3g}), "
               f"argmax agree {100 * agree:.0f}% (bound: median <= 0.1, >= 80%)")

    for name in names:
        d, _ = make_tiny_ds.build(name, a.cache)
        f32, bf16 = os.path.join(d, "f32"), os.path.join(d, "bf16")
        prompt = [int(x) for x in np.random.RandomState(1234).randint(3, make_tiny_ds.VOCAB, size=n_prompt)]
        ref_lg, ref_ids = ds_ref.DSModel(f32, "float32").generate(prompt, n_new)

        def go():
            hf_ids, hf_lg = sglc(f32)
            base = os.path.join(td, name)
            for v, args in (("F32", ["--type", "F32"]), ("F32 --plain", ["--type", "F32", "--plain"])):
                g = base + ("-plain" if "plain" in v else "") + ".gguf"
                quantize(f32, g, *args)
                ids, lg = sglc(g)
                e, er = rel(lg, hf_lg), rel(lg, ref_lg)
                report(e <= 1e-4 and er <= 1e-4 and ids == hf_ids,
                       f"{name} {v}: logits vs the safetensors run {e:.3g}, vs the PyTorch reference {er:.3g} "
                       f"(tol 1e-4), 32 greedy ids {'identical' if ids == hf_ids else 'differ'}")
            err, summary = check(f32, base + "-plain.gguf")
            report(err is None, f"{name} F32 --plain layout: " + (err or summary))
            # the older attn_kv_b form of the same weights
            legacy(base + "-plain.gguf", base + "-legacy.gguf")
            ids, lg = sglc(base + "-legacy.gguf")
            e = rel(lg, hf_lg)
            report(e <= 1e-4 and ids == hf_ids, f"{name} legacy attn_kv_b form (no *_mla keys): logits {e:.3g} "
                   f"vs the safetensors run, ids {'identical' if ids == hf_ids else 'differ'}")
            # BF16 / Q8_0 / Q4_K_M: the file's values decoded independently
            # (norms, router and correction bias stay F32, so a BF16 file is
            # not the bf16 folder); sglc from the file == sglc from that
            # folder == the PyTorch reference on it, and in place (int8
            # activations for the block types) within test_gguf.sh's bound
            for ty in ("BF16", "Q8_0", "Q4_K_M"):
                g, deq = f"{base}-{ty}.gguf", f"{base}-{ty}-deq"
                quantize(f32, g, "--type", ty, "--plain")
                types = dequant_hf(f32, g, deq)
                _, lg_d = sglc(g, 1, {"SGLC_GGUF_DEQUANT": "1"})
                _, lg_f = sglc(deq, 1)
                rq = ds_ref.DSModel(deq, "float32").generate(prompt, 1)[0]
                e1, e2 = rel(lg_d, lg_f), rel(lg_d, rq)
                report(e1 <= 1e-6 and e2 <= 1e-4,
                       f"{name} {ty} ({types}) dequantized: logits vs sglc on the decoded folder {e1:.3g}, "
                       f"vs the PyTorch reference on the decoded weights {e2:.3g} (tol 1e-6 / 1e-4)")
                if ty == "BF16":
                    continue
                _, lg_q = sglc(g, 1)
                moe_bound(f"{name} {ty} in place (int8 activations) vs the decoded weights", lg_q, rq)
            # a file missing a tensor the model needs: a clear error naming it
            for t in ("blk.1.attn_kv_a_mqa.weight", "blk.1.attn_v_b.weight"):
                drop(base + "-plain.gguf", base + "-drop.gguf", t)
                p = subprocess.run([a.sglc, "generate", "--model-path", base + "-drop.gguf", "--input-ids", "3,4,5",
                                    "--max-new-tokens", "1", "--dtype", "float32"],
                                   capture_output=True, text=True, timeout=120)
                short = t.split(".")[2]
                report(p.returncode != 0 and short in p.stderr,
                       f"{name} without {t}: " + (f"refused: {p.stderr.strip().splitlines()[-1][:160]}"
                                                  if p.returncode else "loaded anyway"))
        golden.guard(name, go)
    # the real vocabulary and DeepSeek V3's tokenizer through the file alone
    tokdir = os.path.join(a.shared, "models", "tokenizers", "deepseek_v3")
    if os.path.exists(os.path.join(tokdir, "tokenizer.json")) and (not a.only or "deepseek-v3-tok" in a.only):
        def tok():
            d, _ = make_tiny_ds.build("deepseek-v3-tok", a.cache, a.shared)
            md, g = os.path.join(d, "f32"), os.path.join(td, "tok.gguf")
            quantize(md, g, "--type", "Q8_0", "--plain")
            text = "DeepSeek-V3 caches one 576-value latent row per token: 你好, MLA! 12345"
            outs = []
            for m in (md, g):
                p = subprocess.run([a.sglc, "generate", "--model-path", m, "--prompt", text, "--max-new-tokens", "6",
                                    "--temperature", "0", "--json", "--ignore-eos", "--dtype", "float32"],
                                   capture_output=True, text=True, timeout=300)
                if p.returncode:
                    raise golden.SglcError(p.stderr.strip()[-300:])
                outs.append(json.loads(p.stdout.strip().splitlines()[-1]))
            enc = []
            for m in (md, g):
                p = subprocess.run([a.sglc, "tokenize", "--tokenizer-path", m], capture_output=True, text=True,
                                   input=json.dumps({"text": text, "add_special_tokens": True}) + "\n", timeout=120)
                enc.append(json.loads(p.stdout)["ids"] if p.returncode == 0 else None)
            report(enc[0] is not None and enc[0] == enc[1],
                   f"deepseek-v3-tok: the GGUF's tokenizer.ggml.* encodes the prompt as tokenizer.json does "
                   f"({len(enc[0] or [])} ids)")
            report(outs[0]["meta_info"].get("prompt_tokens") == outs[1]["meta_info"].get("prompt_tokens")
                   and isinstance(outs[1].get("text"), str),
                   f"deepseek-v3-tok Q8_0 file alone: prompt of {outs[1]['meta_info'].get('prompt_tokens')} tokens, "
                   f"text {outs[1].get('text', '')[:30]!r}")
        golden.guard("deepseek-v3-tok", tok)
    subprocess.run(["rm", "-rf", td])
    print(("PASS" if not golden.failures else f"FAIL ({len(golden.failures)})") + ": gguf_deepseek")
    return 1 if golden.failures else 0


if __name__ == "__main__":
    cmd = sys.argv[1] if len(sys.argv) > 1 else ""
    if cmd == "run":
        sys.exit(run(sys.argv[2:]))
    if cmd == "check" and len(sys.argv) == 4:
        err, summary = check(sys.argv[2], sys.argv[3])
        print(err or summary)
        sys.exit(1 if err else 0)
    if cmd == "legacy" and len(sys.argv) == 4:
        sys.exit(legacy(sys.argv[2], sys.argv[3]))
    if cmd == "drop" and len(sys.argv) == 5:
        sys.exit(drop(*sys.argv[2:]))
    if cmd == "dequant-hf" and len(sys.argv) == 5:
        print(dequant_hf(*sys.argv[2:]))
        sys.exit(0)
    print(__doc__.split("Usage:")[1].strip())
    sys.exit(2)
