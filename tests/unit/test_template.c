/* test_template — unit tests of the Jinja engine (src/template).
 *
 * The golden table (template_golden.inc) holds one-line templates with the
 * output python3-jinja2 gives for them in transformers' environment
 * (regenerate with tests/ref/gen_unit_golden.py); NULL marks templates
 * jinja2 rejects, where sglc must return an error too.  The other tests
 * cover what a table cannot: syntax-error positions, limits, the
 * raise_exception message, special tokens and named templates. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "template/template.h"
#include "template/template_impl.h" /* tr_filter_known / tr_test_known */

struct golden {
    const char *src;
    const char *expected; /* NULL: must be an error */
};
#include "template_golden.inc"

static const char *CTX_JSON =
    "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi there\"},"
    " {\"role\": \"assistant\", \"content\": \"Hello!\", \"extra\": 1.5},"
    " {\"role\": \"user\", \"content\": null}], \"bos_token\": \"<s>\"}";

/* compile + render; returns 0 with *out, -1 with *err */
static int render(const char *src, const char *vars_json, const tmpl_limits *lim, char **out, char **err)
{
    tmpl_template *t = NULL;
    *out = *err = NULL;
    if (tmpl_compile(src, strlen(src), &t, err)) return -1;
    json_t *vars = json_loads(vars_json ? vars_json : "{}", 0, NULL);
    assert_non_null(vars);
    int rc = tmpl_render(t, vars, lim, out, NULL, err);
    json_decref(vars);
    tmpl_destroy(t);
    return rc;
}

static void test_golden(void **state)
{
    (void)state;
    int bad = 0;
    for (size_t i = 0; i < sizeof GOLDEN / sizeof GOLDEN[0]; i++) {
        char *out, *err;
        int rc = render(GOLDEN[i].src, CTX_JSON, NULL, &out, &err);
        int ok = GOLDEN[i].expected ? (rc == 0 && !strcmp(out, GOLDEN[i].expected)) : rc != 0;
        if (!ok) {
            bad++;
            fprintf(stderr, "golden %zu: %s\n  expected: %s\n  got: %s\n", i, GOLDEN[i].src,
                    GOLDEN[i].expected ? GOLDEN[i].expected : "(error)", rc == 0 ? out : err);
        }
        free(out);
        free(err);
    }
    assert_int_equal(bad, 0);
}

static void expect(const char *src, const char *vars, const char *want)
{
    char *out, *err;
    int rc = render(src, vars, NULL, &out, &err);
    if (rc) fprintf(stderr, "error for %s: %s\n", src, err);
    assert_int_equal(rc, 0);
    assert_string_equal(out, want);
    free(out);
    free(err);
}

/* returns the error string (caller frees) and asserts it is an error */
static char *expect_error(const char *src, const char *vars, const tmpl_limits *lim)
{
    char *out, *err;
    int rc = render(src, vars, lim, &out, &err);
    if (rc == 0) fprintf(stderr, "unexpected success for %.80s: %.200s\n", src, out);
    assert_int_equal(rc, -1);
    assert_null(out);
    assert_non_null(err);
    return err;
}

/* Python's printf-style % and the specs handed to vsnprintf: valid ones
 * as Python prints them (also past 512 bytes), malformed ones an error
 * rather than undefined printf behaviour. */
