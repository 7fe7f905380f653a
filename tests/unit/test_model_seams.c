/* test_model_seams — the seams of src/model that coming features plug
 * into: the weight-source interface (a source without bytes, read through
 * the interface only, loads TinyStories-656K to the same logits bit for bit
 * as the safetensors path; the safetensors source's views and type names),
 * run states sharing one set of weights (model_share: same logits, freed in
 * either order), and the linear step's adapter hook (y += scale · B (A x)
 * per row equals the merged weight). */
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

#include "kernels/kernels.h"
#include "model/linear.h"
#include "model/model.h"
#include "model/wsource.h"
#include "util/threadpool.h"

static const char *shared_dir(void)
{
    const char *s = getenv("SGLC_SHARED");
    return s && *s ? s : "../shared";
}

static int tinystories_dir(char *dir, size_t n)
{
    snprintf(dir, n, "%s/models/TinyStories-656K", shared_dir());
    return access(dir, R_OK) == 0;
}

/* ---- a source without bytes ---------------------------------------------
 * Wraps the safetensors source but hands out tensors with data = NULL, so
 * the loader must go through read / read_row (as a source that decodes or
 * generates its values would).  The inner bytes ride in `tag`. */

typedef struct noby_src {
    wsrc inner;
    int n_find, n_read, n_rows;
} noby_src;

static int nb_find(void *self, const char *name, int ndim, const int64_t *expect, wsrc_tensor *out)
{
    noby_src *s = self;
    s->n_find++;
    if (!wsrc_find(&s->inner, name, ndim, expect, out)) return 0;
    out->tag = (uint64_t)(uintptr_t)out->data;
    out->data = NULL;
    return 1;
}

static int nb_read(void *self, const wsrc_tensor *t, void *dst, dtype dst_dt)
{
    noby_src *s = self;
    s->n_read++;
    return wsrc_convert(dst, dst_dt, (const void *)(uintptr_t)t->tag, t->type,
                        (size_t)wsrc_numel(t));
}

static void nb_read_row(void *self, const wsrc_tensor *t, int64_t r, float *dst)
{
    noby_src *s = self;
    __atomic_add_fetch(&s->n_rows, 1, __ATOMIC_RELAXED);
    const char *base = (const void *)(uintptr_t)t->tag;
    size_t rb = kern_type_row_bytes((kern_type)t->type, t->shape[1]);
    assert_int_equal(wsrc_convert(dst, DTYPE_F32, base + (size_t)r * rb, t->type,
                                  (size_t)t->shape[1]),
                     0);
}

static void nb_close(void *self)
{
    noby_src *s = self;
    wsrc_close(&s->inner);
    /* the counters are read by the test after the model is freed */
}

static const wsrc_ops noby_ops = {
    .kind = "test source without bytes",
    .find = nb_find,
    .read = nb_read,
    .read_row = nb_read_row,
    .close = nb_close,
};

/* Logits of a 5-token prefill (all rows) and 2 decode steps. */
static float *run_logits(model *m, int *n_out)
{
    const model_config *c = model_get_config(m);
    const int V = c->vocab_size, n = 5 + 2;
    float *all = malloc(sizeof(float) * (size_t)V * n);
    model_kv *kv = model_kv_create(m, 16, DTYPE_F32);
    assert_non_null(kv);
    int32_t slots[16];
    for (int i = 0; i < 16; i++) slots[i] = i;
    const int32_t *sl[1] = {slots};
    int32_t toks[5] = {1, 40, 300, 7, 511}, pos[5] = {0, 1, 2, 3, 4}, rows[5] = {0, 1, 2, 3, 4};
    int32_t kvl = 5, ss[2] = {0, 5};
    model_batch b = {.n_tokens = 5, .tokens = toks, .positions = pos, .n_seqs = 1,
                     .seq_start = ss, .seq_kv_len = &kvl, .seq_slots = sl, .n_logits = 5,
                     .logit_rows = rows};
    assert_int_equal(model_forward(m, kv, &b, all, NULL), 0);
    for (int s = 0; s < 2; s++) {
        int32_t tok = kern_argmax(all + (size_t)(4 + s) * V, V), p = 5 + s, kl = 6 + s;
        int32_t s1[2] = {0, 1}, r0 = 0;
        model_batch d = {.n_tokens = 1, .tokens = &tok, .positions = &p, .n_seqs = 1,
                         .seq_start = s1, .seq_kv_len = &kl, .seq_slots = sl, .n_logits = 1,
                         .logit_rows = &r0};
        assert_int_equal(model_forward(m, kv, &d, all + (size_t)(5 + s) * V, NULL), 0);
    }
    model_kv_destroy(kv);
    *n_out = V * n;
    return all;
}

