/* template_strings — Python's string algorithms over UTF-8 values (strip,
 * split/rsplit, case mapping, replace, splitlines) and markupsafe escaping.
 *
 * DESIGN: strings are indexed by walking code points (no offset tables):
 * chat-template strings are small.  Case mapping is utf8proc's one code
 * point to one, plus the two special casings templates meet (ß, İ).
 * Uses only template_rt. */
#include <string.h>

#include <utf8proc.h>

#include "template/template_rt.h"

/* ---- string helpers ------------------------------------------------------- */
/* Offsets of code point boundaries would cost memory; strings are indexed
 * by walking, which is fine at chat-template sizes. */
size_t tr_cp_offset(const tv *s, int64_t idx)
{
    size_t i = 0;
    for (int64_t k = 0; k < idx && i < s->u.str.len; k++) tutf8_next(s->u.str.s, s->u.str.len, &i);
    return i;
}

static int in_chars(uint32_t c, const tv *chars)
{
    size_t i = 0;
    while (i < chars->u.str.len)
        if (tutf8_next(chars->u.str.s, chars->u.str.len, &i) == c) return 1;
    return 0;
}

/* Python strip family: mode 1 = left, 2 = right, 3 = both; chars NULL or
 * None = whitespace. */
tv *tr_py_strip(trender *r, const tv *s, const tv *chars, int mode)
{
    const char *p = s->u.str.s;
    size_t n = s->u.str.len, b = 0, e = n;
    int ws = !chars || chars->type == TV_NONE;
    if (mode & 1) {
        while (b < e) {
            size_t j = b;
            uint32_t c = tutf8_next(p, n, &j);
            if (ws ? tpy_isspace(c) : in_chars(c, chars)) b = j;
            else break;
        }
    }
    if (mode & 2) {
        while (e > b) {
            size_t st = e - 1;
            while (st > b && ((unsigned char)p[st] & 0xC0) == 0x80) st--;
            size_t j = st;
            uint32_t c = tutf8_next(p, e, &j);
            if (ws ? tpy_isspace(c) : in_chars(c, chars)) e = st;
            else break;
        }
    }
    return tr_str(r, p + b, e - b);
}

const char *tr_memmem(const char *h, size_t hn, const char *nd, size_t nn)
{
    if (nn == 0) return h;
    if (nn > hn) return NULL;
    return memmem(h, hn, nd, nn);
}

