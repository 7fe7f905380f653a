/* test_ep — expert parallelism's pure parts (model/model_ep.h):
 *   - placement from --init-expert-location: a physical_to_logical_map is
 *     taken as given (one row for all layers, or per layer); bad maps are
 *     refused with their messages; a logical_count gives the balanced
 *     placement (every rank n_local slots, every expert placed, the spare
 *     slots copy the heaviest experts, no rank holds one expert twice while
 *     it can be avoided, the per-rank loads within the heaviest copy of
 *     each other);
 *   - model_ep_rows: the holders of an expert split its rows into parts
 *     that cover them exactly once;
 *   - the recorder without a model: off by default (routes refused), the
 *     mode names, metrics text empty until enabled. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "model/config.h"
#include "model/model_ep.h"

/* A tiny Qwen3-MoE config of L layers and E experts (all MoE layers). */
static void make_cfg(model_config *c, int L, int E)
{
    char j[512], err[256];
    snprintf(j, sizeof j,
             "{\"architectures\":[\"Qwen3MoeForCausalLM\"],\"hidden_size\":16,\"intermediate_size\":32,"
             "\"num_attention_heads\":2,\"num_key_value_heads\":1,\"num_hidden_layers\":%d,\"vocab_size\":32,"
             "\"num_experts\":%d,\"num_experts_per_tok\":2,\"moe_intermediate_size\":8}", L, E);
    assert_int_equal(model_config_parse(c, j, strlen(j), NULL, 0, err, sizeof err), 0);
}

static void test_map_given(void **state)
{
    (void)state;
    model_config c;
    make_cfg(&c, 2, 4);
    int32_t *p = NULL;
    char err[512];
    assert_int_equal(model_ep_parse_location(&c, 2, 2, "{\"physical_to_logical_map\": [3,2,1,0,3,2]}", &p, err,
                                             sizeof err), 0);
    const int32_t want[6] = {3, 2, 1, 0, 3, 2};
    for (int il = 0; il < 2; il++) assert_memory_equal(p + il * 6, want, sizeof want);
    free(p);
    /* per layer */
    assert_int_equal(model_ep_parse_location(&c, 2, 0, "{\"physical_to_logical_map\": [[0,1,2,3],[1,0,3,2]]}",
                                             &p, err, sizeof err), 0);
    assert_int_equal(p[4], 1);
    assert_int_equal(p[7], 2);
    free(p);
}

static void refused(const model_config *c, int size, int red, const char *spec, const char *msg)
{
    int32_t *p = (int32_t *)1;
    char err[512] = "";
    assert_int_equal(model_ep_parse_location(c, size, red, spec, &p, err, sizeof err), -1);
    assert_null(p);
    if (!strstr(err, msg)) fail_msg("'%s' lacks '%s'", err, msg);
}

static void test_map_refused(void **state)
{
    (void)state;
    model_config c;
    make_cfg(&c, 2, 4);
    refused(&c, 2, 0, "{\"physical_to_logical_map\": [0,0,1,2]}", "places expert 3 nowhere");
    refused(&c, 2, 0, "{\"physical_to_logical_map\": [0,1,2]}", "expected 4 values");
    refused(&c, 2, 0, "{\"physical_to_logical_map\": [0,1,2,4]}", "is not an expert id");
    refused(&c, 2, 0, "{\"physical_to_logical_map\": [[0,1,2,3]]}", "1 rows for 2 layers");
    refused(&c, 2, 0, "{\"logical_count\": [1,2,-3,4]}", "is not a count >= 0");
    refused(&c, 2, 0, "{\"other\": 1}", "expected a \"physical_to_logical_map\" or");
    refused(&c, 2, 0, "{not json", "not a readable JSON document");
    refused(&c, 2, 0, "/nonexistent/placement.json", "not a readable JSON document");
    refused(&c, 3, 0, "{\"logical_count\": [1,1,1,1]}", "do not divide over 3 ranks");
}

