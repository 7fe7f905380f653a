#!/usr/bin/env bash
# side_by_side_llamacpp.sh — sglc against llama.cpp on the same CPU, same
# weights, same thread count, one script (docs/notes/llamacpp.md).
#
# DESIGN
#   Builds nothing.  llama.cpp is built elsewhere (LLAMA_CPP_DIR, default
#   /work/llama.cpp, binaries in $LLAMA_CPP_DIR/build/bin) and is never part
#   of this repository; without it the script prints "SKIP: ..." and exits 0.
#   Models live outside the repository (BENCH_MODELS, default
#   /work/bench-models); `--prepare` makes the missing ones with our tools:
#     tools/make_random_hf.py  random-weight Llama-3.2-1B (BF16 safetensors,
#                              real config + real Llama 3 tokenizer)
#     tools/hf_to_gguf.py      the same bits as GGUF (BF16), and
#                              TinyStories-656K as GGUF (F32)
#   so both engines compute with identical weights.
#
#   Parts (PARTS, default "one-batch serve-tiny serve-1b"):
#     one-batch   llama-bench pp512 / tg128 (depth 0 and depth 512) vs
#                 `sglc bench-one-batch --batch-size 1 --input-len 512
#                 --output-len 128`, 1B BF16, REPS runs each.
#     serve-tiny  llama-server vs `sglc serve` on TinyStories-656K (F32),
#                 driven by the same client, `sglc bench-serving --backend
#                 sglang-oai` (POST /v1/completions, streaming), dataset
#                 random-ids (the same random token ids sent to both, so
#                 input lengths are exact whatever each engine's tokenizer
#                 does), 256 in / 128 out, ignore_eos, concurrency 1 and 8,
#                 REPS runs (seeds below).
#     serve-1b    the same on the 1B model, concurrency 1 and 4, fewer prompts.
#     quant       the one-batch runs on GGUF files llama.cpp's own llama-quantize
#                 wrote from the 1B BF16 file (QUANT_TYPES, default Q8_0 Q4_0
#                 Q4_K_M): llama-bench pp/tg vs `sglc bench-one-batch
#                 --model-path FILE.gguf` (so sglc reads llama.cpp-written files).
#     batch       decode at batch BATCH (16): llama-batched-bench -npl BATCH vs
#                 `sglc bench-one-batch --batch-size BATCH`, on the BF16 file and
#                 each QUANT_TYPES file (BATCH_TYPES); BB_IN (128) / BB_OUT (64) per sequence.
#     agree       the same GGUF file in both engines gives the same numbers:
#                 llama-perplexity vs `sglc perplexity` (tests/data/ppl_stories.txt,
#                 -c 256) and greedy text (llama-completion --temp 0 vs `sglc
#                 generate --temperature 0`) on TinyStories-656K F32 and the
#                 llama-quantize Q8_0 / Q4_0 copies of it, and perplexity on the
#                 1B Q4_K_M file (AGREE_1B_CHUNKS windows).
#   Runs alternate between the engines (llama-bench -r 1 / one sglc run;
#   both servers up, one bench-serving run each in turn) so that both see
#   the same machine load.  Both servers get THREADS compute threads; llama-server gets -np = the
#   largest concurrency and a context of (in + out + 64) tokens per slot.
#   Run s at concurrency C uses seed 100*C + s, so no prompt repeats across
#   runs (both engines keep prompts cached between runs: sglc's radix tree,
#   llama-server's slots and --cache-ram).  Neither cache is flushed: each
#   run's warm-up request (its first prompt) lets both engines reuse that
#   prompt for the first request alike.
#
#   Output: OUT (default build/side_by_side/<UTC time>) holds every raw
#   result (llama-bench JSONL, bench-one-batch JSONL, bench-serving JSONL),
#   server logs, load averages, and table.md, the table printed at the end
#   (medians over REPS; ratio = sglc / llama.cpp, > 1 means sglc is faster
#   for throughputs, for latencies the ratio is llama.cpp / sglc so > 1
#   again means sglc is better).
#
# Usage: bench/side_by_side_llamacpp.sh [--prepare]
#   env: LLAMA_CPP_DIR, BENCH_MODELS, SGLC, THREADS (2), REPS (3), PARTS, OUT,
#        PORT_BASE (31400), TINY_PROMPTS (64), B1_PROMPTS_C1 (4), B1_PROMPTS_C4 (8),
#        OB_IN (512), OB_OUT (128): one-batch prompt / output lengths,
#        B1_IN (256), B1_OUT (128): serve-1b prompt / output lengths,
#        QUANT_TYPES, BATCH, BB_IN, BB_OUT, AGREE_1B_CHUNKS (4), AGREE_TOKENS (48)
set -u

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
SHARED="${SGLC_SHARED:-$ROOT/../shared}"
LLAMA_CPP_DIR="${LLAMA_CPP_DIR:-/work/llama.cpp}"
LLAMA_BIN="${LLAMA_BIN:-$LLAMA_CPP_DIR/build/bin}"
BENCH_MODELS="${BENCH_MODELS:-/work/bench-models}"
SGLC="${SGLC:-$ROOT/build/sglc}"
PY=/usr/bin/python3
THREADS="${THREADS:-2}"
REPS="${REPS:-3}"
PARTS="${PARTS:-one-batch serve-tiny serve-1b}"
PORT_BASE="${PORT_BASE:-31400}"
TINY_PROMPTS="${TINY_PROMPTS:-64}"
B1_PROMPTS_C1="${B1_PROMPTS_C1:-4}"
B1_PROMPTS_C4="${B1_PROMPTS_C4:-8}"
OB_IN="${OB_IN:-512}"
OB_OUT="${OB_OUT:-128}"
B1_IN="${B1_IN:-256}"
B1_OUT="${B1_OUT:-128}"
QUANT_TYPES="${QUANT_TYPES:-Q8_0 Q4_0 Q4_K_M}"
BATCH="${BATCH:-16}"
BATCH_TYPES="${BATCH_TYPES:-BF16 $QUANT_TYPES}"
BB_IN="${BB_IN:-128}"
BB_OUT="${BB_OUT:-64}"
AGREE_1B_CHUNKS="${AGREE_1B_CHUNKS:-4}"
AGREE_TOKENS="${AGREE_TOKENS:-48}"
OUT="${OUT:-$ROOT/build/side_by_side/$(date -u +%Y%m%dT%H%M%SZ)}"

