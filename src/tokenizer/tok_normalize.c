/* tok_normalize — tokenizer.json normalizers: NFC/NFD/NFKC/NFKD (utf8proc),
 * Lowercase, Prepend, Replace, Strip, StripAccents, BertNormalizer,
 * Sequence.
 *
 * DESIGN: each normalizer maps a whole UTF-8 string to a new one (we do not
 * track offsets: sglc needs ids, not alignments).  Sequence ping-pongs
 * between two buffers.  Unicode forms skip pure-ASCII input (ASCII is
 * invariant under all four forms) and otherwise call utf8proc_map. */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "tokenizer/tok_internal.h"
#include "util/log.h"

static bool all_ascii(const char *s, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, s + i, 8);
        if (w & 0x8080808080808080ull) return false;
    }
    for (; i < n; i++)
        if ((unsigned char)s[i] & 0x80) return false;
    return true;
}

static int unicode_form(const char *in, size_t n, tok_buf *out, utf8proc_option_t opt)
{
    if (all_ascii(in, n)) return tok_buf_put(out, in, n);
    /* ASCII never composes with a preceding character, so only the runs of
     * non-ASCII bytes (with the one character before each run) need the
     * library; ASCII in between is copied. */
    size_t i = 0;
    while (i < n) {
        size_t j = i;
        while (j < n && !((unsigned char)in[j] & 0x80)) j++;
        if (j == n) return tok_buf_put(out, in + i, n - i);
        size_t seg = j;
        if (seg > i) seg--; /* include the starter before the run */
        if (tok_buf_put(out, in + i, seg - i)) return -1;
        size_t k = j;
        while (k < n && ((unsigned char)in[k] & 0x80)) k++;
        utf8proc_uint8_t *dst = NULL;
        utf8proc_ssize_t r = utf8proc_map((const utf8proc_uint8_t *)in + seg, (utf8proc_ssize_t)(k - seg),
                                          &dst, opt);
        if (r < 0) {
            log_error("utf8proc: %s", utf8proc_errmsg(r));
            return -1;
        }
        int rc = tok_buf_put(out, dst, (size_t)r);
        free(dst);
        if (rc) return -1;
        i = k;
    }
    return 0;
}

static int put_cp(tok_buf *out, int32_t cp)
{
    char u[4];
    int l = tok_utf8_encode(cp, u);
    return tok_buf_put(out, u, (size_t)l);
}

static int lowercase(const char *in, size_t n, tok_buf *out)
{
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)in[i];
        if (c < 0x80) {
            if (tok_buf_putc(out, (char)(c >= 'A' && c <= 'Z' ? c + 32 : c))) return -1;
            i++;
            continue;
        }
        size_t l;
        int32_t cp = tok_utf8_decode(in + i, &l);
        i += l;
        if (cp == 0x130) { /* full mapping: I WITH DOT ABOVE -> i + COMBINING DOT ABOVE */
            if (tok_buf_put(out, "i\xCC\x87", 3)) return -1;
            continue;
        }
        if (put_cp(out, utf8proc_tolower(cp))) return -1;
    }
    return 0;
}

static bool is_mark(int32_t cp)
{
    utf8proc_category_t c = utf8proc_category(cp);
    return c == UTF8PROC_CATEGORY_MN || c == UTF8PROC_CATEGORY_MC || c == UTF8PROC_CATEGORY_ME;
}

/* NFD, then drop combining marks (category M). */
static int strip_accents(const char *in, size_t n, tok_buf *out, bool only_mn)
{
    tok_buf tmp = {0};
    if (unicode_form(in, n, &tmp, UTF8PROC_STABLE | UTF8PROC_DECOMPOSE)) { tok_buf_free(&tmp); return -1; }
    for (size_t i = 0; i < tmp.n;) {
        size_t l;
        int32_t cp = tok_utf8_decode(tmp.p + i, &l);
        bool drop = only_mn ? utf8proc_category(cp) == UTF8PROC_CATEGORY_MN : is_mark(cp);
        if (!drop && tok_buf_put(out, tmp.p + i, l)) { tok_buf_free(&tmp); return -1; }
        i += l;
    }
    tok_buf_free(&tmp);
    return 0;
}

