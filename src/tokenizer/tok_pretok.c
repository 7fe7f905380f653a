/* tok_pretok — tokenizer.json pre-tokenizers: ByteLevel, Split (with all
 * five behaviours and invert), Metaspace, Digits, Punctuation, Whitespace,
 * WhitespaceSplit, BertPreTokenizer, Sequence.
 *
 * DESIGN: a pre-tokenizer turns a list of pieces (spans of one arena
 * buffer) into a finer list.  Splitting never copies: sub-pieces are spans
 * of the same arena; only stages that change text (Metaspace, ByteLevel's
 * prefix space) append new strings to the arena.  Every splitter first
 * lists the piece as alternating (segment, is_delimiter) runs, then one
 * function applies the behaviour exactly as the tokenizers crate does.
 *
 * ByteLevel's byte-to-unicode mapping is not applied here: the BPE model of
 * a byte-level tokenizer works on raw bytes directly (tok_model.c), which is
 * the same thing without building the mapped strings. */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "tokenizer/tok_internal.h"

int tok_pieces_push(tok_pieces *p, size_t off, size_t len)
{
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 64;
        tok_piece *v = realloc(p->v, cap * sizeof *v);
        if (!v) return -1;
        p->v = v;
        p->cap = cap;
    }
    p->v[p->n].off = (uint32_t)off;
    p->v[p->n].len = (uint32_t)len;
    p->n++;
    return 0;
}

/* Runs of one piece: (start, end, is_delimiter), absolute arena offsets. */
typedef struct run {
    size_t s, e;
    bool delim;
} run;

typedef struct runs {
    run *v;
    size_t n, cap;
} runs;

static int runs_push(runs *r, size_t s, size_t e, bool delim)
{
    if (s == e) return 0;
    if (r->n == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 32;
        run *v = realloc(r->v, cap * sizeof *v);
        if (!v) return -1;
        r->v = v;
        r->cap = cap;
    }
    r->v[r->n++] = (run){s, e, delim};
    return 0;
}

/* Apply a split behaviour to runs and append the resulting pieces. */
static int apply_behavior(runs *r, tok_split_behavior b, tok_pieces *out)
{
    switch (b) {
    case TOK_SPLIT_REMOVED:
        for (size_t i = 0; i < r->n; i++)
            if (!r->v[i].delim && tok_pieces_push(out, r->v[i].s, r->v[i].e - r->v[i].s)) return -1;
        return 0;
    case TOK_SPLIT_ISOLATED:
        for (size_t i = 0; i < r->n; i++)
            if (tok_pieces_push(out, r->v[i].s, r->v[i].e - r->v[i].s)) return -1;
        return 0;
    case TOK_SPLIT_MERGED_PREV: {
        size_t base = out->n;
        bool prev_match = false;
        for (size_t i = 0; i < r->n; i++) {
            if (r->v[i].delim && !prev_match && out->n > base) {
                tok_piece *l = &out->v[out->n - 1];
                l->len = (uint32_t)(r->v[i].e - l->off);
            } else if (tok_pieces_push(out, r->v[i].s, r->v[i].e - r->v[i].s)) return -1;
            prev_match = r->v[i].delim;
        }
        return 0;
    }
    case TOK_SPLIT_MERGED_NEXT: {
        /* walk backwards, then reverse what we appended */
        size_t base = out->n;
        bool prev_match = false;
        for (size_t k = r->n; k-- > 0;) {
            if (r->v[k].delim && !prev_match && out->n > base) {
                tok_piece *l = &out->v[out->n - 1];
                size_t end = l->off + l->len;
                l->off = (uint32_t)r->v[k].s;
                l->len = (uint32_t)(end - r->v[k].s);
            } else if (tok_pieces_push(out, r->v[k].s, r->v[k].e - r->v[k].s)) return -1;
            prev_match = r->v[k].delim;
        }
        for (size_t i = base, j = out->n; i + 1 < j; i++, j--) {
            tok_piece t = out->v[i];
            out->v[i] = out->v[j - 1];
            out->v[j - 1] = t;
        }
        return 0;
    }
    case TOK_SPLIT_CONTIGUOUS: {
        size_t base = out->n;
        bool prev_match = false;
        for (size_t i = 0; i < r->n; i++) {
            if (r->v[i].delim && prev_match && out->n > base) {
                tok_piece *l = &out->v[out->n - 1];
                l->len = (uint32_t)(r->v[i].e - l->off);
            } else if (tok_pieces_push(out, r->v[i].s, r->v[i].e - r->v[i].s)) return -1;
            prev_match = r->v[i].delim;
        }
        return 0;
    }
    }
    return -1;
}