B1_HF="${B1_HF:-$BENCH_MODELS/llama-3.2-1b-random-bf16}"
B1_GGUF="${B1_GGUF:-$BENCH_MODELS/llama-3.2-1b-random-bf16.gguf}"
TINY_HF="${TINY_HF:-$SHARED/models/TinyStories-656K}"
TINY_GGUF="${TINY_GGUF:-$BENCH_MODELS/tinystories-656k-f32.gguf}"

die() { echo "side_by_side: $*" >&2; exit 1; }
# the llama-quantize copies: l1b-llamacpp-Q4_K_M.gguf, tinystories-656k-llamacpp-Q8_0.gguf
qfile() { echo "$BENCH_MODELS/$1-llamacpp-$2.gguf"; }
TINY_QTYPES="Q8_0 Q4_0"

# ---- prerequisites --------------------------------------------------------
need=llama-bench
case " $PARTS " in *" serve-"*) need="$need llama-server" ;; esac
for b in $need; do
    if [ ! -x "$LLAMA_BIN/$b" ]; then
        echo "SKIP: $LLAMA_BIN/$b not found: build llama.cpp outside this repo first" \
             "(see docs/notes/llamacpp.md) and set LLAMA_CPP_DIR"
        exit 0
    fi
done
[ -x "$SGLC" ] || die "$SGLC not found: run make -j2 first"
[ -d "$TINY_HF" ] || die "$TINY_HF not found (set SGLC_SHARED)"