/* str.split(sep=None, maxsplit=-1) / rsplit */
tv *tr_py_split(trender *r, const tnode *at, const tv *s, const tv *sep, int64_t maxsplit, int right)
{
    const char *p = s->u.str.s;
    size_t n = s->u.str.len;
    tv **parts = NULL;
    size_t np = 0, cap = 0;
#define PUSH_PART(b, e)                                                                  \
    do {                                                                                 \
        if (np == cap) {                                                                 \
            cap = cap ? cap * 2 : 8;                                                     \
            tv **q = tarena_alloc(r->a, cap * sizeof *q);                                \
            if (!q) return tr_oom(r);                                                       \
            if (np) memcpy(q, parts, np * sizeof *q);                                    \
            parts = q;                                                                   \
        }                                                                                \
        if (!(parts[np++] = tr_str(r, p + (b), (e) - (b)))) return NULL;                  \
    } while (0)
    if (sep && sep->type != TV_NONE) {
        if (sep->type != TV_STR) {
            tr_err(r, at, "must be str or None, not %s", tv_type_name(sep));
            return NULL;
        }
        size_t sl = sep->u.str.len;
        if (sl == 0) {
            tr_err(r, at, "empty separator");
            return NULL;
        }
        if (!right) {
            size_t b = 0;
            while (maxsplit < 0 || (int64_t)np < maxsplit) {
                const char *f = tr_memmem(p + b, n - b, sep->u.str.s, sl);
                if (!f) break;
                size_t e = (size_t)(f - p);
                PUSH_PART(b, e);
                b = e + sl;
            }
            PUSH_PART(b, n);
        } else {
            size_t e = n;
            while (maxsplit < 0 || (int64_t)np < maxsplit) {
                /* find last occurrence in p[0,e) */
                const char *f = NULL;
                for (size_t k = e >= sl ? e - sl + 1 : 0; k-- > 0;)
                    if (!memcmp(p + k, sep->u.str.s, sl)) {
                        f = p + k;
                        break;
                    }
                if (!f) break;
                size_t b = (size_t)(f - p) + sl;
                PUSH_PART(b, e);
                e = (size_t)(f - p);
            }
            PUSH_PART((size_t)0, e);
            for (size_t i = 0; i < np / 2; i++) {
                tv *t = parts[i];
                parts[i] = parts[np - 1 - i];
                parts[np - 1 - i] = t;
            }
        }
    } else {
        /* whitespace split: runs of whitespace, no empty strings */
        if (!right) {
            size_t i = 0;
            for (;;) {
                while (i < n) {
                    size_t j = i;
                    if (!tpy_isspace(tutf8_next(p, n, &j))) break;
                    i = j;
                }
                if (i >= n) break;
                if (maxsplit >= 0 && (int64_t)np >= maxsplit) {
                    /* rest, with trailing whitespace kept as Python does */
                    PUSH_PART(i, n);
                    break;
                }
                size_t b = i;
                while (i < n) {
                    size_t j = i;
                    if (tpy_isspace(tutf8_next(p, n, &j))) break;
                    i = j;
                }
                PUSH_PART(b, i);
            }
        } else {
            tv *fw = tr_py_strip(r, s, NULL, 2);
            if (!fw) return NULL;
            if (maxsplit < 0) return tr_py_split(r, at, fw, NULL, -1, 0);
            /* rare: rsplit(None, k) — split fully, then rejoin the head */
            tv *all = tr_py_split(r, at, fw, NULL, -1, 0);
            if (!all) return NULL;
            size_t tot = all->u.list.n;
            if ((int64_t)tot <= maxsplit) return all;
            size_t head = tot - (size_t)maxsplit;
            /* head part: from start of string (after lstrip) to end of word head-1 */
            size_t hb = 0;
            while (hb < fw->u.str.len) {
                size_t j = hb;
                if (!tpy_isspace(tutf8_next(fw->u.str.s, fw->u.str.len, &j))) break;
                hb = j;
            }
            /* words are copies; locate by scanning words again */
            size_t i = hb, w = 0;
            while (w < head) {
                while (i < fw->u.str.len) {
                    size_t j = i;
                    if (!tpy_isspace(tutf8_next(fw->u.str.s, fw->u.str.len, &j))) break;
                    i = j;
                }
                while (i < fw->u.str.len) {
                    size_t j = i;
                    if (tpy_isspace(tutf8_next(fw->u.str.s, fw->u.str.len, &j))) break;
                    i = j;
                }
                w++;
            }
            tv *l = tr_list(r, (size_t)maxsplit + 1);
            if (!l) return NULL;
            if (!(l->u.list.items[0] = tr_str(r, fw->u.str.s, i))) return NULL;
            for (size_t k = 0; k < (size_t)maxsplit; k++) l->u.list.items[k + 1] = all->u.list.items[head + k];
            return l;
        }
    }
#undef PUSH_PART
    tv *l = tr_list(r, np);
    if (!l) return NULL;
    if (np) memcpy(l->u.list.items, parts, np * sizeof *parts);
    return l;
}

/* case mapping: mode 0 lower, 1 upper, 2 title-case one code point */
void tr_put_case(tbuf *b, uint32_t c, int mode)
{
    if (mode == 0) {
        if (c == 0x130) { /* İ -> i̇ as Python does */
            tutf8_put(b, 'i');
            tutf8_put(b, 0x307);
            return;
        }
        tutf8_put(b, (uint32_t)utf8proc_tolower((utf8proc_int32_t)c));
    } else if (mode == 1) {
        if (c == 0xDF) { /* ß -> SS */
            tbuf_puts(b, "SS");
            return;
        }
        tutf8_put(b, (uint32_t)utf8proc_toupper((utf8proc_int32_t)c));
    } else {
        tutf8_put(b, (uint32_t)utf8proc_totitle((utf8proc_int32_t)c));
    }
}

static int is_cased_letter(uint32_t c)
{
    utf8proc_category_t k = utf8proc_category((utf8proc_int32_t)c);
    return k == UTF8PROC_CATEGORY_LU || k == UTF8PROC_CATEGORY_LL || k == UTF8PROC_CATEGORY_LT;
}

/* kind: 0 lower, 1 upper, 2 capitalize, 3 py title, 4 swapcase */
tv *tr_py_case(trender *r, const tv *s, int kind)
{
    tbuf b = {0};
    size_t i = 0, n = s->u.str.len;
    int first = 1, prev_cased = 0;
    while (i < n) {
        uint32_t c = tutf8_next(s->u.str.s, n, &i);
        switch (kind) {
        case 0: tr_put_case(&b, c, 0); break;
        case 1: tr_put_case(&b, c, 1); break;
        case 2: tr_put_case(&b, c, first ? 2 : 0); break;
        case 3: {
            int cased = is_cased_letter(c);
            tr_put_case(&b, c, prev_cased ? 0 : 2);
            prev_cased = cased || (utf8proc_category((utf8proc_int32_t)c) == UTF8PROC_CATEGORY_LM &&
                                   prev_cased);
            if (!cased && utf8proc_category((utf8proc_int32_t)c) != UTF8PROC_CATEGORY_MN) prev_cased = 0;
            if (cased) prev_cased = 1;
            break;
        }
        default: {
            uint32_t u = (uint32_t)utf8proc_toupper((utf8proc_int32_t)c);
            tr_put_case(&b, c, u == c ? 0 : 1);
        }
        }
        first = 0;
    }
    return tr_buf_to_str(r, &b);
}

