/* test_grammar_json_schema — grammar_schema_to_ebnf.
 *
 * The generated grammar is checked by meaning, not by its text: the test
 * carries a small GBNF -> PCRE2 converter (each rule a named group in a
 * DEFINE block, rule references as recursive (?&name) calls), so every
 * case is "this schema accepts these texts and rejects those", matched
 * by PCRE2 independently of the grammar engine.  Integer and decimal
 * bounds are checked exhaustively over a window of values. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "grammar/grammar.h"

/* ---- GBNF -> PCRE2 ---- */

static void put_hex_cp(strbuf *o, unsigned long cp) { strbuf_printf(o, "\\x{%lX}", cp); }

/* One rule body to a regex. */
static void conv_body(const char *p, strbuf *o)
{
    while (*p && *p != '\n') {
        if (*p == ' ') { p++; continue; }
        if (*p == '"') {
            p++;
            strbuf_puts(o, "(?:");
            while (*p && *p != '"') {
                if (*p == '\\') {
                    p++;
                    char e = *p++;
                    if (e == 'x') { put_hex_cp(o, strtoul((char[]){p[0], p[1], 0}, NULL, 16)); p += 2; }
                    else if (e == 'n') strbuf_puts(o, "\\n");
                    else if (e == 't') strbuf_puts(o, "\\t");
                    else if (e == 'r') strbuf_puts(o, "\\r");
                    else put_hex_cp(o, (unsigned char)e);
                } else if ((unsigned char)*p >= 0x80) strbuf_put(o, p++, 1);
                else if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9')) strbuf_put(o, p++, 1);
                else put_hex_cp(o, (unsigned char)*p++);
            }
            p++;
            strbuf_puts(o, ")");
        } else if (*p == '[') {
            strbuf_put(o, p++, 1);
            if (*p == '^') strbuf_put(o, p++, 1);
            while (*p && *p != ']') {
                if (*p == '\\') {
                    char e = p[1];
                    if (e == 'x') { put_hex_cp(o, strtoul((char[]){p[2], p[3], 0}, NULL, 16)); p += 4; }
                    else if (e == 'u') { char h[5] = {p[2], p[3], p[4], p[5], 0}; put_hex_cp(o, strtoul(h, NULL, 16)); p += 6; }
                    else if (e == 'U') { char h[9]; memcpy(h, p + 2, 8); h[8] = 0; put_hex_cp(o, strtoul(h, NULL, 16)); p += 10; }
                    else if (e == 'n') strbuf_puts(o, "\\n"), p += 2;
                    else if (e == 't') strbuf_puts(o, "\\t"), p += 2;
                    else if (e == 'r') strbuf_puts(o, "\\r"), p += 2;
                    else { put_hex_cp(o, (unsigned char)e); p += 2; }
                } else if (*p == '-') strbuf_put(o, p++, 1);
                else if ((unsigned char)*p >= 0x80) strbuf_put(o, p++, 1);
                else if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9')) strbuf_put(o, p++, 1);
                else put_hex_cp(o, (unsigned char)*p++);
            }
            strbuf_put(o, p++, 1);
        } else if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')) {
            const char *s = p;
            while ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9')) p++;
            strbuf_printf(o, "(?&%.*s)", (int)(p - s), s);
        } else if (*p == '(') { strbuf_puts(o, "(?:"); p++; }
        else strbuf_put(o, p++, 1); /* ) | * + ? { } , digits */
    }
}

/* The whole grammar as one anchored PCRE2 pattern. */
static pcre2_code *to_pcre(const char *g)
{
    strbuf o = {0};
    strbuf_puts(&o, "(?(DEFINE)");
    for (const char *p = g; *p;) {
        const char *eq = strstr(p, " ::= ");
        assert_non_null(eq);
        strbuf_printf(&o, "(?<%.*s>", (int)(eq - p), p);
        conv_body(eq + 5, &o);
        strbuf_puts(&o, ")");
        p = strchr(eq, '\n');
        assert_non_null(p);
        p++;
    }
    strbuf_puts(&o, ")\\A(?&root)\\z");
    int ec;
    PCRE2_SIZE eo;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)o.p, o.len, PCRE2_UTF, &ec, &eo, NULL);
    if (!re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(ec, msg, sizeof msg);
        fprintf(stderr, "pcre2: %s at %zu in\n%s\ngrammar:\n%s\n", msg, (size_t)eo, o.p, g);
    }
    free(o.p);
    assert_non_null(re);
    return re;
}