if [ "${1:-}" = "--prepare" ]; then
    mkdir -p "$BENCH_MODELS"
    if [ ! -f "$B1_HF/model.safetensors" ]; then
        nice -n 10 "$PY" "$ROOT/tools/make_random_hf.py" \
            --config "$SHARED/models/configs/meta-llama__Llama-3.2-1B-Instruct/config.json" \
            --tokenizer "$SHARED/models/tokenizers/llama3_1" --out "$B1_HF" || die "make_random_hf failed"
    fi
    [ -f "$B1_GGUF" ] || LLAMA_CPP_DIR="$LLAMA_CPP_DIR" nice -n 10 "$PY" "$ROOT/tools/hf_to_gguf.py" \
        "$B1_HF" "$B1_GGUF" --outtype bf16 || die "hf_to_gguf (1B) failed"
    [ -f "$TINY_GGUF" ] || LLAMA_CPP_DIR="$LLAMA_CPP_DIR" nice -n 10 "$PY" "$ROOT/tools/hf_to_gguf.py" \
        "$TINY_HF" "$TINY_GGUF" --outtype f32 || die "hf_to_gguf (TinyStories) failed"
    if [ -x "$LLAMA_BIN/llama-quantize" ]; then
        for ty in $QUANT_TYPES; do
            [ -f "$(qfile l1b "$ty")" ] || nice -n 10 "$LLAMA_BIN/llama-quantize" "$B1_GGUF" "$(qfile l1b "$ty")" \
                "$ty" "$THREADS" > /dev/null 2>&1 || die "llama-quantize $ty (1B) failed"
        done
        for ty in $TINY_QTYPES; do
            [ -f "$(qfile tinystories-656k "$ty")" ] || nice -n 10 "$LLAMA_BIN/llama-quantize" "$TINY_GGUF" \
                "$(qfile tinystories-656k "$ty")" "$ty" "$THREADS" > /dev/null 2>&1 ||
                die "llama-quantize $ty (TinyStories) failed"
        done
    fi
fi
for f in "$B1_HF/model.safetensors" "$B1_GGUF" "$TINY_GGUF"; do
    if [ ! -f "$f" ]; then
        echo "SKIP: $f missing: run $0 --prepare (writes $BENCH_MODELS, needs $LLAMA_CPP_DIR/gguf-py)"
        exit 0
    fi
done

mkdir -p "$OUT/logs" || die "cannot create $OUT"
LOADLOG="$OUT/loadavg.txt"
load() { echo "$(date -u +%H:%M:%S) $1 load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$LOADLOG"; }

{
    echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) cpus"
    echo "isa: $(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx512f|avx512_bf16|avx512_vnni|amx_bf16|amx_int8)$' | tr '\n' ' ')"
    echo "mem: $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo)"
    echo "sglc: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null) ($SGLC)"
    echo "llama.cpp: $(git -C "$LLAMA_CPP_DIR" rev-parse --short HEAD 2>/dev/null) ($LLAMA_BIN)"
    echo "threads: $THREADS, reps: $REPS"
} | tee "$OUT/machine.txt"

# ---- servers --------------------------------------------------------------
# Both servers of a part run at once (idle ones sleep), so that the runs of
# the two engines can alternate and share whatever load the machine has.
PIDS=()
stop_servers() {
    local p
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
    for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
    PIDS=()
}
trap stop_servers EXIT INT TERM

wait_health() { # pid port seconds
    local i
    for ((i = 0; i < $3 * 5; i++)); do
        if curl -sf -o /dev/null "http://127.0.0.1:$2/health"; then return 0; fi
        kill -0 "$1" 2>/dev/null || return 1
        sleep 0.2
    done
    return 1
}

start_sglc() { # hf_dir port tag
    "$SGLC" serve --model-path "$1" --host 127.0.0.1 --port "$2" --threads "$THREADS" \
        > "$OUT/logs/sglc-serve-$3.log" 2>&1 &
    PIDS+=($!)
    wait_health $! "$2" 300 || die "sglc serve did not come up (see $OUT/logs/sglc-serve-$3.log)"
}

start_llama() { # gguf port tag slots ctx_per_slot
    "$LLAMA_BIN/llama-server" -m "$1" --host 127.0.0.1 --port "$2" -t "$THREADS" -tb "$THREADS" \
        -np "$4" -c $(($4 * $5)) --no-webui -a "$3" \
        > "$OUT/logs/llama-server-$3.log" 2>&1 &
    PIDS+=($!)
    wait_health $! "$2" 300 || die "llama-server did not come up (see $OUT/logs/llama-server-$3.log)"
}

serve_run() { # engine tag tokenizer_dir port concurrency prompts in out seed
    "$SGLC" bench-serving --backend sglang-oai --host 127.0.0.1 --port "$4" \
        --tokenizer "$3" --dataset-name random-ids --num-prompts "$6" \
        --random-input-len "$7" --random-output-len "$8" --random-range-ratio 1 \
        --max-concurrency "$5" --seed "$9" \
        --output-file "$OUT/serve-$2-$1-c$5.jsonl" \
        > "$OUT/logs/bench-serving-$2-$1-c$5-s$9.txt" 2>&1 ||
        echo "side_by_side: bench-serving $1 $2 c=$5 seed $9 failed (see $OUT/logs)" >&2
}

