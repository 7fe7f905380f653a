/* kernels_pack — weight packing into the column panels the SIMD matmuls
 * read, shared by kernels_avx2.c (16-column panels) and kernels_avx512.c
 * (32-column panels).  Plain C: it runs once per weight at load, so it
 * needs no ISA flags.
 *
 *   bf16: panel b, k-pair p -> nb x (W[c][2p], W[c][2p+1])
 *   f32:  panel b, index i  -> nb x W[c][i]
 * Columns past n in the last panel and the odd half of the last pair are
 * zero. */
#include <stdint.h>
#include <string.h>

#include "kernels/kernels_impl.h"

static inline float src_get(const void *src, dtype dt, size_t idx)
{
    switch (dt) {
    case DTYPE_F32: return ((const float *)src)[idx];
    case DTYPE_F16: return f16_to_f32(((const uint16_t *)src)[idx]);
    default: return bf16_to_f32(((const uint16_t *)src)[idx]);
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
        /* every element of a full panel is written below; only padding
         * (columns >= n of the last panel, the odd half of the last pair)
         * must be zeroed, so the first touch of the pages is the copy */
        if (k & 1)
            memset(d, 0, bytes);
        else if (n % nb)
            memset(d + (npan - 1) * k2 * (size_t)nb * 2, 0, k2 * (size_t)nb * 2 * sizeof(uint16_t));
        for (size_t b = 0; b < npan; b++) {
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
        m->owned = d;
        m->bytes = bytes;
        m->layout = layout_bf16;
    } else {
        size_t bytes = npan * (size_t)k * (size_t)nb * sizeof(float);
        float *d = kern_weight_alloc(bytes);
        if (!d) return -1;
        if (n % nb) memset(d + (npan - 1) * (size_t)k * (size_t)nb, 0, (size_t)k * (size_t)nb * sizeof(float));
        for (size_t b = 0; b < npan; b++) {
            float *pan = d + b * (size_t)k * (size_t)nb;
            for (int j = 0; j < nb; j++) {
                size_t c = b * (size_t)nb + (size_t)j;
                if (c >= (size_t)n) break;
                for (int i = 0; i < k; i++)
                    pan[(size_t)i * (size_t)nb + j] = src_get(src, sdt, c * (size_t)k + (size_t)i);
            }
        }
        m->owned = d;
        m->bytes = bytes;
        m->layout = layout_f32;
    }
    m->data = m->owned;
    return 0;
}
