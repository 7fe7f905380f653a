#!/usr/bin/env bash
# Tensor parallelism (issue 12): `generate --tp-size 2` and `4` against the
# one-process run on every tiny architecture model and TinyStories-656K —
# prompt logits within 1e-5 relative (f32), 16 greedy ids identical, heads
# that do not divide refused (tests/scripts/tp_check.py).
set -u
. "$(dirname "$0")/golden_common.sh"
golden_require models/TinyStories-656K/config.json \
    models/configs/meta-llama__Llama-3.2-1B-Instruct/config.json \
    models/configs/Qwen__Qwen2.5-0.5B-Instruct/config.json \
    models/configs/Qwen__Qwen3-0.6B/config.json \
    models/configs/Qwen__Qwen3-30B-A3B/config.json \
    models/configs/mistralai__Mixtral-8x7B-Instruct-v0.1/config.json \
    models/configs/ibm-granite__granite-3.0-1b-a400m-instruct/config.json
mkdir -p "$ROOT/build/tiny-models"
# parts the ranks do not split are refused before any weight is read
# (model_tp_setup): a classifier's score head
R=$(mktemp -d)
trap 'rm -rf "$R"' EXIT
mkdir -p "$R/cls"
# (shrunk, so that were a refusal to go the dummy load stays small)
"$PY" -c 'import json, sys; c = json.load(open(sys.argv[1])); c.update(architectures=["Qwen3ForSequenceClassification"], num_labels=2, num_hidden_layers=2, vocab_size=1024); json.dump(c, open(sys.argv[2], "w"))' \
    "$SHARED/models/configs/Qwen__Qwen3-0.6B/config.json" "$R/cls/config.json"
refuse() { # NAME MESSAGE ARGS...: generate exits non-zero with MESSAGE
    local name=$1 msg=$2
    shift 2
    if out=$(timeout 60 "$BIN" generate --load-format dummy --input-ids 1,2 --max-new-tokens 1 --threads 2 "$@" 2>&1); then
        echo "FAIL $name: started"; exit 1
    fi
    case $out in *"$msg"*) echo "ok   $name: refused" ;; *) echo "FAIL $name: $out"; exit 1 ;; esac
}
refuse "classifier with --tp-size 2" "--tp-size 2: tensor parallelism does not shard a classifier's score head yet" \
    --model-path "$R/cls" --tp-size 2
"$PY" "$ROOT/tests/scripts/tp_check.py"
