/* test_phi3 — Phi3ForCausalLM's config (longrope / su, the factors, the
 * attention factor, partial rotary, the context length SGLang derives),
 * the longrope tables against transformers' formula written out here,
 * *ForSequenceClassification configs (id2label, num_labels) and a dummy
 * load of the real Phi-4-mini config (fused tensors split at load). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "model/arch.h"
#include "model/config.h"
#include "model/model.h"
#include "model/rope.h"
#include "util/fileio.h"
#include "util/log.h"

#define PHI_BASE                                                                                   \
    "\"architectures\":[\"Phi3ForCausalLM\"],\"hidden_size\":64,\"intermediate_size\":128,"         \
    "\"num_hidden_layers\":2,\"num_attention_heads\":4,\"num_key_value_heads\":2,\"vocab_size\":100," \
    "\"rope_theta\":10000.0"

static int parse(model_config *c, const char *json, char *err)
{
    return model_config_parse(c, json, strlen(json), NULL, 0, err, 512);
}

static const char *src_root(void)
{
    const char *s = getenv("SGLC_ROOT");
    return s && *s ? s : ".";
}

/* The real configs (tests/data/configs): Phi-3.5-mini and Phi-4-mini. */
static void test_real_configs(void **state)
{
    (void)state;
    char path[1024], err[512];
    size_t len;
    model_config c;
    snprintf(path, sizeof path, "%s/tests/data/configs/microsoft__Phi-3.5-mini-instruct/config.json", src_root());
    char *t = fileio_read(path, 1 << 20, &len);
    if (!t) skip();
    assert_int_equal(model_config_parse(&c, t, len, NULL, 0, err, sizeof err), 0);
    free(t);
    assert_int_equal(c.rope.kind, MODEL_ROPE_LONGROPE);
    assert_int_equal(c.rope.n_factors, 48); /* head_dim 96 */
    assert_int_equal(c.rope.original_max_pos, 4096);
    assert_true(fabsf(c.rope.short_factor[1] - 1.0199999809265137f) < 1e-7f);
    assert_true(fabsf(c.rope.long_factor[47] - 64.83999633789062f) < 1e-5f);
    assert_int_equal(c.context_length, 131072); /* rope_scaling has no factor: x1 */
    assert_int_equal(c.sliding_window, 262144);
    assert_true(model_config_layer_window(&c, 0));
    /* sqrt(1 + ln(131072/4096) / ln(4096)) */
    assert_true(fabs(model_rope_longrope_attn_factor(&c) - sqrt(1.0 + log(32.0) / log(4096.0))) < 1e-6);
    assert_int_equal(model_rope_longrope_switch(&c), 4096);

    snprintf(path, sizeof path, "%s/tests/data/configs/microsoft__Phi-4-mini-instruct/config.json", src_root());
    t = fileio_read(path, 1 << 20, &len);
    assert_non_null(t);
    assert_int_equal(model_config_parse(&c, t, len, NULL, 0, err, sizeof err), 0);
    free(t);
    assert_int_equal(model_rope_dim(&c), 96); /* 128 x 0.75 */
    assert_int_equal(c.rope.n_factors, 48);
    assert_int_equal(c.n_head, 24);
    assert_int_equal(c.n_kv_head, 8);
    assert_true(c.tie_word_embeddings);
    assert_true(fabsf(c.rope.long_factor[1] - 1.118320672f) < 1e-7f);
}

/* inv_freq = 1 / (ext * base^(2i/d)), long when seq_len > orig; "su" is
 * the same; attention_factor and factor keys win; wrong list lengths and
 * missing lists are refused. */
