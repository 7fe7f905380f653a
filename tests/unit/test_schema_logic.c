/* test_schema_logic — JSON Schema `not`, `if`/`then`/`else`, `contains`
 * and `uniqueItems` through grammar_schema_to_ebnf and the engine: each
 * case is a schema, instances it accepts and instances it rejects (by the
 * spec), walked byte by byte through the compiled grammar; refusals must
 * name the keyword.  (The JSON-Schema-Test-Suite run,
 * test_json_schema_suite.sh, checks the same keywords against the
 * suite's own verdicts.) */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar.h"

static const grammar_json_opts g_compact = {NULL, 0, 0};

typedef struct {
    const char *schema;
    const char *yes[12];
    const char *no[12];
} scase;

static grammar *compile_schema(const char *s, char *err, size_t errlen)
{
    strbuf sb = {0};
    grammar *g = NULL;
    if (grammar_schema_to_ebnf(s, strlen(s), &g_compact, &sb, err, errlen) == 0)
        g = grammar_compile_ebnf(sb.p, sb.len, "root", err, errlen);
    free(sb.p);
    return g;
}

static int accepts(const grammar *g, const char *s)
{
    grammar_matcher *m = grammar_matcher_new(g, NULL);
    assert_non_null(m);
    int ok = grammar_matcher_accept_bytes(m, s, strlen(s)) && grammar_matcher_can_end(m);
    grammar_matcher_free(m);
    return ok;
}

static void run(const scase *cs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char err[512];
        grammar *g = compile_schema(cs[i].schema, err, sizeof err);
        if (!g) fail_msg("case %zu (%s): %s", i, cs[i].schema, err);
        for (int k = 0; k < 12 && cs[i].yes[k]; k++)
            if (!accepts(g, cs[i].yes[k])) fail_msg("case %zu (%s) rejects %s", i, cs[i].schema, cs[i].yes[k]);
        for (int k = 0; k < 12 && cs[i].no[k]; k++)
            if (accepts(g, cs[i].no[k])) fail_msg("case %zu (%s) accepts %s", i, cs[i].schema, cs[i].no[k]);
        grammar_free(g);
    }
}

static void refused(const char *schema, const char *what)
{
    char err[512] = "";
    strbuf sb = {0};
    int rc = grammar_schema_to_ebnf(schema, strlen(schema), &g_compact, &sb, err, sizeof err);
    free(sb.p);
    if (rc != -1 || !strstr(err, what)) fail_msg("%s: rc %d, '%s' (want '%s')", schema, rc, err, what);
}

