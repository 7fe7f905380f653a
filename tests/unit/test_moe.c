/* test_moe — mixture-of-experts routing (moe_route_row: order, ties,
 * distinct ids, renormalization, NaN), grouping by expert (moe_group
 * against a brute-force count), MoE config parsing (Qwen3-MoE, Mixtral,
 * dense layers from mlp_only_layers / decoder_sparse_step, rejections), and
 * a tiny Qwen3-MoE checkpoint written here: a batch of several sequences
 * (rows of different sequences routed to the same experts) gives the same
 * logits as each sequence alone, token by token, and a decode step reads
 * exactly top-k experts per MoE layer. */
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
#include "model/arch.h"
#include "model/config.h"
#include "model/model.h"
#include "model/moe.h"
#include "util/log.h"
#include "util/threadpool.h"

static char g_tmp[256];

/* ---- routing -------------------------------------------------------------- */

static void test_route_order_and_weights(void **state)
{
    (void)state;
    const float lg[6] = {0.5f, 2.0f, -1.0f, 1.0f, 3.0f, 0.0f};
    int32_t sel[6];
    float w[6];
    moe_route_row(lg, 6, 3, 0, sel, w);
    assert_int_equal(sel[0], 4);
    assert_int_equal(sel[1], 1);
    assert_int_equal(sel[2], 3);
    /* no renormalization: the softmax over all six */
    double z = 0;
    for (int e = 0; e < 6; e++) z += exp(lg[e]);
    assert_true(fabs(w[0] - exp(3.0) / z) < 1e-6);
    assert_true(fabs(w[1] - exp(2.0) / z) < 1e-6);
    assert_true(fabs(w[2] - exp(1.0) / z) < 1e-6);
    /* renormalized: softmax over the chosen logits */
    moe_route_row(lg, 6, 3, 1, sel, w);
    double zk = exp(3.0) + exp(2.0) + exp(1.0);
    assert_true(fabs(w[0] - exp(3.0) / zk) < 1e-6);
    assert_true(fabs(w[2] - exp(1.0) / zk) < 1e-6);
    assert_true(fabs(w[0] + w[1] + w[2] - 1.0) < 1e-6);
    /* K = E: every expert once, sorted */
    moe_route_row(lg, 6, 6, 1, sel, w);
    const int32_t want[6] = {4, 1, 3, 0, 5, 2};
    assert_memory_equal(sel, want, sizeof want);
    /* large logits do not overflow */
    const float big[3] = {1000.0f, 999.0f, -1000.0f};
    moe_route_row(big, 3, 2, 0, sel, w);
    assert_true(isfinite(w[0]) && isfinite(w[1]));
    assert_true(fabs(w[0] - 1.0 / (1.0 + exp(-1.0))) < 1e-5);
}

static void test_route_ties_distinct(void **state)
{
    (void)state;
    /* all equal: lowest indices first, each once, equal weights */
    float lg[8];
    for (int e = 0; e < 8; e++) lg[e] = 0.25f;
    int32_t sel[8];
    float w[8];
    moe_route_row(lg, 8, 4, 1, sel, w);
    for (int k = 0; k < 4; k++) {
        assert_int_equal(sel[k], k);
        assert_true(fabsf(w[k] - 0.25f) < 1e-6f);
    }
    /* a tie at the top-k boundary: the lower index wins */
    const float t2[5] = {1.0f, 5.0f, 2.0f, 0.0f, 2.0f};
    moe_route_row(t2, 5, 2, 0, sel, w);
    assert_int_equal(sel[0], 1);
    assert_int_equal(sel[1], 2);
    /* NaN is never preferred; -inf experts get weight 0 */
    const float nn[4] = {NAN, -INFINITY, 1.0f, 0.0f};
    moe_route_row(nn, 4, 3, 1, sel, w);
    assert_int_equal(sel[0], 2);
    assert_int_equal(sel[1], 3);
    assert_true(sel[2] == 0 || sel[2] == 1);
    assert_true(sel[0] != sel[1] && sel[1] != sel[2] && sel[0] != sel[2]);
    assert_true(fabsf(w[0] + w[1] + w[2] - 1.0f) < 1e-6f);
    assert_true(w[2] == 0.0f);
}