static void test_longrope_tables(void **state)
{
    (void)state;
    model_config c;
    char err[512];
    /* head_dim 16, partial 0.5: 8 rotary dims, 4 factors */
    const char *cfg = "{" PHI_BASE ",\"partial_rotary_factor\":0.5,\"max_position_embeddings\":1024,"
                      "\"original_max_position_embeddings\":64,\"rope_scaling\":{\"type\":\"su\","
                      "\"short_factor\":[1,2,3,4],\"long_factor\":[5,6,7,8]}}";
    assert_int_equal(parse(&c, cfg, err), 0);
    assert_int_equal(c.rope.kind, MODEL_ROPE_LONGROPE);
    assert_int_equal(model_rope_dim(&c), 8);
    float inv[4];
    for (int use_long = 0; use_long < 2; use_long++) {
        float af = model_rope_inv_freq(&c, use_long ? 65 : 64, inv);
        assert_true(fabs(af - sqrt(1.0 + log(16.0) / log(64.0))) < 1e-6);
        for (int i = 0; i < 4; i++) {
            double want = 1.0 / ((use_long ? 5 + i : 1 + i) * pow(10000.0, 2.0 * i / 8.0));
            assert_true(fabs(inv[i] - want) <= 1e-6 * want);
        }
    }
    /* rope_scaling's own keys win */
    cfg = "{" PHI_BASE ",\"partial_rotary_factor\":0.5,\"max_position_embeddings\":1024,"
          "\"original_max_position_embeddings\":64,\"rope_scaling\":{\"rope_type\":\"longrope\","
          "\"short_factor\":[1,1,1,1],\"long_factor\":[1,1,1,1],\"attention_factor\":1.5,"
          "\"original_max_position_embeddings\":32}}";
    assert_int_equal(parse(&c, cfg, err), 0);
    assert_true(fabs(model_rope_longrope_attn_factor(&c) - 1.5) < 1e-7);
    assert_int_equal(model_rope_longrope_switch(&c), 32);
    assert_int_equal(c.context_length, 1024); /* original_max_position_embeddings in rope_scaling: x1 */
    /* no scaling beyond the original length: attention factor 1 */
    cfg = "{" PHI_BASE ",\"max_position_embeddings\":64,\"original_max_position_embeddings\":64,"
          "\"rope_scaling\":{\"type\":\"longrope\",\"short_factor\":[1,1,1,1,1,1,1,1],"
          "\"long_factor\":[1,1,1,1,1,1,1,1]}}";
    assert_int_equal(parse(&c, cfg, err), 0);
    assert_true(model_rope_longrope_attn_factor(&c) == 1.0f);
    /* bad lists */
    cfg = "{" PHI_BASE ",\"rope_scaling\":{\"type\":\"longrope\",\"short_factor\":[1,1],\"long_factor\":[1,1]}}";
    assert_int_not_equal(parse(&c, cfg, err), 0);
    assert_non_null(strstr(err, "8 numbers"));
    cfg = "{" PHI_BASE ",\"rope_scaling\":{\"type\":\"longrope\",\"short_factor\":[1,1,1,1,1,1,1,1]}}";
    assert_int_not_equal(parse(&c, cfg, err), 0);
    assert_non_null(strstr(err, "long_factor"));
    cfg = "{" PHI_BASE ",\"rope_scaling\":{\"type\":\"longrope\",\"short_factor\":[1,1,1,1,1,1,1,-1],"
          "\"long_factor\":[1,1,1,1,1,1,1,1]}}";
    assert_int_not_equal(parse(&c, cfg, err), 0);
    assert_non_null(strstr(err, "positive"));
}

/* *ForSequenceClassification: the base family's decoder, labels from
 * id2label, else num_labels, else 2; unknown families stay unsupported. */