static void test_not(void **state)
{
    (void)state;
    static const scase cs[] = {
        {"{\"not\":{\"type\":\"string\"}}", {"1", "null", "true", "{}", "[]", "-2.5"}, {"\"a\"", "\"\""}},
        {"{\"type\":[\"string\",\"integer\"],\"not\":{\"type\":\"string\"}}", {"1", "-3"}, {"\"a\"", "null", "1.5"}},
        {"{\"type\":\"string\",\"not\":{\"enum\":[\"a\",\"b\"]}}",
         {"\"c\"", "\"\"", "\"ab\"", "\"ba\"", "\"a b\""},
         {"\"a\"", "\"b\"", "1"}},
        {"{\"not\":{\"const\":null}}", {"1", "\"x\"", "false", "[]", "{}"}, {"null"}},
        {"{\"not\":{\"enum\":[true,\"x\"]}}", {"false", "null", "\"y\"", "0", "[true]"}, {"true", "\"x\""}},
        {"{\"enum\":[\"a\",\"b\",\"c\"],\"not\":{\"const\":\"b\"}}", {"\"a\"", "\"c\""}, {"\"b\"", "\"d\""}},
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"integer\"}},"
         "\"not\":{\"required\":[\"a\",\"b\"]}}",
         {"{}", "{\"a\":1}", "{\"b\":2}"},
         {"{\"a\":1,\"b\":2}"}},
        {"{\"not\":{\"required\":[\"a\"]}}", {"{}", "{\"b\":1}"}, {"{\"a\":1}", "1", "\"s\"", "[]"}},
        {"{\"type\":\"object\",\"properties\":{\"k\":{\"type\":\"string\"}},\"required\":[\"k\"],"
         "\"not\":{\"properties\":{\"k\":{\"const\":\"none\"}}}}",
         {"{\"k\":\"x\"}", "{\"k\":\"nonee\"}"},
         {"{\"k\":\"none\"}", "{}"}},
        {"{\"type\":\"object\",\"not\":{\"anyOf\":[{\"required\":[\"a\"]},{\"required\":[\"b\"]}]}}",
         {"{}", "{\"c\":1}"},
         {"{\"a\":1}", "{\"b\":1}", "{\"a\":1,\"b\":2}"}},
        {"{\"type\":\"string\",\"not\":{\"minLength\":3}}", {"\"\"", "\"ab\""}, {"\"abc\"", "\"abcd\""}},
        {"{\"type\":\"integer\",\"not\":{\"minimum\":5}}", {"4", "-10", "0"}, {"5", "6", "100"}},
        {"{\"type\":\"array\",\"not\":{\"maxItems\":1}}", {"[1,2]", "[1,2,3]"}, {"[]", "[1]"}},
        {"{\"not\":{\"not\":{\"type\":\"null\"}}}", {"null"}, {"1", "\"a\""}},
        /* numbers other than some: the intervals between them */
        {"{\"type\":\"number\",\"not\":{\"enum\":[1,2.5]}}", {"0", "1.5", "2", "2.51", "-7", "3"}, {"1", "1.0", "2.5", "2.50"}},
        {"{\"type\":\"integer\",\"not\":{\"const\":0}}", {"1", "-1", "10"}, {"0", "-0"}},
        /* not integer: the numbers with a non-zero fraction digit (no exponent forms: a subset) */
        {"{\"not\":{\"type\":\"integer\"}}", {"1.5", "-0.25", "null", "\"a\"", "10.010"}, {"1", "-3", "0", "2.0", "1.00"}},
        {"{\"enum\":[1,1.5,\"x\"],\"not\":{\"type\":\"integer\"}}", {"1.5", "\"x\""}, {"1", "1.0"}},
        {"{\"type\":\"integer\",\"not\":false}", {"1"}, {"\"a\""}},
        {"{\"$defs\":{\"n\":{\"type\":\"null\"}},\"not\":{\"$ref\":\"#/$defs/n\"}}", {"1", "\"a\""}, {"null"}},
    };
    run(cs, sizeof cs / sizeof *cs);
    refused("{\"not\":{}}", "cannot be satisfied");
    refused("{\"not\":{\"pattern\":\"^a\"}}", "'not' of a schema with 'pattern'");
    refused("{\"type\":\"number\",\"minimum\":1,\"not\":{\"type\":\"integer\"}}", "'not' of type integer together");
    refused("{\"not\":{\"enum\":[{},2]}}", "object values");
    refused("{\"type\":\"string\",\"minLength\":2,\"not\":{\"const\":\"ab\"}}", "'not' of string values");
}

static void test_if_then_else(void **state)
{
    (void)state;
    static const scase cs[] = {
        {"{\"type\":\"object\",\"properties\":{\"kind\":{\"enum\":[\"a\",\"b\"]},\"n\":{\"type\":\"integer\"}},"
         "\"required\":[\"kind\"],"
         "\"if\":{\"properties\":{\"kind\":{\"const\":\"a\"}}},\"then\":{\"required\":[\"n\"]},"
         "\"else\":{\"properties\":{\"n\":false}}}",
         {"{\"kind\":\"a\",\"n\":1}", "{\"kind\":\"b\"}"},
         {"{\"kind\":\"a\"}", "{\"kind\":\"b\",\"n\":1}"}},
        {"{\"if\":{\"type\":\"string\"},\"then\":{\"minLength\":2}}", {"\"ab\"", "1", "null"}, {"\"a\"", "\"\""}},
        {"{\"if\":{\"type\":\"number\",\"minimum\":10},\"else\":{\"type\":\"string\"}}",
         {"10", "11", "\"x\""},
         {"9", "null", "true"}},
        /* two conditionals in an allOf */
        {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"boolean\"},\"b\":{\"type\":\"boolean\"},"
         "\"x\":{\"type\":\"integer\"},\"y\":{\"type\":\"integer\"}},\"allOf\":["
         "{\"if\":{\"properties\":{\"a\":{\"const\":true}},\"required\":[\"a\"]},\"then\":{\"required\":[\"x\"]}},"
         "{\"if\":{\"properties\":{\"b\":{\"const\":true}},\"required\":[\"b\"]},\"then\":{\"required\":[\"y\"]}}]}",
         {"{}", "{\"a\":true,\"x\":1}", "{\"a\":false,\"b\":true,\"y\":2}", "{\"a\":true,\"b\":true,\"x\":1,\"y\":2}"},
         {"{\"a\":true}", "{\"b\":true,\"x\":1}", "{\"a\":true,\"b\":true,\"x\":1}"}},
        /* if without then/else: no constraint */
        {"{\"type\":\"integer\",\"if\":{\"minimum\":3}}", {"1", "5"}, {"\"a\""}},
    };
    run(cs, sizeof cs / sizeof *cs);
    refused("{\"if\":{\"pattern\":\"x\"},\"then\":{\"type\":\"string\"}}", "'if'/'then'/'else'");
}

