/* quant_select — the start-up check of the AVX-512 VNNI-or-AVX2 choice of
 * the block-quantized kernels (quant_dot.h: quant_avx512_select).
 *
 * DESIGN: quant_dot.c keeps a table of what measured faster on Zen 4 (the
 * prior); here each plain-layout entry is checked by timing, once per
 * process, single thread: the type's AVX2 dot and its VNNI dot on the same
 * QS_ROWS x QS_K weight (one quantized row copied to every row: 36-70 KiB,
 * L2 resident, the compute rate the table was measured on) with R = 1
 * activation row (decode) and R = 4 (the GEMM's register block), QS_REPS
 * interleaved runs each after one warm-up, best run counts.  The rule is
 * kern_bf16_decide's: the other kernel must be faster by more than
 * QS_MARGIN to overturn the table, so near ties (many types are within
 * 0.87-1.0x) keep the table's deterministic pick.  The repacked x8
 * layouts keep the table (their driver is not timed here).  About 2-4 ms
 * for the 12 types. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/kern_types.h"
#include "kernels/kernels.h"
#include "kernels/quant_dot.h"
#include "kernels/quant_select.h"

#define QS_ROWS 64
#define QS_K 1024
#define QS_REPS 7
#define QS_MARGIN 0.10

static double qs_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct qs_result {
    int done, rc;
    double t[2][2][QS_REPS]; /* [gemv, gemm][avx2, vnni][rep] seconds */
} qs_result;

static qs_result g_qs[KERN_TYPE_COUNT];
static quant_select_info g_info;

static int qs_time(kern_type t, qs_result *res)
{
    const quant_ops *o2 = quant_ops_avx2(t);
    quant_dot_fn dv = quant_dot_avx512(t);
    const kern_type_traits *tr = kern_type_get(t);
    if (!o2 || !dv || !tr || !tr->row_from_f32 || QS_K % tr->block_size) return -1;
    size_t wrow = kern_type_row_bytes(t, QS_K), arow = kern_type_row_bytes(o2->act_type, QS_K);
    if (!wrow || !arow) return -1;
    char *w = malloc(wrow * QS_ROWS), *a = malloc(arow * 4);
    float *x = malloc(sizeof(float) * QS_K * 4), out[QS_ROWS * 4];
    int rc = -1;
    if (!w || !a || !x) goto done;
    uint32_t s = 0x9E3779B9u ^ (uint32_t)t;
    for (int i = 0; i < QS_K * 4; i++) {
        s = s * 1664525u + 1013904223u;
        x[i] = (float)(s >> 8) / (float)(1 << 24) - 0.5f;
    }
    tr->row_from_f32(w, x, QS_K);
    for (int r = 1; r < QS_ROWS; r++) memcpy(w + wrow * r, w, wrow);
    for (int r = 0; r < 4; r++) o2->act(a + arow * r, x + (size_t)QS_K * r, QS_K);
    for (int path = 0; path < 2; path++) {
        const int R = path ? 4 : 1;
        for (int rep = -1; rep < QS_REPS; rep++)
            for (int j = 0; j < 2; j++) {
                const int kern = (rep & 1) ? 1 - j : j;
                quant_dot_fn f = kern ? dv : o2->dot;
                double t0 = qs_now();
                for (int r = 0; r < QS_ROWS; r++) f(QS_K, w + wrow * r, a, arow, R, out + r * 4, 1);
                double dt = qs_now() - t0;
                if (rep >= 0) res->t[path][kern][rep] = dt;
            }
    }
    rc = 0;
done:
    free(w);
    free(a);
    free(x);
    return rc;
}

int quant_avx512_measure(kern_type t, int prior_gemv, int prior_gemm, int *gemv, int *gemm)
{
    if ((int)t < 0 || t >= KERN_TYPE_COUNT) return -1;
    qs_result *res = &g_qs[t];
    if (!res->done) {
        double t0 = qs_now();
        res->rc = qs_time(t, res);
        res->done = 1;
        g_info.ms += (qs_now() - t0) * 1e3;
    }
    if (res->rc) return -1;
    *gemv = kern_bf16_decide(res->t[0][0], QS_REPS, res->t[0][1], QS_REPS, prior_gemv, QS_MARGIN);
    *gemm = kern_bf16_decide(res->t[1][0], QS_REPS, res->t[1][1], QS_REPS, prior_gemm, QS_MARGIN);
    return 0;
}

/* best avx2 time / best vnni time (> 1: VNNI faster) of one path */
static double qs_ratio(const qs_result *r, int path)
{
    double b[2] = {INFINITY, INFINITY};
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < QS_REPS; i++)
            if (r->t[path][k][i] > 0 && r->t[path][k][i] < b[k]) b[k] = r->t[path][k][i];
    return isfinite(b[0]) && isfinite(b[1]) ? b[0] / b[1] : 0.0;
}

void quant_select_note(kern_type t, int path, int table, int chosen)
{
    if (path == 0) g_info.n_checked++;
    if (table == chosen) return;
    g_info.n_overturned++;
    const kern_type_traits *tr = kern_type_get(t);
    size_t n = strlen(g_info.overturned);
    snprintf(g_info.overturned + n, sizeof g_info.overturned - n, "%s%s %s->%s (%.2fx)", n ? ", " : "",
             tr && tr->name ? tr->name : "?", path ? "gemm" : "gemv", chosen ? "vnni" : "avx2",
             qs_ratio(&g_qs[t], path));
}

void quant_select_reset(const char *how)
{
    g_info.n_checked = g_info.n_overturned = 0;
    g_info.overturned[0] = 0;
    g_info.how = how;
}

const quant_select_info *quant_select_get(void) { return &g_info; }

double quant_select_ratio(kern_type t, int path)
{
    if ((int)t < 0 || t >= KERN_TYPE_COUNT || !g_qs[t].done || g_qs[t].rc) return 0.0;
    return qs_ratio(&g_qs[t], path);
}
