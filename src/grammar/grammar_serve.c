/* grammar_serve — see grammar_serve.h: the compile entry point of the
 * grammar queue, structural_tag -> EBNF, rule renaming, and the
 * tokenizer's vocabulary for the engine. */
#include "grammar/grammar_serve.h"

#include <ctype.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_bytes.h"
#include "util/errmsg.h"
#include "util/log.h"

/* ---- compile by key ------------------------------------------------------- */

void grammar_free_value(void *g) { grammar_free(g); }

void *grammar_compile_key(void *ctx, const grammar_key *k, size_t *bytes, char *err, size_t errlen)
{
    grammar_json_opts o = {.whitespace_pattern = NULL, .any_whitespace = 1, .strict = 0};
    if (ctx) o = *(const grammar_json_opts *)ctx;
    o.strict = (k->opts & GRAMMAR_OPT_STRICT) != 0;
    if (k->opts & GRAMMAR_OPT_COMPACT) o.any_whitespace = 0, o.whitespace_pattern = NULL;
    grammar *g = NULL;
    strbuf sb = {0};
    switch (k->kind) {
    case GRAMMAR_KIND_REGEX:
        g = grammar_compile_regex(k->text, k->len, err, errlen);
        break;
    case GRAMMAR_KIND_EBNF:
        g = grammar_compile_ebnf(k->text, k->len, "root", err, errlen);
        break;
    case GRAMMAR_KIND_JSON:
        if (grammar_schema_to_ebnf(k->text, k->len, &o, &sb, err, errlen) == 0) {
            if (sb.oom) errmsg_set(err, errlen, "out of memory");
            else g = grammar_compile_ebnf(sb.p ? sb.p : "", sb.len, "root", err, errlen);
        }
        break;
    case GRAMMAR_KIND_STRUCTURAL_TAG:
        if (grammar_structural_tag_to_ebnf(k->text, k->len, &o, &sb, err, errlen) == 0) {
            if (sb.oom) errmsg_set(err, errlen, "out of memory");
            else g = grammar_compile_ebnf(sb.p ? sb.p : "", sb.len, "root", err, errlen);
        }
        break;
    default:
        errmsg_set(err, errlen, "unknown grammar kind %d", (int)k->kind);
    }
    free(sb.p);
    if (g && bytes) *bytes = grammar_bytes(g);
    return g;
}

/* ---- EBNF text helpers ---------------------------------------------------- */

static bool ident_start(int c) { return isalpha(c) || c == '_'; }
static bool ident_char(int c) { return isalnum(c) || c == '_' || c == '-'; }

int grammar_ebnf_prefix_rules(const char *s, size_t n, const char *prefix, strbuf *out)
{
    size_t i = 0;
    while (i < n) {
        char c = s[i];
        size_t j = i + 1;
        if (c == '#') {
            while (j < n && s[j] != '\n') j++;
        } else if (c == '"' || c == '[') {
            char close = c == '"' ? '"' : ']';
            while (j < n && s[j] != close) j += s[j] == '\\' && j + 1 < n ? 2 : 1;
            if (j < n) j++;
        } else if (ident_start((unsigned char)c)) {
            while (j < n && ident_char((unsigned char)s[j])) j++;
            strbuf_puts(out, prefix);
        }
        strbuf_put(out, s + i, j - i);
        i = j;
    }
    return out->oom ? -1 : 0;
}

/* One UTF-8 code point at s (n bytes left): its length, or 1 for a bad byte. */
static size_t u8_len(const char *s, size_t n)
{
    unsigned char c = (unsigned char)s[0];
    size_t l = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
    return l <= n ? l : 1;
}

static void put_lit(strbuf *b, const char *s, size_t n)
{
    strbuf_put(b, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') strbuf_printf(b, "\\%c", c);
        else if (c == '\n') strbuf_puts(b, "\\n");
        else if (c == '\r') strbuf_puts(b, "\\r");
        else if (c == '\t') strbuf_puts(b, "\\t");
        else if (c < 0x20 || c == 0x7f) strbuf_printf(b, "\\x%02X", c);
        else strbuf_put(b, (const char *)&c, 1);
    }
    strbuf_put(b, "\"", 1);
}

/* One character (a code point's UTF-8 bytes) inside [...]. */
static void put_class_char(strbuf *b, const char *s, size_t l)
{
    unsigned char c = (unsigned char)s[0];
    if (l == 1 && (c == ']' || c == '[' || c == '\\' || c == '^' || c == '-')) strbuf_printf(b, "\\%c", c);
    else if (l == 1 && c == '\n') strbuf_puts(b, "\\n");
    else if (l == 1 && c == '\r') strbuf_puts(b, "\\r");
    else if (l == 1 && c == '\t') strbuf_puts(b, "\\t");
    else if (l == 1 && (c < 0x20 || c == 0x7f)) strbuf_printf(b, "\\x%02X", c);
    else strbuf_put(b, s, l);
}

