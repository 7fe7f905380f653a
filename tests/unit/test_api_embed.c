/* test_api_embed — embedding request parsing (SGLang's messages), the
 * Matryoshka checks and base64 encoding (src/api/api_embed.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <jansson.h>

#include "api/api_embed.h"

/* parse `body`; expect failure with `msg` (substring), or success when msg is NULL */
static void parse_expect(const char *body, bool oai, const char *msg, api_embed_req *out)
{
    json_t *j = json_loads(body, 0, NULL);
    assert_non_null(j);
    char err[512] = "";
    int rc = api_embed_parse(j, oai, out, err, sizeof err);
    json_decref(j);
    if (msg) {
        assert_int_equal(rc, -1);
        if (!strstr(err, msg)) fail_msg("%s: got '%s', want '%s'", body, err, msg);
        assert_int_equal(out->n, 0);
    } else {
        if (rc) fail_msg("%s: %s", body, err);
    }
}

static void test_parse_openai(void **st)
{
    (void)st;
    api_embed_req q;
    parse_expect("{\"input\": \"hello\", \"model\": \"m\"}", true, NULL, &q);
    assert_int_equal(q.n, 1);
    assert_true(q.single);
    assert_string_equal(q.items[0].text, "hello");
    assert_false(q.base64);
    assert_false(q.has_dims);
    api_embed_req_free(&q);
    parse_expect("{\"input\": [\"a\", \"b c\"], \"encoding_format\": \"base64\", \"dimensions\": 32}", true, NULL, &q);
    assert_int_equal(q.n, 2);
    assert_false(q.single);
    assert_true(q.base64);
    assert_true(q.has_dims);
    assert_int_equal(q.dims, 32);
    assert_string_equal(q.items[1].text, "b c");
    api_embed_req_free(&q);
    parse_expect("{\"input\": [5, 6, 7]}", true, NULL, &q);
    assert_int_equal(q.n, 1);
    assert_int_equal(q.items[0].n_ids, 3);
    assert_int_equal(q.items[0].ids[2], 7);
    api_embed_req_free(&q);
    parse_expect("{\"input\": [[5], [6, 7]], \"rid\": [\"x\", \"y\"]}", true, NULL, &q);
    assert_int_equal(q.n, 2);
    assert_int_equal(q.items[1].n_ids, 2);
    assert_string_equal(q.rids[1], "y");
    api_embed_req_free(&q);
    /* SGLang's serving_embedding.py messages */
    parse_expect("{\"input\": \"\"}", true, "Input cannot be empty", &q);
    parse_expect("{\"input\": \"  \\n\"}", true, "Input cannot be empty or whitespace only", &q);
    parse_expect("{\"input\": []}", true, "Input cannot be empty", &q);
    parse_expect("{\"input\": [\"a\", 1]}", true, "All items in input list must be strings", &q);
    parse_expect("{\"input\": [\"a\", \" \"]}", true, "Input at index 1 cannot be empty or whitespace only", &q);
    parse_expect("{\"input\": [1, \"a\"]}", true, "All items in input list must be integers", &q);
    parse_expect("{\"input\": [1, -1]}", true, "Token ID at index 1 must be non-negative", &q);
    parse_expect("{\"input\": [[1], 2]}", true, "Input at index 1 must be a list", &q);
    parse_expect("{\"input\": [[1], []]}", true, "Input at index 1 cannot be empty", &q);
    parse_expect("{\"input\": [[1], [1.5]]}", true, "Input at index 1 must contain only integers", &q);
    parse_expect("{\"input\": [[1], [-3]]}", true, "Input at index 1 contains negative token IDs", &q);
    parse_expect("{\"model\": \"m\"}", true, "input", &q);
    parse_expect("{\"input\": \"a\", \"encoding_format\": \"int8\"}", true, "encoding_format", &q);
    parse_expect("{\"input\": \"a\", \"dimensions\": \"8\"}", true, "dimensions", &q);
    parse_expect("{\"input\": [{\"text\": \"a\"}]}", true, "Multimodal", &q);
    parse_expect("{\"input\": [\"a\", \"b\"], \"rid\": \"x\"}", true, "rid", &q);
}

static void test_parse_native(void **st)
{
    (void)st;
    api_embed_req q;
    parse_expect("{\"text\": \"hi\", \"rid\": \"r1\"}", false, NULL, &q);
    assert_true(q.single);
    assert_string_equal(q.rids[0], "r1");
    api_embed_req_free(&q);
    parse_expect("{\"input_ids\": [[1, 2], [3]]}", false, NULL, &q);
    assert_int_equal(q.n, 2);
    assert_false(q.single);
    api_embed_req_free(&q);
    parse_expect("{\"text\": \"\"}", false, NULL, &q); /* native: the tokenizer decides */
    api_embed_req_free(&q);
    parse_expect("{}", false, "Either text or input_ids should be provided.", &q);
    parse_expect("{\"text\": \"a\", \"input_ids\": [1]}", false, "Either text or input_ids should be provided.", &q);
    parse_expect("{\"text\": 5}", false, "text must be", &q);
    parse_expect("{\"input_ids\": \"1\"}", false, "input_ids must be", &q);
}

static void test_dims(void **st)
{
    (void)st;
    char err[512];
    api_embed_model m = {.model_path = "Qwen/Qwen3-Embedding-0.6B", .hidden_size = 1024};
    assert_int_equal(api_embed_check_dims(&m, 256, err, sizeof err), -1);
    assert_string_equal(err, "Model 'Qwen/Qwen3-Embedding-0.6B' does not support matryoshka representation, "
                             "changing output dimensions will lead to poor results.");
    m.is_matryoshka = true;
    assert_int_equal(api_embed_check_dims(&m, 256, err, sizeof err), 0);
    assert_int_equal(api_embed_check_dims(&m, 0, err, sizeof err), -1);
    assert_string_equal(err, "Requested dimensions must be greater than 0");
    assert_int_equal(api_embed_check_dims(&m, 1025, err, sizeof err), -1);
    assert_string_equal(err, "Provided dimensions are greater than max embedding dimension: 1024");
    int md[3] = {64, 128, 256};
    m.mdims = md, m.n_mdims = 3;
    assert_int_equal(api_embed_check_dims(&m, 128, err, sizeof err), 0);
    assert_int_equal(api_embed_check_dims(&m, 100, err, sizeof err), -1);
    assert_string_equal(err, "Model 'Qwen/Qwen3-Embedding-0.6B' only supports [64, 128, 256] matryoshka dimensions, "
                             "using other output dimensions will lead to poor results.");
}

static void test_base64(void **st)
{
    (void)st;
    /* Python: base64.b64encode(struct.pack('<3f', 1.0, -2.0, 0.5)) */
    float v[3] = {1.0f, -2.0f, 0.5f};
    char *b = api_embed_base64(v, 3);
    assert_string_equal(b, "AACAPwAAAMAAAAA/");
    free(b);
    b = api_embed_base64(v, 1);
    assert_string_equal(b, "AACAPw==");
    free(b);
    b = api_embed_base64(v, 0);
    assert_string_equal(b, "");
    free(b);
    json_t *a = api_embed_float_array(v, 3);
    assert_int_equal(json_array_size(a), 3);
    assert_true(json_real_value(json_array_get(a, 1)) == -2.0);
    json_decref(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_openai),
        cmocka_unit_test(test_parse_native),
        cmocka_unit_test(test_dims),
        cmocka_unit_test(test_base64),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
