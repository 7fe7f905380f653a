/* test_api_output — the per-request output stage (src/api/api_output.c):
 * incremental decode of multi-byte UTF-8 split across tokens, a stop string
 * spanning tokens, stop trimming, n > 1 siblings, and the parser list (a
 * test-only parser sees every delta in order).  Uses the qwen3 tokenizer
 * from ../shared (byte-level BPE: rare characters are several tokens);
 * the decoding tests skip without it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "api/api_output.h"
#include "sampling/sampling_params.h"
#include "tokenizer/tokenizer.h"

static tok_tokenizer *load_tok(void)
{
    const char *shared = getenv("SGLC_SHARED");
    char path[4096], err[512];
    snprintf(path, sizeof path, "%s/models/tokenizers/qwen3", shared ? shared : "../shared");
    return tok_load_dir(path, NULL, err, sizeof err);
}

#define NEED_TOK(t)                                                                                    \
    do {                                                                                                \
        if (!(t)) {                                                                                     \
            print_message("skip: no qwen3 tokenizer under ../shared\n");                               \
            skip();                                                                                     \
        }                                                                                               \
    } while (0)

static bool valid_utf8(const char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        size_t k = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        if (!k || i + k > n) return false;
        for (size_t j = 1; j < k; j++)
            if (((unsigned char)s[i + j] >> 6) != 2) return false;
        i += k;
    }
    return true;
}

/* Feed ids[0..n) one event per token through the hook into o (sibling
 * `index` of the array base); the last event is the FINISH with `fin`. */
static void run_events(api_output *base, int index, const sampling_params *p, const int32_t *ids, int n,
                       sched_finish_kind fin)
{
    for (int k = 1; k <= n; k++) {
        size_t len = 0;
        char *t = api_output_hook.text(NULL, base, index, p, ids, k, k == n ? fin : SCHED_FINISH_NONE, &len);
        if (t) {
            assert_int_equal(strlen(t), len);
            assert_true(valid_utf8(t, len)); /* never half a character */
        }
        assert_int_equal(api_output_add(&base[index], t, len), 0);
        free(t);
    }
}

static void test_multibyte_split_across_tokens(void **st)
{
    (void)st;
    tok_tokenizer *tok = load_tok();
    NEED_TOK(tok);
    const char *text = "a \xF0\x9D\x84\x9E b \xE2\x98\x83 caf\xC3\xA9 \xF0\x9F\x98\x80 end";
    tok_ids ids = {0};
    assert_int_equal(tok_encode(tok, text, strlen(text), false, &ids), 0);
    /* the test means something only if a token boundary splits a character */
    bool split = false;
    for (size_t k = 1; k < ids.n && !split; k++) {
        char *d = NULL;
        size_t dl = 0;
        tok_decode_opts o = {.skip_special_tokens = true};
        assert_int_equal(tok_decode(tok, ids.ids, k, &o, &d, &dl), 0);
        split = dl >= 3 && !memcmp(d + dl - 3, "\xEF\xBF\xBD", 3);
        free(d);
    }
    assert_true(split);
    sampling_params p;
    sampling_params_init(&p);
    api_output o;
    api_output_init(&o, tok);
    run_events(&o, 0, &p, ids.ids, (int)ids.n, SCHED_FINISH_LENGTH);
    assert_string_equal(o.text, text);
    char *fin = api_output_final(&o, SCHED_FINISH_LENGTH, NULL, false);
    assert_string_equal(fin, text);
    free(fin);
    /* after the FINISH event the stage gives no more text */
    size_t len = 1;
    assert_null(api_output_hook.text(NULL, &o, 0, &p, ids.ids, (int64_t)ids.n, SCHED_FINISH_LENGTH, &len));
    assert_int_equal(len, 0);
    api_output_free(&o);
    sampling_params_free(&p);
    tok_ids_free(&ids);
    tok_destroy(tok);
}

static void test_stop_string_spanning_tokens(void **st)
{
    (void)st;
    tok_tokenizer *tok = load_tok();
    NEED_TOK(tok);
    const char *text = "Once upon a time there was a cat. The end of the story.";
    tok_ids ids = {0};
    assert_int_equal(tok_encode(tok, text, strlen(text), false, &ids), 0);
    sampling_params p;
    sampling_params_init(&p);
    p.stop = calloc(2, sizeof(char *));
    p.stop[0] = strdup("zebra");
    p.stop[1] = strdup("The end");
    p.n_stop = 2;
    api_output o;
    api_output_init(&o, tok);
    /* the scheduler's order: check after each token, an event per token */
    int hit = -1, at = -1;
    for (int k = 1; k <= (int)ids.n && hit < 0; k++) {
        hit = api_output_hook.check(NULL, &o, 1, 0, &p, ids.ids, k);
        if (hit >= 0) at = k;
        size_t len = 0;
        char *t = api_output_hook.text(NULL, &o, 0, &p, ids.ids, k, hit >= 0 ? SCHED_FINISH_STOP_STR : SCHED_FINISH_NONE,
                                       &len);
        assert_int_equal(api_output_add(&o, t, len), 0);
        free(t);
    }
    assert_int_equal(hit, 1);
    /* the match came on the token that completes "The end", which spans
     * tokens: the text one token earlier holds "The" but not the stop */
    tok_decode_opts dop = {.skip_special_tokens = true};
    char *before = NULL, *upto = NULL;
    assert_int_equal(tok_decode(tok, ids.ids, (size_t)at - 1, &dop, &before, NULL), 0);
    assert_int_equal(tok_decode(tok, ids.ids, (size_t)at, &dop, &upto, NULL), 0);
    assert_non_null(strstr(before, "The"));
    assert_null(strstr(before, "The end"));
    assert_non_null(strstr(upto, "The end"));
    assert_string_equal(o.text, upto);
    /* SGLang's trim_matched_stop: the text stops before the stop string */
    char *fin = api_output_final(&o, SCHED_FINISH_STOP_STR, "The end", false);
    assert_string_equal(fin, "Once upon a time there was a cat. ");
    free(fin);
    fin = api_output_final(&o, SCHED_FINISH_STOP_STR, "The end", true); /* no_stop_trim */
    assert_string_equal(fin, upto);
    free(fin);
    free(before), free(upto);
    api_output_free(&o);
    sampling_params_free(&p);
    tok_ids_free(&ids);
    tok_destroy(tok);
}