/* ---- structural_tag ------------------------------------------------------- */

typedef struct {
    const char *s;               /* a trigger's UTF-8 text (borrowed from the JSON) */
    size_t n;
    size_t first_len;            /* bytes of its first code point */
} stag_trigger;

/* [^ every trigger's first char, plus extra (l bytes, may be 0)] */
static void put_not_class(strbuf *b, const stag_trigger *t, int nt, const char *extra, size_t l)
{
    strbuf_puts(b, "[^");
    for (int i = 0; i < nt; i++) put_class_char(b, t[i].s, t[i].first_len);
    if (l) put_class_char(b, extra, l);
    strbuf_puts(b, "]");
}

/* Is each trigger's first code point absent from the rest of every trigger? */
static bool triggers_simple(const stag_trigger *t, int nt, char *err, size_t errlen)
{
    for (int i = 0; i < nt; i++) {
        for (int j = 0; j < nt; j++) {
            size_t p = j == i ? t[j].first_len : 0;
            if (j != i && t[j].first_len == t[i].first_len && !memcmp(t[j].s, t[i].s, t[i].first_len) &&
                t[j].n == t[i].n && !memcmp(t[j].s, t[i].s, t[i].n))
                continue; /* duplicate trigger: harmless */
            while (p < t[j].n) {
                size_t l = u8_len(t[j].s + p, t[j].n - p);
                if (l == t[i].first_len && !memcmp(t[j].s + p, t[i].s, l)) {
                    errmsg_set(err, errlen,
                               "structural_tag: trigger '%.*s' starts with a character that appears again in trigger "
                               "'%.*s'; such trigger sets are not supported",
                               (int)t[i].n, t[i].s, (int)t[j].n, t[j].s);
                    return false;
                }
                p += l;
            }
        }
    }
    return true;
}

