/* fuzz_reasoning — libFuzzer target for the reasoning parsers' streaming
 * input (src/api/api_reasoning*.c).  Byte 0 picks the parser and
 * stream_reasoning, byte 1 seeds the chunk sizes; the rest is model
 * output, split whole (api_reasoning_separate) and streamed in those
 * chunks.  A crash, a sanitizer report, a leak or a streamed result that
 * differs from the whole one is a bug. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/api_reasoning.h"

static const char *const names[] = {"deepseek-r1", "deepseek-v3", "glm45", "gpt-oss",
                                    "kimi", "qwen3", "qwen3-thinking", "step3"};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2) return 0;
    const api_reasoning_spec *d = api_reasoning_find(names[(data[0] & 0x7f) % (sizeof names / sizeof names[0])]);
    bool stream = !(data[0] & 0x80);
    unsigned seed = data[1];
    const char *text = (const char *)data + 2;
    size_t n = size - 2;
    char *c0, *r0;
    if (api_reasoning_separate(d, text, n, &c0, &r0)) abort();
    api_output_parser *p = api_reasoning_parser_new(d, stream);
    if (!p) abort();
    api_pieces ps = {0};
    for (size_t at = 0; at < n;) {
        seed = seed * 1103515245u + 12345u;
        size_t k = 1 + (seed >> 16) % 13;
        if (k > n - at) k = n - at;
        if (p->feed(p, text + at, k, false, &ps)) abort();
        at += k;
    }
    if (p->feed(p, "", 0, true, &ps)) abort();
    char *c1 = api_pieces_join(&ps, API_PIECE_CONTENT), *r1 = api_pieces_join(&ps, API_PIECE_REASONING);
    if (!c1 || !r1 || strlen(c0) != strlen(c1) || strcmp(c0, c1) || strcmp(r0, r1)) abort();
    api_pieces_free(&ps);
    p->destroy(p);
    free(c0), free(r0), free(c1), free(r1);
    return 0;
}