static void test_group(void **state)
{
    (void)state;
    enum { E = 7, K = 3, T = 23, A = T * K };
    uint64_t s = 12345;
    for (int trial = 0; trial < 50; trial++) {
        int32_t sel[A], cnt[E], off[E + 1], order[A], inv[A];
        for (int t = 0; t < T; t++) {
            /* K distinct experts per token, skewed towards low ids */
            for (int k = 0; k < K; k++) {
                int e, dup;
                do {
                    s = s * 6364136223846793005ull + 1442695040888963407ull;
                    e = (int)((s >> 33) % (trial % 2 ? E : 4));
                    dup = 0;
                    for (int j = 0; j < k; j++) dup |= sel[t * K + j] == e;
                } while (dup);
                sel[t * K + k] = e;
            }
        }
        moe_group(sel, A, E, cnt, off, order, inv);
        assert_int_equal(off[0], 0);
        assert_int_equal(off[E], A);
        for (int e = 0; e < E; e++) {
            int n = 0;
            for (int a = 0; a < A; a++) n += sel[a] == e;
            assert_int_equal(cnt[e], n);
            assert_int_equal(off[e + 1] - off[e], n);
            /* rows of expert e: contiguous, increasing assignment (so
             * increasing token), each token at most once */
            for (int p = off[e]; p < off[e + 1]; p++) {
                assert_int_equal(sel[order[p]], e);
                if (p > off[e]) assert_true(order[p] / K > order[p - 1] / K);
            }
        }
        for (int a = 0; a < A; a++) assert_int_equal(order[inv[a]], a);
    }
}

/* ---- config --------------------------------------------------------------- */

#define QMOE                                                                                     \
    "{\"architectures\":[\"Qwen3MoeForCausalLM\"],\"hidden_size\":32,\"intermediate_size\":24," \
    "\"num_hidden_layers\":4,\"num_attention_heads\":4,\"num_key_value_heads\":2,"              \
    "\"head_dim\":8,\"vocab_size\":64,\"max_position_embeddings\":256,\"num_experts\":8,"       \
    "\"num_experts_per_tok\":3,\"moe_intermediate_size\":16,\"norm_topk_prob\":true"

static int parse(model_config *c, const char *json, const char *ov, char *err)
{
    return model_config_parse(c, json, strlen(json), ov, 0, err, 512);
}

