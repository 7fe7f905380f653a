/* test_bserve — bench-serving's stream parser and ShareGPT loader: SSE
 * events split at every byte boundary give the same result as whole
 * feeds; TTFT is the first chunk with output (not the chat role chunk);
 * a native chunk carrying k tokens adds k equal ITL entries; usage /
 * meta_info counts are taken; error events are recorded; ShareGPT skips
 * short conversations and rejects non-arrays. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "cli/cli_bserve.h"

/* Feed each event string at its own time (i + 1) * 0.1 s, each split into
 * pieces of `step` bytes. */
static void feed(cli_bserve_stream *s, const char **ev, size_t n, size_t step)
{
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(ev[i]);
        for (size_t off = 0; off < len; off += step)
            cli_bserve_stream_feed(s, ev[i] + off, len - off < step ? len - off : step, 0.1 * (double)(i + 1));
    }
    cli_bserve_stream_finish(s, 0.1 * (double)(n + 1));
}

static void test_native(void **st)
{
    (void)st;
    const char *ev[] = {
        ": comment\n\ndata: {\"text\":\"Once\",\"meta_info\":{\"completion_tokens\":1,\"prompt_tokens\":7}}\n\n",
        "data: {\"text\":\"Once upon a\",\"meta_info\":{\"completion_tokens\":3}}\r\n\r\n",
        "data: {\"text\":\"Once upon a time\",\"meta_info\":{\"completion_tokens\":4}}\n\ndata: [DONE]\n\n",
    };
    for (size_t step = 1; step <= 200; step += 199) {
        cli_bserve_stream s;
        cli_bserve_stream_init(&s, CLI_BSERVE_SGLANG, 0.0);
        feed(&s, ev, 3, step);
        assert_true(s.done);
        assert_null(s.error);
        assert_float_equal(s.ttft, 0.1, 1e-12);
        assert_int_equal(s.completion_tokens, 4);
        assert_int_equal(s.prompt_tokens, 7);
        assert_string_equal(s.text, "Once upon a time");
        assert_int_equal(s.n_itl, 3); /* 2 tokens in the second chunk: two gaps of 0.05 */
        assert_float_equal(s.itl[0], 0.05, 1e-12);
        assert_float_equal(s.itl[1], 0.05, 1e-12);
        assert_float_equal(s.itl[2], 0.1, 1e-12);
        cli_bserve_stream_free(&s);
    }
}

static void test_chat_usage_error(void **st)
{
    (void)st;
    const char *ev[] = {
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\" there\"},\"finish_reason\":\"length\"}]}\n\n",
        "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":2}}\n\ndata: [DONE]",
    };
    cli_bserve_stream s;
    cli_bserve_stream_init(&s, CLI_BSERVE_OAI_CHAT, 0.0);
    feed(&s, ev, 4, 3);
    assert_true(s.done); /* last line had no newline: finish processed it */
    assert_float_equal(s.ttft, 0.2, 1e-12);
    assert_string_equal(s.text, "Hi there");
    assert_int_equal(s.completion_tokens, 2);
    assert_int_equal(s.prompt_tokens, 9);
    assert_int_equal(s.n_itl, 1);
    cli_bserve_stream_free(&s);

    const char *bad[] = {"data: {\"choices\":[{\"text\":\"a\"}]}\n\n", "data: not json\n\n",
                         "data: {\"error\":{\"message\":\"boom\"}}\n\n"};
    cli_bserve_stream_init(&s, CLI_BSERVE_OAI, 0.0);
    feed(&s, bad, 3, 1000);
    assert_string_equal(s.text, "a");
    assert_non_null(s.error);
    assert_string_equal(s.error, "boom");
    assert_int_equal(s.completion_tokens, -1);
    cli_bserve_stream_free(&s);
}

static void test_sharegpt(void **st)
{
    (void)st;
    const char *j = "[{\"conversations\":[{\"from\":\"human\",\"value\":\"p1\"},{\"from\":\"gpt\",\"value\":\"c1\"}]},"
                    "{\"conversations\":[{\"from\":\"human\",\"value\":\"alone\"}]}, 3,"
                    "{\"conversations\":[{\"from\":\"human\",\"value\":\"p2\"},{\"from\":\"gpt\",\"value\":\"c2\"},"
                    "{\"from\":\"human\",\"value\":\"more\"}]}]";
    cli_bserve_conv *c;
    size_t n;
    char err[128];
    assert_int_equal(cli_bserve_sharegpt_parse(j, strlen(j), &c, &n, err, sizeof err), 0);
    assert_int_equal(n, 2);
    assert_string_equal(c[0].prompt, "p1");
    assert_string_equal(c[1].completion, "c2");
    cli_bserve_convs_free(c, n);
    assert_int_equal(cli_bserve_sharegpt_parse("{}", 2, &c, &n, err, sizeof err), -1);
    assert_int_equal(cli_bserve_sharegpt_parse("[", 1, &c, &n, err, sizeof err), -1);
    assert_non_null(strstr(err, "not JSON"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_native),
        cmocka_unit_test(test_chat_usage_error),
        cmocka_unit_test(test_sharegpt),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