static bool is_chinese_char(int32_t cp)
{
    return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) || (cp >= 0x20000 && cp <= 0x2A6DF) ||
           (cp >= 0x2A700 && cp <= 0x2B73F) || (cp >= 0x2B740 && cp <= 0x2B81F) ||
           (cp >= 0x2B820 && cp <= 0x2CEAF) || (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

/* BertNormalizer as the tokenizers crate defines it. */
static int bert(const tok_normalizer *nm, const char *in, size_t n, tok_buf *out)
{
    tok_buf a = {0};
    int rc = -1;
    for (size_t i = 0; i < n;) {
        size_t l;
        int32_t cp = tok_utf8_decode(in + i, &l);
        const char *s = in + i;
        i += l;
        if (nm->clean_text) {
            if (cp == 0 || cp == 0xFFFD) continue;
            utf8proc_category_t c = utf8proc_category(cp);
            bool ws = cp == '\t' || cp == '\n' || cp == '\r' || cp == ' ' || c == UTF8PROC_CATEGORY_ZS;
            bool ctrl = !ws && (c == UTF8PROC_CATEGORY_CC || c == UTF8PROC_CATEGORY_CF ||
                                c == UTF8PROC_CATEGORY_CN || c == UTF8PROC_CATEGORY_CO);
            if (ctrl) continue;
            if (ws) { if (tok_buf_putc(&a, ' ')) goto done; continue; }
        }
        if (nm->chinese_chars && is_chinese_char(cp)) {
            if (tok_buf_putc(&a, ' ') || tok_buf_put(&a, s, l) || tok_buf_putc(&a, ' ')) goto done;
            continue;
        }
        if (tok_buf_put(&a, s, l)) goto done;
    }
    bool strip = nm->strip_accents == 1 || (nm->strip_accents == -1 && nm->lowercase);
    if (nm->lowercase) {
        tok_buf b = {0};
        if (lowercase(a.p ? a.p : "", a.n, &b)) { tok_buf_free(&b); goto done; }
        tok_buf_free(&a);
        a = b;
    }
    if (strip) rc = strip_accents(a.p ? a.p : "", a.n, out, true);
    else rc = tok_buf_put(out, a.p ? a.p : "", a.n);
done:
    tok_buf_free(&a);
    return rc;
}

static int replace(const tok_normalizer *nm, const char *in, size_t n, tok_buf *out, pcre2_match_data *md)
{
    size_t pos = 0, search = 0;
    while (search <= n) {
        size_t ms, me;
        int r = tok_regex_next(&nm->pattern, in, n, search, md, &ms, &me);
        if (r < 0) return -1;
        if (r == 0) break;
        if (tok_buf_put(out, in + pos, ms - pos) || tok_buf_put(out, nm->str, nm->str_n)) return -1;
        pos = me;
        if (me == ms) { /* empty match: step over one character */
            if (me >= n) break;
            size_t l;
            tok_utf8_decode(in + me, &l);
            if (tok_buf_put(out, in + me, l)) return -1;
            pos = me + l;
        }
        search = pos;
    }
    return tok_buf_put(out, in + pos, n - pos);
}

static int strip(const tok_normalizer *nm, const char *in, size_t n, tok_buf *out)
{
    size_t b = 0, e = n;
    if (nm->left)
        while (b < e) {
            size_t l;
            int32_t cp = tok_utf8_decode(in + b, &l);
            if (!tok_is_white_space(cp)) break;
            b += l;
        }
    if (nm->right)
        while (e > b) {
            size_t s = e - 1;
            while (s > b && ((unsigned char)in[s] & 0xC0) == 0x80) s--;
            size_t l;
            int32_t cp = tok_utf8_decode(in + s, &l);
            if (!tok_is_white_space(cp)) break;
            e = s;
        }
    return tok_buf_put(out, in + b, e - b);
}

int tok_normalize(const tok_normalizer *nm, const char *in, size_t n, tok_buf *out, pcre2_match_data *md)
{
    out->n = 0;
    if (tok_buf_reserve(out, n + 16)) return -1;
    out->p[0] = 0;
    switch (nm->kind) {
    case TOK_NORM_NFC: return unicode_form(in, n, out, UTF8PROC_STABLE | UTF8PROC_COMPOSE);
    case TOK_NORM_NFD: return unicode_form(in, n, out, UTF8PROC_STABLE | UTF8PROC_DECOMPOSE);
    case TOK_NORM_NFKC: return unicode_form(in, n, out, UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT);
    case TOK_NORM_NFKD: return unicode_form(in, n, out, UTF8PROC_STABLE | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT);
    case TOK_NORM_LOWERCASE: return lowercase(in, n, out);
    case TOK_NORM_PREPEND:
        if (!n) return 0; /* HF prepends only to non-empty strings */
        return tok_buf_put(out, nm->str, nm->str_n) || tok_buf_put(out, in, n) ? -1 : 0;
    case TOK_NORM_REPLACE: return replace(nm, in, n, out, md);
    case TOK_NORM_STRIP: return strip(nm, in, n, out);
    case TOK_NORM_STRIP_ACCENTS: return strip_accents(in, n, out, false);
    case TOK_NORM_BERT: return bert(nm, in, n, out);
    case TOK_NORM_SEQUENCE: {
        if (!nm->n_children) return tok_buf_put(out, in, n);
        tok_buf tmp = {0};
        if (tok_buf_put(&tmp, in, n)) return -1;
        for (size_t i = 0; i < nm->n_children; i++) {
            if (tok_normalize(&nm->children[i], tmp.p, tmp.n, out, md)) { tok_buf_free(&tmp); return -1; }
            tok_buf swap = tmp;
            tmp = *out;
            *out = swap;
        }
        /* result is in tmp */
        tok_buf_free(out);
        *out = tmp;
        return 0;
    }
    }
    return -1;
}

void tok_normalizer_free(tok_normalizer *nm)
{
    if (!nm) return;
    for (size_t i = 0; i < nm->n_children; i++) tok_normalizer_free(&nm->children[i]);
    free(nm->children);
    free(nm->str);
    tok_regex_free(&nm->pattern);
}