static void test_config_moe(void **state)
{
    (void)state;
    model_config c;
    char err[512];
    assert_int_equal(parse(&c, QMOE "}", NULL, err), 0);
    assert_ptr_equal(c.arch, &model_arch_qwen3_moe);
    assert_int_equal(c.n_expert, 8);
    assert_int_equal(c.n_expert_used, 3);
    assert_int_equal(c.moe_inter, 16);
    assert_int_equal(c.norm_topk_prob, 1);
    for (int il = 0; il < 4; il++) assert_true(model_config_layer_moe(&c, il));
    /* decoder_sparse_step 2: layers 1, 3 sparse; mlp_only_layers removes 3 */
    assert_int_equal(parse(&c, QMOE ",\"decoder_sparse_step\":2,\"mlp_only_layers\":[3,99]}",
                           NULL, err), 0);
    assert_false(model_config_layer_moe(&c, 0));
    assert_true(model_config_layer_moe(&c, 1));
    assert_false(model_config_layer_moe(&c, 2));
    assert_false(model_config_layer_moe(&c, 3));
    /* defaults of Qwen3MoeConfig: norm_topk_prob false */
    assert_int_equal(parse(&c, QMOE "}", "{\"norm_topk_prob\":null}", err), 0);
    assert_int_equal(c.norm_topk_prob, 0);
    /* num_experts 0: every layer dense */
    assert_int_equal(parse(&c, QMOE "}", "{\"num_experts\":0}", err), 0);
    assert_false(model_config_layer_moe(&c, 0));
    /* rejections */
    assert_int_not_equal(parse(&c, QMOE "}", "{\"num_experts_per_tok\":9}", err), 0);
    assert_non_null(strstr(err, "num_experts_per_tok"));
    assert_int_not_equal(parse(&c, QMOE "}", "{\"mlp_only_layers\":[-1]}", err), 0);
    assert_non_null(strstr(err, "mlp_only_layers"));
    assert_int_not_equal(parse(&c, QMOE "}", "{\"mlp_only_layers\":3}", err), 0);
    assert_int_not_equal(parse(&c, QMOE "}", "{\"decoder_sparse_step\":0}", err), 0);
    assert_non_null(strstr(err, "decoder_sparse_step"));
    /* an architecture that is not registered: a clear error */
    assert_int_not_equal(parse(&c, QMOE "}", "{\"architectures\":[\"DbrxForCausalLM\"]}", err),
                         0);
    assert_non_null(strstr(err, "unsupported architecture"));
    assert_non_null(strstr(err, "MixtralForCausalLM"));
    /* Mixtral: num_local_experts, experts as wide as intermediate_size,
     * always renormalized, no mlp_only_layers */
    assert_int_equal(parse(&c, QMOE "}",
                           "{\"architectures\":[\"MixtralForCausalLM\"],\"num_local_experts\":4,"
                           "\"num_experts_per_tok\":2,\"norm_topk_prob\":false}", err), 0);
    assert_ptr_equal(c.arch, &model_arch_mixtral);
    assert_int_equal(c.n_expert, 4);
    assert_int_equal(c.n_expert_used, 2);
    assert_int_equal(c.moe_inter, 24);
    assert_int_equal(c.norm_topk_prob, 1);
    assert_true(model_config_layer_moe(&c, 3));
    assert_int_not_equal(parse(&c, QMOE "}",
                               "{\"architectures\":[\"MixtralForCausalLM\"],\"mlp_only_layers\":[1]}",
                               err), 0);
    /* GraniteMoE: Mixtral-style MoE plus the four scalars (defaults 1) */
    assert_int_equal(parse(&c, QMOE "}",
                           "{\"architectures\":[\"GraniteMoeForCausalLM\"],\"num_local_experts\":4,"
                           "\"embedding_multiplier\":12.0,\"attention_multiplier\":0.015625,"
                           "\"residual_multiplier\":0.22,\"logits_scaling\":6.0}", err), 0);
    assert_ptr_equal(c.arch, &model_arch_granitemoe);
    assert_true(fabsf(c.embed_mult - 12.0f) < 1e-6f && fabsf(c.attn_mult - 0.015625f) < 1e-9f);
    assert_true(fabsf(c.resid_mult - 0.22f) < 1e-6f && fabsf(c.logits_scaling - 6.0f) < 1e-6f);
    assert_int_equal(c.norm_topk_prob, 1);
    assert_int_equal(parse(&c, QMOE "}", "{\"architectures\":[\"GraniteMoeForCausalLM\"]}", err), 0);
    assert_true(c.embed_mult == 1.0f && c.attn_mult == 1.0f && c.resid_mult == 1.0f &&
                c.logits_scaling == 1.0f);
    assert_int_not_equal(parse(&c, QMOE "}",
                               "{\"architectures\":[\"GraniteMoeForCausalLM\"],"
                               "\"position_embedding_type\":\"alibi\"}", err), 0);
    assert_non_null(strstr(err, "position_embedding_type"));
    /* other architectures ignore Granite keys */
    assert_int_equal(parse(&c, QMOE "}", "{\"logits_scaling\":6.0}", err), 0);
    assert_true(c.logits_scaling == 1.0f && c.attn_mult == 0.0f);
    /* the real configs parse */
    const char *sh = getenv("SGLC_SHARED");
    char path[512];
    const char *dirs[3] = {"Qwen__Qwen3-30B-A3B", "mistralai__Mixtral-8x7B-Instruct-v0.1",
                           "ibm-granite__granite-3.0-1b-a400m-instruct"};
    const int ne[3] = {128, 8, 32}, nk[3] = {8, 2, 8}, ni[3] = {768, 14336, 512};
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/models/configs/%s", sh && *sh ? sh : "../shared", dirs[i]);
        if (access(path, R_OK)) continue;
        assert_int_equal(model_config_load(&c, path, NULL, 0, err, sizeof err), 0);
        assert_int_equal(c.n_expert, ne[i]);
        assert_int_equal(c.n_expert_used, nk[i]);
        assert_int_equal(c.moe_inter, ni[i]);
        assert_int_equal(c.norm_topk_prob, 1);
    }
}