static int matches(pcre2_code *re, const char *text)
{
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
    int rc = pcre2_match(re, (PCRE2_SPTR)text, strlen(text), 0, 0, md, NULL);
    pcre2_match_data_free(md);
    return rc >= 0;
}

static char *translate(const char *schema, const grammar_json_opts *o, char *err)
{
    strbuf out = {0};
    int rc = grammar_schema_to_ebnf(schema, schema ? strlen(schema) : 0, o, &out, err, 256);
    if (rc != 0) { free(out.p); return NULL; }
    return strbuf_take(&out);
}

/* schema accepts every text in yes[] and rejects every one in no[]. */
static void check(const char *schema, const char *const *yes, const char *const *no)
{
    char err[256];
    grammar_json_opts o = {.any_whitespace = 1};
    char *g = translate(schema, &o, err);
    if (!g) fprintf(stderr, "schema %s: %s\n", schema, err);
    assert_non_null(g);
    pcre2_code *re = to_pcre(g);
    for (; yes && *yes; yes++)
        if (!matches(re, *yes)) { fprintf(stderr, "%s should accept %s\n%s", schema, *yes, g); fail(); }
    for (; no && *no; no++)
        if (matches(re, *no)) { fprintf(stderr, "%s should reject %s\n%s", schema, *no, g); fail(); }
    pcre2_code_free(re);
    free(g);
}

#define L(...) ((const char *const[]){__VA_ARGS__, NULL})

static void test_types(void **state)
{
    (void)state;
    check("{\"type\":\"integer\"}", L("0", "-12", "123456789012345678901234"), L("01", "1.5", "\"1\"", "-", "1e3"));
    check("{\"type\":\"number\"}", L("0", "-1.5e-3", "2E+10", "0.25"), L("01", ".5", "1.", "NaN"));
    check("{\"type\":\"boolean\"}", L("true", "false"), L("null", "1"));
    check("{\"type\":[\"string\",\"null\"]}", L("null", "\"a\\\"b\"", "\"\\u00e9\""), L("1", "\"\\ud800\"", "\"a\nb\""));
    check("true", L("{\"a\": [1, {\"b\": null}]}", "\"x\"", "-0.5"), L("{", "[1,]"));
    check("{}", L("[]", "{ }"), L("tru"));
    /* no type: every type, each with its kind's keywords */
    check("{\"properties\":{\"a\":{\"type\":\"integer\"}}}", L("12", "\"s\"", "{\"a\":1}", "{}"), L("{\"a\":\"x\"}"));
}

static void test_objects(void **state)
{
    (void)state;
    const char *s = "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"string\"}},"
                    "\"required\":[\"b\"]}";
    check(s, L("{\"b\":\"x\"}", "{\"a\":1,\"b\":\"x\"}", "{ \"a\" : 1 ,\n \"b\" : \"x\" }", "{\"b\":\"x\",\"zz\":[1]}",
               "{\"b\":\"x\",\"ab\":1}", "{\"b\":\"x\",\"\":1}"),
          /* order is the schema's; a known key is never an additional one */
          L("{}", "{\"a\":1}", "{\"b\":\"x\",\"a\":1}", "{\"b\":\"x\",\"a\":\"y\"}", "{\"b\":1}"));
    check("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"additionalProperties\":false}",
          L("{}", "{\"a\":3}"), L("{\"b\":1}", "{\"a\":1,\"b\":1}"));
    check("{\"type\":\"object\",\"additionalProperties\":{\"type\":\"boolean\"}}", L("{}", "{\"x\":true,\"y\":false}"),
          L("{\"x\":1}"));
    check("{\"type\":\"object\",\"patternProperties\":{\"^x-\":{\"type\":\"integer\"}},\"additionalProperties\":false}",
          L("{\"x-a\":1}", "{}"), L("{\"y\":1}", "{\"x-a\":\"s\"}"));
    check("{\"type\":\"object\",\"minProperties\":1}", L("{\"a\":1}"), L("{}"));
    /* strict: additionalProperties false by default */
    char err[256];
    grammar_json_opts o = {.any_whitespace = 1, .strict = 1};
    char *g = translate("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}}}", &o, err);
    assert_non_null(g);
    pcre2_code *re = to_pcre(g);
    assert_true(matches(re, "{\"a\":1}"));
    assert_false(matches(re, "{\"a\":1,\"b\":2}"));
    pcre2_code_free(re);
    free(g);
    /* dependencies: the needs of a required trigger become required */
    check("{\"type\":\"object\",\"properties\":{\"a\":{},\"b\":{}},\"required\":[\"a\"],\"dependentRequired\":{\"a\":[\"b\"]}}",
          L("{\"a\":1,\"b\":2}"), L("{\"a\":1}"));
}