static void test_source_without_bytes(void **state)
{
    (void)state;
    char dir[512], err[1024];
    if (!tinystories_dir(dir, sizeof dir)) skip();
    const int dts[3] = {-1, DTYPE_BF16, DTYPE_F16};
    for (int i = 0; i < 3; i++) {
        model_load_opts o = {.model_path = dir, .dtype = dts[i]};
        model *ref = model_load(&o, err, sizeof err);
        if (!ref) fail_msg("%s", err);
        int n1, n2;
        float *a = run_logits(ref, &n1);
        size_t ref_bytes = model_weight_bytes(ref);
        model_free(ref);

        noby_src *s = calloc(1, sizeof *s);
        assert_int_equal(wsrc_open_safetensors(&s->inner, dir, err, sizeof err), 0);
        wsrc src = {&noby_ops, s};
        model *m = model_load_source(&o, &src, err, sizeof err);
        if (!m) fail_msg("%s", err);
        assert_null(src.ops); /* taken over */
        float *b = run_logits(m, &n2);
        assert_int_equal(n1, n2);
        if (memcmp(a, b, sizeof(float) * (size_t)n1)) {
            for (int j = 0; j < n1; j++)
                if (memcmp(&a[j], &b[j], 4))
                    fail_msg("dtype %d: logit %d: %.9g via bytes, %.9g via read", dts[i], j,
                             (double)a[j], (double)b[j]);
        }
        /* the same weights resident, minus the embedding table: it is
         * never stored when the source has no bytes (rows are read) */
        assert_true(model_weight_bytes(m) <= ref_bytes);
        assert_true(s->n_find > 0 && s->n_read > 0 && s->n_rows > 0);
        model_free(m);
        free(s);
        free(a), free(b);
    }
}

static void test_safetensors_source(void **state)
{
    (void)state;
    char dir[512], err[1024];
    if (!tinystories_dir(dir, sizeof dir)) skip();
    wsrc s;
    assert_int_equal(wsrc_open_safetensors(&s, dir, err, sizeof err), 0);
    assert_string_equal(s.ops->kind, "safetensors");
    wsrc_tensor t;
    assert_int_equal(wsrc_find(&s, "no.such.tensor", 1, (int64_t[]){4}, &t), 0);
    assert_int_equal(wsrc_find(&s, "lm_head.weight", 2, (int64_t[]){1, 1}, &t), 1);
    assert_int_equal(t.ndim, 2); /* what the file holds, not what was asked */
    assert_int_equal(t.type, KERN_TYPE_F32);
    assert_string_equal(t.type_name, "F32");
    assert_non_null(t.data);
    assert_non_null(strstr(t.origin, ".safetensors"));
    assert_int_equal(t.nbytes, kern_type_mat_bytes((kern_type)t.type, t.shape[0], t.shape[1]));
    /* a view of rows [3, 5) reads the same values as those rows */
    int64_t H = t.shape[1];
    wsrc_tensor v = wsrc_view2(&t, 3 * H, 2, H);
    assert_int_equal(v.nbytes, (size_t)(2 * H * 4));
    float *got = malloc(sizeof(float) * (size_t)(2 * H)), *row = malloc(sizeof(float) * (size_t)H);
    assert_int_equal(wsrc_read(&s, &v, got, DTYPE_F32), 0);
    for (int r = 0; r < 2; r++) {
        s.ops->read_row(s.self, &t, 3 + r, row);
        assert_memory_equal(row, got + r * H, sizeof(float) * (size_t)H);
    }
    /* conversion to bf16 on read rounds to nearest even */
    uint16_t *h = malloc(sizeof(uint16_t) * (size_t)(2 * H));
    assert_int_equal(wsrc_read(&s, &v, h, DTYPE_BF16), 0);
    for (int64_t i = 0; i < 2 * H; i++) assert_int_equal(h[i], f32_to_bf16(got[i]));
    assert_int_not_equal(wsrc_read(&s, &v, h, DTYPE_F16), 0); /* not a read target */
    wsrc_keep(&s, &v);
    wsrc_release_unused(&s);
    free(got), free(row), free(h);
    wsrc_close(&s);
    assert_null(s.ops);
}

