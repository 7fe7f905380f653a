/* kernels_pack — weight packing into the column panels the SIMD matmuls
 * read, shared by kernels_avx2.c (16-column panels) and kernels_avx512.c
 * (32-column panels).  Plain C: it runs once per weight at load, so it
 * needs no ISA flags.
 *
 *   bf16: panel b, k-pair p -> nb x (W[c][2p], W[c][2p+1])
 *   f32:  panel b, index i  -> nb x W[c][i]
 * Columns past n in the last panel and the odd half of the last pair are
 * zero.  Weights of 4 MiB and more are packed by kern_set_pack_threads()
 * threads over contiguous panel ranges (load time of big matrices such as
 * lm_head is dominated by first-touch page faults, which then run in
 * parallel too); the result does not depend on the thread count. */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "kernels/kern_types.h"
#include "kernels/kernels_impl.h"
#include "util/dtype.h"

static inline float src_get(const void *src, dtype dt, size_t idx)
{
    switch (dt) {
    case DTYPE_F32: return ((const float *)src)[idx];
    case DTYPE_F16: return f16_to_f32(((const uint16_t *)src)[idx]);
    default: return bf16_to_f32(((const uint16_t *)src)[idx]);
    }
}

/* One packing job: panels [b0, b1) of one matrix. */
typedef struct pack_job {
    const kern_mat *m;
    const void *src;
    dtype sdt;
    int nb;
    void *dst;         /* the whole packed buffer */
    size_t b0, b1;
} pack_job;

static void pack_bf16_panels(const pack_job *J)
{
    int n = J->m->n, k = J->m->k, nb = J->nb;
    const void *src = J->src;
    dtype sdt = J->sdt;
    size_t k2 = (size_t)(k + 1) / 2;
    uint16_t *d = J->dst;
    for (size_t b = J->b0; b < J->b1; b++) {
        uint16_t *pan = d + b * k2 * (size_t)nb * 2;
        for (int j = 0; j < nb; j++) {
            size_t c = b * (size_t)nb + (size_t)j;
            if (c >= (size_t)n) break;
            size_t row = c * (size_t)k;
            if (sdt == DTYPE_BF16 && !(k & 1)) {
                continue; /* done below, 32-bit pairs in cache-sized blocks */
            } else if (sdt == DTYPE_BF16) {
                const uint16_t *s = (const uint16_t *)src + row;
                for (int i = 0; i < k; i++) pan[((size_t)(i >> 1) * (size_t)nb + j) * 2 + (i & 1)] = s[i];
            } else {
                for (int i = 0; i < k; i++)
                    pan[((size_t)(i >> 1) * (size_t)nb + j) * 2 + (i & 1)] =
                        f32_to_bf16(src_get(src, sdt, row + (size_t)i));
            }
        }
        if (sdt == DTYPE_BF16 && !(k & 1)) {
            /* a (W[c][2p], W[c][2p+1]) pair is one 32-bit word of the
             * source row: transpose words in blocks of 16 pairs so the
             * 16 destination lines stay in L1 while the rows stream */
            uint32_t *pan32 = (uint32_t *)pan;
            int nj = n - (int)(b * (size_t)nb) < nb ? n - (int)(b * (size_t)nb) : nb;
            for (size_t p0 = 0; p0 < k2; p0 += 16) {
                size_t pn = k2 - p0 < 16 ? k2 - p0 : 16;
                for (int j = 0; j < nj; j++) {
                    const char *s = (const char *)src + ((b * (size_t)nb + (size_t)j) * k2 + p0) * 4;
                    uint32_t tmp[16];
                    memcpy(tmp, s, pn * 4); /* the source may be only 2-byte aligned */
                    for (size_t p = 0; p < pn; p++) pan32[(p0 + p) * (size_t)nb + (size_t)j] = tmp[p];
                }
            }
        }
    }
}

static void pack_f32_panels(const pack_job *J)
{
    int n = J->m->n, k = J->m->k, nb = J->nb;
    float *d = J->dst;
    for (size_t b = J->b0; b < J->b1; b++) {
        float *pan = d + b * (size_t)k * (size_t)nb;
        for (int j = 0; j < nb; j++) {
            size_t c = b * (size_t)nb + (size_t)j;
            if (c >= (size_t)n) break;
            for (int i = 0; i < k; i++)
                pan[(size_t)i * (size_t)nb + j] = src_get(J->src, J->sdt, c * (size_t)k + (size_t)i);
        }
    }
}

static void *pack_thread(void *arg)
{
    const pack_job *J = arg;
    if (J->m->dt == DTYPE_BF16) pack_bf16_panels(J);
    else pack_f32_panels(J);
    return NULL;
}

/* Threads packing one weight (kern_set_pack_threads); read when a weight
 * is packed, set before loading starts. */
static int g_pack_threads = 1;
#define PACK_MAX_THREADS 256
#define PACK_PAR_MIN_BYTES ((size_t)4 << 20) /* smaller weights: one thread */

void kern_set_pack_threads(int n) { g_pack_threads = n < 1 ? 1 : n > PACK_MAX_THREADS ? PACK_MAX_THREADS : n; }
int kern_pack_threads(void) { return g_pack_threads; }