tv *tr_py_replace(trender *r, const tnode *at, const tv *s, const tv *old, const tv *new_, int64_t count)
{
    if (old->type != TV_STR || new_->type != TV_STR) {
        tr_err(r, at, "replace() arguments must be str");
        return NULL;
    }
    tbuf b = {0};
    const char *p = s->u.str.s;
    size_t n = s->u.str.len, ol = old->u.str.len;
    if (ol == 0) {
        /* Python inserts new between every character (and at both ends) */
        size_t i = 0;
        int64_t k = 0;
        while (count < 0 || k < count) {
            tbuf_put(&b, new_->u.str.s, new_->u.str.len);
            k++;
            if (i >= n) break;
            size_t st = i;
            tutf8_next(p, n, &i);
            tbuf_put(&b, p + st, i - st);
        }
        tbuf_put(&b, p + i, n - i);
        return tr_buf_to_str(r, &b);
    }
    size_t i = 0;
    int64_t k = 0;
    while (count < 0 || k < count) {
        const char *f = tr_memmem(p + i, n - i, old->u.str.s, ol);
        if (!f) break;
        tbuf_put(&b, p + i, (size_t)(f - (p + i)));
        tbuf_put(&b, new_->u.str.s, new_->u.str.len);
        i = (size_t)(f - p) + ol;
        k++;
    }
    tbuf_put(&b, p + i, n - i);
    return tr_buf_to_str(r, &b);
}

/* Python str.splitlines() boundaries */
static int is_linebreak(uint32_t c)
{
    return c == '\n' || c == '\r' || c == 0x0b || c == 0x0c || c == 0x1c || c == 0x1d || c == 0x1e ||
           c == 0x85 || c == 0x2028 || c == 0x2029;
}

tv *tr_py_splitlines(trender *r, const tv *s, int keepends)
{
    const char *p = s->u.str.s;
    size_t n = s->u.str.len, i = 0, b = 0, cnt = 0;
    tv **parts = NULL;
    size_t cap = 0;
    while (i < n) {
        size_t st = i;
        uint32_t c = tutf8_next(p, n, &i);
        if (!is_linebreak(c)) continue;
        size_t e = st;
        if (c == '\r' && i < n && p[i] == '\n') i++;
        if (cnt == cap) {
            cap = cap ? cap * 2 : 8;
            tv **q = tarena_alloc(r->a, cap * sizeof *q);
            if (!q) return tr_oom(r);
            if (cnt) memcpy(q, parts, cnt * sizeof *q);
            parts = q;
        }
        if (!(parts[cnt++] = tr_str(r, p + b, (keepends ? i : e) - b))) return NULL;
        b = i;
    }
    if (b < n) {
        if (cnt == cap) {
            cap = cap ? cap * 2 : 8;
            tv **q = tarena_alloc(r->a, cap * sizeof *q);
            if (!q) return tr_oom(r);
            if (cnt) memcpy(q, parts, cnt * sizeof *q);
            parts = q;
        }
        if (!(parts[cnt++] = tr_str(r, p + b, n - b))) return NULL;
    }
    tv *l = tr_list(r, cnt);
    if (l && cnt) memcpy(l->u.list.items, parts, cnt * sizeof *parts);
    return l;
}

tv *tr_as_markup(trender *r, tv *v)
{
    if (!v || v->type != TV_STR || v->is_markup) return v;
    tv *m = tv_str_nocopy(r->a, v->u.str.s, v->u.str.len);
    if (!m) return tr_oom(r);
    m->is_markup = 1;
    return m;
}

/* markupsafe.escape(v): Markup stays as is, anything else is str()'d and escaped */
tv *tr_html_escape(trender *r, tv *v)
{
    if (v->type == TV_STR && v->is_markup) return v;
    tv *s = tr_to_str(r, v);
    if (!s) return NULL;
    tbuf b = {0};
    for (size_t i = 0; i < s->u.str.len; i++) {
        char c = s->u.str.s[i];
        switch (c) {
        case '&': tbuf_puts(&b, "&amp;"); break;
        case '<': tbuf_puts(&b, "&lt;"); break;
        case '>': tbuf_puts(&b, "&gt;"); break;
        case '"': tbuf_puts(&b, "&#34;"); break;
        case '\'': tbuf_puts(&b, "&#39;"); break;
        default: tbuf_putc(&b, c);
        }
    }
    return tr_as_markup(r, tr_buf_to_str(r, &b));
}
