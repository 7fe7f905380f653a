/* test_schema_stag — structural_tag (both forms) -> EBNF -> the engine,
 * checked by meaning: texts the tag accepts and rejects, walked byte by
 * byte through a compiled grammar (no vocabulary).
 *
 * The free-text construction (triggers, end strings, excludes) is also
 * checked exhaustively against an independent reference: a scan that
 * looks, from the current position, for the earliest-ending occurrence of
 * any trigger / end / excluded string and acts on it (the semantics the
 * DESIGN comment of grammar_stag.c states), over every string of up to 7
 * characters of a small alphabet, for several overlapping string sets. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar.h"
#include "grammar/grammar_serve.h"

static const grammar_json_opts g_compact = {NULL, 0, 0};

static grammar *compile_st(const char *st, char *err, size_t errlen)
{
    strbuf sb = {0};
    grammar *g = NULL;
    if (grammar_structural_tag_to_ebnf(st, strlen(st), &g_compact, &sb, err, errlen) == 0) {
        g = grammar_compile_ebnf(sb.p, sb.len, "root", err, errlen);
        if (!g) fprintf(stderr, "EBNF:\n%s\n", sb.p);
    }
    free(sb.p);
    return g;
}

static int walk_n(const grammar *g, const char *s, size_t n)
{
    grammar_matcher *m = grammar_matcher_new(g, NULL);
    assert_non_null(m);
    int ok = grammar_matcher_accept_bytes(m, s, n) && grammar_matcher_can_end(m);
    grammar_matcher_free(m);
    return ok;
}

static int walk(const grammar *g, const char *s) { return walk_n(g, s, strlen(s)); }

typedef struct {
    const char *tag;             /* structural_tag JSON */
    const char *yes[10];
    const char *no[10];
} stcase;

static void run_cases(const stcase *cs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char err[512];
        grammar *g = compile_st(cs[i].tag, err, sizeof err);
        if (!g) fail_msg("case %zu: %s", i, err);
        for (int k = 0; k < 10 && cs[i].yes[k]; k++)
            if (!walk(g, cs[i].yes[k])) fail_msg("case %zu rejects '%s'", i, cs[i].yes[k]);
        for (int k = 0; k < 10 && cs[i].no[k]; k++)
            if (walk(g, cs[i].no[k])) fail_msg("case %zu accepts '%s'", i, cs[i].no[k]);
        grammar_free(g);
    }
}

#define F(x) "{\"type\":\"structural_tag\",\"format\":" x "}"

