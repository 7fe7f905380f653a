/* test_api_reasoning — the reasoning parsers (src/api/api_reasoning.c):
 * each detector over a set of texts fed whole, then in 1-byte deltas and
 * in random-size deltas (the pieces must join to the whole-text result),
 * partial tags at delta boundaries, no end tag, force_reasoning,
 * stream_reasoning false, thinking on/off. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "api/api_reasoning.h"

/* Feed text in deltas of the given sizes (sizes NULL: 1 byte each); the
 * joined content and reasoning (malloc'd). */
static void run(const api_reasoning_spec *d, bool stream, const char *text, const size_t *sizes, char **content,
                char **reasoning)
{
    api_output_parser *p = api_reasoning_parser_new(d, stream);
    assert_non_null(p);
    api_pieces ps = {0};
    size_t n = strlen(text), at = 0;
    for (int i = 0; at < n; i++) {
        size_t k = sizes ? sizes[i] : 1;
        if (k > n - at) k = n - at;
        assert_int_equal(p->feed(p, text + at, k, false, &ps), 0);
        at += k;
    }
    assert_int_equal(p->feed(p, "", 0, true, &ps), 0);
    *content = api_pieces_join(&ps, API_PIECE_CONTENT);
    *reasoning = api_pieces_join(&ps, API_PIECE_REASONING);
    api_pieces_free(&ps);
    p->destroy(p);
}

static const char *texts[] = {
    "",
    "plain answer, no tags",
    "<think>let me see</think>The answer is 42.",
    "<think>\nstep 1\n</think>\n\nanswer",
    "<think><think>twice</think>x",
    "I think about it...</think>The answer.",
    "<think>never ends",
    "<think>calls a tool<tool_call>{\"name\":\"f\"}</tool_call>",
    "a < b and </th is not a tag </think> tail </think>",
    "<thi",
    "<",
    "\xe2\x97\x81think\xe2\x96\xb7kimi thinks\xe2\x97\x81/think\xe2\x96\xb7kimi answers",
    "</think>",
    "<|channel|>analysis<|message|>a<|end|><|start|>assistant<|channel|>final<|message|>b<|return|>",
    "<|start|>assistant<|channel|>commentary to=functions.f <|constrain|>json<|message|>{}<|call|>tail",
    "<|channel|>analysis<|message|>x<|en",
    "<|channel|>final<|mess",
};

static void test_splits_join_to_whole(void **st)
{
    (void)st;
    static const char *names[] = {"deepseek-r1", "deepseek-v3", "glm45", "kimi", "qwen3", "qwen3-thinking", "step3",
                                  "gpt-oss"};
    srand(1234);
    for (size_t di = 0; di < sizeof names / sizeof names[0]; di++) {
        const api_reasoning_spec *d = api_reasoning_find(names[di]);
        assert_non_null(d);
        for (int stream = 0; stream < 2; stream++)
            for (size_t ti = 0; ti < sizeof texts / sizeof texts[0]; ti++) {
                char *wc, *wr;
                assert_int_equal(api_reasoning_separate(d, texts[ti], strlen(texts[ti]), &wc, &wr), 0);
                for (int trial = 0; trial < 6; trial++) {
                    size_t sizes[256];
                    for (int i = 0; i < 256; i++) sizes[i] = 1 + (size_t)(rand() % 9);
                    char *c, *r;
                    run(d, stream, texts[ti], trial ? sizes : NULL, &c, &r);
                    if (strcmp(c, wc) || strcmp(r, wr))
                        fail_msg("%s stream=%d text %zu trial %d: content '%s' vs '%s', reasoning '%s' vs '%s'",
                                 names[di], stream, ti, trial, c, wc, r, wr);
                    free(c), free(r);
                }
                free(wc), free(wr);
            }
    }
}

static void expect(const char *name, const char *text, const char *content, const char *reasoning)
{
    char *c, *r;
    assert_int_equal(api_reasoning_separate(api_reasoning_find(name), text, strlen(text), &c, &r), 0);
    if (strcmp(c, content) || strcmp(r, reasoning))
        fail_msg("%s '%s': content '%s' (want '%s'), reasoning '%s' (want '%s')", name, text, c, content, r, reasoning);
    free(c), free(r);
}

