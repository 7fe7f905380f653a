# sglc — one binary, one library, one test binary per module.
#
#   make            build/sglc
#   make test       quick tier: unit tests + golden tests (README names this)
#   make test-full  + ASan/UBSan build of the unit tests + fuzzers (clang libFuzzer)
#
# Sources are discovered: every src/**/*.c except src/main.c goes into
# build/libsglc.a.  Files named *_avx512.c / *_amx.c / *_avx2.c are compiled with their
# own -m flags so one binary runs on any x86-64 (kernels dispatch at start-up).

BUILD   ?= build
CC      ?= cc
OPT     ?= -O2
SAN     ?=
PKGS    := jansson libpcre2-8 libutf8proc libcurl yaml-0.1 libmicrohttpd
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)

# Open MPI (tensor parallelism across machines): only src/dist/dist_mpi.c
# includes mpi.h; without libopenmpi-dev the file builds its stub.
MPI_CFLAGS := $(shell mpicc --showme:compile 2>/dev/null)
MPI_LIBS   := $(shell mpicc --showme:link 2>/dev/null)

# gloo (multi-node without mpirun, --dist-init-addr): only src/dist/dist_gloo.cc
# includes gloo headers, compiled with g++; without libgloo-dev that file is
# skipped and dist_gloo_stub.c says so at run time.
CXX     ?= g++
GLOO    := $(shell test -f /usr/include/gloo/rendezvous/context.h && \
             { test -e /usr/lib/libgloo.so || ls /usr/lib/*/libgloo.so; } >/dev/null 2>&1 && echo 1)
GLOO_LIBS := $(if $(GLOO),-lgloo -lstdc++)

WARN    := -Wall -Wextra -Werror -Wno-unused-parameter
CFLAGS  += -std=c11 -D_GNU_SOURCE $(OPT) -g $(WARN) -pthread -Isrc $(PKG_CFLAGS) $(SAN) -MMD -MP
LDLIBS  += $(PKG_LIBS) $(MPI_LIBS) $(GLOO_LIBS) -lm -pthread -lrt
LDFLAGS += $(SAN)

ISA_AVX512 := -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512bf16 -mavx512vnni -mfma -mf16c -mbmi2 -O3
ISA_AMX    := $(ISA_AVX512) -mamx-tile -mamx-bf16
ISA_AVX2   := -mavx2 -mfma -mf16c -mbmi2 -O3

LIB_SRC  := $(shell find src -name '*.c' ! -path src/main.c | sort)
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/obj/%.o) $(if $(GLOO),$(BUILD)/obj/src/dist/dist_gloo.o)
TEST_SRC := $(sort $(wildcard tests/unit/test_*.c))
TEST_BIN := $(TEST_SRC:tests/unit/%.c=$(BUILD)/tests/%)
BENCH_SRC := $(sort $(wildcard bench/*.c))
BENCH_BIN := $(BENCH_SRC:bench/%.c=$(BUILD)/bench/%)
FUZZ_SRC := $(sort $(wildcard tests/fuzz/fuzz_*.c))

.PHONY: all test test-full clean fuzz asan bench
.SECONDARY:
all: $(BUILD)/sglc $(TEST_BIN) $(BENCH_BIN)

$(BUILD)/obj/%_avx512.o: %_avx512.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(ISA_AVX512) -c $< -o $@
$(BUILD)/obj/%_amx.o: %_amx.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(ISA_AMX) -c $< -o $@
$(BUILD)/obj/%_avx2.o: %_avx2.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(ISA_AVX2) -c $< -o $@
ifneq ($(MPI_LIBS),)
$(BUILD)/obj/src/dist/dist_mpi.o: CFLAGS += $(MPI_CFLAGS) -DSGLC_HAVE_MPI
endif
ifneq ($(GLOO),)
$(BUILD)/obj/src/dist/dist_gloo_stub.o: CFLAGS += -DSGLC_HAVE_GLOO
$(BUILD)/obj/src/dist/dist_gloo.o: src/dist/dist_gloo.cc
	@mkdir -p $(dir $@)
	$(CXX) -std=c++17 -D_GNU_SOURCE $(OPT) -g $(WARN) -pthread -Isrc $(SAN) -MMD -MP -c $< -o $@
endif
$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/libsglc.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/sglc: $(BUILD)/obj/src/main.o $(BUILD)/libsglc.a
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/tests/%: $(BUILD)/obj/tests/unit/%.o $(BUILD)/libsglc.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS) -lcmocka

$(BUILD)/bench/%: $(BUILD)/obj/bench/%.o $(BUILD)/libsglc.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

test: all
	@bash tests/run_tests.sh $(BUILD)

# Sanitizer tier: the same unit tests under ASan+UBSan, then each fuzzer for
# FUZZ_SECONDS on its seed corpus.
FUZZ_SECONDS ?= 20
asan:
	$(MAKE) BUILD=build-asan OPT=-O1 SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all" all
fuzz:
	@bash tests/run_fuzz.sh $(FUZZ_SECONDS)
test-full: test asan
	@SGLC_SANITIZED=1 bash tests/run_tests.sh build-asan
	@$(MAKE) fuzz

bench: all

clean:
	rm -rf build build-asan build-fuzz

-include $(shell find $(BUILD) build-asan -name '*.d' 2>/dev/null)
