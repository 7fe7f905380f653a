/* cli_warmup — `sglc serve --warmups a,b`: SGLang's registry of named
 * warm-up functions (python/sglang/srt/entrypoints/warmup.py), run in the
 * order given after the standard warm-up request and before the server
 * reports ready.
 *
 * Registered (the text-model ones of SGLang's registry):
 *   voice_chat      input lengths 4, 8, ..., 2044 tokens of random ids,
 *                   30 new tokens each (temperature 0.8, min_p 0,
 *                   stop_token_ids [1]), one after the other
 *   prefill_shapes  one-token generations over the prefill sizes 64, 96,
 *                   128, 192, ... up to 32768 (powers of two and the
 *                   page-rounded midpoints between them)
 * Sizes the model cannot take (>= its max input length) are skipped.
 * SGLang's whisper_autodetect is for audio models and is not registered.
 * Unlike SGLang (which warns and skips an unknown name), an unknown name
 * is a start-up error listing the known ones. */
#ifndef SGLC_CLI_WARMUP_H
#define SGLC_CLI_WARMUP_H

#include <stddef.h>
#include <stdint.h>

#include "sched/sched.h"

/* Check a comma-separated list; 0, or -1 with a message naming the
 * unknown entry and the known ones. */
int cli_warmups_check(const char *list, char *err, size_t errlen);

/* Submit one request (ownership of sp moves to the scheduler) to a started
 * scheduler whose outbox nobody else reads, and wait up to 600 s for its
 * FINISH (events of other requests are dropped).  0, or -1 (aborted,
 * rejected or timed out; logged). */
int cli_warmup_submit_wait(sched *s, sched_req_spec *sp);

/* Run the list on a started scheduler whose outbox nobody else reads
 * (before the http front starts).  vocab: token ids are drawn in
 * [0, vocab); seed: the random ids' seed.  0, or -1 (a request failed). */
int cli_warmups_run(sched *s, const char *list, int64_t vocab, uint64_t seed);

#endif