static void test_detectors(void **st)
{
    (void)st;
    expect("qwen3", "<think>a</think>b", "b", "a");
    expect("qwen3", "no tags", "no tags", "");
    expect("qwen3", "x</think>y", "x</think>y", "");   /* no force: content */
    expect("qwen3", "<think>open", "", "open");         /* no end tag: all reasoning */
    expect("qwen3", "<think>r<tool_call>t", "<tool_call>t", "r");
    expect("qwen3-thinking", "x</think>y", "y", "x");   /* force */
    expect("deepseek-r1", "x</think>y", "y", "x");
    expect("deepseek-r1", "<think>x</think>y", "y", "x");
    expect("deepseek-r1", "no end", "", "no end");
    expect("step3", "x</think>y", "y", "x");
    expect("deepseek-v3", "<think>a</think>b", "b", "a");
    expect("glm45", "<think>a</think>b", "b", "a");
    expect("glm45", "x</think>y", "x</think>y", "");
    expect("glm45", "<think>r<tool_call>f\n</tool_call>", "<tool_call>f\n</tool_call>", "r"); /* SGLang's tool_start_token */
    assert_false(api_reasoning_enabled(api_reasoning_find("glm45"), 0, -1));
    expect("kimi", "\xe2\x97\x81think\xe2\x96\xb7" "a\xe2\x97\x81/think\xe2\x96\xb7" "b", "b", "a");
    expect("kimi", "<think>a</think>b", "<think>a</think>b", "");
    expect("QWEN3", "<think>a</think>b", "b", "a");
    expect("gpt-oss", "<|channel|>analysis<|message|>think hard<|end|><|start|>assistant<|channel|>final<|message|>42<|return|>",
           "42", "think hard");
    expect("gpt-oss", "<|channel|>analysis<|message|>need a tool<|end|><|start|>assistant<|channel|>commentary to=functions.f"
                      " <|constrain|>json<|message|>{\"a\":1}<|call|>",
           "<|channel|>commentary to=functions.f <|constrain|>json<|message|>{\"a\":1}<|call|>", "need a tool");
    expect("gpt-oss", "<|channel|>commentary<|message|>preamble<|end|><|start|>assistant<|channel|>final<|message|>x",
           "preamblex", "");
    expect("gpt-oss", "plain text", "plain text", "");
    expect("gpt-oss", "<|channel|>analysis<|message|>cut short", "", "cut short");
    assert_null(api_reasoning_find("nope"));
}

static void test_partial_tags_held(void **st)
{
    (void)st;
    const api_reasoning_spec *d = api_reasoning_find("qwen3");
    api_output_parser *p = api_reasoning_parser_new(d, true);
    api_pieces ps = {0};
    assert_int_equal(p->feed(p, "<thi", 4, false, &ps), 0);
    assert_int_equal(ps.n, 0); /* maybe the start tag */
    assert_int_equal(p->feed(p, "nk>abc</th", 10, false, &ps), 0);
    assert_int_equal(ps.n, 1); /* "abc" streamed, "</th" held */
    assert_int_equal(ps.v[0].kind, API_PIECE_REASONING);
    assert_string_equal(ps.v[0].text, "abc");
    assert_int_equal(p->feed(p, "ink>ok", 6, false, &ps), 0);
    assert_int_equal(ps.n, 2);
    assert_int_equal(ps.v[1].kind, API_PIECE_CONTENT);
    assert_string_equal(ps.v[1].text, "ok");
    api_pieces_free(&ps);
    p->destroy(p);
}

static void test_stream_reasoning_false(void **st)
{
    (void)st;
    api_output_parser *p = api_reasoning_parser_new(api_reasoning_find("deepseek-r1"), false);
    api_pieces ps = {0};
    assert_int_equal(p->feed(p, "think ", 6, false, &ps), 0);
    assert_int_equal(p->feed(p, "more", 4, false, &ps), 0);
    assert_int_equal(ps.n, 0); /* held until the end tag */
    assert_int_equal(p->feed(p, "</think>A", 9, false, &ps), 0);
    assert_int_equal(ps.n, 2);
    assert_string_equal(ps.v[0].text, "think more");
    assert_string_equal(ps.v[1].text, "A");
    api_pieces_free(&ps);
    p->destroy(p);
    /* no end tag: the held reasoning comes at the final call */
    p = api_reasoning_parser_new(api_reasoning_find("deepseek-r1"), false);
    assert_int_equal(p->feed(p, "cut short", 9, false, &ps), 0);
    assert_int_equal(ps.n, 0);
    assert_int_equal(p->feed(p, "", 0, true, &ps), 0);
    assert_int_equal(ps.n, 1);
    assert_string_equal(ps.v[0].text, "cut short");
    api_pieces_free(&ps);
    p->destroy(p);
}

static void test_thinking_switch(void **st)
{
    (void)st;
    const api_reasoning_spec *q = api_reasoning_find("qwen3"), *v3 = api_reasoning_find("deepseek-v3"),
                             *r1 = api_reasoning_find("deepseek-r1");
    assert_true(api_reasoning_enabled(q, -1, -1));
    assert_true(api_reasoning_enabled(q, 1, -1));
    assert_false(api_reasoning_enabled(q, 0, -1));
    assert_false(api_reasoning_enabled(v3, -1, -1));
    assert_false(api_reasoning_enabled(v3, 1, 0));
    assert_true(api_reasoning_enabled(v3, -1, 1));
    assert_true(api_reasoning_enabled(r1, 0, 0));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_splits_join_to_whole),
        cmocka_unit_test(test_detectors),
        cmocka_unit_test(test_partial_tags_held),
        cmocka_unit_test(test_stream_reasoning_false),
        cmocka_unit_test(test_thinking_switch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