serve_part() { # tag hf gguf in out "c1 c2" "n1 n2"
    local tag=$1 hf=$2 gguf=$3 in=$4 out=$5 cs=($6) ns=($7) i s maxc=1
    for i in "${cs[@]}"; do [ "$i" -gt "$maxc" ] && maxc=$i; done
    start_sglc "$hf" "$PORT_BASE" "$tag"
    start_llama "$gguf" $((PORT_BASE + 1)) "$tag" "$maxc" $((in + out + 64))
    for i in "${!cs[@]}"; do
        for ((s = 1; s <= REPS; s++)); do
            load "serve-$tag c=${cs[$i]} run $s"
            serve_run sglc "$tag" "$hf" "$PORT_BASE" "${cs[$i]}" "${ns[$i]}" "$in" "$out" $((100 * cs[i] + s))
            serve_run llama.cpp "$tag" "$hf" $((PORT_BASE + 1)) "${cs[$i]}" "${ns[$i]}" "$in" "$out" \
                $((100 * cs[i] + s))
        done
    done
    stop_servers
    load "serve-$tag end"
}

# ---- parts ----------------------------------------------------------------
for part in $PARTS; do
    case "$part" in
    one-batch)
        # alternate the engines run by run (llama-bench -r 1 each time)
        for ((r = 1; r <= REPS; r++)); do
            load "one-batch run $r"
            "$LLAMA_BIN/llama-bench" -m "$B1_GGUF" -t "$THREADS" -p "$OB_IN" -n "$OB_OUT" -r 1 -o jsonl \
                >> "$OUT/llama-bench.jsonl" 2>> "$OUT/logs/llama-bench.log" || die "llama-bench failed"
            "$SGLC" bench-one-batch --model-path "$B1_HF" --batch-size 1 --input-len "$OB_IN" \
                --output-len "$OB_OUT" --threads "$THREADS" --result-filename "$OUT/sglc-one-batch.jsonl" \
                > "$OUT/logs/sglc-one-batch-$r.log" 2>&1 || die "sglc bench-one-batch failed"
            "$LLAMA_BIN/llama-bench" -m "$B1_GGUF" -t "$THREADS" -p 0 -n "$OB_OUT" -d "$OB_IN" -r 1 -o jsonl \
                >> "$OUT/llama-bench.jsonl" 2>> "$OUT/logs/llama-bench.log" || die "llama-bench -d failed"
        done
        load "one-batch end"
        ;;
    serve-tiny)
        serve_part tiny "$TINY_HF" "$TINY_GGUF" 256 128 "1 8" "$TINY_PROMPTS $TINY_PROMPTS"
        ;;
    serve-1b)
        serve_part 1b "$B1_HF" "$B1_GGUF" "$B1_IN" "$B1_OUT" "1 4" "$B1_PROMPTS_C1 $B1_PROMPTS_C4"
        ;;
    quant)
        for ty in $QUANT_TYPES; do
            [ -f "$(qfile l1b "$ty")" ] || die "$(qfile l1b "$ty") missing: run $0 --prepare (needs llama-quantize)"
        done
        for ((r = 1; r <= REPS; r++)); do
            for ty in $QUANT_TYPES; do
                f=$(qfile l1b "$ty")
                load "quant $ty run $r"
                "$LLAMA_BIN/llama-bench" -m "$f" -t "$THREADS" -p "$OB_IN" -n "$OB_OUT" -r 1 -o jsonl \
                    >> "$OUT/quant-llama-bench.jsonl" 2>> "$OUT/logs/llama-bench.log" || die "llama-bench $ty failed"
                "$SGLC" bench-one-batch --model-path "$f" --batch-size 1 --input-len "$OB_IN" \
                    --output-len "$OB_OUT" --threads "$THREADS" --run-name "$ty" \
                    --result-filename "$OUT/quant-sglc.jsonl" > "$OUT/logs/sglc-quant-$ty-$r.log" 2>&1 ||
                    die "sglc bench-one-batch $ty failed (see $OUT/logs/sglc-quant-$ty-$r.log)"
                "$LLAMA_BIN/llama-bench" -m "$f" -t "$THREADS" -p 0 -n "$OB_OUT" -d "$OB_IN" -r 1 -o jsonl \
                    >> "$OUT/quant-llama-bench.jsonl" 2>> "$OUT/logs/llama-bench.log" || die "llama-bench -d $ty failed"
            done
        done
        load "quant end"
        ;;
    batch)
        [ -x "$LLAMA_BIN/llama-batched-bench" ] || die "$LLAMA_BIN/llama-batched-bench not built"
        for ((r = 1; r <= REPS; r++)); do
            for ty in $BATCH_TYPES; do
                if [ "$ty" = BF16 ]; then f=$B1_GGUF; sf=$B1_HF; else f=$(qfile l1b "$ty"); sf=$f; fi
                [ -f "$f" ] || die "$f missing: run $0 --prepare"
                load "batch $ty run $r"
                echo "{\"type\":\"$ty\",\"run\":$r}" >> "$OUT/batch-llama.jsonl"
                "$LLAMA_BIN/llama-batched-bench" -m "$f" -t "$THREADS" -tb "$THREADS" \
                    -c $((BATCH * (BB_IN + BB_OUT) + 64)) -b 2048 -ub 512 -npp "$BB_IN" -ntg "$BB_OUT" \
                    -npl "$BATCH" --output-format jsonl 2>> "$OUT/logs/llama-batched-bench.log" |
                    grep '^{' >> "$OUT/batch-llama.jsonl" || die "llama-batched-bench $ty failed"
                "$SGLC" bench-one-batch --model-path "$sf" --batch-size "$BATCH" --input-len "$BB_IN" \
                    --output-len "$BB_OUT" --threads "$THREADS" --run-name "$ty" \
                    --result-filename "$OUT/batch-sglc.jsonl" > "$OUT/logs/sglc-batch-$ty-$r.log" 2>&1 ||
                    die "sglc bench-one-batch batch $ty failed (see $OUT/logs/sglc-batch-$ty-$r.log)"
            done
        done
        load "batch end"
        ;;
    agree)
        # TinyStories-656K's 2,048-token vocabulary has no byte tokens and no "(" / ")";
        # llama.cpp's SentencePiece tokenizer aborts on them (std::out_of_range in
        # llama_vocab::byte_to_token), where the HF tokenizer gives <unk>.  Both engines
        # read the same copy of the text without those two characters.
        TXT="$OUT/agree_text.txt"
        tr -d '()' < "$ROOT/tests/data/ppl_stories.txt" > "$TXT"
        [ -x "$LLAMA_BIN/llama-perplexity" ] || die "$LLAMA_BIN/llama-perplexity not built"
        files="$TINY_GGUF"
        for ty in $TINY_QTYPES; do files="$files $(qfile tinystories-656k "$ty")"; done
        [ -f "$(qfile l1b Q4_K_M)" ] && files="$files $(qfile l1b Q4_K_M)"
        for f in $files; do
            [ -f "$f" ] || die "$f missing: run $0 --prepare"
            b=$(basename "$f" .gguf)
            chunks=-1
            case "$b" in l1b-*) chunks=$AGREE_1B_CHUNKS ;; esac
            load "agree $b"
            "$LLAMA_BIN/llama-perplexity" -m "$f" -f "$TXT" -c 256 -b 256 -t "$THREADS" --chunks "$chunks" \
                > "$OUT/logs/agree-llama-ppl-$b.log" 2>&1 || die "llama-perplexity $b failed"
            "$SGLC" perplexity --model-path "$f" --file "$TXT" --ctx-size 256 --chunks "$chunks" \
                --threads "$THREADS" --run-name "$b" --result-filename "$OUT/agree-sglc-ppl.jsonl" \
                > "$OUT/logs/agree-sglc-ppl-$b.log" 2>&1 || die "sglc perplexity $b failed"
            case "$b" in l1b-*) continue ;; esac  # random weights: greedy text is noise
            "$LLAMA_BIN/llama-completion" -m "$f" -p "Once upon a time" -n "$AGREE_TOKENS" --temp 0 -no-cnv \
                -t "$THREADS" --no-warmup --no-display-prompt 2> "$OUT/logs/agree-llama-gen-$b.log" \
                > "$OUT/agree-llama-gen-$b.txt" || die "llama-completion $b failed"
            "$SGLC" generate --model-path "$f" --prompt "Once upon a time" --max-new-tokens "$AGREE_TOKENS" \
                --temperature 0 --threads "$THREADS" 2> "$OUT/logs/agree-sglc-gen-$b.log" \
                > "$OUT/agree-sglc-gen-$b.txt" || die "sglc generate $b failed"
        done
        load "agree end"
        ;;
    *) die "unknown part '$part'" ;;
    esac
done

"$PY" "$ROOT/bench/side_by_side_table.py" "$OUT" | tee "$OUT/table.md"
echo "raw results: $OUT"