/* Runs of a regex over arena[s, e). */
static int regex_runs(const tok_regex *re, const char *arena, size_t s, size_t e, bool invert,
                      pcre2_match_data *md, runs *r)
{
    const char *p = arena + s;
    size_t n = e - s, pos = 0, search = 0;
    while (search <= n) {
        size_t ms, me;
        int rc = tok_regex_next(re, p, n, search, md, &ms, &me);
        if (rc < 0) return -1;
        if (rc == 0) break;
        if (me == ms) { /* empty match: not a delimiter; step one char */
            if (ms >= n) break;
            size_t l;
            tok_utf8_decode(p + ms, &l);
            search = ms + l;
            continue;
        }
        if (runs_push(r, s + pos, s + ms, invert) || runs_push(r, s + ms, s + me, !invert)) return -1;
        pos = search = me;
    }
    return runs_push(r, s + pos, e, invert);
}

typedef bool (*char_pred)(int32_t cp);

static bool is_ws(int32_t cp) { return tok_is_white_space(cp); }

static bool is_numeric(int32_t cp)
{
    if (cp < 0x80) return cp >= '0' && cp <= '9';
    utf8proc_category_t c = utf8proc_category(cp);
    return c == UTF8PROC_CATEGORY_ND || c == UTF8PROC_CATEGORY_NL || c == UTF8PROC_CATEGORY_NO;
}

static bool is_punct(int32_t cp)
{
    if (cp < 0x80)
        return (cp >= 0x21 && cp <= 0x2F) || (cp >= 0x3A && cp <= 0x40) || (cp >= 0x5B && cp <= 0x60) ||
               (cp >= 0x7B && cp <= 0x7E);
    utf8proc_category_t c = utf8proc_category(cp);
    return c >= UTF8PROC_CATEGORY_PC && c <= UTF8PROC_CATEGORY_PO;
}

/* Runs where each char matching pred is its own delimiter run. */
static int pred_runs(char_pred pred, const char *arena, size_t s, size_t e, runs *r)
{
    size_t pos = s;
    for (size_t i = s; i < e;) {
        size_t l;
        int32_t cp = tok_utf8_decode(arena + i, &l);
        if (pred(cp)) {
            if (runs_push(r, pos, i, false) || runs_push(r, i, i + l, true)) return -1;
            pos = i + l;
        }
        i += l;
    }
    return runs_push(r, pos, e, false);
}