static void test_arrays(void **state)
{
    (void)state;
    check("{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"minItems\":1,\"maxItems\":3}", L("[1]", "[1, 2,3]"),
          L("[]", "[1,2,3,4]", "[\"a\"]"));
    check("{\"prefixItems\":[{\"type\":\"integer\"},{\"type\":\"string\"}],\"items\":false}",
          L("[]", "[1]", "[1,\"a\"]"), L("[1,\"a\",2]", "[\"a\"]"));
    check("{\"items\":[{\"type\":\"integer\"}],\"additionalItems\":{\"type\":\"boolean\"}}", L("[1,true,false]", "[]"),
          L("[1,2]"));
}

static void test_combinators_refs(void **state)
{
    (void)state;
    check("{\"anyOf\":[{\"type\":\"integer\"},{\"type\":\"string\",\"maxLength\":2}]}", L("1", "\"ab\""), L("\"abc\"", "null"));
    check("{\"allOf\":[{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"required\":[\"a\"]},"
          "{\"properties\":{\"b\":{\"type\":\"string\"}},\"required\":[\"b\"]}]}",
          L("{\"a\":1,\"b\":\"x\"}"), L("{\"a\":1}", "{\"b\":\"x\"}"));
    check("{\"$defs\":{\"n\":{\"type\":\"object\",\"properties\":{\"v\":{\"type\":\"integer\"},\"next\":{\"$ref\":\"#/$defs/n\"}},"
          "\"required\":[\"v\"],\"additionalProperties\":false}},\"$ref\":\"#/$defs/n\"}",
          L("{\"v\":1}", "{\"v\":1,\"next\":{\"v\":2,\"next\":{\"v\":3}}}"), L("{\"v\":1,\"next\":{}}"));
    check("{\"definitions\":{\"a~b/c\":{\"const\":5}},\"items\":{\"$ref\":\"#/definitions/a~0b~1c\"},\"type\":\"array\"}",
          L("[5,5]"), L("[4]"));
    check("{\"properties\":{\"x\":{\"$ref\":\"#\"}},\"type\":\"object\",\"additionalProperties\":false}",
          L("{\"x\":{\"x\":{}}}"), L("{\"x\":1}"));
    check("{\"enum\":[\"a\",1,null,{\"k\":[true]}],\"const\":1}", L("1"), L("\"a\""));
    /* oneOf: disjoint by type, by a discriminator, or narrowed so no
     * instance meets two branches */
    check("{\"oneOf\":[{\"type\":\"string\"},{\"type\":\"integer\"}]}", L("\"a\"", "3"), L("null"));
    check("{\"oneOf\":[{\"properties\":{\"k\":{\"const\":\"a\"},\"x\":{\"type\":\"integer\"}},\"required\":[\"k\"]},"
          "{\"properties\":{\"k\":{\"const\":\"b\"}},\"required\":[\"k\"]}],\"type\":\"object\"}",
          L("{\"k\":\"a\",\"x\":1}", "{\"k\":\"b\"}"), L("{\"k\":\"c\"}", "{\"x\":1}"));
    check("{\"type\":\"object\",\"oneOf\":[{\"required\":[\"a\"]},{\"required\":[\"b\"]}]}", L("{\"a\":1}", "{\"b\":1}"),
          L("{\"a\":1,\"b\":2}", "{}"));
    /* without a type a non-object meets both required-only branches */
    check("{\"oneOf\":[{\"required\":[\"a\"]},{\"required\":[\"b\"]}]}", L("{\"a\":1}"), L("1", "\"s\"", "{\"a\":1,\"b\":2}"));
    check("{\"type\":\"object\",\"oneOf\":[{\"properties\":{\"key\":{}},\"additionalProperties\":false},"
          "{\"properties\":{\"keys\":{}},\"additionalProperties\":false}]}",
          L("{\"key\":1}", "{\"keys\":1}"), L("{}", "{\"key\":1,\"keys\":2}"));
    check("{\"enum\":[\"a\\\"b\",1.5,{\"k\":[true]}]}", L("\"a\\\"b\"", "1.5", "{\"k\":[true]}"), L("\"a\""));
}