static void test_basic_formats(void **state)
{
    (void)state;
    static const stcase cs[] = {
        {F("{\"type\":\"const_string\",\"value\":\"hi \\\"x\\\"\"}"), {"hi \"x\""}, {"hi", "hi \"x\" ", ""}},
        {F("{\"type\":\"json_schema\",\"json_schema\":{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},"
           "\"required\":[\"a\"]}}"),
         {"{\"a\":1}", "{\"a\":-20}"},
         {"{\"a\":1,\"b\":2}" /* strict, as xgrammar's structural tag */, "{}", "{\"a\":\"x\"}"}},
        {F("{\"type\":\"json_schema\",\"json_schema\":true}"), {"1", "[true,null]", "\"s\""}, {"", "tru"}},
        {F("{\"type\":\"grammar\",\"grammar\":\"root ::= \\\"a\\\" b+\\nb ::= \\\"b\\\"\"}"), {"ab", "abbb"}, {"a", "b"}},
        {F("{\"type\":\"regex\",\"pattern\":\"[0-9]{2}-[a-z]+\"}"), {"12-ab"}, {"1-ab", "12-", "12-AB"}},
        {F("{\"type\":\"sequence\",\"elements\":[{\"type\":\"const_string\",\"value\":\"n=\"},"
           "{\"type\":\"regex\",\"pattern\":\"[0-9]+\"},{\"type\":\"const_string\",\"value\":\";\"}]}"),
         {"n=1;", "n=42;"},
         {"n=;", "n=1", "1;"}},
        {F("{\"type\":\"or\",\"elements\":[{\"type\":\"const_string\",\"value\":\"yes\"},"
           "{\"type\":\"const_string\",\"value\":\"no\"}]}"),
         {"yes", "no"},
         {"yesno", "", "maybe"}},
        /* tag with an end list; untyped formats recognised by their fields */
        {F("{\"begin\":\"<a>\",\"content\":{\"value\":\"x\"},\"end\":[\"</a>\",\"</A>\"]}"),
         {"<a>x</a>", "<a>x</A>"},
         {"<a>x", "<a>y</a>", "<a>x</b>"}},
        /* any_text at the top: anything, or without the excluded strings */
        {F("{\"type\":\"any_text\"}"), {"", "anything <at> all\n"}, {NULL}},
        {F("{\"type\":\"any_text\",\"excludes\":[\"bad\",\"<x\"]}"),
         {"", "ba d", "b<ax", "<<y"},
         {"bad", "a bad one", "<x", "<<x"}},
        /* any_text in a tag runs to the tag's end, which is consumed once */
        {F("{\"type\":\"tag\",\"begin\":\"<think>\",\"content\":{\"type\":\"any_text\"},\"end\":\"</think>\"}"),
         {"<think></think>", "<think>a < b </thin k></think>"},
         {"<think>", "<think></think>x", "<think>a</think></think>"}},
        /* a sequence ending in any_text inside a tag */
        {F("{\"type\":\"tag\",\"begin\":\"[\",\"content\":{\"type\":\"sequence\",\"elements\":["
           "{\"type\":\"const_string\",\"value\":\"k:\"},{\"type\":\"any_text\"}]},\"end\":[\"]\",\"]]\"]}"),
         {"[k:]", "[k:abc]"},
         {"[]", "[k:a]b]", "[k:a"}},
    };
    run_cases(cs, sizeof cs / sizeof *cs);
}

static void test_triggered_and_separated(void **state)
{
    (void)state;
#define TAGS2                                                                                                          \
    "[{\"begin\":\"<f=a>\",\"content\":{\"type\":\"json_schema\",\"json_schema\":{\"type\":\"object\",\"properties\":" \
    "{\"x\":{\"type\":\"integer\"}},\"required\":[\"x\"]}},\"end\":\"</f>\"},"                                      \
    "{\"begin\":\"<f=b>\",\"content\":{\"type\":\"const_string\",\"value\":\"B\"},\"end\":\"</f>\"}]"
    static const stcase cs[] = {
        {F("{\"type\":\"triggered_tags\",\"triggers\":[\"<f=\"],\"tags\":" TAGS2 "}"),
         {"", "text <f and <f no", "x<f=a>{\"x\":1}</f>y<f=b>B</f>", "<<f=b>B</f>", "<f=a>{\"x\":2}</f><f=b>B</f>z"},
         {"<f=c>", "<f=a>{\"x\":\"s\"}</f>", "<f=b>B", "<f=a>{\"x\":1}</f>z<f=", "<f=b>B</f><f=c"}},
        {F("{\"type\":\"triggered_tags\",\"triggers\":[\"<f=\"],\"tags\":" TAGS2 ",\"at_least_one\":true}"),
         {"<f=b>B</f>", "<f=b>B</f> then <f=a>{\"x\":1}</f>"},
         {"", "text<f=b>B</f>"}},
        {F("{\"type\":\"triggered_tags\",\"triggers\":[\"<f=\"],\"tags\":" TAGS2 ",\"stop_after_first\":true}"),
         {"", "text", "text<f=b>B</f>"},
         {"<f=b>B</f>more", "<f=b>B</f><f=b>B</f>"}},
        {F("{\"type\":\"triggered_tags\",\"triggers\":[\"<f=\"],\"tags\":" TAGS2
           ",\"at_least_one\":true,\"stop_after_first\":true}"),
         {"<f=b>B</f>", "<f=a>{\"x\":0}</f>"},
         {"", "x<f=b>B</f>", "<f=b>B</f>x"}},
        {F("{\"type\":\"triggered_tags\",\"triggers\":[\"<f=\"],\"tags\":" TAGS2 ",\"excludes\":[\"STOP\"]}"),
         {"STO P", "<f=b>B</f>"},
         {"STOP", "<f=b>B</f>STOP"}},
        /* triggers sharing first characters (refused by the old converter) */
        {"{\"structures\":[{\"begin\":\"aba\",\"schema\":{\"type\":\"integer\"},\"end\":\";\"}],\"triggers\":[\"aba\"]}",
         {"ab", "abb", "aaba1;", "aba2;x", "abba"},
         {"aba", "ababa", "abaa;"}},
        /* triggered tags inside a tag: the tag's end closes the text */
        {F("{\"type\":\"tag\",\"begin\":\"<r>\",\"content\":{\"type\":\"triggered_tags\",\"triggers\":[\"<f=\"],"
           "\"tags\":" TAGS2 "},\"end\":\"</r>\"}"),
         {"<r></r>", "<r>hi <f=b>B</f> ok</r>"},
         {"<r>", "<r><f=b>B</f>", "<r></r>x", "<r><f=c></r>"}},
        {F("{\"type\":\"tags_with_separator\",\"tags\":" TAGS2 ",\"separator\":\",\"}"),
         {"", "<f=b>B</f>", "<f=b>B</f>,<f=a>{\"x\":3}</f>"},
         {",", "<f=b>B</f>,", "x<f=b>B</f>", "<f=b>B</f><f=b>B</f>"}},
        {F("{\"type\":\"tags_with_separator\",\"tags\":" TAGS2 ",\"separator\":\",\",\"at_least_one\":true,"
           "\"stop_after_first\":true}"),
         {"<f=b>B</f>"},
         {"", "<f=b>B</f>,<f=b>B</f>"}},
        {F("{\"type\":\"tag\",\"begin\":\"[\",\"content\":{\"type\":\"tags_with_separator\",\"tags\":" TAGS2
           ",\"separator\":\";\"},\"end\":\"]\"}"),
         {"[]", "[<f=b>B</f>;<f=b>B</f>]"},
         {"[", "[<f=b>B</f>;]"}},
    };
    run_cases(cs, sizeof cs / sizeof *cs);
}

