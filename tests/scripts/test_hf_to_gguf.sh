#!/usr/bin/env bash
# test_hf_to_gguf.sh — tools/hf_to_gguf.py (the converter behind
# bench/side_by_side_llamacpp.sh) checked against its inputs and, when a
# llama.cpp build is at hand, against llama.cpp itself.
#
# DESIGN
#   Needs llama.cpp's gguf-py ($LLAMA_CPP_DIR, default $ROOT/../llama.cpp);
#   without it: skip (77).  Converts TinyStories-656K (F32, tied, only
#   lm_head stored) to F32 and BF16 GGUF in a temp dir, then, in an
#   independent reader (gguf-py's GGUFReader + tools/safetensors_np.py):
#     - every tensor is present with the right GGUF shape and type (norms F32);
#     - token_embd == the checkpoint's lm_head; attn_v / ffn_* / norms equal
#       their sources; attn_q / attn_k are the source rows reordered per head
#       as out[2i] = in[i], out[2i+1] = in[i + d/2] (written out with explicit
#       indices here, not with the converter's reshape);
#     - BF16 file: bits = round-to-nearest-even of the F32 weights;
#     - tokenizer: 2048 tokens equal tokenizer.json's vocabulary, bos 1,
#       eos 2, model "llama", merged tokens scored by merge rank.
#   If $LLAMA_CPP_DIR/build/bin/llama-server exists: serves the F32 file and
#   checks that greedy decoding from BOS gives the model card's text ("Once
#   upon a time, there was a little girl named Lily. She had a toy car"),
#   i.e. the q/k permutation and rope match what llama.cpp expects.
set -u
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
SHARED="${SGLC_SHARED:-$ROOT/../shared}"
LLAMA_CPP_DIR="${LLAMA_CPP_DIR:-$ROOT/../llama.cpp}"
PY=/usr/bin/python3
TINY="$SHARED/models/TinyStories-656K"

if [ ! -d "$LLAMA_CPP_DIR/gguf-py/gguf" ]; then
    echo "skip: no llama.cpp gguf-py at $LLAMA_CPP_DIR (set LLAMA_CPP_DIR)"
    exit 77
fi
[ -f "$TINY/model.safetensors" ] || { echo "skip: $TINY missing"; exit 77; }

TMP="$(mktemp -d)"
SPID=""
cleanup() { [ -n "$SPID" ] && kill "$SPID" 2>/dev/null && wait "$SPID" 2>/dev/null; rm -rf "$TMP"; }
trap cleanup EXIT

fail() { echo "FAIL: $*"; exit 1; }

for t in f32 bf16; do
    LLAMA_CPP_DIR="$LLAMA_CPP_DIR" "$PY" "$ROOT/tools/hf_to_gguf.py" "$TINY" "$TMP/tiny-$t.gguf" \
        --outtype "$t" > "$TMP/conv-$t.log" 2>&1 || { cat "$TMP/conv-$t.log"; fail "convert $t"; }
done

# bad input: a folder without config.json -> clear error, no traceback
mkdir -p "$TMP/empty"
if LLAMA_CPP_DIR="$LLAMA_CPP_DIR" "$PY" "$ROOT/tools/hf_to_gguf.py" "$TMP/empty" "$TMP/x.gguf" \
        > "$TMP/bad.log" 2>&1; then
    fail "converting an empty folder succeeded"
fi
grep -q "config.json" "$TMP/bad.log" || { cat "$TMP/bad.log"; fail "no clear error for a missing config.json"; }
grep -q "Traceback" "$TMP/bad.log" && { cat "$TMP/bad.log"; fail "traceback instead of an error"; }

"$PY" - "$LLAMA_CPP_DIR/gguf-py" "$ROOT/tools" "$TINY" "$TMP" <<'EOF' || fail "GGUF content"
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1]); sys.path.insert(0, sys.argv[2])
import gguf, safetensors_np
tiny, tmp = sys.argv[3], sys.argv[4]
src, _ = safetensors_np.read(tiny + "/model.safetensors")
cfg = json.load(open(tiny + "/config.json"))
H, NH, KV, L = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["num_hidden_layers"]
D = H // NH