static void test_strings(void **state)
{
    (void)state;
    check("{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}", L("\"ab\"", "\"\\u00e9\\n\"", "\"\xc3\xa9\xc3\xa9\""),
          L("\"a\"", "\"abcd\""));
    check("{\"type\":\"string\",\"pattern\":\"^[a-z\\\"]+$\"}", L("\"ab\\\"\""), L("\"\"", "\"A\"", "\"a\"\""));
    check("{\"type\":\"string\",\"pattern\":\"\\\\d{3}\"}", L("\"x123y\"", "\"123\""), L("\"12\""));
    check("{\"type\":\"string\",\"pattern\":\"^[^/]+$\",\"maxLength\":3}", L("\"a\\\\b\"", "\"\\\"\""), L("\"a/\"", "\"abcd\""));
    check("{\"type\":\"string\",\"format\":\"date\"}", L("\"2024-02-29\"", "\"1999-12-31\""),
          L("\"2023-02-29\"", "\"1999-13-01\"", "\"1999-04-31\"", "\"0000-01-01\""));
    check("{\"type\":\"string\",\"format\":\"date-time\"}", L("\"2024-01-02T03:04:05Z\"", "\"2024-01-02T03:04:05.123+05:30\""),
          L("\"2024-01-02 03:04:05Z\"", "\"2024-01-02T24:00:00Z\""));
    check("{\"format\":\"ipv4\",\"type\":\"string\"}", L("\"192.168.0.1\""), L("\"256.1.1.1\"", "\"01.2.3.4\""));
    check("{\"format\":\"ipv6\",\"type\":\"string\"}", L("\"::1\"", "\"fe80::1:2\"", "\"1:2:3:4:5:6:7:8\"", "\"::ffff:1.2.3.4\""),
          L("\"1:2:3:4:5:6:7:8:9\"", "\"1::2::3\""));
    check("{\"format\":\"uuid\",\"type\":\"string\"}", L("\"123e4567-e89b-12d3-a456-426614174000\""), L("\"123e4567\""));
    check("{\"format\":\"email\",\"type\":\"string\"}", L("\"a.b@c.org\""), L("\"a@b\"", "\"@c.org\""));
}

/* Every integer in [-300, 300] against integer bounds. */
static void test_integer_bounds_exhaustive(void **state)
{
    (void)state;
    static const char *const bounds[] = {"\"minimum\":-5,\"maximum\":120", "\"minimum\":0", "\"maximum\":-17",
                                         "\"exclusiveMinimum\":9,\"exclusiveMaximum\":100", "\"minimum\":1.5,\"maximum\":199.9",
                                         "\"minimum\":-250,\"maximum\":-10", "\"minimum\":99,\"maximum\":101",
                                         "\"exclusiveMaximum\":0", "\"minimum\":10,\"exclusiveMinimum\":true"};
    static const double lo[] = {-5, 0, -1e9, 10, 2, -250, 99, -1e9, 11}, hi[] = {120, 1e9, -17, 99, 199, -10, 101, -1, 1e9};
    for (size_t b = 0; b < sizeof bounds / sizeof *bounds; b++) {
        char s[256], err[256];
        snprintf(s, sizeof s, "{\"type\":\"integer\",%s}", bounds[b]);
        grammar_json_opts o = {.any_whitespace = 1};
        char *g = translate(s, &o, err);
        assert_non_null(g);
        pcre2_code *re = to_pcre(g);
        for (int v = -300; v <= 300; v++) {
            char t[16];
            snprintf(t, sizeof t, "%d", v);
            int want = v >= lo[b] && v <= hi[b];
            if (matches(re, t) != want) { fprintf(stderr, "%s: %d -> %d\n%s", s, v, !want, g); fail(); }
        }
        pcre2_code_free(re);
        free(g);
    }
}

