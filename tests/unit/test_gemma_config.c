/* test_gemma_config — the Gemma 2 / Gemma 3 configs parsed as transformers
 * reads them: the real config.json files of gemma-2-2b-it, gemma-3-1b-it
 * and gemma-3-4b-it (tests/ref/configs, sources in SOURCES.tsv; run from
 * the repository root), the class defaults for absent keys, the sliding
 * layer pattern / layer_types, and the errors for what sglc cannot run. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "model/arch.h"
#include "model/config.h"
#include "util/dtype.h"

#define CFG_DIR "tests/ref/configs/"

static void load(model_config *c, const char *name, const char *ov)
{
    char err[512] = "";
    int rc = model_config_load(c, name, ov, 0, err, sizeof err);
    if (rc) fprintf(stderr, "%s: %s\n", name, err);
    assert_int_equal(rc, 0);
}

static int n_sliding(const model_config *c, int *first_full)
{
    int n = 0;
    *first_full = -1;
    for (int il = 0; il < c->n_layer; il++) {
        if (model_config_layer_sliding(c, il)) n++;
        else if (*first_full < 0) *first_full = il;
    }
    return n;
}

static void test_gemma2_2b(void **state)
{
    (void)state;
    model_config c;
    load(&c, CFG_DIR "google__gemma-2-2b-it", NULL);
    assert_ptr_equal(c.arch, &model_arch_gemma2);
    assert_int_equal(c.hidden_size, 2304);
    assert_int_equal(c.head_dim, 256); /* not 2304 / 8 */
    assert_int_equal(c.n_kv_head, 4);
    assert_true(c.tie_word_embeddings); /* absent: Gemma2Config's default */
    assert_float_equal(c.attn_softcap, 50.0f, 0);
    assert_float_equal(c.final_softcap, 30.0f, 0);
    assert_float_equal(c.attn_mult, 1.0f / 16.0f, 1e-9); /* 256 ** -0.5 */
    assert_true(c.rope_local_theta == 0);
    int ff, ns = n_sliding(&c, &ff);
    assert_int_equal(ns, 13); /* 0, 2, 4, ... slide; 1, 3, ... full */
    assert_int_equal(ff, 1);
    assert_int_equal(model_config_layer_window(&c, 0), 1);
    assert_int_equal(model_config_layer_window(&c, 1), 0);
    assert_int_equal(c.sliding_window, 4096);
    assert_string_equal(c.hidden_act, "gelu_pytorch_tanh");
    assert_int_equal(c.n_eos, 2);
    assert_int_equal(c.eos_token_ids[1], 107);
}

static void test_gemma3_1b(void **state)
{
    (void)state;
    model_config c;
    load(&c, CFG_DIR "google__gemma-3-1b-it", NULL);
    assert_ptr_equal(c.arch, &model_arch_gemma3);
    assert_int_equal(c.n_head, 4);
    assert_int_equal(c.n_kv_head, 1);
    assert_int_equal(c.head_dim, 256);
    assert_true(c.tie_word_embeddings);
    assert_float_equal(c.attn_softcap, 0.0f, 0); /* null */
    assert_float_equal(c.final_softcap, 0.0f, 0);
    assert_true(c.rope.theta == 1e6);
    assert_true(c.rope_local_theta == 10000.0);
    assert_int_equal(c.rope.kind, MODEL_ROPE_DEFAULT);
    for (int il = 0; il < 26; il++) /* full at 5, 11, 17, 23 */
        assert_int_equal(model_config_layer_sliding(&c, il), (il + 1) % 6 != 0);
    assert_int_equal(model_config_layer_window(&c, 5), 0);
    assert_int_equal(model_config_layer_window(&c, 4), 1);
    assert_int_equal(c.context_length, 32768);
}