/* ---- a tiny checkpoint, batched == single --------------------------------- */

typedef struct tensor_spec {
    char name[96];
    int n, k; /* k = 0: vector */
    float scale; /* values uniform in [-scale, scale]; < 0: 1 + |scale| * u (norms) */
} tensor_spec;

/* Writes an F32 safetensors file of pseudo-random tensors. */
static void write_checkpoint(const char *path, const tensor_spec *ts, int n)
{
    size_t hcap = 65536, off = 0, hl = 0;
    char *h = malloc(hcap);
    hl += (size_t)snprintf(h + hl, hcap - hl, "{");
    for (int i = 0; i < n; i++) {
        size_t cnt = (size_t)ts[i].n * (ts[i].k ? ts[i].k : 1);
        if (ts[i].k)
            hl += (size_t)snprintf(h + hl, hcap - hl,
                                   "%s\"%s\":{\"dtype\":\"F32\",\"shape\":[%d,%d],"
                                   "\"data_offsets\":[%zu,%zu]}",
                                   i ? "," : "", ts[i].name, ts[i].n, ts[i].k, off, off + cnt * 4);
        else
            hl += (size_t)snprintf(h + hl, hcap - hl,
                                   "%s\"%s\":{\"dtype\":\"F32\",\"shape\":[%d],"
                                   "\"data_offsets\":[%zu,%zu]}",
                                   i ? "," : "", ts[i].name, ts[i].n, off, off + cnt * 4);
        off += cnt * 4;
    }
    hl += (size_t)snprintf(h + hl, hcap - hl, "}");
    while (hl % 8) h[hl++] = ' ';
    assert_true(hl < hcap);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    uint8_t le[8];
    for (int i = 0; i < 8; i++) le[i] = (uint8_t)((uint64_t)hl >> (8 * i));
    fwrite(le, 1, 8, f);
    fwrite(h, 1, hl, f);
    uint64_t s = 99;
    for (int i = 0; i < n; i++) {
        size_t cnt = (size_t)ts[i].n * (ts[i].k ? ts[i].k : 1);
        for (size_t j = 0; j < cnt; j++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            float u = (float)((double)(s >> 40) / (double)(1ull << 24)) * 2.0f - 1.0f;
            float v = ts[i].scale < 0 ? 1.0f - ts[i].scale * u : ts[i].scale * u;
            fwrite(&v, 4, 1, f);
        }
    }
    fclose(f);
    free(h);
}

/* Qwen3-MoE, 3 layers (layer 1 dense via mlp_only_layers), 8 experts top-3,
 * router weights 4x larger than the rest so routing is decisive. */