static const char GPT2_PATTERN[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

/* Exposed to the loader through tok_pretok fields: compile the GPT-2 regex. */
int tok_pretok_bytelevel_regex(tok_pretok *pt, char *err, size_t errlen);
int tok_pretok_bytelevel_regex(tok_pretok *pt, char *err, size_t errlen)
{
    return tok_regex_compile(&pt->pattern, 1, GPT2_PATTERN, sizeof GPT2_PATTERN - 1, err, errlen);
}

static int pretok_piece(const tok_pretok *pt, tok_buf *arena, tok_piece pc, tok_pieces *out, bool first,
                        pcre2_match_data *md)
{
    runs r = {0};
    int rc = -1;
    size_t s = pc.off, e = pc.off + pc.len;
    switch (pt->kind) {
    case TOK_PRE_SPLIT:
        if (regex_runs(&pt->pattern, arena->p, s, e, pt->invert, md, &r)) goto done;
        rc = apply_behavior(&r, pt->behavior, out);
        break;
    case TOK_PRE_BYTELEVEL: {
        if (pt->add_prefix_space && (pc.len == 0 || arena->p[s] != ' ')) {
            size_t off = arena->n;
            /* reserve first: arena->p must not move between reading and copying */
            if (tok_buf_reserve(arena, pc.len + 1) || tok_buf_putc(arena, ' ')) goto done;
            memcpy(arena->p + arena->n, arena->p + s, pc.len);
            arena->n += pc.len;
            arena->p[arena->n] = 0;
            s = off;
            e = arena->n;
        }
        if (!pt->use_regex) { rc = tok_pieces_push(out, s, e - s); break; }
        if (regex_runs(&pt->pattern, arena->p, s, e, false, md, &r)) goto done;
        rc = apply_behavior(&r, TOK_SPLIT_ISOLATED, out);
        break;
    }
    case TOK_PRE_METASPACE: {
        size_t off = arena->n;
        /* the check is made after spaces became the replacement (as HF) */
        bool starts = (pc.len >= 1 && arena->p[s] == ' ') ||
                      (pc.len >= pt->repl_n && memcmp(arena->p + s, pt->repl, pt->repl_n) == 0);
        bool prepend = !starts && (pt->prepend_scheme == 0 || (pt->prepend_scheme == 1 && first));
        if (prepend && tok_buf_put(arena, pt->repl, pt->repl_n)) goto done;
        for (size_t i = s; i < e; i++) {
            /* arena may move while we append: index, never pointers */
            if (arena->p[i] == ' ') { if (tok_buf_put(arena, pt->repl, pt->repl_n)) goto done; }
            else if (tok_buf_putc(arena, arena->p[i])) goto done;
        }
        s = off;
        e = arena->n;
        if (!pt->split) { rc = tok_pieces_push(out, s, e - s); break; }
        tok_regex lit = {.literal = true, .lit = (char *)pt->repl, .lit_n = pt->repl_n};
        if (regex_runs(&lit, arena->p, s, e, false, md, &r)) goto done;
        rc = apply_behavior(&r, TOK_SPLIT_MERGED_NEXT, out);
        break;
    }
    case TOK_PRE_DIGITS:
        if (pred_runs(is_numeric, arena->p, s, e, &r)) goto done;
        rc = apply_behavior(&r, pt->individual_digits ? TOK_SPLIT_ISOLATED : TOK_SPLIT_CONTIGUOUS, out);
        break;
    case TOK_PRE_PUNCTUATION:
        if (pred_runs(is_punct, arena->p, s, e, &r)) goto done;
        rc = apply_behavior(&r, pt->behavior, out);
        break;
    case TOK_PRE_WHITESPACE:
        if (regex_runs(&pt->pattern, arena->p, s, e, true, md, &r)) goto done;
        rc = apply_behavior(&r, TOK_SPLIT_REMOVED, out);
        break;
    case TOK_PRE_WHITESPACE_SPLIT:
        if (pred_runs(is_ws, arena->p, s, e, &r)) goto done;
        rc = apply_behavior(&r, TOK_SPLIT_REMOVED, out);
        break;
    case TOK_PRE_BERT: {
        if (pred_runs(is_ws, arena->p, s, e, &r)) goto done;
        tok_pieces words = {0};
        if (apply_behavior(&r, TOK_SPLIT_REMOVED, &words)) { free(words.v); goto done; }
        rc = 0;
        for (size_t i = 0; i < words.n && !rc; i++) {
            r.n = 0;
            rc = pred_runs(is_punct, arena->p, words.v[i].off, words.v[i].off + words.v[i].len, &r);
            if (!rc) rc = apply_behavior(&r, TOK_SPLIT_ISOLATED, out);
        }
        free(words.v);
        break;
    }
    case TOK_PRE_SEQUENCE:
        rc = -1; /* handled by tok_pretokenize */
        break;
    }
done:
    free(r.v);
    return rc;
}

int tok_pretokenize(const tok_pretok *pt, tok_buf *arena, const tok_pieces *in, tok_pieces *out,
                    bool first_section, pcre2_match_data *md)
{
    out->n = 0;
    if (pt->kind != TOK_PRE_SEQUENCE) {
        for (size_t i = 0; i < in->n; i++)
            if (pretok_piece(pt, arena, in->v[i], out, first_section, md)) return -1;
        return 0;
    }
    tok_pieces a = {0}, b = {0};
    for (size_t i = 0; i < in->n; i++)
        if (tok_pieces_push(&a, in->v[i].off, in->v[i].len)) goto fail;
    for (size_t c = 0; c < pt->n_children; c++) {
        if (tok_pretokenize(&pt->children[c], arena, &a, &b, first_section, md)) goto fail;
        tok_pieces t = a;
        a = b;
        b = t;
    }
    for (size_t i = 0; i < a.n; i++)
        if (tok_pieces_push(out, a.v[i].off, a.v[i].len)) goto fail;
    free(a.v);
    free(b.v);
    return 0;
fail:
    free(a.v);
    free(b.v);
    return -1;
}

bool tok_pretok_is_bytelevel(const tok_pretok *pt)
{
    if (!pt) return false;
    if (pt->kind == TOK_PRE_BYTELEVEL) return true;
    for (size_t i = 0; i < pt->n_children; i++)
        if (tok_pretok_is_bytelevel(&pt->children[i])) return true;
    return false;
}

void tok_pretok_free(tok_pretok *pt)
{
    if (!pt) return;
    for (size_t i = 0; i < pt->n_children; i++) tok_pretok_free(&pt->children[i]);
    free(pt->children);
    tok_regex_free(&pt->pattern);
}