static void test_errors(void **state)
{
    (void)state;
    static const struct {
        const char *tag, *msg;
    } cs[] = {
        {"[1]", "expected a JSON object"},
        {"{\"type\":\"other\",\"format\":{}}", "must be \"structural_tag\""},
        {F("{\"type\":\"nope\"}"), "unknown format type 'nope'"},
        {F("{\"type\":\"qwen_xml_parameter\",\"json_schema\":{}}"), "qwen_xml_parameter"},
        {F("{\"type\":\"regex\",\"pattern\":\"a\",\"excludes\":[\"b\"]}"), "excludes"},
        {F("{\"type\":\"or\",\"elements\":[{\"type\":\"any_text\"},{\"type\":\"const_string\",\"value\":\"a\"}]}"),
         "mixes unlimited"},
        {F("{\"type\":\"sequence\",\"elements\":[{\"type\":\"any_text\"},{\"type\":\"const_string\",\"value\":\"a\"}]}"),
         "only the last element"},
        {F("{\"type\":\"tag\",\"begin\":\"a\",\"content\":{\"type\":\"any_text\"},\"end\":\"\"}"), "non-empty end"},
        {F("{\"type\":\"triggered_tags\",\"triggers\":[\"<a\",\"<\"],\"tags\":[{\"begin\":\"<ab\",\"content\":"
           "{\"type\":\"const_string\",\"value\":\"x\"},\"end\":\"\"}]}"),
         "two triggers"},
        {F("{\"type\":\"triggered_tags\",\"triggers\":[\"<a\"],\"tags\":[{\"begin\":\"<b\",\"content\":"
           "{\"type\":\"const_string\",\"value\":\"x\"},\"end\":\"\"}]}"),
         "starts with no trigger"},
        {F("{\"type\":\"tag\",\"begin\":\"<\",\"content\":{\"type\":\"any_text\",\"excludes\":[\">\"]},\"end\":\">\"}"),
         "can never end"},
        {F("{\"type\":\"json_schema\",\"json_schema\":{\"type\":\"integer\",\"minimum\":3,\"maximum\":1}}"), "json_schema"},
        {F("{\"type\":\"const_string\",\"value\":\"\"}"), "non-empty"},
        {"{\"structures\":[],\"triggers\":[\"a\"]}", "'structures'"},
    };
    for (size_t i = 0; i < sizeof cs / sizeof *cs; i++) {
        char err[512] = "";
        strbuf sb = {0};
        int rc = grammar_structural_tag_to_ebnf(cs[i].tag, strlen(cs[i].tag), &g_compact, &sb, err, sizeof err);
        free(sb.p);
        if (rc != -1 || !strstr(err, cs[i].msg)) fail_msg("case %zu: rc %d, err '%s', want '%s'", i, rc, err, cs[i].msg);
    }
    /* nesting is bounded */
    strbuf deep = {0};
    strbuf_puts(&deep, "{\"format\":");
    for (int i = 0; i < 200; i++) strbuf_puts(&deep, "{\"type\":\"or\",\"elements\":[");
    strbuf_puts(&deep, "{\"type\":\"const_string\",\"value\":\"a\"}");
    for (int i = 0; i < 200; i++) strbuf_puts(&deep, "]}");
    strbuf_puts(&deep, "}");
    char err[512] = "";
    strbuf sb = {0};
    assert_int_equal(grammar_structural_tag_to_ebnf(deep.p, deep.len, &g_compact, &sb, err, sizeof err), -1);
    assert_non_null(strstr(err, "nested too deeply"));
    free(sb.p);
    free(deep.p);
}