static void test_percent_format(void **state)
{
    (void)state;
    expect("{{ '%5.2f|%-4d|%s|%03x|%+.1e' % (3.14159, 7, 'x', 255, 12345.0) }}", NULL,
           " 3.14|7   |x|0ff|+1.2e+04");
    char *out, *err;
    assert_int_equal(render("{{ ('%.300f' % 1e300) | length }}", NULL, NULL, &out, &err), 0);
    assert_string_equal(out, "602"); /* 301 integer digits + '.' + 300 decimals */
    free(out), free(err);
    assert_int_equal(render("{{ ('%9999d' % 1) | length }}", NULL, NULL, &out, &err), 0);
    assert_string_equal(out, "9999");
    free(out), free(err);
    expect("{{ '%-+ #0-+ #0-+ #0-+ #0d|' % 1 }}", NULL, "+1|"); /* repeated flags */
    static const char *const bad[] = {"{{ '%1.2.3f' % 1.5 }}", "{{ '%99999d' % 1 }}", "{{ '%.301f' % 1.0 }}",
                                      "{{ '%.2.5f' % 0.25 }}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) free(expect_error(bad[i], NULL, NULL));
}

static void test_syntax_errors(void **state)
{
    (void)state;
    static const struct { const char *src; const char *where; } cases[] = {
        {"{% if x %}\nno end", "line 2"},
        {"ok\n  {{ 1 + }}", "line 2, column 10"},
        {"{% for %}", "line 1"},
        {"{{ x | nosuchfilter }}", "no filter named 'nosuchfilter'"},
        {"{{ x is nosuchtest }}", "no test named 'nosuchtest'"},
        {"{% endif %}", "unexpected 'endif'"},
        {"{{ 'unterminated }}", "unterminated string"},
        {"{% include 'x' %}", "unsupported or unknown statement 'include'"},
        {"{# never closed", "comment"},
        {"{{ (((((1 }}", "line 1"},
        {"{% for x in y recursive recursive %}{% endfor %}", "line 1"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tmpl_template *t = NULL;
        char *err = NULL;
        assert_int_equal(tmpl_compile(cases[i].src, strlen(cases[i].src), &t, &err), -1);
        assert_null(t);
        assert_non_null(err);
        if (!strstr(err, cases[i].where)) fprintf(stderr, "%s -> %s\n", cases[i].src, err);
        assert_non_null(strstr(err, cases[i].where));
        free(err);
    }
}

static void test_raise_exception_message(void **state)
{
    (void)state;
    char *err = expect_error("a{{ raise_exception('Roles must alternate ' ~ 2) }}b", NULL, NULL);
    assert_string_equal(err, "Roles must alternate 2");
    free(err);
    err = expect_error("{{ messages[0].content + 1 }}", CTX_JSON, NULL);
    assert_non_null(strstr(err, "concatenate"));
    free(err);
    err = expect_error("{{ nothing.attr }}", NULL, NULL);
    assert_non_null(strstr(err, "'nothing' is undefined"));
    free(err);
}

static void test_limits(void **state)
{
    (void)state;
    tmpl_limits small = {.max_output = 1000, .max_steps = 5000, .max_depth = 8, .max_memory = 1 << 20};
    char *err;
    /* nested loops: 300^3 iterations hit the step limit */
    tmpl_limits steps = {.max_steps = 5000};
    err = expect_error("{% for a in range(300) %}{% for b in range(300) %}{% for c in range(300) %}"
                       "{% endfor %}{% endfor %}{% endfor %}", NULL, &steps);
    assert_non_null(strstr(err, "step limit"));
    free(err);
    err = expect_error("{% for a in range(2000) %}xxxxxxxxxx{% endfor %}", NULL, &small);
    assert_non_null(strstr(err, "size limit"));
    free(err);
    err = expect_error("{% macro m(n) %}{{ m(n + 1) }}{% endmacro %}{{ m(0) }}", NULL, &small);
    assert_non_null(strstr(err, "nested too deeply"));
    free(err);
    err = expect_error("{% for x in [1] recursive %}{{ loop([x]) }}{% endfor %}", NULL, &small);
    assert_non_null(strstr(err, "nested too deeply"));
    free(err);
    err = expect_error("{{ 'x' * 100000000000 }}", NULL, &small);
    free(err);
    err = expect_error("{% set ns = namespace(s='xxxxxxxxxxxxxxxx') %}{% for i in range(40) %}"
                       "{% set ns.s = ns.s ~ ns.s %}{% endfor %}", NULL, &small);
    free(err);
    err = expect_error("{{ range(1000000) | length }}", NULL, NULL);
    assert_non_null(strstr(err, "MAX_RANGE"));
    free(err);
    /* deep expression nesting is a syntax error, not a stack overflow */
    char deep[20000];
    size_t k = 0;
    k += (size_t)snprintf(deep, sizeof deep, "{{ ");
    for (int i = 0; i < 5000; i++) deep[k++] = '(';
    deep[k++] = '1';
    for (int i = 0; i < 5000; i++) deep[k++] = ')';
    snprintf(deep + k, sizeof deep - k, " }}");
    tmpl_template *t = NULL;
    assert_int_equal(tmpl_compile(deep, strlen(deep), &t, &err), -1);
    assert_non_null(strstr(err, "too deeply"));
    free(err);
}

static void test_whitespace_control(void **state)
{
    (void)state;
    /* trim_blocks + lstrip_blocks as transformers configures them */
    expect("{% if true %}\n  x\n{% endif %}\ny", NULL, "  x\ny");
    expect("  {% if true %}a{% endif %}\n", NULL, "a");
    expect("  {{ 'v' }}  ", NULL, "  v  ");
    expect("a  {%- if true -%}  b  {%- endif -%}  c", NULL, "abc");
    expect("  {%+ if true %}a{% endif %}", NULL, "  a");
    expect("{% if true +%}\na{% endif %}", NULL, "\na");
    expect("x\r\ny\r\n", NULL, "x\ny");
    expect("{{ {'a': {'b': 1}} }}", NULL, "{'a': {'b': 1}}");
    expect("{% raw %}{{ x }}{% endraw %}", NULL, "{{ x }}");
    expect("a {# c #}\nb", NULL, "a b");
}

static void test_values_and_json(void **state)
{
    (void)state;
    expect("{{ x | tojson }}", "{\"x\": {\"b\": [1, 2.5, null, true, \"\\u00e9\\n\"], \"a\": {}}}",
           "{\"b\": [1, 2.5, null, true, \"é\\n\"], \"a\": {}}");
    expect("{{ x | tojson(indent=2) }}", "{\"x\": {\"a\": [1]}}", "{\n  \"a\": [\n    1\n  ]\n}");
    expect("{{ x }}", "{\"x\": [0.1, 1e16, 1e-05, 100.0, -0.0]}", "[0.1, 1e+16, 1e-05, 100.0, -0.0]");
    expect("{{ x | length }}", "{\"x\": \"h\u00e9\u6f22\"}", "3");
    expect("{{ x[1] }}{{ x[-1] }}", "{\"x\": \"h\u00e9\u6f22\"}", "\u00e9\u6f22");
    /* dict order is the JSON input order */
    expect("{% for k in d %}{{ k }}{% endfor %}", "{\"d\": {\"z\": 1, \"a\": 2, \"m\": 3}}", "zam");
}

static void test_chat_builtins_and_names(void **state)
{
    (void)state;
    tmpl_chat c;
    char *err = NULL, *out = NULL;
    json_t *msgs = json_loads("[{\"role\":\"system\",\"content\":\"S\"},{\"role\":\"user\",\"content\":\" hi \"},"
                              "{\"role\":\"assistant\",\"content\":\"yo\"}]", 0, NULL);
    assert_int_equal(tmpl_chat_load(&c, NULL, "chatml", NULL, &err), 0);
    assert_int_equal(tmpl_chat_render(&c, msgs, NULL, NULL, 1, NULL, &out, NULL, &err), 0);
    assert_string_equal(out, "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\n hi <|im_end|>\n"
                             "<|im_start|>assistant\nyo<|im_end|>\n<|im_start|>assistant\n");
    free(out);
    tmpl_chat_free(&c);

    assert_int_equal(tmpl_chat_load(&c, NULL, "llama-2", NULL, &err), 0);
    json_t *kw = json_loads("{\"bos_token\": \"<s>\", \"eos_token\": \"</s>\"}", 0, NULL);
    assert_int_equal(tmpl_chat_render(&c, msgs, NULL, NULL, 0, kw, &out, NULL, &err), 0);
    assert_string_equal(out, "<s>[INST] <<SYS>>\nS\n<</SYS>>\n\n hi [/INST] yo </s>");
    free(out);
    /* reserved kwargs are refused, as transformers would (duplicate keyword) */
    json_t *bad = json_loads("{\"messages\": []}", 0, NULL);
    assert_int_equal(tmpl_chat_render(&c, msgs, NULL, NULL, 0, bad, &out, NULL, &err), -1);
    free(err);
    json_decref(bad);
    json_decref(kw);
    tmpl_chat_free(&c);

    assert_int_equal(tmpl_chat_load(&c, NULL, "no-such-builtin", NULL, &err), -1);
    assert_non_null(strstr(err, "not a built-in"));
    free(err);

    /* a folder with a list of named templates and AddedToken-style tokens */
    char dir[] = "/tmp/sglc_tmpl_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[256];
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("{\"bos_token\": {\"__type\": \"AddedToken\", \"content\": \"<B>\"}, \"eos_token\": \"<E>\","
          " \"unk_token\": null, \"model_max_length\": 1000000000000000019884624838656,"
          " \"chat_template\": [{\"name\": \"default\", \"template\": \"{{ bos_token }}D{{ unk_token is defined }}\"},"
          " {\"name\": \"tool_use\", \"template\": \"T{{ eos_token }}{{ tools | length }}\"}]}", f);
    fclose(f);
    assert_int_equal(tmpl_chat_load(&c, dir, NULL, NULL, &err), 0);
    assert_int_equal(tmpl_chat_render(&c, msgs, NULL, NULL, 0, NULL, &out, NULL, &err), 0);
    assert_string_equal(out, "<B>DFalse");
    free(out);
    tmpl_chat_free(&c);
    assert_int_equal(tmpl_chat_load(&c, dir, NULL, "tool_use", &err), 0);
    json_t *tools = json_loads("[{\"type\": \"function\"}]", 0, NULL);
    assert_int_equal(tmpl_chat_render(&c, msgs, tools, NULL, 0, NULL, &out, NULL, &err), 0);
    assert_string_equal(out, "T<E>1");
    free(out);
    json_decref(tools);
    tmpl_chat_free(&c);
    assert_int_equal(tmpl_chat_load(&c, dir, NULL, "missing", &err), -1);
    assert_non_null(strstr(err, "available: default, tool_use"));
    free(err);
    unlink(path);
    /* newer layout: chat_template.jinja + additional_chat_templates/NAME.jinja */
    f = fopen(path, "w");
    assert_non_null(f);
    fputs("{\"eos_token\": \"<E>\"}", f);
    fclose(f);
    char jpath[300], adir[300], apath[320];
    snprintf(jpath, sizeof jpath, "%s/chat_template.jinja", dir);
    snprintf(adir, sizeof adir, "%s/additional_chat_templates", dir);
    snprintf(apath, sizeof apath, "%s/rag.jinja", adir);
    f = fopen(jpath, "w");
    assert_non_null(f);
    fputs("J{{ eos_token }}\n", f);
    fclose(f);
    assert_int_equal(mkdir(adir, 0700), 0);
    f = fopen(apath, "w");
    assert_non_null(f);
    fputs("R{{ messages | length }}", f);
    fclose(f);
    assert_int_equal(tmpl_chat_load(&c, dir, NULL, NULL, &err), 0);
    assert_int_equal(tmpl_chat_render(&c, msgs, NULL, NULL, 0, NULL, &out, NULL, &err), 0);
    assert_string_equal(out, "J<E>");
    free(out);
    tmpl_chat_free(&c);
    assert_int_equal(tmpl_chat_load(&c, dir, NULL, "rag", &err), 0);
    assert_int_equal(tmpl_chat_render(&c, msgs, NULL, NULL, 0, NULL, &out, NULL, &err), 0);
    assert_string_equal(out, "R3");
    free(out);
    tmpl_chat_free(&c);
    unlink(apath);
    rmdir(adir);
    unlink(jpath);
    unlink(path);
    rmdir(dir);
    json_decref(msgs);
}

static void test_strftime_fixed_date(void **state)
{
    (void)state;
    setenv("SGLC_FIXED_DATE", "2024-07-26", 1);
    expect("{{ strftime_now('%d %b %Y, %A') }}", NULL, "26 Jul 2024, Friday");
    setenv("SGLC_FIXED_DATE", "2023-12-31T23:59:58", 1);
    expect("{{ strftime_now('%Y-%m-%d %H:%M:%S %j') }}", NULL, "2023-12-31 23:59:58 365");
    unsetenv("SGLC_FIXED_DATE");
    char *out, *err;
    assert_int_equal(render("{{ strftime_now('%Y') | length }}", NULL, NULL, &out, &err), 0);
    assert_string_equal(out, "4");
    free(out);
}

static void test_content_format(void **state)
{
    (void)state;
    static const struct { const char *src; int fmt; } cases[] = {
        {"{% for message in messages %}{{ message['content'] }}{% endfor %}", TMPL_CONTENT_STRING},
        {"{% for message in messages %}{% for c in message['content'] %}{{ c.text }}{% endfor %}{% endfor %}",
         TMPL_CONTENT_OPENAI},
        {"{% for m in messages %}{% for c in m.content | selectattr('type', 'eq', 'text') %}x{% endfor %}{% endfor %}",
         TMPL_CONTENT_OPENAI},
        {"{% for msg in messages %}{% for c in msg.content[1:] %}x{% endfor %}{% endfor %}", TMPL_CONTENT_OPENAI},
        {"{% for x in other.content %}{% endfor %}", TMPL_CONTENT_STRING},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tmpl_template *t = NULL;
        char *err = NULL;
        assert_int_equal(tmpl_compile(cases[i].src, strlen(cases[i].src), &t, &err), 0);
        assert_int_equal(tmpl_detect_content_format(t), cases[i].fmt);
        tmpl_destroy(t);
    }
    json_t *msg = json_loads("{\"role\": \"user\", \"name\": null, \"content\": [{\"type\": \"text\", \"text\": \"a\"},"
                             " {\"type\": \"image_url\", \"image_url\": {\"url\": \"http://x/i.png\"}},"
                             " {\"type\": \"text\", \"text\": \"b\"}]}", 0, NULL);
    assert_non_null(msg);
    json_t *s = tmpl_process_message(msg, TMPL_CONTENT_STRING, NULL);
    char *dump = json_dumps(s, JSON_COMPACT);
    assert_string_equal(dump, "{\"role\":\"user\",\"content\":\"a b\"}");
    free(dump);
    json_decref(s);
    json_t *media = json_array();
    json_t *o = tmpl_process_message(msg, TMPL_CONTENT_OPENAI, media);
    dump = json_dumps(o, JSON_COMPACT);
    assert_string_equal(dump, "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},"
                              "{\"type\":\"image\"},{\"type\":\"text\",\"text\":\"b\"}]}");
    free(dump);
    dump = json_dumps(media, JSON_COMPACT);
    assert_string_equal(dump, "[{\"type\":\"image\",\"url\":\"http://x/i.png\"}]");
    free(dump);
    json_decref(o);
    json_decref(media);
    json_decref(msg);
}

static void test_continue_final_message(void **state)
{
    (void)state;
    tmpl_chat c;
    char *err = NULL, *out = NULL;
    size_t len = 0;
    assert_int_equal(tmpl_chat_load(&c, NULL, "chatml", NULL, &err), 0);
    json_t *msgs = json_loads("[{\"role\":\"user\",\"content\":\"hi\"},{\"role\":\"assistant\",\"content\":\"The answer is\"}]",
                              0, NULL);
    assert_int_equal(tmpl_chat_render(&c, msgs, NULL, NULL, 0, NULL, &out, &len, &err), 0);
    assert_int_equal(tmpl_continue_final_message(msgs, out, &len, &err), 0);
    assert_string_equal(out, "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\nThe answer is");
    assert_int_equal(len, strlen(out));
    free(out);
    json_decref(msgs);
    /* trailing spaces trimmed by a template: cut after the stripped text */
    tmpl_chat_free(&c);
    assert_int_equal(tmpl_chat_load(&c, NULL, "{% for m in messages %}[{{ m.content | trim }}]{% endfor %}", NULL, &err), 0);
    msgs = json_loads("[{\"role\":\"assistant\",\"content\":\"  partial  \"}]", 0, NULL);
    assert_int_equal(tmpl_chat_render(&c, msgs, NULL, NULL, 0, NULL, &out, &len, &err), 0);
    assert_int_equal(tmpl_continue_final_message(msgs, out, &len, &err), 0);
    assert_string_equal(out, "[partial");
    free(out);
    json_decref(msgs);
    /* the template dropped the final message: an error */
    msgs = json_loads("[{\"role\":\"assistant\",\"content\":\"zzz\"}]", 0, NULL);
    out = strdup("nothing here");
    len = strlen(out);
    assert_int_equal(tmpl_continue_final_message(msgs, out, &len, &err), -1);
    free(err);
    free(out);
    json_decref(msgs);
    tmpl_chat_free(&c);
}

/* The filter and test tables: every implemented name is found (the tables
 * are bisected, so a row out of order would go missing here), others not;
 * names that reach the tables at render time (map / select) fail with the
 * same words as before the tables. */
static void test_filter_and_test_tables(void **state)
{
    (void)state;
    static const char *const filters[] = {
        "abs", "attr", "batch", "capitalize", "center", "count", "d", "default", "dictsort", "e",
        "escape", "first", "float", "forceescape", "format", "indent", "int", "items", "join",
        "last", "length", "list", "lower", "map", "max", "min", "reject", "rejectattr",
        "replace", "reverse", "round", "safe", "select", "selectattr", "slice", "sort", "string", "sum",
        "title", "tojson", "trim", "truncate", "unique", "upper", "wordcount", NULL};
    static const char *const tests[] = {
        "boolean", "callable", "defined", "divisibleby", "eq", "equalto", "escaped", "even",
        "false", "float", "ge", "gt", "greaterthan", "in", "integer", "iterable", "le",
        "lower", "lessthan", "lt", "mapping", "ne", "none", "number", "odd", "sameas", "sequence",
        "string", "true", "undefined", "upper", "==", "!=", "<", "<=", ">", ">=", NULL};
    for (int i = 0; filters[i]; i++) assert_true(tr_filter_known(filters[i]));
    for (int i = 0; tests[i]; i++) assert_true(tr_test_known(tests[i]));
    static const char *const unknown[] = {"", "A", "groupby", "striptags", "zzz", "abs_", "=", "test", NULL};
    for (int i = 0; unknown[i]; i++) {
        assert_false(tr_filter_known(unknown[i]));
        assert_false(tr_test_known(unknown[i]));
    }
    static const struct {
        const char *src, *out, *err;
    } cases[] = {
        {"{{ [1,2] | map('nosuch') | list }}", NULL, "filter 'nosuch' is not supported by sglc's template engine (line 1)"},
        {"{{ [1,2] | select('nosuch') | list }}", NULL, "test 'nosuch' needs an argument (line 1)"},
        {"{{ [1,2] | select('nosuch', 1, 2) | list }}", NULL,
         "test_nosuch() takes 2 positional arguments but 3 were given (line 1)"},
        {"{{ [1,2] | select('odd', 1) | list }}", NULL, "test_odd() takes 1 positional argument but 2 were given (line 1)"},
        {"{{ [1,2] | select('nosuch', 1) | list }}", NULL, "test 'nosuch' is not supported by sglc's template engine (line 1)"},
        {"{{ 1 | nosuch }}", NULL, "line 1, column 8: no filter named 'nosuch' (unknown or not supported by sglc)"},
        {"{{ nothing | int }}", NULL, "'nothing' is undefined (line 1)"},
        {"{{ 3 | indent }}", NULL, "unsupported operand type(s) for +=: 'int' and 'str' (line 1)"},
        {"{{ [1,2,3] | select('==', 2) | list }}{{ [1,2,3] | reject('>=', 2) | list }}", "[2][1]", NULL},
        {"{{ ['a','b'] | map('upper') | join(',') }}|{{ nothing | d('y') }}|{{ [1,2] | count }}", "A,B|y|2", NULL},
        {"{{ 'x<' | e }}{{ 3 | string }}{{ ' a ' | trim }}|{{ 'ab' | center(6) }}|", "x&lt;3a|  ab  |", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *out, *err;
        int rc = render(cases[i].src, NULL, NULL, &out, &err);
        if (cases[i].out) {
            assert_int_equal(rc, 0);
            assert_string_equal(out, cases[i].out);
        } else {
            assert_int_equal(rc, -1);
            assert_string_equal(err, cases[i].err);
        }
        free(out);
        free(err);
    }
}

/* tmpl_chat_prompt: the refusal with add_generation_prompt (transformers'
 * words), the cut, and the same prompt as render + tmpl_continue_final_message */
static void test_chat_prompt(void **state)
{
    (void)state;
    tmpl_chat c;
    char *err = NULL, *out = NULL, *out2 = NULL;
    size_t len = 0, len2 = 0;
    assert_int_equal(tmpl_chat_load(&c, NULL, "chatml", NULL, &err), 0);
    json_t *msgs = json_loads("[{\"role\":\"user\",\"content\":\"hi\"},{\"role\":\"assistant\",\"content\":\"The answer is\"}]",
                              0, NULL);
    assert_int_equal(tmpl_chat_prompt(&c, msgs, NULL, NULL, 1, 1, NULL, &out, &len, &err), -1);
    assert_null(out);
    assert_string_equal(err, "continue_final_message and add_generation_prompt are not compatible. Use "
                             "continue_final_message when you want the model to continue the final message, and "
                             "add_generation_prompt when you want to add a header that will prompt it to generate a "
                             "new assistant message instead.");
    free(err);
    assert_int_equal(tmpl_chat_prompt(&c, msgs, NULL, NULL, 0, 1, NULL, &out, &len, &err), 0);
    assert_string_equal(out, "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\nThe answer is");
    assert_int_equal(len, strlen(out));
    assert_int_equal(tmpl_chat_render(&c, msgs, NULL, NULL, 0, NULL, &out2, &len2, &err), 0);
    assert_int_equal(tmpl_continue_final_message(msgs, out2, &len2, &err), 0);
    assert_int_equal(len, len2);
    assert_memory_equal(out, out2, len);
    free(out);
    free(out2);
    /* without continue_final_message: tmpl_chat_render's prompt */
    assert_int_equal(tmpl_chat_prompt(&c, msgs, NULL, NULL, 1, 0, NULL, &out, &len, &err), 0);
    assert_string_equal(out, "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\nThe answer is<|im_end|>\n"
                             "<|im_start|>assistant\n");
    free(out);
    json_decref(msgs);
    /* the final message missing from the prompt: an error, no prompt */
    tmpl_chat_free(&c);
    assert_int_equal(tmpl_chat_load(&c, NULL, "{% for m in messages %}[{{ m.role }}]{% endfor %}", NULL, &err), 0);
    msgs = json_loads("[{\"role\":\"assistant\",\"content\":\"zzz\"}]", 0, NULL);
    assert_int_equal(tmpl_chat_prompt(&c, msgs, NULL, NULL, 0, 1, NULL, &out, &len, &err), -1);
    assert_null(out);
    assert_non_null(strstr(err, "does not appear in the chat"));
    free(err);
    json_decref(msgs);
    tmpl_chat_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_golden),
        cmocka_unit_test(test_syntax_errors),
        cmocka_unit_test(test_percent_format),
        cmocka_unit_test(test_raise_exception_message),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_whitespace_control),
        cmocka_unit_test(test_values_and_json),
        cmocka_unit_test(test_chat_builtins_and_names),
        cmocka_unit_test(test_strftime_fixed_date),
        cmocka_unit_test(test_content_format),
        cmocka_unit_test(test_continue_final_message),
        cmocka_unit_test(test_filter_and_test_tables),
        cmocka_unit_test(test_chat_prompt),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
