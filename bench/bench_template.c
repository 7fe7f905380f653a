/* bench_template — speed of chat-template rendering.
 *
 * usage: build/bench/bench_template [TOKENIZER_DIR] [N_MESSAGES] [REPEATS]
 * (defaults: ../shared/models/tokenizers/qwen3, 200, 21)
 *
 * Loads the folder's chat template, builds a synthetic conversation of
 * N_MESSAGES alternating user/assistant turns (assistant turns carry a
 * <think> block, every fifth one a tool call with dict arguments, and the
 * request has two tools), checks that the prompt renders and contains every
 * message, then times REPEATS renders and prints the median and min time
 * per render and the prompt bytes per second.  Compile time is reported
 * separately. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "template/template.h"
#include "util/timeutil.h"

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : "../shared/models/tokenizers/qwen3";
    int n = argc > 2 ? atoi(argv[2]) : 200, reps = argc > 3 ? atoi(argv[3]) : 21;
    if (n < 1 || reps < 1) {
        fprintf(stderr, "usage: bench_template [DIR] [N_MESSAGES>0] [REPEATS>0]\n");
        return 2;
    }
    tmpl_chat c;
    char *err = NULL;
    double t0 = time_now_sec();
    if (tmpl_chat_load(&c, dir, NULL, NULL, &err)) {
        fprintf(stderr, "bench_template: %s\n", err);
        free(err);
        return 1;
    }
    double t_load = time_now_sec() - t0;

    json_t *msgs = json_array();
    json_array_append_new(msgs, json_pack("{s:s, s:s}", "role", "system", "content", "You are a helpful assistant."));
    for (int i = 0; i < n; i++) {
        char text[256];
        if (i % 2 == 0) {
            snprintf(text, sizeof text, "Question %d: how does the radix cache reuse prefixes? 多语言 ✓", i);
            json_array_append_new(msgs, json_pack("{s:s, s:s}", "role", "user", "content", text));
        } else {
            snprintf(text, sizeof text, "<think>\nreasoning %d\n</think>\n\nAnswer %d: shared prefixes hit the tree.", i, i);
            json_t *m = json_pack("{s:s, s:s}", "role", "assistant", "content", text);
            if (i % 5 == 0)
                json_object_set_new(m, "tool_calls",
                                    json_pack("[{s:s, s:{s:s, s:{s:s, s:i, s:b}}}]", "type", "function", "function",
                                              "name", "search", "arguments", "query", "radix", "top_k", 5, "safe", 1));
            json_array_append_new(msgs, m);
        }
    }
    json_t *tools = json_pack("[{s:s, s:{s:s, s:s, s:{s:s, s:{s:{s:s}}}}}, {s:s, s:{s:s, s:{s:s}}}]",
                              "type", "function", "function", "name", "search", "description", "Web search",
                              "parameters", "type", "object", "properties", "query", "type", "string",
                              "type", "function", "function", "name", "noop", "parameters", "type", "object");
    /* validate once */
    char *out = NULL;
    size_t out_len = 0;
    if (tmpl_chat_render(&c, msgs, tools, NULL, 1, NULL, &out, &out_len, &err)) {
        fprintf(stderr, "bench_template: render failed: %s\n", err);
        return 1;
    }
    char needle[64];
    snprintf(needle, sizeof needle, "Question %d:", n % 2 ? n - 1 : n - 2);
    if (!strstr(out, needle) || !strstr(out, "You are a helpful assistant.")) {
        fprintf(stderr, "bench_template: prompt is missing messages\n");
        return 1;
    }
    free(out);

    double *t = malloc((size_t)reps * sizeof *t); /* (reps) seconds per render */
    for (int r = 0; r < reps; r++) {
        double s = time_now_sec();
        if (tmpl_chat_render(&c, msgs, tools, NULL, 1, NULL, &out, &out_len, &err)) return 1;
        t[r] = time_now_sec() - s;
        free(out);
    }
    qsort(t, (size_t)reps, sizeof *t, cmp_d);
    double med = t[reps / 2];
    printf("template %s: load+compile %.2f ms; %d messages -> %zu prompt bytes; render median %.3f ms, min %.3f ms "
           "(%d runs), %.1f MB/s\n",
           dir, t_load * 1e3, n + 1, out_len, med * 1e3, t[0] * 1e3, reps, (double)out_len / med / 1e6);
    free(t);
    json_decref(msgs);
    json_decref(tools);
    tmpl_chat_free(&c);
    return 0;
}