/* Decimals on a 0.05 grid (and a few longer ones) against number bounds. */
static void test_number_bounds(void **state)
{
    (void)state;
    static const char *const bounds[] = {"\"minimum\":0,\"maximum\":1", "\"exclusiveMinimum\":0.1,\"maximum\":2.25",
                                         "\"minimum\":-1.5", "\"exclusiveMaximum\":-0.35", "\"minimum\":-2,\"exclusiveMaximum\":2"};
    static const double lo[] = {0, 0.1, -1.5, -1e9, -2}, hi[] = {1, 2.25, 1e9, -0.35, 2};
    static const int lx[] = {0, 1, 0, 0, 0}, hx[] = {0, 0, 0, 1, 1};
    for (size_t b = 0; b < sizeof bounds / sizeof *bounds; b++) {
        char s[256], err[256];
        snprintf(s, sizeof s, "{\"type\":\"number\",%s}", bounds[b]);
        grammar_json_opts o = {.any_whitespace = 1};
        char *g = translate(s, &o, err);
        assert_non_null(g);
        pcre2_code *re = to_pcre(g);
        for (int k = -70; k <= 70; k++) {
            /* exact decimal text for k * 0.05, plus a variant with trailing digits */
            char t[32];
            int a = k < 0 ? -k : k;
            for (int var = 0; var < 3; var++) {
                double v = k * 0.05 + (var == 2 ? (k < 0 ? -0.0001 : 0.0001) : 0);
                if (var == 0) snprintf(t, sizeof t, "%s%d.%02d", k < 0 ? "-" : "", a / 20, (a % 20) * 5);
                else if (var == 1) snprintf(t, sizeof t, "%s%d.%02d000", k < 0 ? "-" : "", a / 20, (a % 20) * 5);
                else snprintf(t, sizeof t, "%s%d.%02d01", k < 0 ? "-" : "", a / 20, (a % 20) * 5);
                double x = var == 2 ? v : k * 0.05;
                (void)x;
                /* compare in hundredths-of-ten-thousandths as integers to avoid float error */
                long long q = (long long)(k * 500) + (var == 2 ? (k < 0 ? -1 : 1) : 0); /* units of 1e-4 */
                long long ql = (long long)(lo[b] * 10000 + (lo[b] < 0 ? -0.5 : 0.5)), qh = (long long)(hi[b] * 10000 + (hi[b] < 0 ? -0.5 : 0.5));
                int want = (lx[b] ? q > ql : q >= ql) && (hx[b] ? q < qh : q <= qh);
                if (!strcmp(t, "-0.00") || !strcmp(t, "-0.00000")) continue;
                if (matches(re, t) != want) { fprintf(stderr, "%s: %s -> %d\n%s", s, t, !want, g); fail(); }
            }
        }
        pcre2_code_free(re);
        free(g);
    }
}

static void test_whitespace_modes(void **state)
{
    (void)state;
    char err[256];
    const char *s = "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"array\"}}}";
    grammar_json_opts none = {.any_whitespace = 0};
    char *g = translate(s, &none, err);
    assert_non_null(g);
    pcre2_code *re = to_pcre(g);
    assert_true(matches(re, "{\"a\":[1,2]}"));
    assert_false(matches(re, "{\"a\": [1,2]}"));
    assert_false(matches(re, "{\"a\":[1, 2]}"));
    pcre2_code_free(re);
    free(g);
    grammar_json_opts pat = {.whitespace_pattern = "[ ]?", .any_whitespace = 1};
    g = translate(s, &pat, err);
    assert_non_null(g);
    re = to_pcre(g);
    assert_true(matches(re, "{ \"a\" : [ 1 , 2 ] }"));
    assert_false(matches(re, "{  \"a\":[]}"));
    assert_false(matches(re, "{\n\"a\":[]}"));
    pcre2_code_free(re);
    free(g);
    /* JSON mode: any object */
    grammar_json_opts def = {.any_whitespace = 1};
    g = translate(NULL, &def, err);
    assert_non_null(g);
    re = to_pcre(g);
    assert_true(matches(re, "{\"x\": [1, {\"y\": null}]}"));
    assert_false(matches(re, "[1]"));
    pcre2_code_free(re);
    free(g);
}

