/* test_completion_template — FIM prompts of --completion-template, as
 * SGLang's code_completion_parser builds them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "template/completion.h"

static char *render(const tmpl_completion *c, const char *p, const char *s)
{
    size_t n = 0;
    char *out = tmpl_completion_prompt(c, p, strlen(p), s, strlen(s), &n);
    assert_non_null(out);
    assert_int_equal(n, strlen(out));
    return out;
}

static void test_builtins(void **state)
{
    (void)state;
    char err[256];
    tmpl_completion c;
    assert_int_equal(tmpl_completion_load("qwen_coder", &c, err, sizeof err), 0);
    char *o = render(&c, "def f(", "    return x\n");
    assert_string_equal(o, "<|fim_prefix|>def f(<|fim_suffix|>    return x\n<|fim_middle|>");
    free(o);
    tmpl_completion_free(&c);

    assert_int_equal(tmpl_completion_load("deepseek_coder", &c, err, sizeof err), 0);
    o = render(&c, "A", "B");
    assert_string_equal(o, "<\xef\xbd\x9c" "fim\xe2\x96\x81" "begin\xef\xbd\x9c>A<\xef\xbd\x9c" "fim\xe2\x96\x81"
                           "hole\xef\xbd\x9c>B<\xef\xbd\x9c" "fim\xe2\x96\x81" "end\xef\xbd\x9c>");
    free(o);
    /* an empty suffix leaves the prompt alone */
    o = render(&c, "plain prompt", "");
    assert_string_equal(o, "plain prompt");
    free(o);
    tmpl_completion_free(&c);

    assert_int_equal(tmpl_completion_load("star_coder", &c, err, sizeof err), 0);
    o = render(&c, "x", "y");
    assert_string_equal(o, "<fim_prefix>x<fim_suffix>y<fim_middle>");
    free(o);
    tmpl_completion_free(&c);
}

static void test_json_file_and_errors(void **state)
{
    (void)state;
    char path[] = "/tmp/sglc_ct_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    const char *doc = "{\"name\": \"mine\", \"fim_begin_token\": \"<B>\", \"fim_middle_token\": \"<M>\","
                      " \"fim_end_token\": \"<E>\", \"fim_position\": \"MIDDLE\"}";
    assert_int_equal(write(fd, doc, strlen(doc)), (int)strlen(doc));
    close(fd);
    char err[512];
    tmpl_completion c;
    assert_int_equal(tmpl_completion_load(path, &c, err, sizeof err), 0);
    assert_string_equal(c.name, "mine");
    char *o = render(&c, "p", "s");
    assert_string_equal(o, "<B>p<M>s<E>");
    free(o);
    tmpl_completion_free(&c);

    FILE *f = fopen(path, "w");
    fputs("{\"fim_begin_token\": \"a\", \"fim_middle_token\": \"b\", \"fim_end_token\": \"c\", \"fim_position\": \"START\"}", f);
    fclose(f);
    assert_int_equal(tmpl_completion_load(path, &c, err, sizeof err), -1);
    assert_non_null(strstr(err, "MIDDLE"));
    unlink(path);

    assert_int_equal(tmpl_completion_load("no_such_template", &c, err, sizeof err), -1);
    assert_non_null(strstr(err, "qwen_coder"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_builtins),
        cmocka_unit_test(test_json_file_and_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
