/* test_model — config parsing, rope, safetensors validation, loading and
 * the forward pass (TinyStories-656K greedy, batched == one-by-one, dummy
 * weights of real configs). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "kernels/kernels.h"
#include "util/cpu.h"
#include "model/arch.h"
#include "model/config.h"
#include "model/model.h"
#include "model/rope.h"
#include "model/safetensors.h"
#include "util/log.h"
#include "util/threadpool.h"

static char g_tmp[256];

static const char *shared_dir(void)
{
    const char *s = getenv("SGLC_SHARED");
    return s && *s ? s : "../shared";
}

static void path_join(char *out, size_t n, const char *dir, const char *name)
{
    snprintf(out, n, "%s/%s", dir, name);
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* ---- config --------------------------------------------------------------- */

#define BASE_CFG                                                                          \
    "\"architectures\":[\"LlamaForCausalLM\"],\"hidden_size\":64,\"intermediate_size\":128," \
    "\"num_hidden_layers\":2,\"num_attention_heads\":4,\"num_key_value_heads\":2,"         \
    "\"vocab_size\":100,\"max_position_embeddings\":256,\"rope_theta\":10000.0"

static int parse(model_config *c, const char *json, const char *ov, int ctx, char *err)
{
    return model_config_parse(c, json, strlen(json), ov, ctx, err, 512);
}

static void test_config_basic(void **state)
{
    (void)state;
    model_config c;
    char err[512];
    assert_int_equal(parse(&c, "{" BASE_CFG ",\"eos_token_id\":[5,7],\"bos_token_id\":1}", NULL, 0, err), 0);
    assert_int_equal(c.hidden_size, 64);
    assert_int_equal(c.head_dim, 16);
    assert_int_equal(c.n_kv_head, 2);
    assert_int_equal(c.n_eos, 2);
    assert_int_equal(c.eos_token_ids[1], 7);
    assert_int_equal(c.bos_token_id, 1);
    assert_int_equal(c.context_length, 256);
    assert_int_equal(c.rope.kind, MODEL_ROPE_DEFAULT);
    assert_ptr_equal(c.arch, &model_arch_llama);
    assert_int_equal(c.tie_word_embeddings, 0);
    assert_true(fabsf(c.rms_norm_eps - 1e-6f) < 1e-12f);

    /* overrides merge over the top level */
    assert_int_equal(parse(&c, "{" BASE_CFG "}", "{\"num_hidden_layers\":1,\"head_dim\":32}", 0, err), 0);
    assert_int_equal(c.n_layer, 1);
    assert_int_equal(c.head_dim, 32);
    assert_int_not_equal(parse(&c, "{" BASE_CFG "}", "[1]", 0, err), 0);
    assert_non_null(strstr(err, "override"));
    assert_int_not_equal(parse(&c, "{" BASE_CFG "}", "{bad", 0, err), 0);

    /* context length: explicit shorter ok, longer refused */
    assert_int_equal(parse(&c, "{" BASE_CFG "}", NULL, 100, err), 0);
    assert_int_equal(c.context_length, 100);
    unsetenv("SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN");
    assert_int_not_equal(parse(&c, "{" BASE_CFG "}", NULL, 1000, err), 0);
    assert_non_null(strstr(err, "context"));

    /* unsupported architecture lists the supported ones */
    assert_int_not_equal(parse(&c, "{" BASE_CFG "}", "{\"architectures\":[\"GPT2LMHeadModel\"]}", 0, err), 0);
    assert_non_null(strstr(err, "GPT2LMHeadModel"));
    assert_non_null(strstr(err, "Qwen3ForCausalLM"));
    assert_non_null(strstr(err, "MistralForCausalLM"));

    /* bad values */
    assert_int_not_equal(parse(&c, "{" BASE_CFG ",\"num_key_value_heads\":3}", NULL, 0, err), 0);
    assert_int_not_equal(parse(&c, "{" BASE_CFG "}", "{\"hidden_size\":-1}", 0, err), 0);
    assert_non_null(strstr(err, "hidden_size"));
    assert_int_not_equal(parse(&c, "{\"architectures\":[\"LlamaForCausalLM\"]}", NULL, 0, err), 0);
    assert_non_null(strstr(err, "missing"));
    assert_int_not_equal(parse(&c, "not json", NULL, 0, err), 0);
    assert_int_not_equal(parse(&c, "{" BASE_CFG ",\"hidden_act\":\"relu\"}", NULL, 0, err), 0);
}

