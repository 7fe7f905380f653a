#!/usr/bin/env bash
# Expert parallelism (issue 12): `generate --tp-size 2 --ep-size 2` (and 4
# ranks: EP 2 x 2, EP 4) = one process on the tiny MoE models (prompt
# logits 1e-5 relative, 16 greedy ids identical), with redundant experts,
# a given placement and EPLB moving experts every 3 forwards; the shm and
# the MPI backend; bad combinations refused with their messages; the
# expert distribution recorder's routes behind `serve` (counts per layer =
# tokens x top_k) and its /metrics counters (tests/scripts/ep_check.py).
# Skips (77) like test_tp.sh without the Python reference stack.
set -u
. "$(dirname "$0")/golden_common.sh"
golden_require models/configs/Qwen__Qwen3-30B-A3B/config.json \
    models/configs/mistralai__Mixtral-8x7B-Instruct-v0.1/config.json \
    models/configs/ibm-granite__granite-3.0-1b-a400m-instruct/config.json \
    models/configs/meta-llama__Llama-3.2-1B-Instruct/config.json
mkdir -p "$ROOT/build/tiny-models"
exec "$PY" "$ROOT/tests/scripts/ep_check.py"