/* Pack panels [0, npan) of `dst` with up to g_pack_threads threads (the
 * caller's thread takes the first share; contiguous panel ranges, so each
 * thread first-touches its own part of the buffer).  A thread that cannot
 * be created leaves its share to the caller. */
static void pack_all(const kern_mat *m, const void *src, dtype sdt, int nb, void *dst, size_t npan, size_t bytes)
{
    int nt = g_pack_threads;
    if (bytes < PACK_PAR_MIN_BYTES || npan < 2) nt = 1;
    if ((size_t)nt > npan) nt = (int)npan;
    pack_job jobs[PACK_MAX_THREADS];
    pthread_t th[PACK_MAX_THREADS];
    bool started[PACK_MAX_THREADS] = {false};
    for (int t = 0; t < nt; t++)
        jobs[t] = (pack_job){m, src, sdt, nb, dst, npan * (size_t)t / (size_t)nt, npan * (size_t)(t + 1) / (size_t)nt};
    for (int t = 1; t < nt; t++) started[t] = pthread_create(&th[t], NULL, pack_thread, &jobs[t]) == 0;
    pack_thread(&jobs[0]);
    for (int t = 1; t < nt; t++) {
        if (started[t]) pthread_join(th[t], NULL);
        else pack_thread(&jobs[t]);
    }
}

int kern_pack_panels(kern_mat *m, const void *src, dtype sdt, int nb, int layout_bf16, int layout_f32)
{
    int n = m->n, k = m->k;
    if (sdt != DTYPE_F32 && sdt != DTYPE_F16 && sdt != DTYPE_BF16) return -1;
    size_t npan = (size_t)(n + (size_t)nb - 1) / (size_t)nb;
    if (m->dt == DTYPE_BF16) {
        size_t k2 = (size_t)(k + 1) / 2;
        size_t bytes = npan * k2 * (size_t)nb * 2 * sizeof(uint16_t);
        uint16_t *d = kern_weight_alloc(bytes);
        if (!d) return -1;
        /* every element of a full panel is written by pack_all; only
         * padding (columns >= n of the last panel, the odd half of the last
         * pair) must be zeroed, so the first touch of the pages is the copy */
        if (k & 1)
            memset(d, 0, bytes);
        else if (n % nb)
            memset(d + (npan - 1) * k2 * (size_t)nb * 2, 0, k2 * (size_t)nb * 2 * sizeof(uint16_t));
        pack_all(m, src, sdt, nb, d, npan, bytes);
        m->owned = d;
        m->bytes = bytes;
        m->layout = layout_bf16;
    } else {
        size_t bytes = npan * (size_t)k * (size_t)nb * sizeof(float);
        float *d = kern_weight_alloc(bytes);
        if (!d) return -1;
        if (n % nb) memset(d + (npan - 1) * (size_t)k * (size_t)nb, 0, (size_t)k * (size_t)nb * sizeof(float));
        pack_all(m, src, sdt, nb, d, npan, bytes);
        m->owned = d;
        m->bytes = bytes;
        m->layout = layout_f32;
    }
    m->panel_nb = nb;
    m->data = m->owned;
    return 0;
}

int kern_mat_row_f32(const kern_mat *m, int r, float *out)
{
    const int k = m->k;
    if (r < 0 || r >= m->n || !m->data) return -1;
    if (m->qtype) {
        const kern_type_traits *tr = kern_type_get((kern_type)m->qtype);
        if (m->layout != 0 || m->perm || !tr || !tr->row_to_f32) return -1;
        tr->row_to_f32(out, (const char *)m->data + (size_t)r * kern_type_row_bytes((kern_type)m->qtype, k), k);
        return 0;
    }
    if (m->dt != DTYPE_F32 && m->dt != DTYPE_BF16) return -1;
    if (m->layout == 0) {
        for (int c = 0; c < k; c++)
            out[c] = m->dt == DTYPE_F32 ? ((const float *)m->data)[(size_t)r * k + c]
                                        : bf16_to_f32(((const uint16_t *)m->data)[(size_t)r * k + c]);
        return 0;
    }
    const int nb = m->panel_nb;
    if (nb <= 0) return -1;
    const size_t b = (size_t)(r / nb), j = (size_t)(r % nb);
    if (m->dt == DTYPE_BF16) { /* panel b: k-pair p -> nb x (W[c][2p], W[c][2p+1]) */
        const size_t k2 = (size_t)(k + 1) / 2;
        const uint16_t *pan = (const uint16_t *)m->data + b * k2 * (size_t)nb * 2;
        for (int c = 0; c < k; c++) out[c] = bf16_to_f32(pan[((size_t)c / 2) * (size_t)nb * 2 + j * 2 + (size_t)(c & 1)]);
    } else { /* panel b: index i -> nb f32 */
        const float *pan = (const float *)m->data + b * (size_t)k * (size_t)nb;
        for (int c = 0; c < k; c++) out[c] = pan[(size_t)c * (size_t)nb + j];
    }
    return 0;
}