static model *load_tiny_moe(const char *dir)
{
    char path[512], err[1024];
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("{\"architectures\":[\"Qwen3MoeForCausalLM\"],\"hidden_size\":32,"
          "\"intermediate_size\":24,\"num_hidden_layers\":3,\"num_attention_heads\":4,"
          "\"num_key_value_heads\":2,\"head_dim\":8,\"vocab_size\":64,"
          "\"max_position_embeddings\":256,\"num_experts\":8,\"num_experts_per_tok\":3,"
          "\"moe_intermediate_size\":16,\"norm_topk_prob\":true,\"mlp_only_layers\":[1],"
          "\"tie_word_embeddings\":true,\"torch_dtype\":\"float32\",\"rms_norm_eps\":1e-6}",
          f);
    fclose(f);
    enum { H = 32, HD = 8, NH = 4, KV = 2, E = 8, IE = 16, I = 24, V = 64 };
    static tensor_spec ts[512];
    int n = 0;
#define T(nm_, n_, k_, sc_)                                                                     \
    do {                                                                                      \
        snprintf(ts[n].name, sizeof ts[n].name, "%s", nm_);                                  \
        ts[n].n = (n_), ts[n].k = (k_), ts[n].scale = (sc_);                                  \
        n++;                                                                                  \
    } while (0)
    char nm[96];
    T("model.embed_tokens.weight", V, H, 1.0f);
    T("model.norm.weight", H, 0, -0.2f);
    float a = 1.7f / sqrtf((float)H), b = 1.7f / sqrtf((float)IE), c = 1.7f / sqrtf((float)I);
    for (int il = 0; il < 3; il++) {
#define L(suffix, n_, k_, sc_)                                                                  \
    do {                                                                                      \
        snprintf(nm, sizeof nm, "model.layers.%d.%s", il, suffix);                           \
        T(nm, n_, k_, sc_);                                                                   \
    } while (0)
        L("input_layernorm.weight", H, 0, -0.2f);
        L("post_attention_layernorm.weight", H, 0, -0.2f);
        L("self_attn.q_proj.weight", NH * HD, H, a);
        L("self_attn.k_proj.weight", KV * HD, H, a);
        L("self_attn.v_proj.weight", KV * HD, H, a);
        L("self_attn.o_proj.weight", H, NH * HD, a);
        L("self_attn.q_norm.weight", HD, 0, -0.2f);
        L("self_attn.k_norm.weight", HD, 0, -0.2f);
        if (il == 1) {
            L("mlp.gate_proj.weight", I, H, a);
            L("mlp.up_proj.weight", I, H, a);
            L("mlp.down_proj.weight", H, I, c);
            continue;
        }
        L("mlp.gate.weight", E, H, 4 * a);
        for (int e = 0; e < E; e++) {
            char s2[64];
            snprintf(s2, sizeof s2, "mlp.experts.%d.gate_proj.weight", e);
            L(s2, IE, H, a);
            snprintf(s2, sizeof s2, "mlp.experts.%d.up_proj.weight", e);
            L(s2, IE, H, a);
            snprintf(s2, sizeof s2, "mlp.experts.%d.down_proj.weight", e);
            L(s2, H, IE, b);
        }
#undef L
    }
#undef T
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    write_checkpoint(path, ts, n);
    model_load_opts o = {.model_path = dir, .dtype = -1, .load_format = MODEL_LOAD_AUTO,
                         .context_length = 0, .random_seed = 0};
    model *m = model_load(&o, err, sizeof err);
    if (!m) fail_msg("tiny MoE load: %s", err);
    return m;
}

