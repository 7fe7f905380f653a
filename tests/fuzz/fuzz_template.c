/* fuzz_template — libFuzzer target for the Jinja engine: the input is
 * template source, compiled and (when it compiles) rendered against a fixed
 * chat context under tight limits.  Any crash, sanitizer report, leak or
 * hang is a bug: bad templates must end in an error string. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <jansson.h>

#include "template/template.h"

static json_t *ctx;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!ctx) {
        ctx = json_loads(
            "{\"messages\": [{\"role\": \"system\", \"content\": \"sys \\u00e9\"},"
            " {\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \" hi \"}, {\"type\": \"image\"}]},"
            " {\"role\": \"assistant\", \"content\": null, \"tool_calls\": [{\"type\": \"function\","
            "   \"function\": {\"name\": \"f\", \"arguments\": {\"a\": 1, \"b\": [1.5, true, null]}}}]},"
            " {\"role\": \"tool\", \"content\": \"42\"}, {\"role\": \"user\", \"content\": \"<think>x</think>y\"}],"
            " \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": {}}}],"
            " \"documents\": null, \"add_generation_prompt\": true, \"bos_token\": \"<s>\","
            " \"eos_token\": \"</s>\", \"enable_thinking\": false}",
            0, NULL);
        if (!ctx) abort();
    }
    tmpl_template *t = NULL;
    char *err = NULL, *out = NULL;
    if (tmpl_compile((const char *)data, size, &t, &err) == 0) {
        tmpl_limits lim = {.max_output = 1 << 20, .max_memory = 64 << 20, .max_steps = 200000, .max_depth = 32};
        size_t n = 0;
        if (tmpl_render(t, ctx, &lim, &out, &n, &err) == 0 && !out) abort();
        if (out && out[n] != 0) abort();
        tmpl_destroy(t);
    } else if (!err) {
        abort(); /* a failed compile must explain itself */
    }
    free(out);
    free(err);
    return 0;
}