static void test_dummy_source(void **state)
{
    (void)state;
    wsrc a, b;
    assert_int_equal(wsrc_open_dummy(&a, 42, DTYPE_BF16), 0);
    assert_int_equal(wsrc_open_dummy(&b, 42, DTYPE_BF16), 0);
    wsrc_tensor t, u;
    const int64_t shape[2] = {6, 10};
    assert_int_equal(wsrc_find(&a, "w", 2, shape, &t), 1);
    assert_int_equal(wsrc_find(&b, "w", 2, shape, &u), 1);
    assert_int_equal(t.type, KERN_TYPE_BF16); /* the precision asked for */
    assert_null(t.data);
    assert_int_equal(t.shape[0], 6);
    float x[60], y[60];
    assert_int_equal(wsrc_read(&a, &t, x, DTYPE_F32), 0);
    assert_int_equal(wsrc_read(&b, &u, y, DTYPE_F32), 0);
    assert_memory_equal(x, y, sizeof x); /* same seed, same order: same values */
    for (int i = 0; i < 60; i++) {
        assert_true(fabsf(x[i]) <= 1e-3f);
        assert_true(x[i] == bf16_to_f32(f32_to_bf16(x[i]))); /* rounded to bf16 */
    }
    assert_int_equal(wsrc_read(&a, &t, y, DTYPE_F32), 0);
    assert_memory_not_equal(x, y, sizeof x); /* the next read makes new values */
    /* bound rows are a pure function of (seed at binding, row) */
    a.ops->bind_rows(a.self, &t);
    float r1[10], r2[10];
    a.ops->read_row(a.self, &t, 4, r1);
    assert_int_equal(wsrc_read(&a, &u, y, DTYPE_F32), 0);
    a.ops->read_row(a.self, &t, 4, r2);
    assert_memory_equal(r1, r2, sizeof r1);
    a.ops->read_row(a.self, &t, 5, r2);
    assert_memory_not_equal(r1, r2, sizeof r1);
    wsrc_close(&a);
    wsrc_close(&b);
}

static void test_shared_weights(void **state)
{
    (void)state;
    char dir[512], err[1024];
    if (!tinystories_dir(dir, sizeof dir)) skip();
    model_load_opts o = {.model_path = dir, .dtype = -1};
    model *m = model_load(&o, err, sizeof err);
    if (!m) fail_msg("%s", err);
    model *r = model_share(m);
    assert_non_null(r);
    assert_ptr_equal(model_get_config(m), model_get_config(r)); /* one set of weights */
    assert_int_equal(model_weight_bytes(m), model_weight_bytes(r));
    const model_config *cf = model_get_config(m);
    size_t tb = 2 * (size_t)cf->n_layer * cf->n_kv_head * cf->head_dim;
    assert_int_equal(model_kv_token_bytes(m, DTYPE_F32), tb * 4);
    assert_int_equal(model_kv_token_bytes(r, DTYPE_BF16), tb * 2);
    model_kv *kv = model_kv_create(r, 3, DTYPE_BF16);
    assert_non_null(kv);
    assert_true(kv->bytes >= 3 * model_kv_token_bytes(r, DTYPE_BF16));
    model_kv_destroy(kv);
    model_set_chunk_tokens(r, 2); /* run-state settings are per run state */
    int n1, n2, n3;
    float *a = run_logits(m, &n1), *b = run_logits(r, &n2);
    assert_memory_equal(a, b, sizeof(float) * (size_t)n1);
    model_free(m); /* the weights outlive the first handle */
    float *c = run_logits(r, &n3);
    assert_memory_equal(a, c, sizeof(float) * (size_t)n1);
    model_free(r);
    free(a), free(b), free(c);
}

