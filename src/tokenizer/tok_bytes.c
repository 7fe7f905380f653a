/* tok_bytes — token id -> raw bytes (see tok_bytes.h). */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_bytes.h"
#include "tokenizer/tok_internal.h"

struct tok_bytes_table {
    int32_t n;       /* ids */
    uint32_t *off;   /* (n + 1) into blob; off[i] == off[i+1] and !has[i]: none */
    uint8_t *has;    /* (n) */
    char *blob;      /* owned */
};

static int dec_has(const tok_decoder *d, tok_dec_kind k)
{
    if (!d) return 0;
    if (d->kind == k) return 1;
    for (size_t i = 0; i < d->n_children; i++)
        if (dec_has(&d->children[i], k)) return 1;
    return 0;
}

static int hexv(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

tok_bytes_table *tok_bytes_build(const tok_tokenizer *t)
{
    tok_bytes_table *b = calloc(1, sizeof *b);
    if (!b) return NULL;
    int32_t n = (int32_t)tok_vocab_size(t);
    b->n = n;
    b->off = calloc((size_t)n + 1, sizeof *b->off);
    b->has = calloc((size_t)n + 1, 1);
    size_t cap = 1 << 20, used = 0;
    b->blob = malloc(cap);
    int inv[512];
    for (int i = 0; i < 512; i++) inv[i] = -1;
    for (unsigned x = 0; x < 256; x++) {
        int cp = tok_bytelevel_cp(x);
        if (cp >= 0 && cp < 512) inv[cp] = (int)x;
    }
    int bytelevel = t->model.byte_level || dec_has(t->decoder, TOK_DEC_BYTELEVEL);
    if (!b->off || !b->has || !b->blob) goto fail;
    for (int32_t id = 0; id < n; id++) {
        b->off[id] = (uint32_t)used;
        if (tok_is_special(t, id)) continue;
        size_t len = 0;
        const char *s = tok_id_to_token(t, id, &len);
        if (!s) continue;
        if (used + len + 4 > cap) {
            while (used + len + 4 > cap) cap *= 2;
            char *nb = realloc(b->blob, cap);
            if (!nb) goto fail;
            b->blob = nb;
        }
        char *o = b->blob + used;
        size_t ol = 0;
        int added = t->is_added && t->is_added[id];
        if (added) {
            memcpy(o, s, len);
            ol = len;
        } else if (bytelevel) {
            for (size_t k = 0; k < len;) {
                size_t l = tok_utf8_valid_len((const unsigned char *)s + k, len - k);
                if (!l) l = 1;
                int32_t cp = l == 1 ? (unsigned char)s[k] : tok_utf8_decode(s + k, &l);
                if (cp >= 0 && cp < 512 && inv[cp] >= 0) o[ol++] = (char)inv[cp];
                else {
                    memcpy(o + ol, s + k, l);
                    ol += l;
                }
                k += l;
            }
        } else if (len == 6 && s[0] == '<' && s[1] == '0' && s[2] == 'x' && s[5] == '>' && hexv(s[3]) >= 0 &&
                   hexv(s[4]) >= 0) {
            o[ol++] = (char)(hexv(s[3]) * 16 + hexv(s[4]));
        } else {
            for (size_t k = 0; k < len;) {
                if (k + 3 <= len && !memcmp(s + k, "\xE2\x96\x81", 3)) {
                    o[ol++] = ' ';
                    k += 3;
                } else o[ol++] = s[k++];
            }
        }
        used += ol;
        b->has[id] = 1;
    }
    b->off[n] = (uint32_t)used;
    return b;
fail:
    tok_bytes_free(b);
    return NULL;
}

void tok_bytes_free(tok_bytes_table *b)
{
    if (!b) return;
    free(b->off);
    free(b->has);
    free(b->blob);
    free(b);
}

const char *tok_bytes_get(void *table, int32_t id, size_t *len)
{
    const tok_bytes_table *b = table;
    if (id < 0 || id >= b->n || !b->has[id]) return NULL;
    *len = b->off[id + 1] - b->off[id];
    return b->blob + b->off[id];
}

int32_t tok_bytes_vocab_size(const tok_bytes_table *b) { return b->n; }
