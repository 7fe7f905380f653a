/* spec_tokmap — see spec_tokmap.h. */
#include "spec/spec_tokmap.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kern_types.h"
#include "util/log.h"
#include "util/pt_reader.h"

spec_tokmap *spec_tokmap_from_ids(const int64_t *ids, int64_t n, char *err, size_t errlen)
{
    if (n < 1 || n > INT32_MAX) {
        snprintf(err, errlen, "the token map holds %lld ids (at least 1 needed)", (long long)n);
        return NULL;
    }
    spec_tokmap *m = calloc(1, sizeof *m);
    if (m) m->hot = malloc(sizeof(int32_t) * (size_t)n);
    if (!m || !m->hot) {
        free(m);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    for (int64_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] > INT32_MAX) {
            snprintf(err, errlen, "token map entry %lld is %lld, not a token id", (long long)i, (long long)ids[i]);
            spec_tokmap_destroy(m);
            return NULL;
        }
        m->hot[i] = (int32_t)ids[i];
    }
    m->n = (int)n;
    return m;
}

spec_tokmap *spec_tokmap_load(const char *path, char *err, size_t errlen)
{
    int64_t *ids = NULL, n = 0;
    if (pt_read_int_vector_file(path, &ids, &n, err, errlen)) return NULL;
    spec_tokmap *m = spec_tokmap_from_ids(ids, n, err, errlen);
    free(ids);
    return m;
}

int spec_tokmap_bind(spec_tokmap *m, int vocab, char *err, size_t errlen)
{
    if (m->is_hot) {
        if (m->vocab == vocab) return 0;
        snprintf(err, errlen, "the token map is bound to a vocabulary of %d, not %d", m->vocab, vocab);
        return -1;
    }
    if (m->n > vocab) {
        snprintf(err, errlen, "the token map holds %d ids, more than the target's vocabulary of %d", m->n, vocab);
        return -1;
    }
    unsigned char *seen = calloc((size_t)vocab, 1);
    if (!seen) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (int i = 0; i < m->n; i++) {
        int32_t t = m->hot[i];
        if (t >= vocab) {
            snprintf(err, errlen, "token map entry %d is %d, outside the target's vocabulary of %d", i, t, vocab);
            free(seen);
            return -1;
        }
        if (seen[t]) {
            snprintf(err, errlen, "token map entry %d repeats token id %d", i, t);
            free(seen);
            return -1;
        }
        seen[t] = 1;
    }
    m->is_hot = seen;
    m->vocab = vocab;
    return 0;
}

void spec_tokmap_mask(const spec_tokmap *m, float *logits)
{
    SGLC_ASSERT(m->is_hot);
    for (int i = 0; i < m->vocab; i++)
        if (!m->is_hot[i]) logits[i] = -INFINITY;
}

void spec_tokmap_destroy(spec_tokmap *m)
{
    if (!m) return;
    free(m->hot);
    free(m->is_hot);
    free(m);
}

int spec_tokmap_head_init(spec_tokmap_head *h, const spec_tokmap *m, const kern_mat *lm)
{
    memset(h, 0, sizeof *h);
    SGLC_ASSERT(m->is_hot);
    if (!lm || lm->n != m->vocab || lm->k < 1 || (lm->qtype && (lm->layout != 0 || lm->perm))) return 1;
    const int n = m->n, k = lm->k;
    int rc = -1;
    void *rows = NULL;
    if (lm->qtype) { /* row-major blocks: copied as they are, the same kernel runs */
        size_t rb = kern_type_row_bytes((kern_type)lm->qtype, k);
        if (!rb || !(rows = malloc(rb * (size_t)n))) goto out;
        for (int i = 0; i < n; i++) memcpy((char *)rows + rb * (size_t)i, (const char *)lm->data + rb * (size_t)m->hot[i], rb);
        if (kern_mat_init_kt(&h->mat, rows, lm->qtype, n, k, lm->qtype, 0)) goto out;
    } else {
        float *f = rows = malloc(sizeof(float) * (size_t)n * (size_t)k);
        if (!f) goto out;
        for (int i = 0; i < n; i++)
            if (kern_mat_row_f32(lm, m->hot[i], f + (size_t)i * k)) {
                rc = 1;
                goto out;
            }
        /* a bf16 head's values are bf16: converting back is exact */
        if (kern_mat_init(&h->mat, f, DTYPE_F32, n, k, lm->dt == DTYPE_BF16 ? DTYPE_BF16 : DTYPE_F32, 0)) goto out;
    }
    h->mat.x_exact = lm->x_exact;
    h->lg = malloc(sizeof(float) * (size_t)n);
    h->scr = aligned_alloc(64, (kern_matmul_scratch(1, k) + 63) & ~(size_t)63);
    if (!h->lg || !h->scr) goto out;
    rc = 0;
out:
    free(rows);
    if (rc) spec_tokmap_head_free(h);
    return rc;
}

void spec_tokmap_head_logits(spec_tokmap_head *h, const spec_tokmap *m, const float *x, float *logits)
{
    kern_matmul(h->lg, x, 1, &h->mat, NULL, 0, 1, h->scr);
    for (int i = 0; i < m->vocab; i++) logits[i] = -INFINITY;
    for (int i = 0; i < m->n; i++) logits[m->hot[i]] = h->lg[i];
}

void spec_tokmap_head_free(spec_tokmap_head *h)
{
    kern_mat_free(&h->mat);
    free(h->lg);
    free(h->scr);
    memset(h, 0, sizeof *h);
}