static void test_errors_name_the_keyword(void **state)
{
    (void)state;
    static const struct { const char *schema, *word; } t[] = {
        {"{\"not\":{\"pattern\":\"a\"}}", "not"}, /* not of a type, enum, bound ...: test_schema_logic */
        {"{\"type\":\"array\",\"uniqueItems\":true}", "uniqueItems"},
        {"{\"if\":{\"format\":\"date\"},\"then\":{\"minLength\":1}}", "if"},
        {"{\"type\":\"array\",\"contains\":{\"pattern\":\"a\"},\"maxContains\":1}", "not"},
        {"{\"type\":\"number\",\"multipleOf\":0.01}", "multipleOf"},
        {"{\"$ref\":\"other.json#/a\"}", "remote"},
        {"{\"$ref\":\"#/$defs/missing\"}", "not found"},
        {"{\"$defs\":{\"a\":{\"$ref\":\"#/$defs/b\"},\"b\":{\"$ref\":\"#/$defs/a\"}},\"$ref\":\"#/$defs/a\"}", "cycle"},
        {"{\"type\":\"string\",\"pattern\":\"(?=x)\"}", "lookahead"},
        {"{\"type\":\"integer\",\"minimum\":5,\"maximum\":1}", "minimum"},
        {"{\"type\":", "not JSON"},
        {"{\"oneOf\":[{\"type\":\"number\"},{\"type\":\"integer\"}]}", "oneOf"},
    };
    for (size_t i = 0; i < sizeof t / sizeof *t; i++) {
        char err[256];
        grammar_json_opts o = {.any_whitespace = 1};
        char *g = translate(t[i].schema, &o, err);
        if (g || !strstr(err, t[i].word)) fprintf(stderr, "%s -> %s\n", t[i].schema, g ? "compiled" : err);
        assert_null(g);
        assert_non_null(strstr(err, t[i].word));
    }
}

/* Large inputs stay bounded: a deep nesting is an error, a big enum and
 * large bounds compile to a grammar proportional to the input. */
static void test_bounded_work(void **state)
{
    (void)state;
    strbuf s = {0};
    for (int i = 0; i < 1000; i++) strbuf_puts(&s, "{\"items\":");
    strbuf_puts(&s, "{}");
    for (int i = 0; i < 1000; i++) strbuf_puts(&s, "}");
    char err[256];
    grammar_json_opts o = {.any_whitespace = 1};
    char *g = translate(s.p, &o, err);
    assert_null(g);
    assert_non_null(strstr(err, "deep"));
    free(s.p);
    s = (strbuf){0};
    strbuf_puts(&s, "{\"enum\":[");
    for (int i = 0; i < 20000; i++) strbuf_printf(&s, "%s\"v%d\"", i ? "," : "", i);
    strbuf_puts(&s, "]}");
    g = translate(s.p, &o, err);
    assert_non_null(g);
    assert_true(strlen(g) < 20 * s.len);
    free(g);
    free(s.p);
    g = translate("{\"type\":\"integer\",\"minimum\":-1e300,\"maximum\":1e300}", &o, err);
    assert_non_null(g);
    assert_true(strlen(g) < 200000);
    free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_types),
        cmocka_unit_test(test_objects),
        cmocka_unit_test(test_arrays),
        cmocka_unit_test(test_combinators_refs),
        cmocka_unit_test(test_strings),
        cmocka_unit_test(test_integer_bounds_exhaustive),
        cmocka_unit_test(test_number_bounds),
        cmocka_unit_test(test_whitespace_modes),
        cmocka_unit_test(test_errors_name_the_keyword),
        cmocka_unit_test(test_bounded_work),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