/* ---- the reference for free text ---------------------------------------- */

typedef struct {
    const char *trig[3];
    const char *begin[3], *content[3], *end[3]; /* tags: begin, const content, end */
    const char *excl[3];
    const char *stop;            /* the enclosing tag's end, or NULL (top level: may end anywhere) */
    bool loop;
} refcfg;

/* Does the free text starting at pos match s[pos..n) completely (top
 * level: followed by nothing; with a stop: the stop ends it and must be
 * the last thing)? */
static bool ref_free(const refcfg *r, const char *s, size_t pos, size_t n)
{
    for (size_t j = pos + 1; j <= n; j++) {
        int kind = -1, idx = -1;
        size_t best = 0;
        const char *pats[10];
        int kinds[10], idxs[10], np = 0;
        for (int k = 0; k < 3 && r->excl[k]; k++) pats[np] = r->excl[k], kinds[np] = 2, idxs[np++] = k;
        if (r->stop) pats[np] = r->stop, kinds[np] = 1, idxs[np++] = 0;
        for (int k = 0; k < 3 && r->trig[k]; k++) pats[np] = r->trig[k], kinds[np] = 0, idxs[np++] = k;
        for (int k = 0; k < np; k++) {
            size_t l = strlen(pats[k]);
            if (j - pos < l || memcmp(s + j - l, pats[k], l)) continue;
            if (kinds[k] > kind || (kinds[k] == kind && l > best)) kind = kinds[k], idx = idxs[k], best = l;
        }
        if (kind < 0) continue;
        if (kind == 2) return false;
        if (kind == 1) return j == n;
        /* a trigger: one of its tags, then free text again (or the end) */
        size_t tl = strlen(r->trig[idx]);
        for (int t = 0; t < 3 && r->begin[t]; t++) {
            if (strncmp(r->begin[t], r->trig[idx], tl)) continue;
            char body[64];
            snprintf(body, sizeof body, "%s%s%s", r->begin[t] + tl, r->content[t], r->end[t]);
            size_t bl = strlen(body);
            if (n - j < bl || memcmp(s + j, body, bl)) continue;
            size_t q = j + bl;
            if (r->loop ? ref_free(r, s, q, n) : r->stop ? (n - q == strlen(r->stop) && !memcmp(s + q, r->stop, n - q))
                                                          : q == n)
                return true;
        }
        return false;
    }
    return r->stop == NULL;
}

static void json_str(strbuf *b, const char *s)
{
    strbuf_puts(b, "\"");
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') strbuf_put(b, "\\", 1);
        strbuf_put(b, s, 1);
    }
    strbuf_puts(b, "\"");
}