static void test_config_rope_scaling(void **state)
{
    (void)state;
    model_config c;
    char err[512];
    assert_int_equal(parse(&c, "{" BASE_CFG ",\"rope_scaling\":{\"type\":\"linear\",\"factor\":4}}", NULL, 0, err), 0);
    assert_int_equal(c.rope.kind, MODEL_ROPE_LINEAR);
    assert_true(c.rope.factor == 4.0);
    assert_int_equal(c.context_length, 1024); /* SGLang: factor x max_position_embeddings */
    assert_int_equal(parse(&c, "{" BASE_CFG ",\"rope_scaling\":{\"rope_type\":\"dynamic\",\"factor\":2}}", NULL, 0, err), 0);
    assert_int_equal(c.rope.kind, MODEL_ROPE_DYNAMIC);
    assert_int_equal(parse(&c, "{" BASE_CFG ",\"rope_scaling\":{\"rope_type\":\"llama3\",\"factor\":32,"
                               "\"low_freq_factor\":1,\"high_freq_factor\":4,"
                               "\"original_max_position_embeddings\":64}}", NULL, 0, err), 0);
    assert_int_equal(c.rope.kind, MODEL_ROPE_LLAMA3);
    assert_int_equal(c.rope.original_max_pos, 64);
    assert_int_equal(c.context_length, 256); /* llama3: no multiplication */
    assert_int_not_equal(parse(&c, "{" BASE_CFG ",\"rope_scaling\":{\"rope_type\":\"llama3\",\"factor\":32}}", NULL, 0, err), 0);
    assert_non_null(strstr(err, "low_freq_factor"));
    assert_int_equal(parse(&c, "{" BASE_CFG ",\"rope_scaling\":{\"rope_type\":\"yarn\",\"factor\":4,"
                               "\"beta_fast\":16,\"mscale\":1,\"mscale_all_dim\":1}}", NULL, 0, err), 0);
    assert_int_equal(c.rope.kind, MODEL_ROPE_YARN);
    assert_true(c.rope.beta_fast == 16.0 && c.rope.beta_slow == 0.0 && c.rope.attention_factor < 0);
    assert_int_equal(parse(&c, "{" BASE_CFG ",\"rope_scaling\":null}", NULL, 0, err), 0);
    assert_int_equal(c.rope.kind, MODEL_ROPE_DEFAULT);
    assert_int_equal(parse(&c, "{" BASE_CFG ",\"rope_scaling\":{\"rope_type\":\"default\"}}", NULL, 0, err), 0);
    assert_int_not_equal(parse(&c, "{" BASE_CFG ",\"rope_scaling\":{\"rope_type\":\"longrope\"}}", NULL, 0, err), 0);
    assert_non_null(strstr(err, "longrope"));
    /* override can switch rope scaling on */
    assert_int_equal(parse(&c, "{" BASE_CFG "}", "{\"rope_scaling\":{\"type\":\"linear\",\"factor\":2.0}}", 0, err), 0);
    assert_int_equal(c.rope.kind, MODEL_ROPE_LINEAR);
}

static void test_config_qwen_window(void **state)
{
    (void)state;
    model_config c;
    char err[512];
    const char *q2 = "{\"architectures\":[\"Qwen2ForCausalLM\"],\"hidden_size\":64,\"intermediate_size\":128,"
                     "\"num_hidden_layers\":4,\"num_attention_heads\":4,\"num_key_value_heads\":2,"
                     "\"vocab_size\":100,\"sliding_window\":32,\"use_sliding_window\":true,"
                     "\"max_window_layers\":2}";
    assert_int_equal(parse(&c, q2, NULL, 0, err), 0);
    assert_int_equal(model_config_layer_window(&c, 1), 0);
    assert_int_equal(model_config_layer_window(&c, 2), 1);
    assert_int_equal(parse(&c, q2, "{\"use_sliding_window\":false}", 0, err), 0);
    assert_int_equal(model_config_layer_window(&c, 3), 0);
    assert_int_equal(parse(&c, q2, "{\"architectures\":[\"MistralForCausalLM\"]}", 0, err), 0);
    assert_int_equal(model_config_layer_window(&c, 0), 1);
    assert_int_equal(parse(&c, q2, "{\"architectures\":[\"MistralForCausalLM\"],\"sliding_window\":null}", 0, err), 0);
    assert_int_equal(model_config_layer_window(&c, 0), 0);
}

static void test_config_real_files(void **state)
{
    (void)state;
    const char *names[] = {"meta-llama__Llama-3.2-1B-Instruct", "Qwen__Qwen3-0.6B",
                           "Qwen__Qwen2.5-0.5B-Instruct", "HuggingFaceTB__SmolLM2-135M-Instruct"};
    char dir[512], err[512];
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        snprintf(dir, sizeof dir, "%s/models/configs/%s", shared_dir(), names[i]);
        if (access(dir, R_OK) != 0) skip();
        model_config c;
        assert_int_equal(model_config_load(&c, dir, NULL, 0, err, sizeof err), 0);
        if (i == 0) {
            assert_int_equal(c.rope.kind, MODEL_ROPE_LLAMA3);
            assert_int_equal(c.n_eos, 3);
            assert_int_equal(c.context_length, 131072);
            assert_int_equal(c.torch_dtype, DTYPE_BF16);
        }
        if (i == 1) {
            assert_int_equal(c.head_dim, 128);
            assert_int_equal(c.arch->qk_norm, 1);
        }
    }
}