static void test_gemma3_4b_nested(void **state)
{
    (void)state;
    model_config c;
    load(&c, CFG_DIR "google__gemma-3-4b-it", NULL);
    assert_ptr_equal(c.arch, &model_arch_gemma3_mm);
    /* from text_config */
    assert_int_equal(c.hidden_size, 2560);
    assert_int_equal(c.n_layer, 34);
    assert_int_equal(c.intermediate_size, 10240);
    assert_int_equal(c.sliding_window, 1024);
    assert_int_equal(c.rope.kind, MODEL_ROPE_LINEAR);
    assert_true(c.rope.factor == 8.0);
    /* Gemma3TextConfig defaults */
    assert_int_equal(c.n_head, 8);
    assert_int_equal(c.n_kv_head, 4);
    assert_int_equal(c.head_dim, 256);
    assert_int_equal(c.vocab_size, 262208);
    assert_true(c.rope.theta == 1e6);
    assert_true(c.rope_local_theta == 10000.0);
    assert_float_equal(c.attn_mult, 1.0f / 16.0f, 1e-9);
    assert_true(c.tie_word_embeddings);
    int ff, ns = n_sliding(&c, &ff);
    assert_int_equal(ns, 34 - 5);
    assert_int_equal(ff, 5);
    /* the top level's eos ids and dtype */
    assert_int_equal(c.n_eos, 2);
    assert_int_equal(c.eos_token_ids[1], 106);
    assert_int_equal(c.torch_dtype, DTYPE_BF16);
}

static void test_gemma_overrides(void **state)
{
    (void)state;
    model_config c;
    /* layer_types wins over the pattern */
    char lt[2048] = "{\"layer_types\": [";
    for (int il = 0; il < 26; il++)
        strcat(lt, il == 25 ? "\"sliding_attention\"]}" : (il == 0 ? "\"full_attention\", "
                                                                   : "\"sliding_attention\", "));
    load(&c, CFG_DIR "google__gemma-3-1b-it", lt);
    assert_int_equal(model_config_layer_sliding(&c, 0), 0);
    assert_int_equal(model_config_layer_sliding(&c, 5), 1);
    /* sliding_window_pattern */
    load(&c, CFG_DIR "google__gemma-3-1b-it", "{\"sliding_window_pattern\": 2}");
    assert_int_equal(model_config_layer_sliding(&c, 1), 0);
    assert_int_equal(model_config_layer_sliding(&c, 2), 1);
    /* Gemma 2: absent caps take the class defaults, null ones are off */
    load(&c, CFG_DIR "google__gemma-2-2b-it",
         "{\"attn_logit_softcapping\": null, \"query_pre_attn_scalar\": 144}");
    assert_float_equal(c.attn_softcap, 0.0f, 0);
    assert_float_equal(c.final_softcap, 30.0f, 0);
    assert_float_equal(c.attn_mult, (float)pow(144.0, -0.5), 1e-9);
    load(&c, CFG_DIR "google__gemma-2-2b-it", "{\"tie_word_embeddings\": false}");
    assert_false(c.tie_word_embeddings);
    /* Gemma 3 keeps no attention cap even if the config names one (its
     * attention ignores it); the final cap is read */
    load(&c, CFG_DIR "google__gemma-3-1b-it",
         "{\"attn_logit_softcapping\": 50.0, \"final_logit_softcapping\": 30.0}");
    assert_float_equal(c.attn_softcap, 0.0f, 0);
    assert_float_equal(c.final_softcap, 30.0f, 0);
}

static void expect_error(const char *name, const char *ov, const char *needle)
{
    model_config c;
    char err[512] = "";
    assert_int_equal(model_config_load(&c, name, ov, 0, err, sizeof err), -1);
    if (!strstr(err, needle)) fprintf(stderr, "error '%s' lacks '%s'\n", err, needle);
    assert_non_null(strstr(err, needle));
}

static void test_gemma_errors(void **state)
{
    (void)state;
    expect_error(CFG_DIR "google__gemma-3-1b-it", "{\"hidden_activation\": \"gelu\"}",
                 "gelu_pytorch_tanh");
    expect_error(CFG_DIR "google__gemma-3-1b-it", "{\"layer_types\": [\"full_attention\"]}",
                 "layer_types");
    char lt[2048] = "{\"layer_types\": [";
    for (int il = 0; il < 26; il++) strcat(lt, il == 25 ? "\"chunked\"]}" : "\"full_attention\", ");
    expect_error(CFG_DIR "google__gemma-3-1b-it", lt, "layer_types[25]");
    expect_error(CFG_DIR "google__gemma-2-2b-it", "{\"final_logit_softcapping\": -1}",
                 "final_logit_softcapping");
    expect_error(CFG_DIR "google__gemma-3-1b-it", "{\"use_bidirectional_attention\": true}",
                 "bidirectional");
    expect_error(CFG_DIR "google__gemma-3-4b-it", "{\"text_config\": 3}", "text_config");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gemma2_2b),
        cmocka_unit_test(test_gemma3_1b),
        cmocka_unit_test(test_gemma3_4b_nested),
        cmocka_unit_test(test_gemma_overrides),
        cmocka_unit_test(test_gemma_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
