/* test_dsmoe — the general MoE router (moe_route) and the DeepSeek /
 * Qwen2-MoE configs: moe_route with softmax, no groups, no bias equals
 * moe_route_row bit for bit; grouped top-k (group_limited_greedy, noaux_tc
 * with a correction bias, sigmoid scores), renormalization and scaling
 * against a brute-force reference written here (sort all experts, filter
 * by the best groups); the real config.json files of DeepSeek-V2-Lite,
 * DeepSeek-V2, DeepSeek-V3 and Qwen1.5-MoE-A2.7B (tests/ref/configs, their
 * sources named inside) parse to the documented values, dense first layers,
 * the V2 / V3 scaling rules, MLA sizes, softmax scale and the latent KV row
 * (576 values per layer vs 16 x (192 + 128) for full attention); bad
 * grouping configs are rejected. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "model/arch.h"
#include "model/config.h"
#include "model/model_impl.h"
#include "model/moe.h"
#include "util/fileio.h"
#include "util/log.h"
#include "util/rng.h"

static float frand(uint64_t *s) { return (float)((double)(rng_next(s) >> 11) / 9007199254740992.0); }

/* ---- brute-force router ----------------------------------------------- */

static float bf_score(const moe_route_cfg *rc, const float *l, int e)
{
    if (rc->score == MOE_SCORE_SIGMOID) return 1.0f / (1.0f + expf(-l[e]));
    float mx = -INFINITY, s = 0;
    for (int i = 0; i < rc->E; i++) mx = l[i] > mx ? l[i] : mx;
    for (int i = 0; i < rc->E; i++) s += expf(l[i] - mx);
    return expf(l[e] - mx) / s;
}

static void bf_route(const moe_route_cfg *rc, const float *l, int32_t *sel, float *w)
{
    int E = rc->E, K = rc->K, G = rc->method == MOE_TOPK_GREEDY ? 1 : rc->n_group, gs = E / G;
    double ch[256], gsc[64];
    int ok[64];
    for (int e = 0; e < E; e++) ch[e] = bf_score(rc, l, e) + (rc->bias ? rc->bias[e] : 0);
    for (int g = 0; g < G; g++) {
        /* sort the group's choice values descending (insertion) */
        double v[256];
        int n = 0;
        for (int e = g * gs; e < (g + 1) * gs; e++) {
            int j = n++;
            while (j > 0 && v[j - 1] < ch[e]) v[j] = v[j - 1], j--;
            v[j] = ch[e];
        }
        gsc[g] = rc->method == MOE_TOPK_GROUP_TOP2 ? v[0] + v[1] : v[0];
        ok[g] = G == 1;
    }
    for (int j = 0; G > 1 && j < rc->topk_group; j++) {
        int b = -1;
        for (int g = 0; g < G; g++)
            if (!ok[g] && (b < 0 || gsc[g] > gsc[b])) b = g;
        ok[b] = 1;
    }
    int used[256] = {0};
    for (int k = 0; k < K; k++) {
        int b = -1;
        for (int e = 0; e < E; e++)
            if (ok[e / gs] && !used[e] && (b < 0 || ch[e] > ch[b])) b = e;
        used[b] = 1;
        sel[k] = b;
        w[k] = bf_score(rc, l, b);
    }
    double s = 0;
    for (int k = 0; k < K; k++) s += w[k];
    for (int k = 0; k < K; k++) w[k] = (float)((rc->renorm ? w[k] / s : w[k]) * rc->scale);
}

static void test_route_plain_equals_route_row(void **state)
{
    (void)state;
    uint64_t s = 7;
    for (int it = 0; it < 300; it++) {
        int E = 2 + (int)(rng_next(&s) % 40), K = 1 + (int)(rng_next(&s) % (uint64_t)E);
        float l[64];
        for (int e = 0; e < E; e++) l[e] = 6.0f * frand(&s) - 3.0f;
        if (it % 7 == 0) l[E / 2] = l[0]; /* a tie */
        int renorm = it & 1;
        moe_route_cfg rc = {.E = E, .K = K, .renorm = renorm, .scale = 1.0f, .n_group = 1,
                            .topk_group = 1};
        int32_t s1[64], s2[64];
        float w1[64], w2[64];
        moe_route_row(l, E, K, renorm, s1, w1);
        moe_route(&rc, l, s2, w2);
        assert_memory_equal(s1, s2, sizeof(int32_t) * (size_t)K);
        assert_memory_equal(w1, w2, sizeof(float) * (size_t)K);
    }
}