/* ---- rope ----------------------------------------------------------------- */

static void test_rope(void **state)
{
    (void)state;
    model_config c;
    char err[512];
    float inv[64], base[64];
    assert_int_equal(parse(&c, "{" BASE_CFG "}", NULL, 0, err), 0);
    assert_true(model_rope_inv_freq(&c, 0, base) == 1.0f);
    for (int i = 0; i < 8; i++)
        assert_true(fabs(base[i] - pow(10000.0, -2.0 * i / 16)) < 1e-6 * base[i] + 1e-9);
    /* linear divides by factor */
    assert_int_equal(parse(&c, "{" BASE_CFG "}", "{\"rope_scaling\":{\"type\":\"linear\",\"factor\":4}}", 0, err), 0);
    model_rope_inv_freq(&c, 0, inv);
    for (int i = 0; i < 8; i++) assert_true(fabsf(inv[i] - base[i] / 4) <= 1e-7f * base[i]);
    /* dynamic: unchanged up to max_position_embeddings, larger base beyond */
    assert_int_equal(parse(&c, "{" BASE_CFG "}", "{\"rope_scaling\":{\"type\":\"dynamic\",\"factor\":2}}", 0, err), 0);
    model_rope_inv_freq(&c, 100, inv);
    for (int i = 0; i < 8; i++) assert_true(inv[i] == base[i]);
    model_rope_inv_freq(&c, 512, inv);
    double nb = 10000.0 * pow(2.0 * 512 / 256 - 1, 16.0 / 14.0);
    for (int i = 0; i < 8; i++) assert_true(fabs(inv[i] - pow(nb, -2.0 * i / 16)) < 1e-6 * inv[i] + 1e-9);
    /* llama3: high-freq dims kept, low-freq divided by factor */
    assert_int_equal(parse(&c, "{" BASE_CFG "}", "{\"rope_scaling\":{\"rope_type\":\"llama3\",\"factor\":8,"
                               "\"low_freq_factor\":1,\"high_freq_factor\":4,"
                               "\"original_max_position_embeddings\":64}}", 0, err), 0);
    model_rope_inv_freq(&c, 0, inv);
    for (int i = 0; i < 8; i++) {
        double wl = 2 * M_PI / base[i];
        if (wl < 64.0 / 4) assert_true(inv[i] == base[i]);
        else if (wl > 64.0) assert_true(fabsf(inv[i] - base[i] / 8) <= 1e-6f * base[i]);
        else assert_true(inv[i] < base[i] && inv[i] > base[i] / 8);
    }
    /* yarn: attention factor 0.1 ln(s) + 1; first dims extrapolate, last interpolate */
    assert_int_equal(parse(&c, "{" BASE_CFG "}", "{\"rope_scaling\":{\"rope_type\":\"yarn\",\"factor\":4}}", 0, err), 0);
    float af = model_rope_inv_freq(&c, 0, inv);
    assert_true(fabsf(af - (float)(0.1 * log(4.0) + 1.0)) < 1e-6f);
    assert_true(inv[0] == base[0]);
    assert_true(fabsf(inv[7] - base[7] / 4) <= 1e-6f * base[7]);
    assert_int_equal(parse(&c, "{" BASE_CFG "}", "{\"rope_scaling\":{\"rope_type\":\"yarn\",\"factor\":4,\"attention_factor\":0.5}}", 0, err), 0);
    assert_true(model_rope_inv_freq(&c, 0, inv) == 0.5f);
}

/* ---- safetensors ---------------------------------------------------------- */

/* Write a safetensors file: header text as given, then data_len bytes. */
static void write_st(const char *path, const char *header, size_t data_len)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    uint64_t n = strlen(header);
    uint8_t le[8];
    for (int i = 0; i < 8; i++) le[i] = (uint8_t)(n >> (8 * i));
    fwrite(le, 1, 8, f);
    fwrite(header, 1, n, f);
    for (size_t i = 0; i < data_len; i++) fputc((int)(i * 7 & 0xff), f);
    fclose(f);
}

static void expect_st_error(const char *header, size_t data_len, const char *needle)
{
    char path[512], err[512] = "";
    path_join(path, sizeof path, g_tmp, "bad.safetensors");
    write_st(path, header, data_len);
    st_archive a;
    int rc = st_open(&a, path, err, sizeof err);
    if (rc == 0) st_close(&a);
    if (rc == 0 || !strstr(err, needle) || !strstr(err, "bad.safetensors"))
        fail_msg("header %s: expected error with '%s', got rc=%d '%s'", header, needle, rc, err);
}