static void test_balanced(void **state)
{
    (void)state;
    model_config c;
    const int E = 8, R = 4, red = 4, P = E + red, NL = P / R;
    make_cfg(&c, 1, E);
    /* expert 7 is hot, 3 warm, the others cold */
    int32_t *p = NULL;
    char err[512];
    assert_int_equal(model_ep_parse_location(&c, R, red, "{\"logical_count\": [1,1,1,40,1,1,1,100]}", &p, err,
                                             sizeof err), 0);
    const double cnt[8] = {1, 1, 1, 40, 1, 1, 1, 100};
    int copies[8] = {0};
    for (int s = 0; s < P; s++) {
        assert_true(p[s] >= 0 && p[s] < E);
        copies[p[s]]++;
    }
    for (int e = 0; e < E; e++) assert_true(copies[e] >= 1);
    /* 4 spare slots by load per copy: 7 (100 -> 50), 7 (50 > 40 -> 33.3), 3 (40 > 33.3 -> 20),
     * 7 (33.3 > 20 -> 25): 7 on every rank, 3 twice */
    assert_int_equal(copies[7], 4);
    assert_int_equal(copies[3], 2);
    double load[4] = {0}, mx = 0, mn = 1e30;
    for (int r = 0; r < R; r++) {
        for (int a = 0; a < NL; a++) {
            for (int b = 0; b < a; b++) assert_int_not_equal(p[r * NL + a], p[r * NL + b]); /* no duplicates */
            load[r] += cnt[p[r * NL + a]] / copies[p[r * NL + a]];
        }
        if (load[r] > mx) mx = load[r];
        if (load[r] < mn) mn = load[r];
    }
    assert_true(mx - mn <= 25.0 + 1e-9); /* within the heaviest copy's load */
    free(p);
}

static void test_rows_partition(void **state)
{
    (void)state;
    /* expert 0 on 3 EP ranks, expert 1 on 1: every row exactly once */
    int16_t nhold[2] = {3, 1};
    for (int n = 0; n < 20; n++) {
        int seen[64] = {0};
        for (int rank = 0; rank < 3; rank++) {
            int16_t myidx[2] = {(int16_t)rank, (int16_t)(rank == 2 ? 0 : -1)};
            model_ep ep = {.size = 3, .rank = rank, .E = 2, .nhold = nhold, .myidx = myidx};
            int p0, p1;
            if (model_ep_rows(&ep, 0, 0, 5, n, &p0, &p1))
                for (int p = p0; p < p1; p++) seen[p]++;
            if (model_ep_rows(&ep, 0, 1, 5 + n, 4, &p0, &p1))
                for (int p = p0; p < p1; p++) seen[p]++;
        }
        for (int p = 0; p < 5; p++) assert_int_equal(seen[p], 0);
        for (int p = 5; p < 5 + n + 4; p++) assert_int_equal(seen[p], 1);
    }
    int p0, p1; /* no EP: everything */
    assert_true(model_ep_rows(NULL, 0, 1, 7, 3, &p0, &p1));
    assert_int_equal(p0, 7);
    assert_int_equal(p1, 10);
}

static void test_recorder_off(void **state)
{
    (void)state;
    char err[256];
    assert_int_equal(model_erec_mode_get(), MODEL_EREC_OFF);
    assert_int_equal(model_erec_start(), -1);
    assert_int_equal(model_erec_stop(), -1);
    assert_null(model_erec_dump_json());
    char *m = model_erec_metrics_text();
    assert_string_equal(m, "");
    free(m);
    assert_int_equal(model_erec_configure("per_layer", 0, 0, err, sizeof err), -1);
    assert_non_null(strstr(err, "per_layer"));
    assert_int_equal(model_erec_configure("stat_approx", 0, 0, err, sizeof err), 0);
    assert_int_equal(model_erec_mode_get(), MODEL_EREC_STAT);
    assert_int_equal(model_erec_start(), 0);
    char *d = model_erec_dump_json(); /* nothing routed yet: an empty stat record */
    assert_non_null(d);
    assert_non_null(strstr(d, "\"recorder_mode\":\"stat\""));
    assert_non_null(strstr(d, "\"num_passes\":0"));
    free(d);
    assert_int_equal(model_erec_configure(NULL, 0, 1, err, sizeof err), 0); /* metrics imply stat */
    assert_int_equal(model_erec_mode_get(), MODEL_EREC_STAT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_map_given),   cmocka_unit_test(test_map_refused),
        cmocka_unit_test(test_balanced),    cmocka_unit_test(test_rows_partition),
        cmocka_unit_test(test_recorder_off),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
