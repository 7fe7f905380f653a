#!/usr/bin/env bash
# `sglc generate --prompt` samples as the server does: with the same seed
# and sampling parameters it gives the same tokens as a /generate request
# to `sglc serve` (and as `generate --requests`, the scheduler offline), on
# TinyStories-656K.  Cases: sampled (temperature 0.8, top_p 0.9, top_k 20)
# with --seed = sampling_seed, min_p with another seed, greedy, and the
# unseeded path: `generate --random-seed R` = the first unseeded request to
# `serve --random-seed R --skip-server-warmup`.  The sampled runs must also
# differ from greedy and from each other, so a sampler that ignored its
# parameters or its seed could not pass.
set -u
ROOT=${SGLC_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
SHARED=${SGLC_SHARED:-$ROOT/../shared}
BIN=${SGLC_BIN:-$ROOT/build/sglc}
M=$SHARED/models/TinyStories-656K
. "$ROOT/tests/scripts/lib_server.sh"
server_require "$M/model.safetensors" "$M/tokenizer.json"
T=$(mktemp -d); trap server_cleanup EXIT
fails=0
check() { if eval "$2"; then echo "ok   $1"; else echo "FAIL $1"; fails=$((fails + 1)); fi; }

PROMPT="Once upon a time, there was a cat"
N=48
# case NAME "generate flags" 'sampling_params JSON members'
CASES=(
    "sampled|--temperature 0.8 --top-p 0.9 --top-k 20 --seed 1234|\"temperature\": 0.8, \"top_p\": 0.9, \"top_k\": 20, \"sampling_seed\": 1234"
    "seed2|--temperature 0.8 --top-p 0.9 --top-k 20 --seed 99|\"temperature\": 0.8, \"top_p\": 0.9, \"top_k\": 20, \"sampling_seed\": 99"
    "minp|--temperature 1.0 --min-p 0.05 --seed 7|\"temperature\": 1.0, \"min_p\": 0.05, \"sampling_seed\": 7"
    "greedy|--temperature 0|\"temperature\": 0"
)

gen() {  # gen OUT FLAGS...: generate --prompt, JSON to OUT
    local out=$1; shift
    "$BIN" generate --model-path "$M" --prompt "$PROMPT" --max-new-tokens $N --ignore-eos --json --threads 1 \
        "$@" >"$out" 2>"$out.err" || { echo "generate $* failed:"; cat "$out.err"; }
}
body() {  # body SP_MEMBERS: a /generate body for the prompt
    printf '{"text": "%s", "sampling_params": {"max_new_tokens": %d, "ignore_eos": true, %s}}' "$PROMPT" $N "$1"
}
ids_eq() {  # ids_eq A B: the two responses have the same output_ids and text, N of them
    "$PY" - "$1" "$2" "$N" <<'PYEOF'
import json, sys
def load(p):
    o = json.loads(open(p).read().splitlines()[0])
    return o["output_ids"], o["text"]
a, b = load(sys.argv[1]), load(sys.argv[2])
assert a[0] == b[0], (sys.argv[1], a, sys.argv[2], b)
assert a[1] == b[1], (a[1], b[1])
assert len(a[0]) == int(sys.argv[3]), len(a[0])
PYEOF
}
ids_ne() {  # ids_ne A B: different output_ids
    "$PY" -c "import json,sys; a=json.load(open(sys.argv[1]))['output_ids']; b=json.load(open(sys.argv[2]))['output_ids']; assert a!=b, a" "$1" "$2"
}

# 1. generate --prompt, and the scheduler offline (generate --requests)
: >"$T/req.jsonl"
for c in "${CASES[@]}"; do
    IFS='|' read -r name flags sp <<<"$c"
    # shellcheck disable=SC2086
    gen "$T/gen_$name.json" $flags
    body "$sp" >>"$T/req.jsonl"; echo >>"$T/req.jsonl"
done
gen "$T/gen_unseeded.json" --temperature 0.8 --top-p 0.9 --top-k 20 --random-seed 4242
"$BIN" generate --model-path "$M" --requests "$T/req.jsonl" --output "$T/req.out" --threads 1 2>"$T/req.err" \
    || { echo "generate --requests failed:"; cat "$T/req.err"; }

# 2. serve, one /generate per case
server_start "$T/log" --model-path "$M" --threads 1 || server_fail "$T/log"
for c in "${CASES[@]}"; do
    IFS='|' read -r name flags sp <<<"$c"
    curl -s -X POST "$SERVER_URL/generate" -H 'Content-Type: application/json' -d "$(body "$sp")" >"$T/srv_$name.json"
done
server_stop TERM
# unseeded: the first request of a server whose generator starts at --random-seed
server_start "$T/log2" --model-path "$M" --threads 1 --random-seed 4242 --skip-server-warmup || server_fail "$T/log2"
curl -s -X POST "$SERVER_URL/generate" -H 'Content-Type: application/json' \
    -d "$(body '"temperature": 0.8, "top_p": 0.9, "top_k": 20')" >"$T/srv_unseeded.json"
server_stop TERM

i=0
for c in "${CASES[@]}"; do
    IFS='|' read -r name flags sp <<<"$c"
    i=$((i + 1))
    sed -n "${i}p" "$T/req.out" >"$T/req_$name.json"
    check "$name: generate --prompt = serve /generate" "ids_eq '$T/gen_$name.json' '$T/srv_$name.json'"
    check "$name: generate --prompt = generate --requests" "ids_eq '$T/gen_$name.json' '$T/req_$name.json'"
done
check "unseeded: generate --random-seed R = first request to serve --random-seed R" \
    "ids_eq '$T/gen_unseeded.json' '$T/srv_unseeded.json'"
check "sampled differs from greedy" "ids_ne '$T/gen_sampled.json' '$T/gen_greedy.json'"
check "another sampling_seed samples differently" "ids_ne '$T/gen_sampled.json' '$T/gen_seed2.json'"
check "unseeded differs from seed 1234" "ids_ne '$T/gen_sampled.json' '$T/gen_unseeded.json'"

[ $fails -eq 0 ] || { echo "$fails check(s) failed"; exit 1; }
echo "all checks passed"