static void test_safetensors_validation(void **state)
{
    (void)state;
    char path[512], err[512];
    /* good file */
    path_join(path, sizeof path, g_tmp, "good.safetensors");
    write_st(path, "{\"__metadata__\":{\"format\":\"pt\"},\"b\":{\"dtype\":\"BF16\",\"shape\":[2,3],"
                   "\"data_offsets\":[16,28]},\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}",
             28);
    st_archive a;
    assert_int_equal(st_open(&a, path, err, sizeof err), 0);
    assert_int_equal(a.n_tensors, 2);
    const st_tensor *t = st_find(&a, "b");
    assert_non_null(t);
    assert_int_equal(t->dt, DTYPE_BF16);
    assert_int_equal(t->shape[1], 3);
    assert_int_equal(t->nbytes, 12);
    assert_null(st_find(&a, "c"));
    st_close(&a);

    /* header length larger than the file */
    path_join(path, sizeof path, g_tmp, "bad.safetensors");
    FILE *f = fopen(path, "wb");
    uint8_t big[16] = {0xff, 0xff, 0, 0, 0, 0, 0, 0, '{', '}'};
    fwrite(big, 1, 10, f);
    fclose(f);
    assert_int_not_equal(st_open(&a, path, err, sizeof err), 0);
    assert_non_null(strstr(err, "exceeds the file size"));
    /* too short */
    f = fopen(path, "wb");
    fwrite(big, 1, 3, f);
    fclose(f);
    assert_int_not_equal(st_open(&a, path, err, sizeof err), 0);
    assert_non_null(strstr(err, "too short"));

    expect_st_error("{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]", 16, "bad JSON");
    expect_st_error("[1,2,3]", 0, "not a JSON object");
    expect_st_error("{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,32]}}", 16, "out of range");
    expect_st_error("{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
                    "\"b\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[8,24]}}", 24, "overlaps");
    expect_st_error("{\"a\":{\"dtype\":\"F32\",\"shape\":[5],\"data_offsets\":[0,16]}}", 16, "needs 20");
    expect_st_error("{\"a\":{\"dtype\":\"Q4_K\",\"shape\":[4],\"data_offsets\":[0,16]}}", 16, "unknown dtype 'Q4_K'");
    expect_st_error("{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[4,20]}}", 20, "unused bytes");
    expect_st_error("{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", 20, "after the last tensor");
    expect_st_error("{\"a\":{\"dtype\":\"F32\",\"shape\":[-4],\"data_offsets\":[0,16]}}", 16, "shape[0]");
    expect_st_error("{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[16]}}", 16, "data_offsets");
    expect_st_error("{\"a\":{\"shape\":[4],\"data_offsets\":[0,16]}}", 16, "dtype");
    expect_st_error("{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
                    "\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", 16, "bad JSON");
    expect_st_error("{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,4294967296],"
                    "\"data_offsets\":[0,16]}}", 16, "too large");

    /* sharded: index -> two files; a name mapped to the wrong shard fails */
    char dir[512];
    path_join(dir, sizeof dir, g_tmp, "sharded");
    mkdir(dir, 0700);
    char p1[600], p2[600], idx[600];
    snprintf(p1, sizeof p1, "%s/model-00001-of-00002.safetensors", dir);
    snprintf(p2, sizeof p2, "%s/model-00002-of-00002.safetensors", dir);
    snprintf(idx, sizeof idx, "%s/model.safetensors.index.json", dir);
    write_st(p1, "{\"x\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[0,4]}}", 4);
    write_st(p2, "{\"y\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4);
    write_text(idx, "{\"metadata\":{},\"weight_map\":{\"x\":\"model-00001-of-00002.safetensors\","
                    "\"y\":\"model-00002-of-00002.safetensors\"}}");
    assert_int_equal(st_open(&a, dir, err, sizeof err), 0);
    assert_int_equal(a.n_files, 2);
    assert_non_null(st_find(&a, "x"));
    assert_int_equal(st_find(&a, "y")->file, 1);
    st_close(&a);
    write_text(idx, "{\"weight_map\":{\"x\":\"model-00002-of-00002.safetensors\","
                    "\"y\":\"model-00002-of-00002.safetensors\"}}");
    assert_int_not_equal(st_open(&a, dir, err, sizeof err), 0);
    assert_non_null(strstr(err, "'x'"));
    write_text(idx, "{\"weight_map\":{\"x\":\"../evil.safetensors\"}}");
    assert_int_not_equal(st_open(&a, dir, err, sizeof err), 0);
    assert_non_null(strstr(err, "bad shard"));
    write_text(idx, "{\"weight_map\":{\"x\":\"missing.safetensors\"}}");
    assert_int_not_equal(st_open(&a, dir, err, sizeof err), 0);
    assert_non_null(strstr(err, "missing.safetensors"));
    /* directory without checkpoint */
    assert_int_not_equal(st_open(&a, g_tmp, err, sizeof err), 0);
    assert_non_null(strstr(err, "model.safetensors"));
}

/* A directory with a tiny llama config and a checkpoint that lacks some
 * tensors: model_load must list them by name. */
static void test_load_missing_tensors(void **state)
{
    (void)state;
    char dir[512], path[600], err[1024];
    path_join(dir, sizeof dir, g_tmp, "tiny");
    mkdir(dir, 0700);
    snprintf(path, sizeof path, "%s/config.json", dir);
    write_text(path, "{\"architectures\":[\"LlamaForCausalLM\"],\"hidden_size\":4,\"intermediate_size\":8,"
                     "\"num_hidden_layers\":1,\"num_attention_heads\":2,\"num_key_value_heads\":1,"
                     "\"vocab_size\":3,\"tie_word_embeddings\":true}");
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    write_st(path, "{\"model.embed_tokens.weight\":{\"dtype\":\"F32\",\"shape\":[3,4],\"data_offsets\":[0,48]},"
                   "\"model.norm.weight\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[48,64]}}", 64);
    model_load_opts o = {.model_path = dir, .dtype = -1};
    model *m = model_load(&o, err, sizeof err);
    assert_null(m);
    assert_non_null(strstr(err, "missing"));
    assert_non_null(strstr(err, "model.layers.0.self_attn.q_proj.weight"));
    assert_non_null(strstr(err, "model.layers.0.input_layernorm.weight"));
    /* wrong shape is named too */
    write_st(path, "{\"model.embed_tokens.weight\":{\"dtype\":\"F32\",\"shape\":[4,3],\"data_offsets\":[0,48]}}", 48);
    m = model_load(&o, err, sizeof err);
    assert_null(m);
    assert_non_null(strstr(err, "shape"));
    assert_non_null(strstr(err, "model.embed_tokens.weight"));
}

/* ---- forward -------------------------------------------------------------- */

static model *load_tinystories(int wdt)
{
    char dir[512], err[1024];
    snprintf(dir, sizeof dir, "%s/models/TinyStories-656K", shared_dir());
    if (access(dir, R_OK) != 0) return NULL;
    model_load_opts o = {.model_path = dir, .dtype = wdt};
    model *m = model_load(&o, err, sizeof err);
    if (!m) fail_msg("load failed: %s", err);
    return m;
}

static void test_tinystories_greedy(void **state)
{
    (void)state;
    model *m = load_tinystories(-1);
    if (!m) skip();
    const model_config *c = model_get_config(m);
    assert_int_equal(c->bos_token_id, 1);
    assert_int_equal(c->tie_word_embeddings, 1);
    const int n_new = 6, want[6] = {147, 201, 282, 215, 286, 598};
    model_kv *kv = model_kv_create(m, 16, DTYPE_F32);
    tpool *pool = tpool_create(2);
    assert_non_null(kv);
    float *logits = malloc(sizeof(float) * c->vocab_size);
    int32_t slots[16], tok = c->bos_token_id;
    for (int i = 0; i < 16; i++) slots[i] = 15 - i; /* any slot order works */
    const int32_t *sl[1] = {slots};
    for (int p = 0; p < n_new; p++) {
        int32_t pos = p, kvl = p + 1, ss[2] = {0, 1}, row = 0;
        model_batch b = {.n_tokens = 1, .tokens = &tok, .positions = &pos, .n_seqs = 1,
                         .seq_start = ss, .seq_kv_len = &kvl, .seq_slots = sl, .n_logits = 1,
                         .logit_rows = &row};
        assert_int_equal(model_forward(m, kv, &b, logits, pool), 0);
        tok = kern_argmax(logits, c->vocab_size);
        assert_int_equal(tok, want[p]);
    }
    /* malformed batches are refused */
    int32_t pos = 3, kvl = 2, ss[2] = {0, 1}, row = 0, bad_tok = 5000;
    model_batch b = {.n_tokens = 1, .tokens = &tok, .positions = &pos, .n_seqs = 1,
                     .seq_start = ss, .seq_kv_len = &kvl, .seq_slots = sl, .n_logits = 1,
                     .logit_rows = &row};
    assert_int_not_equal(model_forward(m, kv, &b, logits, pool), 0); /* position != kv_len-1 */
    pos = 1;
    b.tokens = &bad_tok;
    assert_int_not_equal(model_forward(m, kv, &b, logits, pool), 0); /* token outside vocab */
    b.tokens = &tok;
    slots[0] = 99;
    assert_int_not_equal(model_forward(m, kv, &b, logits, pool), 0); /* slot outside the cache */
    free(logits);
    tpool_destroy(pool);
    model_kv_destroy(kv);
    model_free(m);
}

/* Greedy ids from BOS of a loaded model. */
static void greedy_ids(model *m, int n, int *out)
{
    const model_config *c = model_get_config(m);
    model_kv *kv = model_kv_create(m, n + 1, DTYPE_F32);
    assert_non_null(kv);
    float *logits = malloc(sizeof(float) * c->vocab_size);
    int32_t slots[64], tok = c->bos_token_id;
    for (int i = 0; i < 64; i++) slots[i] = i;
    const int32_t *sl[1] = {slots};
    for (int p = 0; p < n; p++) {
        int32_t pos = p, kvl = p + 1, ss[2] = {0, 1}, row = 0;
        model_batch b = {.n_tokens = 1, .tokens = &tok, .positions = &pos, .n_seqs = 1,
                         .seq_start = ss, .seq_kv_len = &kvl, .seq_slots = sl, .n_logits = 1,
                         .logit_rows = &row};
        assert_int_equal(model_forward(m, kv, &b, logits, NULL), 0);
        out[p] = tok = kern_argmax(logits, c->vocab_size);
    }
    free(logits);
    model_kv_destroy(kv);
}

/* TinyStories stores only lm_head.weight; HF checkpoints store only
 * model.embed_tokens.weight.  Rewrite the header to the HF convention and
 * check the same greedy ids come out. */
static void test_tied_embed_only(void **state)
{
    (void)state;
    char src[512], dir[512], path[600];
    snprintf(src, sizeof src, "%s/models/TinyStories-656K/model.safetensors", shared_dir());
    FILE *f = fopen(src, "rb");
    if (!f) skip();
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc((size_t)len);
    assert_int_equal(fread(buf, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = (n << 8) | buf[i];
    char *hdr = calloc(n + 1, 1);
    memcpy(hdr, buf + 8, n);
    /* drop the metadata alias and rename the tensor */
    char *meta = strstr(hdr, "\"__metadata__\"");
    assert_non_null(meta);
    char *meta_end = strchr(meta, '}');
    memmove(meta, meta_end + 2, strlen(meta_end + 2) + 1); /* also the ',' after it */
    char *name = strstr(hdr, "\"lm_head.weight\"");
    assert_non_null(name);
    char out_hdr[65536];
    snprintf(out_hdr, sizeof out_hdr, "%.*s\"model.embed_tokens.weight\"%s", (int)(name - hdr), hdr,
             name + strlen("\"lm_head.weight\""));
    while (strlen(out_hdr) % 8) strcat(out_hdr, " ");
    path_join(dir, sizeof dir, g_tmp, "tied");
    mkdir(dir, 0700);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    f = fopen(path, "wb");
    uint64_t hn = strlen(out_hdr);
    for (int i = 0; i < 8; i++) fputc((int)(hn >> (8 * i)) & 0xff, f);
    fwrite(out_hdr, 1, hn, f);
    fwrite(buf + 8 + n, 1, (size_t)len - 8 - n, f);
    fclose(f);
    free(buf);
    free(hdr);
    char cfg[600], cmd[1400];
    snprintf(cfg, sizeof cfg, "%s/models/TinyStories-656K/config.json", shared_dir());
    snprintf(cmd, sizeof cmd, "cp '%s' '%s/config.json'", cfg, dir);
    assert_int_equal(system(cmd), 0);
    char err[1024];
    model_load_opts o = {.model_path = dir, .dtype = -1};
    model *m = model_load(&o, err, sizeof err);
    if (!m) fail_msg("load: %s", err);
    model *ref = load_tinystories(-1);
    int a[8], b[8];
    greedy_ids(m, 8, a);
    greedy_ids(ref, 8, b);
    assert_memory_equal(a, b, sizeof a);
    assert_int_equal(a[0], 147);
    model_free(ref);
    model_free(m);
    /* untied config without lm_head: the missing tensor is named */
    snprintf(cmd, sizeof cmd, "sed -i 's/\"tie_word_embeddings\": true/\"tie_word_embeddings\": false/' '%s/config.json'", dir);
    assert_int_equal(system(cmd), 0);
    m = model_load(&o, err, sizeof err);
    assert_null(m);
    assert_non_null(strstr(err, "lm_head.weight"));
}

/* Several sequences with different cached prefixes in one call give the
 * same logits as running each sequence alone, token by token. */
static void batched_vs_single(int wdt, dtype kv_dt, float tol, int chunk, int reverse)
{
    model *m = load_tinystories(wdt);
    if (!m) skip();
    model_set_chunk_tokens(m, chunk);
    const model_config *c = model_get_config(m);
    int V = c->vocab_size;
    enum { NS = 4 };
    const int prefix[NS] = {5, 0, 10, 3}, n_new[NS] = {3, 7, 1, 1};
    int total[NS], maxlen = 0;
    int32_t toks[NS][16];
    for (int s = 0; s < NS; s++) {
        total[s] = prefix[s] + n_new[s];
        if (total[s] > maxlen) maxlen = total[s];
        for (int p = 0; p < total[s]; p++) toks[s][p] = (int32_t)((s * 131 + p * 37 + 11) % V);
    }
    /* reference: each sequence alone, one token per forward, 1 thread */
    float *ref = calloc((size_t)NS * 16 * V, sizeof(float));
    tpool *one = tpool_create(1), *two = tpool_create(3);
    for (int s = 0; s < NS; s++) {
        model_kv *kv = model_kv_create(m, 16, kv_dt);
        int32_t slots[16];
        for (int i = 0; i < 16; i++) slots[i] = i;
        const int32_t *sl[1] = {slots};
        for (int p = 0; p < total[s]; p++) {
            int32_t pos = p, kvl = p + 1, ss[2] = {0, 1}, row = 0;
            model_batch b = {.n_tokens = 1, .tokens = &toks[s][p], .positions = &pos, .n_seqs = 1,
                             .seq_start = ss, .seq_kv_len = &kvl, .seq_slots = sl, .n_logits = 1,
                             .logit_rows = &row};
            assert_int_equal(model_forward(m, kv, &b, ref + ((size_t)s * 16 + p) * V, one), 0);
        }
        model_kv_destroy(kv);
    }
    /* batched: one shared cache, interleaved slots; prefixes in one call,
     * then all new chunks in one call */
    model_kv *kv = model_kv_create(m, NS * 16, kv_dt);
    int32_t slots[NS][16];
    const int32_t *sl[NS];
    for (int s = 0; s < NS; s++) {
        for (int p = 0; p < 16; p++) slots[s][p] = p * NS + (NS - 1 - s);
        sl[s] = slots[s];
    }
    int32_t tk[64], pos[64], start[NS + 1], kvl[NS], rows[64];
    const int32_t *bsl[NS];
    int nt = 0, ns = 0;
    for (int s = 0; s < NS; s++) {
        if (!prefix[s]) continue;
        start[ns] = nt;
        for (int p = 0; p < prefix[s]; p++) {
            tk[nt] = toks[s][p];
            pos[nt++] = p;
        }
        kvl[ns] = prefix[s];
        bsl[ns++] = sl[s];
    }
    start[ns] = nt;
    model_batch b1 = {.n_tokens = nt, .tokens = tk, .positions = pos, .n_seqs = ns,
                      .seq_start = start, .seq_kv_len = kvl, .seq_slots = bsl, .n_logits = 0};
    assert_int_equal(model_forward(m, kv, &b1, NULL, two), 0);
    nt = 0;
    for (int s = 0; s < NS; s++) {
        start[s] = nt;
        for (int i = 0; i < n_new[s]; i++) {
            tk[nt] = toks[s][prefix[s] + i];
            pos[nt] = prefix[s] + i;
            nt++;
        }
        kvl[s] = total[s];
    }
    start[NS] = nt;
    /* reverse != 0: logit rows in a scrambled order (5 is coprime with nt = 12) */
    for (int r = 0; r < nt; r++) rows[r] = reverse ? (r * 5) % nt : r;
    float *got = malloc(sizeof(float) * (size_t)nt * V);
    model_batch b2 = {.n_tokens = nt, .tokens = tk, .positions = pos, .n_seqs = NS,
                      .seq_start = start, .seq_kv_len = kvl, .seq_slots = sl, .n_logits = nt,
                      .logit_rows = rows};
    assert_int_equal(model_forward(m, kv, &b2, got, two), 0);
    float worst = 0;
    for (int s = 0; s < NS; s++)
        for (int i = 0; i < n_new[s]; i++) {
            int row = start[s] + i, li = 0;
            while (rows[li] != row) li++;
            const float *g = got + (size_t)li * V;
            const float *r = ref + ((size_t)s * 16 + prefix[s] + i) * V;
            for (int v = 0; v < V; v++) {
                float d = fabsf(g[v] - r[v]);
                if (d > worst) worst = d;
            }
        }
    if (worst > tol) fail_msg("batched vs single: max |diff| %g > %g", worst, tol);
    free(got);
    free(ref);
    model_kv_destroy(kv);
    tpool_destroy(one);
    tpool_destroy(two);
    model_free(m);
}

static void test_batched_equals_single_f32(void **state)
{
    (void)state;
    batched_vs_single(DTYPE_F32, DTYPE_F32, 1e-5f, 0, 0);
}

/* The AVX-512 FMA path is batch-invariant; AMX (prefill, m >= 16 rows)
 * is not bit-exact with it, and bf16 KV rounding would turn its ~1e-6
 * differences into bf16 steps: checked with f32 KV and a tolerance. */
static void test_batched_equals_single_bf16(void **state)
{
    (void)state;
    int forced = kernels_init("avx512") == 0;
    batched_vs_single(DTYPE_BF16, DTYPE_BF16, 1e-5f, 0, 0);
    if (forced) kernels_init(NULL);
}

static void test_batched_bf16_amx(void **state)
{
    (void)state;
    const cpu_features *c = cpu_get();
    if (!(c->amx_tile && c->amx_bf16) || kernels_init("amx") != 0) {
        kernels_init(NULL);
        print_message("skipped: no AMX-BF16 tiles on this CPU/OS\n");
        return;
    }
    batched_vs_single(DTYPE_BF16, DTYPE_F32, 1e-4f, 0, 0);
    kernels_init(NULL);
}

/* Dummy weights from a real config (shrunk by overrides to stay quick). */
/* Batches bigger than the chunk size run as several passes (chunked
 * prefill), with logit rows in any order. */
static void test_batched_chunked(void **state)
{
    (void)state;
    batched_vs_single(DTYPE_F32, DTYPE_F32, 1e-5f, 3, 0);
    batched_vs_single(DTYPE_F32, DTYPE_BF16, 1e-5f, 4, 1);
}

static void test_dummy_real_config(void **state)
{
    (void)state;
    char dir[512], err[1024];
    snprintf(dir, sizeof dir, "%s/models/configs/Qwen__Qwen3-0.6B", shared_dir());
    if (access(dir, R_OK) != 0) skip();
    model_load_opts o = {.model_path = dir, .dtype = -1, .load_format = MODEL_LOAD_DUMMY,
                         .override_json = "{\"num_hidden_layers\":2,\"vocab_size\":4096}",
                         .context_length = 64, .random_seed = 7};
    model *m = model_load(&o, err, sizeof err);
    if (!m) fail_msg("dummy load: %s", err);
    const model_config *c = model_get_config(m);
    assert_int_equal(c->head_dim, 128);
    assert_int_equal(c->hidden_size, 1024);
    assert_int_equal(c->context_length, 64);
    assert_int_equal(model_weight_dtype(m), DTYPE_BF16);
    /* 2 layers: q 2048x1024, k,v 1024x1024, o 1024x2048, 3 x 3072x1024, embed 4096x1024 (tied) */
    size_t mats = (size_t)2 * (2048 * 1024 + 2 * 1024 * 1024 + 1024 * 2048 + 3 * 3072 * 1024) +
                  4096 * 1024;
    assert_true(model_weight_bytes(m) >= mats * 2);
    assert_true(model_weight_bytes(m) < mats * 2 + (1 << 20));
    model_kv *kv = model_kv_create(m, 8, DTYPE_BF16);
    tpool *pool = tpool_create(2);
    int32_t tk[3] = {1, 2, 3}, pos[3] = {0, 1, 2}, ss[2] = {0, 3}, kvl = 3, slots[8] = {0, 1, 2, 3},
            row = 2;
    const int32_t *sl[1] = {slots};
    float *logits = malloc(sizeof(float) * c->vocab_size);
    model_batch b = {.n_tokens = 3, .tokens = tk, .positions = pos, .n_seqs = 1, .seq_start = ss,
                     .seq_kv_len = &kvl, .seq_slots = sl, .n_logits = 1, .logit_rows = &row};
    assert_int_equal(model_forward(m, kv, &b, logits, pool), 0);
    for (int i = 0; i < c->vocab_size; i++) assert_true(isfinite(logits[i]));
    /* same seed, same weights: a second load gives the same logits */
    model *m2 = model_load(&o, err, sizeof err);
    assert_non_null(m2);
    float *l2 = malloc(sizeof(float) * c->vocab_size);
    model_kv *kv2 = model_kv_create(m2, 8, DTYPE_BF16);
    assert_int_equal(model_forward(m2, kv2, &b, l2, pool), 0);
    assert_memory_equal(logits, l2, sizeof(float) * c->vocab_size);
    free(l2);
    free(logits);
    model_kv_destroy(kv2);
    model_kv_destroy(kv);
    tpool_destroy(pool);
    model_free(m2);
    model_free(m);
}

static int setup(void **state)
{
    (void)state;
    kernels_init(NULL);
    log_set_level(LOG_WARNING);
    snprintf(g_tmp, sizeof g_tmp, "/tmp/sglc_test_model_XXXXXX");
    if (!mkdtemp(g_tmp)) return -1;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_tmp);
    return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config_basic),
        cmocka_unit_test(test_config_rope_scaling),
        cmocka_unit_test(test_config_qwen_window),
        cmocka_unit_test(test_config_real_files),
        cmocka_unit_test(test_rope),
        cmocka_unit_test(test_safetensors_validation),
        cmocka_unit_test(test_load_missing_tensors),
        cmocka_unit_test(test_tinystories_greedy),
        cmocka_unit_test(test_tied_embed_only),
        cmocka_unit_test(test_batched_equals_single_f32),
        cmocka_unit_test(test_batched_equals_single_bf16),
        cmocka_unit_test(test_batched_bf16_amx),
        cmocka_unit_test(test_batched_chunked),
        cmocka_unit_test(test_dummy_real_config),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