static void test_contains_unique(void **state)
{
    (void)state;
    static const scase cs[] = {
        {"{\"type\":\"array\",\"contains\":{\"const\":5}}", {"[5]", "[1,5]", "[5,5,2]", "[1,2,3,5]"}, {"[]", "[1]", "[4,6]"}},
        {"{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"contains\":{\"minimum\":10},\"minContains\":2}",
         {"[10,11]", "[1,10,2,20,3]", "[10,10,10]"},
         {"[10]", "[1,2,3]", "[10,\"x\",11]", "[]"}},
        {"{\"type\":\"array\",\"contains\":{\"type\":\"string\"},\"minContains\":0}", {"[]", "[1]"}, {"{}"}},
        {"{\"type\":\"array\",\"uniqueItems\":true,\"items\":{\"enum\":[\"a\",\"b\",\"c\"]}}",
         {"[]", "[\"a\"]", "[\"b\",\"a\"]", "[\"c\",\"a\",\"b\"]"},
         {"[\"a\",\"a\"]", "[\"a\",\"b\",\"a\"]", "[\"d\"]"}},
        {"{\"type\":\"array\",\"uniqueItems\":true,\"minItems\":2,\"items\":{\"type\":\"boolean\"}}",
         {"[true,false]", "[false,true]"},
         {"[true]", "[true,true]", "[]"}},
        {"{\"type\":\"array\",\"uniqueItems\":true,\"maxItems\":2,\"items\":{\"enum\":[1,1.0,2,3]}}",
         {"[1,2]", "[3]", "[2,3]"},
         {"[1,1]", "[1,1.0]", "[1,2,3]"}},
    };
    run(cs, sizeof cs / sizeof *cs);
    static const scase mx[] = {
        {"{\"type\":\"array\",\"contains\":{\"const\":\"x\"},\"maxContains\":2}",
         {"[\"x\"]", "[\"x\",\"x\"]", "[2,\"x\",3,\"x\"]", "[\"x\",\"y\"]"},
         {"[]", "[2]", "[\"x\",\"x\",\"x\"]", "[\"x\",2,\"x\",\"x\"]"}},
        {"{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"contains\":{\"minimum\":5},\"minContains\":0,"
         "\"maxContains\":1}",
         {"[]", "[1]", "[1,7,2]", "[9]"},
         {"[5,6]", "[1,5,2,8]", "[\"a\"]"}},
        {"{\"type\":\"array\",\"contains\":{\"type\":\"string\"},\"minContains\":2,\"maxContains\":3}",
         {"[\"a\",\"b\"]", "[1,\"a\",2,\"b\",\"c\"]"},
         {"[\"a\"]", "[\"a\",\"b\",\"c\",\"d\"]", "[1,2]"}},
    };
    run(mx, sizeof mx / sizeof *mx);
    refused("{\"type\":\"array\",\"contains\":{\"pattern\":\"a\"},\"maxContains\":2}", "'not'");
    refused("{\"type\":\"array\",\"uniqueItems\":true,\"items\":{\"type\":\"string\"}}", "uniqueItems");
    refused("{\"type\":\"array\",\"prefixItems\":[{}],\"contains\":{\"const\":1}}", "contains");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_not),
        cmocka_unit_test(test_if_then_else),
        cmocka_unit_test(test_contains_unique),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