/* ---- linear: the adapter hook ------------------------------------------ */

static void test_linear_adapters(void **state)
{
    (void)state;
    kernels_init("scalar");
    enum { M = 4, N = 7, K = 9, R = 3 };
    float w[N * K], x[M * K], a[R * K], bm[N * R], bias[N], merged[N * K];
    uint64_t s = 99;
    for (int i = 0; i < N * K; i++) w[i] = (float)((s = s * 6364136223846793005ull + 1) >> 41) / (1 << 23) - 0.5f;
    for (int i = 0; i < M * K; i++) x[i] = (float)((s = s * 6364136223846793005ull + 1) >> 41) / (1 << 23) - 0.5f;
    for (int i = 0; i < R * K; i++) a[i] = (float)((s = s * 6364136223846793005ull + 1) >> 41) / (1 << 23) - 0.5f;
    for (int i = 0; i < N * R; i++) bm[i] = (float)((s = s * 6364136223846793005ull + 1) >> 41) / (1 << 23) - 0.5f;
    for (int i = 0; i < N; i++) bias[i] = 0.1f * (float)i;
    const float scale = 0.5f;
    linear_weight lw;
    assert_int_equal(linear_init(&lw, w, DTYPE_F32, N, K, DTYPE_F32, 1), 0);
    assert_int_equal(linear_type(&lw), KERN_TYPE_F32);
    assert_int_equal(lw.shard.rows, N);
    assert_int_equal(lw.shard.full_cols, K);
    lw.bias = bias;
    float bt[R * N]; /* the adapter holds Bᵀ (r, n) */
    for (int n = 0; n < N; n++)
        for (int r = 0; r < R; r++) bt[r * N + n] = bm[n * R + r];
    linear_adapter ad = {.id = 5, .rank = R, .scale = scale, .a = a, .bt = bt};
    float y[M * N], ybase[M * N], want[M * N];
    void *scr = malloc(kern_matmul_scratch(M, K) + 64);
    linear_exec ex = {.ith = 0, .nth = 1, .scratch = scr};
    linear(ybase, x, M, &lw, &ex); /* no adapters: the base product */
    lw.adapters = &ad;
    lw.n_adapters = 1;
    const int32_t row_ad[M] = {5, -1, 5, 2}; /* 2: an id the weight has not */
    ex.row_adapter = row_ad;
    linear(y, x, M, &lw, &ex);
    /* reference: rows with adapter 5 through W + scale B A, others through W */
    for (int n = 0; n < N; n++)
        for (int k = 0; k < K; k++) {
            double d = 0;
            for (int r = 0; r < R; r++) d += (double)bm[n * R + r] * a[r * K + k];
            merged[n * K + k] = w[n * K + k] + scale * (float)d;
        }
    for (int t = 0; t < M; t++)
        for (int n = 0; n < N; n++) {
            const float *wr = row_ad[t] == 5 ? merged : w;
            double d = bias[n];
            for (int k = 0; k < K; k++) d += (double)wr[n * K + k] * x[t * K + k];
            want[t * N + n] = (float)d;
        }
    for (int i = 0; i < M * N; i++) assert_true(fabsf(y[i] - want[i]) <= 1e-5f);
    /* rows without an adapter are exactly the base product */
    assert_memory_equal(y + 1 * N, ybase + 1 * N, sizeof(float) * N);
    assert_memory_equal(y + 3 * N, ybase + 3 * N, sizeof(float) * N);
    free(scr);
    linear_free(&lw);
    kernels_init(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_source_without_bytes),
        cmocka_unit_test(test_safetensors_source),
        cmocka_unit_test(test_dummy_source),
        cmocka_unit_test(test_shared_weights),
        cmocka_unit_test(test_linear_adapters),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