static void test_route_grouped_vs_brute_force(void **state)
{
    (void)state;
    uint64_t s = 99;
    int checked[3] = {0};
    for (int it = 0; it < 600; it++) {
        const int Gs[] = {2, 4, 8};
        int G = Gs[it % 3], gs = 2 + (int)(rng_next(&s) % 6), E = G * gs;
        int tg = 1 + (int)(rng_next(&s) % (uint64_t)G);
        int K = 1 + (int)(rng_next(&s) % (uint64_t)(tg * gs));
        moe_topk_method m = (moe_topk_method)(it / 3 % 3);
        float l[256], bias[256];
        for (int e = 0; e < E; e++) l[e] = 8.0f * frand(&s) - 4.0f, bias[e] = 0.4f * frand(&s) - 0.2f;
        moe_route_cfg rc = {.E = E, .K = K, .score = it % 2 ? MOE_SCORE_SIGMOID : MOE_SCORE_SOFTMAX,
                            .method = m, .n_group = G, .topk_group = tg,
                            .bias = m == MOE_TOPK_GROUP_TOP2 ? bias : NULL,
                            .renorm = (it / 9) % 2, .scale = it % 5 ? 2.5f : 1.0f};
        int32_t s1[256], s2[256];
        float w1[256], w2[256];
        moe_route(&rc, l, s1, w1);
        bf_route(&rc, l, s2, w2);
        for (int k = 0; k < K; k++) {
            if (s1[k] != s2[k]) fail_msg("it %d method %d k %d: %d vs %d", it, m, k, s1[k], s2[k]);
            assert_true(fabsf(w1[k] - w2[k]) <= 1e-5f * (1 + fabsf(w2[k])));
        }
        checked[m]++;
    }
    assert_true(checked[0] > 100 && checked[1] > 100 && checked[2] > 100);
    /* a group limit changes the choice: the best expert sits in a group
     * whose other members are poor */
    float l[8] = {5.0f, -5.0f, 1.0f, 1.0f, 0.5f, 0.5f, -4.0f, -4.0f};
    moe_route_cfg rc = {.E = 8, .K = 2, .score = MOE_SCORE_SIGMOID, .method = MOE_TOPK_GROUP_TOP2,
                        .n_group = 4, .topk_group = 1, .renorm = 1, .scale = 1.0f};
    int32_t sel[2];
    float w[2];
    moe_route(&rc, l, sel, w); /* group sums: 1.0 vs 1.46 (group 1) */
    assert_int_equal(sel[0], 2);
    assert_int_equal(sel[1], 3);
    assert_true(fabsf(w[0] - 0.5f) < 1e-6f);
    rc.method = MOE_TOPK_GROUP_MAX; /* ranked by max: group 0 wins */
    moe_route(&rc, l, sel, w);
    assert_int_equal(sel[0], 0);
    assert_int_equal(sel[1], 1);
    /* the bias moves the choice, not the weight */
    float bias[8] = {0, 0, 0, 0, 0, 0, 10.0f, 10.0f};
    rc.method = MOE_TOPK_GROUP_TOP2, rc.bias = bias, rc.renorm = 0;
    moe_route(&rc, l, sel, w);
    assert_int_equal(sel[0], 6);
    assert_true(fabsf(w[0] - 1.0f / (1.0f + expf(4.0f))) < 1e-7f);
}

/* ---- configs -------------------------------------------------------------- */