static void test_free_text_exhaustive(void **state)
{
    (void)state;
    static const refcfg cfgs[] = {
        {{"<a"}, {"<ab", "<a/"}, {"x", ""}, {"/", "a"}, {NULL}, NULL, true},
        {{"aab", "b<"}, {"aab", "b<"}, {"", "x"}, {"", "/"}, {"<<"}, NULL, true},
        {{"<a"}, {"<a"}, {"x"}, {""}, {"bb"}, "</", true},
        {{"ab"}, {"ab/"}, {"x"}, {"b"}, {NULL}, "a/", false},
        {{"a<a"}, {"a<a"}, {""}, {"/"}, {"/x"}, NULL, false},
        {{"/"}, {"/"}, {"x"}, {"a"}, {"<b", "b<"}, "ba", true},
    };
    const char alpha[] = "ab</x";
    for (size_t ci = 0; ci < sizeof cfgs / sizeof *cfgs; ci++) {
        const refcfg *r = &cfgs[ci];
        strbuf st = {0};
        strbuf_puts(&st, "{\"format\":");
        if (r->stop) strbuf_puts(&st, "{\"type\":\"tag\",\"begin\":\"\",\"end\":"), json_str(&st, r->stop),
            strbuf_puts(&st, ",\"content\":");
        strbuf_puts(&st, "{\"type\":\"triggered_tags\",\"triggers\":[");
        for (int k = 0; k < 3 && r->trig[k]; k++) {
            if (k) strbuf_puts(&st, ",");
            json_str(&st, r->trig[k]);
        }
        strbuf_puts(&st, "],\"tags\":[");
        for (int k = 0; k < 3 && r->begin[k]; k++) {
            strbuf_puts(&st, k ? ",{\"begin\":" : "{\"begin\":");
            json_str(&st, r->begin[k]);
            strbuf_puts(&st, ",\"content\":");
            if (r->content[k][0]) strbuf_puts(&st, "{\"type\":\"const_string\",\"value\":"), json_str(&st, r->content[k]),
                strbuf_puts(&st, "}");
            else strbuf_puts(&st, "{\"type\":\"grammar\",\"grammar\":\"root ::= \\\"\\\"\"}");
            strbuf_puts(&st, ",\"end\":");
            json_str(&st, r->end[k]);
            strbuf_puts(&st, "}");
        }
        strbuf_puts(&st, "]");
        if (r->excl[0]) {
            strbuf_puts(&st, ",\"excludes\":[");
            for (int k = 0; k < 3 && r->excl[k]; k++) {
                if (k) strbuf_puts(&st, ",");
                json_str(&st, r->excl[k]);
            }
            strbuf_puts(&st, "]");
        }
        strbuf_printf(&st, ",\"stop_after_first\":%s}", r->loop ? "false" : "true");
        if (r->stop) strbuf_puts(&st, "}");
        strbuf_puts(&st, "}");
        char err[512];
        grammar *g = compile_st(st.p, err, sizeof err);
        if (!g) fail_msg("config %zu: %s\n%s", ci, err, st.p);
        long n_yes = 0, n_all = 0;
        char s[8];
        for (int len = 0; len <= 7; len++) {
            long total = 1;
            for (int i = 0; i < len; i++) total *= 5;
            for (long v = 0; v < total; v++) {
                long x = v;
                for (int i = 0; i < len; i++) s[i] = alpha[x % 5], x /= 5;
                s[len] = 0;
                bool want = ref_free(r, s, 0, (size_t)len);
                bool got = walk_n(g, s, (size_t)len);
                if (want != got) fail_msg("config %zu, '%s': reference %d, grammar %d\n%s", ci, s, want, got, st.p);
                n_yes += want, n_all++;
            }
        }
        /* the check means something: both outcomes occur */
        assert_true(n_yes > 0 && n_yes < n_all);
        grammar_free(g);
        free(st.p);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_basic_formats),
        cmocka_unit_test(test_triggered_and_separated),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_free_text_exhaustive),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