/* A matched stop token is not text unless no_stop_trim; n > 1 siblings
 * each have their own stage (the hook's index). */
static void test_stop_token_and_siblings(void **st)
{
    (void)st;
    tok_tokenizer *tok = load_tok();
    NEED_TOK(tok);
    tok_ids ids = {0};
    assert_int_equal(tok_encode(tok, "hello world", 11, false, &ids), 0);
    assert_true(ids.n >= 2);
    sampling_params p;
    sampling_params_init(&p);
    api_output o[2];
    api_output_init(&o[0], tok);
    api_output_init(&o[1], tok);
    run_events(o, 1, &p, ids.ids, (int)ids.n, SCHED_FINISH_STOP_TOKEN);
    char *d = NULL;
    tok_decode_opts dop = {.skip_special_tokens = true};
    assert_int_equal(tok_decode(tok, ids.ids, ids.n - 1, &dop, &d, NULL), 0);
    assert_string_equal(o[1].text, d); /* the last token (the "stop token") dropped */
    assert_null(o[0].text);            /* sibling 0 untouched */
    free(d);
    p.no_stop_trim = true;
    run_events(o, 0, &p, ids.ids, (int)ids.n, SCHED_FINISH_STOP_TOKEN);
    assert_string_equal(o[0].text, "hello world");
    api_output_free(&o[0]);
    api_output_free(&o[1]);
    sampling_params_free(&p);
    tok_ids_free(&ids);
    tok_destroy(tok);
}

/* ---- parsers ------------------------------------------------------------------ */

typedef struct rec {
    char seen[256];              /* every delta, concatenated in order */
    int calls, finals;
    bool final_last;             /* the final flag came on the last call */
    bool digits_to_reasoning;
} rec;

static int rec_feed(api_output_parser *self, const char *text, size_t len, bool final, api_pieces *out)
{
    rec *r = self->state;
    assert_true(strlen(r->seen) + len < sizeof r->seen);
    strncat(r->seen, text, len);
    r->calls++;
    if (final) r->finals++;
    r->final_last = final;
    for (size_t i = 0; i < len; i++) {
        bool dig = text[i] >= '0' && text[i] <= '9';
        api_piece_kind k = r->digits_to_reasoning && dig ? API_PIECE_REASONING : API_PIECE_CONTENT;
        if (api_pieces_add(out, k, text + i, 1, 0)) return -1;
    }
    return 0;
}

static void test_parsers_see_every_delta(void **st)
{
    (void)st;
    api_output o;
    api_output_init(&o, NULL);
    /* no parser: the delta is the content */
    api_pieces ps = {0};
    assert_int_equal(api_output_parse(&o, "abc", 3, false, &ps), 0);
    assert_int_equal(ps.n, 1);
    assert_int_equal(ps.v[0].kind, API_PIECE_CONTENT);
    assert_string_equal(ps.v[0].text, "abc");
    api_pieces_free(&ps);
    assert_int_equal(api_output_parse(&o, "", 0, true, &ps), 0);
    assert_int_equal(ps.n, 0);
    /* two parsers: the first moves digits to reasoning, the second sees
     * the content the first let through, every delta in order */
    rec r1 = {.digits_to_reasoning = true}, r2 = {0};
    api_output_parser p1 = {.name = "digits", .state = &r1, .feed = rec_feed};
    api_output_parser p2 = {.name = "record", .state = &r2, .feed = rec_feed};
    assert_int_equal(api_output_add_parser(&o, &p1), 0);
    assert_int_equal(api_output_add_parser(&o, &p2), 0);
    const char *deltas[] = {"Th", "e 4", "2 ans", "", "wer 7", NULL};
    char content[128] = "", reasoning[128] = "";
    for (int i = 0; deltas[i]; i++) {
        bool final = !deltas[i + 1];
        assert_int_equal(api_output_parse(&o, deltas[i], strlen(deltas[i]), final, &ps), 0);
        char *c = api_pieces_join(&ps, API_PIECE_CONTENT), *rz = api_pieces_join(&ps, API_PIECE_REASONING);
        strcat(content, c);
        strcat(reasoning, rz);
        free(c), free(rz);
        api_pieces_free(&ps);
    }
    assert_string_equal(r1.seen, "The 42 answer 7");
    assert_int_equal(r1.calls, 4); /* the empty non-final delta is not fed */
    assert_int_equal(r1.finals, 1);
    assert_true(r1.final_last);
    assert_string_equal(r2.seen, "The  answer ");
    assert_int_equal(r2.finals, 1);
    assert_true(r2.final_last);
    assert_string_equal(content, "The  answer ");
    assert_string_equal(reasoning, "427");
    api_output_free(&o); /* the parsers have no destroy: theirs is the stack */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_multibyte_split_across_tokens),
        cmocka_unit_test(test_stop_string_spanning_tokens),
        cmocka_unit_test(test_stop_token_and_siblings),
        cmocka_unit_test(test_parsers_see_every_delta),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