static void test_batched_equals_single(void **state)
{
    (void)state;
    char dir[300];
    snprintf(dir, sizeof dir, "%s/tiny_moe", g_tmp);
    model *m = load_tiny_moe(dir);
    const model_config *c = model_get_config(m);
    const int V = c->vocab_size;
    enum { NS = 4, MAXL = 16 };
    const int prefix[NS] = {6, 0, 9, 2}, n_new[NS] = {3, 7, 1, 1};
    int total[NS];
    int32_t toks[NS][MAXL];
    for (int s = 0; s < NS; s++) {
        total[s] = prefix[s] + n_new[s];
        for (int p = 0; p < total[s]; p++) toks[s][p] = (int32_t)((s * 29 + p * 13 + 5) % V);
    }
    float *ref = calloc((size_t)NS * MAXL * V, sizeof(float));
    tpool *one = tpool_create(1), *three = tpool_create(3);
    size_t dense_read = 0;
    for (int s = 0; s < NS; s++) {
        model_kv *kv = model_kv_create(m, MAXL, DTYPE_F32);
        int32_t slots[MAXL];
        for (int i = 0; i < MAXL; i++) slots[i] = i;
        const int32_t *sl[1] = {slots};
        for (int p = 0; p < total[s]; p++) {
            int32_t pos = p, kvl = p + 1, ss[2] = {0, 1}, row = 0;
            model_batch b = {.n_tokens = 1, .tokens = &toks[s][p], .positions = &pos, .n_seqs = 1,
                             .seq_start = ss, .seq_kv_len = &kvl, .seq_slots = sl, .n_logits = 1,
                             .logit_rows = &row};
            assert_int_equal(model_forward(m, kv, &b, ref + ((size_t)s * MAXL + p) * V, one), 0);
            /* one token touches exactly top-k experts in each of the 2 MoE
             * layers: the same byte count every step, below the total */
            size_t rb = model_last_read_bytes(m);
            if (!dense_read) dense_read = rb;
            assert_int_equal(rb, dense_read);
            assert_true(rb < model_weight_bytes(m));
        }
        model_kv_destroy(kv);
    }
    /* 2 MoE layers x (8 - 3) experts untouched, each at least 3 x 16 x 32
     * floats (the kernels may pad packed panels) */
    size_t skipped = model_weight_bytes(m) - dense_read, per_expert = 3 * 16 * 32 * 4;
    assert_int_equal(skipped % 10, 0);
    assert_true(skipped / 10 >= per_expert && skipped / 10 < 4 * per_expert);
    /* one shared cache with interleaved slots: prefixes in one call, then
     * all new tokens of the 4 sequences in one call (13 rows routed
     * together), on 3 threads */
    model_kv *kv = model_kv_create(m, NS * MAXL, DTYPE_F32);
    int32_t slots[NS][MAXL];
    const int32_t *sl[NS], *bsl[NS];
    for (int s = 0; s < NS; s++) {
        for (int p = 0; p < MAXL; p++) slots[s][p] = p * NS + (NS - 1 - s);
        sl[s] = slots[s];
    }
    int32_t tk[64], pos[64], start[NS + 1], kvl[NS], rows[64];
    int nt = 0, ns = 0;
    for (int s = 0; s < NS; s++) {
        if (!prefix[s]) continue;
        start[ns] = nt;
        for (int p = 0; p < prefix[s]; p++) tk[nt] = toks[s][p], pos[nt++] = p;
        kvl[ns] = prefix[s];
        bsl[ns++] = sl[s];
    }
    start[ns] = nt;
    model_batch b1 = {.n_tokens = nt, .tokens = tk, .positions = pos, .n_seqs = ns,
                      .seq_start = start, .seq_kv_len = kvl, .seq_slots = bsl, .n_logits = 0};
    assert_int_equal(model_forward(m, kv, &b1, NULL, three), 0);
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
    for (int r = 0; r < nt; r++) rows[r] = r;
    float *got = malloc(sizeof(float) * (size_t)nt * V);
    model_batch b2 = {.n_tokens = nt, .tokens = tk, .positions = pos, .n_seqs = NS,
                      .seq_start = start, .seq_kv_len = kvl, .seq_slots = sl, .n_logits = nt,
                      .logit_rows = rows};
    assert_int_equal(model_forward(m, kv, &b2, got, three), 0);
    float worst = 0, spread = 0;
    for (int s = 0; s < NS; s++)
        for (int i = 0; i < n_new[s]; i++) {
            const float *g = got + (size_t)(start[s] + i) * V;
            const float *r = ref + ((size_t)s * MAXL + prefix[s] + i) * V;
            for (int v = 0; v < V; v++) {
                if (fabsf(g[v] - r[v]) > worst) worst = fabsf(g[v] - r[v]);
                if (fabsf(r[v]) > spread) spread = fabsf(r[v]);
            }
        }
    if (worst > 1e-5f * (1 + spread)) fail_msg("batched vs single: max |diff| %g", worst);
    assert_true(spread > 0.1f); /* the logits are not degenerate */
    free(got);
    free(ref);
    model_kv_destroy(kv);
    tpool_destroy(one);
    tpool_destroy(three);
    model_free(m);
    /* a checkpoint missing an expert names it */
    char cmd[700];
    snprintf(dir, sizeof dir, "%s/tiny_moe", g_tmp);
    char err[1024];
    snprintf(cmd, sizeof cmd, "sed -i 's/\"num_experts\":8/\"num_experts\":9/' '%s/config.json'",
             dir);
    assert_int_equal(system(cmd), 0);
    model_load_opts o = {.model_path = dir, .dtype = -1, .load_format = MODEL_LOAD_AUTO};
    m = model_load(&o, err, sizeof err);
    assert_null(m);
    assert_non_null(strstr(err, "mlp.gate.weight"));
}

static int setup(void **state)
{
    (void)state;
    kernels_init(NULL);
    log_set_level(LOG_WARNING);
    snprintf(g_tmp, sizeof g_tmp, "/tmp/sglc_test_moe_XXXXXX");
    return mkdtemp(g_tmp) ? 0 : -1;
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
        cmocka_unit_test(test_route_order_and_weights),
        cmocka_unit_test(test_route_ties_distinct),
        cmocka_unit_test(test_group),
        cmocka_unit_test(test_config_moe),
        cmocka_unit_test(test_batched_equals_single),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