static int load_cfg(model_config *c, const char *file, const char *over, char *err)
{
    char path[512];
    snprintf(path, sizeof path, "tests/ref/configs/%s", file);
    size_t n;
    char *t = fileio_read(path, 1 << 20, &n);
    if (!t) fail_msg("cannot read %s (run from the repository root)", path);
    int rc = model_config_parse(c, t, n, over, 0, err, 512);
    free(t);
    return rc;
}

static void test_configs(void **state)
{
    (void)state;
    model_config c;
    char err[512];
    /* DeepSeek-V2-Lite: q_proj, 64 experts top-6 greedy softmax, 2 shared,
     * layer 0 dense, scale 1 */
    assert_int_equal(load_cfg(&c, "deepseek-ai__DeepSeek-V2-Lite.json", NULL, err), 0);
    assert_ptr_equal(c.arch, &model_arch_deepseek_v2);
    assert_int_equal(c.q_lora_rank, 0);
    assert_int_equal(c.kv_lora_rank, 512);
    assert_int_equal(c.head_dim, 64);
    assert_int_equal(c.n_kv_head, 1);
    assert_int_equal(c.n_expert, 64);
    assert_int_equal(c.n_expert_used, 6);
    assert_int_equal(c.shared_inter, 2 * 1408);
    assert_int_equal(c.moe_topk_method, MOE_TOPK_GREEDY);
    assert_int_equal(c.moe_score, MOE_SCORE_SOFTMAX);
    assert_false(model_config_layer_moe(&c, 0));
    for (int il = 1; il < 27; il++) assert_true(model_config_layer_moe(&c, il));
    /* latent row: 512 + 64 per layer, vs 16 heads x (192 + 128) */
    assert_int_equal(model_kv_row_len(&c, c.n_kv_head), 576);
    /* softmax scale: 192^-1/2 * (0.1 * 0.707 * ln 40 + 1)^2 */
    double ms = 0.1 * 0.707 * log(40.0) + 1.0;
    assert_true(fabs(c.mla_scale - ms * ms / sqrt(192.0)) < 1e-6);
    assert_int_equal(c.context_length, 163840);
    /* DeepSeek-V2: q_lora_rank, group_limited_greedy 8/3, scale 16 (not normalized) */
    assert_int_equal(load_cfg(&c, "deepseek-ai__DeepSeek-V2.json", NULL, err), 0);
    assert_int_equal(c.q_lora_rank, 1536);
    assert_int_equal(c.moe_topk_method, MOE_TOPK_GROUP_MAX);
    assert_int_equal(c.n_group, 8);
    assert_int_equal(c.topk_group, 3);
    assert_true(c.routed_scale == 16.0f);
    /* normalized V2: the scale is not applied */
    assert_int_equal(load_cfg(&c, "deepseek-ai__DeepSeek-V2.json", "{\"norm_topk_prob\":true}", err), 0);
    assert_true(c.routed_scale == 1.0f);
    /* DeepSeek-V3: sigmoid noaux_tc 8/4, norm + 2.5, 3 dense layers, 1 shared */
    assert_int_equal(load_cfg(&c, "deepseek-ai__DeepSeek-V3.json", NULL, err), 0);
    assert_ptr_equal(c.arch, &model_arch_deepseek_v3);
    assert_int_equal(c.moe_score, MOE_SCORE_SIGMOID);
    assert_int_equal(c.moe_topk_method, MOE_TOPK_GROUP_TOP2);
    assert_int_equal(c.norm_topk_prob, 1);
    assert_true(c.routed_scale == 2.5f);
    assert_int_equal(c.shared_inter, 2048);
    assert_false(model_config_layer_moe(&c, 2));
    assert_true(model_config_layer_moe(&c, 3));
    assert_int_equal(model_kv_row_len(&c, c.n_kv_head), 576);
    ms = 0.1 * 1.0 * log(40.0) + 1.0;
    assert_true(fabs(c.mla_scale - ms * ms / sqrt(192.0)) < 1e-6);
    /* V3 with top-1: no renormalization (HF: only when top_k > 1), scale kept */
    assert_int_equal(load_cfg(&c, "deepseek-ai__DeepSeek-V3.json", "{\"num_experts_per_tok\":1}", err), 0);
    assert_int_equal(c.norm_topk_prob, 0);
    assert_true(c.routed_scale == 2.5f);
    /* explicit nulls are None: plain q_proj, no shared experts; absent keys
     * take DeepseekV3Config's defaults */
    assert_int_equal(load_cfg(&c, "deepseek-ai__DeepSeek-V3.json", "{\"q_lora_rank\":null,"
                              "\"n_shared_experts\":null}", err), 0);
    assert_int_equal(c.q_lora_rank, 0);
    assert_int_equal(c.shared_inter, 0);
    assert_int_equal(model_config_parse(&c, "{\"architectures\":[\"DeepseekV3ForCausalLM\"],"
                                        "\"hidden_size\":64,\"intermediate_size\":96,"
                                        "\"num_hidden_layers\":4,\"num_attention_heads\":4,"
                                        "\"vocab_size\":512}", 146, NULL, 0, err, sizeof err), 0);
    assert_int_equal(c.q_lora_rank, 1536);
    assert_int_equal(c.n_expert, 256);
    assert_int_equal(c.shared_inter, 2048);
    assert_int_equal(c.first_k_dense, 3);
    /* moe_layer_freq 2: odd layers dense */
    assert_int_equal(load_cfg(&c, "deepseek-ai__DeepSeek-V3.json", "{\"moe_layer_freq\":2}", err), 0);
    assert_true(model_config_layer_moe(&c, 4));
    assert_false(model_config_layer_moe(&c, 5));
    /* rejections: grouping that cannot choose K experts, unknown methods */
    assert_int_not_equal(load_cfg(&c, "deepseek-ai__DeepSeek-V3.json", "{\"topk_group\":1,"
                                  "\"num_experts_per_tok\":40}", err), 0);
    assert_non_null(strstr(err, "grouped top-k"));
    assert_int_not_equal(load_cfg(&c, "deepseek-ai__DeepSeek-V3.json", "{\"n_group\":7}", err), 0);
    assert_int_not_equal(load_cfg(&c, "deepseek-ai__DeepSeek-V3.json", "{\"topk_method\":\"x\"}", err), 0);
    assert_non_null(strstr(err, "topk_method"));
    assert_int_not_equal(load_cfg(&c, "deepseek-ai__DeepSeek-V3.json", "{\"scoring_func\":\"relu\"}", err), 0);
    assert_int_not_equal(load_cfg(&c, "deepseek-ai__DeepSeek-V2-Lite.json", "{\"attention_bias\":true}", err), 0);
    assert_non_null(strstr(err, "attention_bias"));
    /* Qwen1.5-MoE-A2.7B: 60 experts top-4, shared 5632 */
    assert_int_equal(load_cfg(&c, "Qwen__Qwen1.5-MoE-A2.7B.json", NULL, err), 0);
    assert_ptr_equal(c.arch, &model_arch_qwen2_moe);
    assert_int_equal(c.n_expert, 60);
    assert_int_equal(c.n_expert_used, 4);
    assert_int_equal(c.moe_inter, 1408);
    assert_int_equal(c.shared_inter, 5632);
    assert_int_equal(c.norm_topk_prob, 0);
    assert_int_equal(model_kv_row_len(&c, c.n_kv_head), 16 * 128);
    assert_true(c.routed_scale == 1.0f);
    /* Qwen2MoeConfig defaults */
    assert_int_equal(load_cfg(&c, "Qwen__Qwen1.5-MoE-A2.7B.json", "{\"num_experts\":null,"
                              "\"shared_expert_intermediate_size\":null}", err), 0);
    assert_int_equal(c.n_expert, 60);
    assert_int_equal(c.shared_inter, 5632);
}

int main(void)
{
    log_set_level(LOG_WARNING);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_route_plain_equals_route_row),
        cmocka_unit_test(test_route_grouped_vs_brute_force),
        cmocka_unit_test(test_configs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
