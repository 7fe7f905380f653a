/* spec_tokmap — see spec_tokmap.h. */
#include "spec/spec_tokmap.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

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
