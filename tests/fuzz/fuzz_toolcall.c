/* fuzz_toolcall — libFuzzer target for the tool-call parsers' streaming
 * input (src/api/api_toolcall*.c).  Byte 0 picks the format, byte 1
 * seeds the chunk sizes; the rest is model output, parsed whole and
 * streamed in those chunks.  A crash, a sanitizer report, a leak or a
 * streamed result that differs from the whole one is a bug. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/api_toolcall.h"

static const char *const names[] = {"hermes", "llama3", "mistral", "json_array", "deepseekv3", "deepseekv31",
                                    "kimi_k2", "gpt-oss", "qwen3_coder", "glm45", "pythonic"};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static json_t *tools;
    if (!tools)
        tools = json_loads("[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\","
                           "\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"string\"}}}}},"
                           "{\"type\":\"function\",\"function\":{\"name\":\"get_weather\"}}]",
                           0, NULL);
    if (size < 2) return 0;
    const api_toolcall_format *f = api_toolcall_find(names[(data[0] & 0x7f) % (sizeof names / sizeof names[0])]);
    json_t *use_tools = data[0] & 0x80 ? tools : NULL;
    unsigned seed = data[1];
    const char *text = (const char *)data + 2;
    size_t n = size - 2;
    char *n0 = NULL, *n1 = NULL;
    json_t *c0 = NULL, *c1 = NULL;
    if (api_toolcall_parse(f, use_tools, text, n, &n0, &c0)) abort();
    api_output_parser *p = api_toolcall_parser_new(f, use_tools);
    if (!p) abort();
    api_pieces ps = {0};
    for (size_t at = 0; at < n;) {
        seed = seed * 1103515245u + 12345u;
        size_t k = 1 + (seed >> 16) % 17;
        if (k > n - at) k = n - at;
        if (p->feed(p, text + at, k, false, &ps)) abort();
        at += k;
    }
    if (p->feed(p, "", 0, true, &ps)) abort();
    if (api_toolcall_collect(&ps, &n1, &c1)) abort();
    if (strcmp(n0, n1) || !json_equal(c0, c1)) abort();
    api_pieces_free(&ps);
    p->destroy(p);
    free(n0), free(n1);
    json_decref(c0), json_decref(c1);
    return 0;
}