static void test_classifier_config(void **state)
{
    (void)state;
    model_config c;
    char err[512];
    const char *cfg = "{\"architectures\":[\"Qwen3ForSequenceClassification\"],\"hidden_size\":64,"
                      "\"intermediate_size\":128,\"num_hidden_layers\":2,\"num_attention_heads\":4,"
                      "\"vocab_size\":100,\"id2label\":{\"0\":\"no\",\"1\":\"maybe\",\"2\":\"yes\"}}";
    assert_int_equal(parse(&c, cfg, err), 0);
    assert_ptr_equal(c.arch, &model_arch_qwen3);
    assert_int_equal(c.n_labels, 3);
    assert_string_equal(c.labels[2], "yes");
    assert_string_equal(c.architecture, "Qwen3ForSequenceClassification");
    cfg = "{\"architectures\":[\"LlamaForSequenceClassification\"],\"hidden_size\":64,\"intermediate_size\":128,"
          "\"num_hidden_layers\":2,\"num_attention_heads\":4,\"vocab_size\":100,\"num_labels\":1}";
    assert_int_equal(parse(&c, cfg, err), 0);
    assert_int_equal(c.n_labels, 1);
    assert_string_equal(c.labels[0], "LABEL_0");
    cfg = "{\"architectures\":[\"LlamaForSequenceClassification\"],\"hidden_size\":64,\"intermediate_size\":128,"
          "\"num_hidden_layers\":2,\"num_attention_heads\":4,\"vocab_size\":100}";
    assert_int_equal(parse(&c, cfg, err), 0);
    assert_int_equal(c.n_labels, 2); /* PretrainedConfig's default */
    cfg = "{\"architectures\":[\"LlamaForCausalLM\"],\"hidden_size\":64,\"intermediate_size\":128,"
          "\"num_hidden_layers\":2,\"num_attention_heads\":4,\"vocab_size\":100,\"id2label\":{\"0\":\"a\"}}";
    assert_int_equal(parse(&c, cfg, err), 0);
    assert_int_equal(c.n_labels, 0); /* a causal LM's id2label means nothing */
    cfg = "{\"architectures\":[\"FooForSequenceClassification\"],\"hidden_size\":64,\"intermediate_size\":128,"
          "\"num_hidden_layers\":2,\"num_attention_heads\":4,\"vocab_size\":100}";
    assert_int_not_equal(parse(&c, cfg, err), 0);
    assert_non_null(strstr(err, "unsupported architecture"));
    cfg = "{\"architectures\":[\"Qwen3ForSequenceClassification\"],\"hidden_size\":64,\"intermediate_size\":128,"
          "\"num_hidden_layers\":2,\"num_attention_heads\":4,\"vocab_size\":100,\"id2label\":{\"0\":\"a\",\"2\":\"b\"}}";
    assert_int_not_equal(parse(&c, cfg, err), 0);
    assert_non_null(strstr(err, "id2label"));
}

/* Dummy weights of the real Phi-4-mini config, shrunk: qkv_proj and
 * gate_up_proj are found and split, and a forward runs. */
static void test_phi4_dummy_forward(void **state)
{
    (void)state;
    char dir[1024], err[1024];
    snprintf(dir, sizeof dir, "%s/tests/data/configs/microsoft__Phi-4-mini-instruct", src_root());
    if (access(dir, R_OK) != 0) skip();
    model_load_opts o = {.model_path = dir, .dtype = -1, .load_format = MODEL_LOAD_DUMMY,
                         .override_json = "{\"num_hidden_layers\":1,\"hidden_size\":384,\"num_attention_heads\":3,"
                                          "\"num_key_value_heads\":1,\"intermediate_size\":256,\"vocab_size\":512}"};
    model *m = model_load(&o, err, sizeof err);
    if (!m) fail_msg("load: %s", err);
    model_kv *kv = model_kv_create(m, 8, DTYPE_F32);
    assert_non_null(kv);
    int32_t tok[3] = {1, 2, 3}, pos[3] = {0, 1, 2}, start[2] = {0, 3}, kvl = 3, slots[3] = {0, 1, 2}, row = 2;
    const int32_t *sl[1] = {slots};
    model_batch b = {.n_tokens = 3, .tokens = tok, .positions = pos, .n_seqs = 1, .seq_start = start,
                     .seq_kv_len = &kvl, .seq_slots = sl, .n_logits = 1, .logit_rows = &row};
    float *lg = malloc(sizeof(float) * 512);
    assert_int_equal(model_forward(m, kv, &b, lg, NULL), 0);
    for (int i = 0; i < 512; i++) assert_true(isfinite(lg[i]));
    free(lg);
    model_kv_destroy(kv);
    model_free(m);
}

int main(void)
{
    log_set_level(LOG_ERROR);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_real_configs),
        cmocka_unit_test(test_longrope_tables),
        cmocka_unit_test(test_classifier_config),
        cmocka_unit_test(test_phi4_dummy_forward),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