int grammar_structural_tag_to_ebnf(const char *json, size_t len, const grammar_json_opts *o, strbuf *out,
                                   char *err, size_t errlen)
{
    json_error_t je;
    json_t *root = json_loadb(json, len, 0, &je);
    if (!json_is_object(root)) {
        errmsg_set(err, errlen, "structural_tag: %s", root ? "expected a JSON object" : je.text);
        json_decref(root);
        return -1;
    }
    json_t *structs = json_object_get(root, "structures"), *trigs = json_object_get(root, "triggers");
    int rc = -1;
    stag_trigger *t = NULL;
    strbuf b = {0};
    if (!json_is_array(structs) || !json_array_size(structs)) {
        errmsg_set(err, errlen, "structural_tag: 'structures' must be a non-empty list");
        goto out;
    }
    if (!json_is_array(trigs) || !json_array_size(trigs)) {
        errmsg_set(err, errlen, "structural_tag: 'triggers' must be a non-empty list of strings");
        goto out;
    }
    int nt = (int)json_array_size(trigs), ns = (int)json_array_size(structs);
    t = calloc((size_t)nt, sizeof *t);
    if (!t) {
        errmsg_set(err, errlen, "out of memory");
        goto out;
    }
    for (int i = 0; i < nt; i++) {
        json_t *v = json_array_get(trigs, (size_t)i);
        if (!json_is_string(v) || !json_string_length(v)) {
            errmsg_set(err, errlen, "structural_tag: each trigger must be a non-empty string");
            goto out;
        }
        t[i].s = json_string_value(v);
        t[i].n = json_string_length(v);
        t[i].first_len = u8_len(t[i].s, t[i].n);
    }
    if (!triggers_simple(t, nt, err, errlen)) goto out;
    /* the structures, each under the trigger its begin starts with */
    strbuf_puts(&b, "stag-tag ::= ");
    for (int i = 0; i < ns; i++) {
        json_t *st = json_array_get(structs, (size_t)i);
        json_t *bg = json_object_get(st, "begin"), *en = json_object_get(st, "end");
        if (!json_is_object(st) || !json_is_string(bg) || !json_is_string(en)) {
            errmsg_set(err, errlen, "structural_tag: structure %d needs string 'begin' and 'end'", i);
            goto out;
        }
        bool has_trig = false;
        for (int k = 0; k < nt && !has_trig; k++)
            has_trig = json_string_length(bg) >= t[k].n && !memcmp(json_string_value(bg), t[k].s, t[k].n);
        if (!has_trig) {
            errmsg_set(err, errlen, "structural_tag: the begin '%s' of structure %d starts with no trigger",
                       json_string_value(bg), i);
            goto out;
        }
        strbuf_printf(&b, "%sstag-st%d", i ? " | " : "", i);
    }
    strbuf_puts(&b, "\n");
    for (int i = 0; i < ns; i++) {
        json_t *st = json_array_get(structs, (size_t)i);
        json_t *bg = json_object_get(st, "begin"), *en = json_object_get(st, "end");
        json_t *sc = json_object_get(st, "schema");
        char *sc_text = sc && !json_is_null(sc) ? json_dumps(sc, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
        strbuf sch = {0};
        char e2[512];
        int src = grammar_schema_to_ebnf(sc_text, sc_text ? strlen(sc_text) : 0, o, &sch, e2, sizeof e2);
        free(sc_text);
        if (src || sch.oom) {
            errmsg_set(err, errlen, "structural_tag: the schema of structure %d: %s", i, src ? e2 : "out of memory");
            free(sch.p);
            goto out;
        }
        char pre[32];
        snprintf(pre, sizeof pre, "s%d-", i);
        strbuf_printf(&b, "stag-st%d ::= ", i);
        put_lit(&b, json_string_value(bg), json_string_length(bg));
        strbuf_printf(&b, " s%d-root ", i);
        put_lit(&b, json_string_value(en), json_string_length(en));
        strbuf_puts(&b, "\n");
        grammar_ebnf_prefix_rules(sch.p ? sch.p : "", sch.len, pre, &b);
        strbuf_puts(&b, "\n");
        free(sch.p);
    }
    /* free text that completes no trigger */
    strbuf_puts(&b, "stag-free ::= ");
    put_not_class(&b, t, nt, NULL, 0);
    strbuf_puts(&b, "*");
    bool any_seg = false;
    for (int j = 0; j < nt; j++) any_seg |= t[j].n > t[j].first_len;
    if (any_seg) {
        strbuf_puts(&b, " (");
        bool first = true;
        for (int j = 0; j < nt; j++) {
            if (t[j].n <= t[j].first_len) continue; /* a one-character trigger: its character always triggers */
            strbuf_printf(&b, "%s", first ? " " : " | ");
            first = false;
            put_lit(&b, t[j].s, t[j].first_len);
            strbuf_printf(&b, " stag-y%d?", j);
        }
        strbuf_puts(&b, " )*\n");
        for (int j = 0; j < nt; j++) {
            if (t[j].n <= t[j].first_len) continue;
            const char *r = t[j].s + t[j].first_len;
            size_t m = t[j].n - t[j].first_len;
            strbuf_printf(&b, "stag-y%d ::= ", j);
            /* proper non-empty prefixes of the rest (a trigger start or the end follows) */
            bool alt = false;
            for (size_t p = 0; p < m;) {
                size_t l = u8_len(r + p, m - p);
                if (p + l >= m) break;
                p += l;
                if (alt) strbuf_puts(&b, " | ");
                put_lit(&b, r, p);
                alt = true;
            }
            /* a prefix broken by a character that is neither the next one nor a trigger start */
            if (alt) strbuf_puts(&b, " | ");
            strbuf_puts(&b, "(");
            for (size_t p = 0, k = 0; p < m; k++) {
                size_t l = u8_len(r + p, m - p);
                if (k) strbuf_puts(&b, " | ");
                if (p) {
                    put_lit(&b, r, p);
                    strbuf_puts(&b, " ");
                }
                put_not_class(&b, t, nt, r + p, l);
                p += l;
            }
            strbuf_puts(&b, ") ");
            put_not_class(&b, t, nt, NULL, 0);
            strbuf_puts(&b, "*\n");
        }
    } else {
        strbuf_puts(&b, "\n");
    }
    strbuf_puts(&b, "root ::= stag-free ( stag-tag stag-free )*\n");
    if (b.oom) {
        errmsg_set(err, errlen, "out of memory");
        goto out;
    }
    strbuf_put(out, b.p, b.len);
    rc = out->oom ? -1 : 0;
out:
    free(b.p);
    free(t);
    json_decref(root);
    return rc;
}

/* ---- the tokenizer's vocabulary ------------------------------------------ */

grammar_vocab *grammar_vocab_from_tok(const tok_tokenizer *t, int32_t n_vocab, const int32_t *end_ids, size_t n_end)
{
    /* tok_bytes: each id's raw bytes (byte-level map, U+2581, <0xAB>,
     * added tokens' content; special ids none); ids past the tokenizer
     * (padded LM-head rows) have none either */
    tok_bytes_table *tb = tok_bytes_build(t);
    grammar_vocab *gv = tb ? grammar_vocab_new(n_vocab, tok_bytes_get, tb, end_ids, n_end) : NULL;
    tok_bytes_free(tb); /* grammar_vocab_new copied the bytes */
    if (!gv) log_error("cannot build the grammar vocabulary");
    return gv;
}
