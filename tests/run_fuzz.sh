#!/usr/bin/env bash
# Fuzz tier: build each tests/fuzz/fuzz_*.c with clang's libFuzzer plus
# ASan/UBSan against the library sources, then run it for SECONDS on its
# seed corpus (tests/fuzz/corpus/<name>/, copied to a scratch dir).
set -eu
SECONDS_PER=${1:-20}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
OUT=build-fuzz
mkdir -p "$OUT"
PKGS="jansson libpcre2-8 libutf8proc libcurl yaml-0.1 libmicrohttpd"
CF="-std=c11 -D_GNU_SOURCE -g -O1 -Isrc $(pkg-config --cflags $PKGS) -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all -pthread"
LIBS="$(pkg-config --libs $PKGS) -lm -pthread"
objs=()
for f in $(find src -name '*.c' ! -path src/main.c | sort); do
  o="$OUT/obj/${f%.c}.o"; mkdir -p "$(dirname "$o")"
  extra=""
  case "$f" in *_avx512.c) extra="-mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512bf16 -mavx512vnni -mfma -mf16c -mbmi2";; *_amx.c) extra="-mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512bf16 -mavx512vnni -mfma -mf16c -mbmi2 -mamx-tile -mamx-bf16";; *_avx2.c) extra="-mavx2 -mfma -mf16c -mbmi2";; esac
  # rebuild when the source or any header is newer (headers change struct layouts)
  if [ ! -f "$o" ] || [ "$f" -nt "$o" ] || [ -n "$(find src -name "*.h" -newer "$o" -print -quit)" ]; then clang $CF $extra -c "$f" -o "$o"; fi
  objs+=("$o")
done
status=0
for fz in tests/fuzz/fuzz_*.c; do
  [ -f "$fz" ] || continue
  name=$(basename "$fz" .c)
  clang $CF -fsanitize=fuzzer "$fz" "${objs[@]}" $LIBS -o "$OUT/$name"
  corpus="$OUT/corpus/$name"; mkdir -p "$corpus"
  [ -d "tests/fuzz/corpus/$name" ] && cp -r "tests/fuzz/corpus/$name/." "$corpus/"
  echo "fuzz $name for ${SECONDS_PER}s"
  if ! "$OUT/$name" -max_total_time="$SECONDS_PER" -rss_limit_mb=4096 "$corpus" >"$OUT/$name.log" 2>&1; then
    echo "FAIL $name"; tail -40 "$OUT/$name.log"; status=1
  else
    # the count from libFuzzer's closing "Done N runs in S second(s)" line: a
    # bare '#[0-9]+' also matches inside the recommended-dictionary entries
    # printed after it
    echo "ok   $name ($(sed -nE 's/^Done ([0-9]+) runs in ([0-9]+) second.*/\1 runs in \2 s/p' "$OUT/$name.log" | tail -1))"
  fi
done
exit $status