def interleave(w, heads):
    out = np.empty_like(w)
    for h in range(heads):
        for i in range(D // 2):
            out[h * D + 2 * i] = w[h * D + i]
            out[h * D + 2 * i + 1] = w[h * D + D // 2 + i]
    return out

want = {"token_embd.weight": src["lm_head.weight"], "output_norm.weight": src["model.norm.weight"]}
for i in range(L):
    p, b = f"model.layers.{i}.", f"blk.{i}."
    want[b + "attn_norm.weight"] = src[p + "input_layernorm.weight"]
    want[b + "ffn_norm.weight"] = src[p + "post_attention_layernorm.weight"]
    want[b + "attn_q.weight"] = interleave(src[p + "self_attn.q_proj.weight"], NH)
    want[b + "attn_k.weight"] = interleave(src[p + "self_attn.k_proj.weight"], KV)
    want[b + "attn_v.weight"] = src[p + "self_attn.v_proj.weight"]
    want[b + "attn_output.weight"] = src[p + "self_attn.o_proj.weight"]
    want[b + "ffn_gate.weight"] = src[p + "mlp.gate_proj.weight"]
    want[b + "ffn_up.weight"] = src[p + "mlp.up_proj.weight"]
    want[b + "ffn_down.weight"] = src[p + "mlp.down_proj.weight"]

bad = 0
for t in ("f32", "bf16"):
    r = gguf.GGUFReader(f"{tmp}/tiny-{t}.gguf")
    got = {x.name: x for x in r.tensors}
    if set(got) != set(want):
        print(f"{t}: tensors {sorted(set(got) ^ set(want))} differ"); bad += 1; continue
    for n, w in want.items():
        x = got[n]
        if list(x.shape[::-1]) != list(w.shape):
            print(f"{t}: {n}: shape {list(x.shape)} vs {w.shape}"); bad += 1; continue
        if w.ndim == 1 or t == "f32":
            if x.tensor_type != gguf.GGMLQuantizationType.F32 or not np.array_equal(
                    np.asarray(x.data).reshape(w.shape), w):
                print(f"{t}: {n}: F32 data differ ({x.tensor_type.name})"); bad += 1
        else:
            bits = np.asarray(x.data).view(np.uint16).reshape(w.shape)
            if x.tensor_type != gguf.GGMLQuantizationType.BF16 or not np.array_equal(
                    bits, safetensors_np.f32_to_bf16_bits(w)):
                print(f"{t}: {n}: BF16 bits differ ({x.tensor_type.name})"); bad += 1
    f = r.fields
    def val(k):
        return f[k].contents()
    tj = json.load(open(tiny + "/tokenizer.json"))
    toks = val("tokenizer.ggml.tokens")
    ok = (val("tokenizer.ggml.model") == "llama" and val("tokenizer.ggml.bos_token_id") == 1
          and val("tokenizer.ggml.eos_token_id") == 2 and len(toks) == 2048
          and all(toks[i] == s for s, i in tj["model"]["vocab"].items())
          and val("llama.attention.head_count_kv") == KV and val("llama.block_count") == L)
    sc = val("tokenizer.ggml.scores")
    first, second = tj["model"]["merges"][0].split(" "), tj["model"]["merges"][1].split(" ")
    ok = ok and sc[tj["model"]["vocab"]["".join(first)]] > sc[tj["model"]["vocab"]["".join(second)]]
    if not ok:
        print(f"{t}: tokenizer / hyper-parameter metadata wrong"); bad += 1
sys.exit(1 if bad else 0)
EOF

SERVER="$LLAMA_CPP_DIR/build/bin/llama-server"
if [ -x "$SERVER" ]; then
    PORT=$((20000 + RANDOM % 20000))
    "$SERVER" -m "$TMP/tiny-f32.gguf" --host 127.0.0.1 --port "$PORT" -t 1 -np 1 -c 512 --no-webui \
        > "$TMP/server.log" 2>&1 &
    SPID=$!
    for _ in $(seq 150); do
        curl -sf -o /dev/null "http://127.0.0.1:$PORT/health" && break
        sleep 0.2
    done
    out="$(curl -sf "http://127.0.0.1:$PORT/completion" -H 'Content-Type: application/json' \
        -d '{"prompt": [1], "n_predict": 20, "temperature": 0, "cache_prompt": false}')" ||
        { tail -5 "$TMP/server.log"; fail "llama-server did not answer"; }
    text="$("$PY" -c 'import json,sys; print(json.loads(sys.argv[1])["content"])' "$out")"
    case "$text" in
    *"Once upon a time, there was a little girl named Lily. She had a toy car"*) ;;
    *) fail "llama.cpp greedy text from the converted model: '$text'" ;;
    esac
    echo "ok: llama.cpp greedy decode of the converted TinyStories matches the model card"
else
    echo "note: $SERVER not built; llama.cpp decode check not run"
fi
echo "PASS: hf_to_gguf"
