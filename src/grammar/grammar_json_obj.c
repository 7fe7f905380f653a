/* grammar_json_obj — JSON Schema objects, arrays and enum/const values
 * for the translator (grammar_json_schema.c holds the DESIGN and the
 * dispatch).
 *
 * DESIGN: an object's members are the known properties in schema order
 * (required ones present, optional ones skippable) followed by any number
 * of additional members.  Built from the end: S_i = "members i.. after one
 * was written" (each optional one "(, kv_i)?"), F_i = "members i.. with
 * none written yet" (an optional one: kv_i S_i+1 | F_i+1), so the grammar
 * is linear in the number of properties.  An additional key is "any
 * string that is none of the known names": a trie over the names in one
 * canonical JSON encoding, where at every node a different character (or
 * the end, where no name ends) leaves the trie for good.  Arrays: prefix
 * items nested as optional tails, then the rest items with {m,n} counts.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "grammar/grammar_json_internal.h"

/* Whether the ECMA-262 regex re finds a match in s (PCRE2 reads the
 * syntax JSON Schema patterns use); a regex PCRE2 cannot compile counts as
 * no match. */
static bool regex_search(const char *re, const char *s)
{
    int ec;
    PCRE2_SIZE eo;
    pcre2_code *code = pcre2_compile((PCRE2_SPTR)re, PCRE2_ZERO_TERMINATED, PCRE2_UTF, &ec, &eo, NULL);
    if (!code) return false;
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(code, NULL);
    int rc = md ? pcre2_match(code, (PCRE2_SPTR)s, strlen(s), 0, 0, md, NULL) : -1;
    pcre2_match_data_free(md);
    pcre2_code_free(code);
    return rc >= 0;
}

/* ---- objects ----------------------------------------------------------- */

/* JSON-encoded text of a string, without the quotes. */
static char *json_enc(const char *s)
{
    json_t *j = json_string(s);
    char *t = j ? json_dumps(j, JSON_ENCODE_ANY) : NULL;
    json_decref(j);
    if (!t) return NULL;
    size_t n = strlen(t);
    memmove(t, t + 1, n - 2);
    t[n - 2] = 0;
    return t;
}

/* Length of the unit (one code point, or one escape) at the start of t. */
static size_t unit_len(const char *t)
{
    if (t[0] == '\\') return t[1] == 'u' ? 6 : 2;
    unsigned char ch = (unsigned char)t[0];
    size_t n = ch < 0x80 ? 1 : ch < 0xE0 ? 2 : ch < 0xF0 ? 3 : 4;
    for (size_t i = 1; i < n; i++)
        if (!t[i]) return i;
    return n;
}

static void class_char(strbuf *b, const char *u, size_t n)
{
    if (n == 1 && (u[0] == ']' || u[0] == '\\' || u[0] == '^' || u[0] == '-' || u[0] == '[')) strbuf_printf(b, "\\%c", u[0]);
    else strbuf_put(b, u, n);
}

/* A key that is none of the n encoded names (sorted), having matched the
 * first `at` bytes of names[lo..hi).  Keys in this language use one
 * encoding per string (no \u or \/ escapes), so "differs in encoding"
 * means "differs". */
static const char *key_trie(gjs *c, char **names, size_t lo, size_t hi, size_t at, int depth)
{
    if (c->failed) return NULL;
    const char *rest = gjs_rule(c, "krest", "jchar* \"\\\"\"");
    strbuf b = {0}, cls = {0}, esc = {0};
    bool ends = false;
    /* children */
    size_t i = lo;
    strbuf_puts(&b, "(");
    bool alt = false;
    while (i < hi) {
        if (!names[i][at]) { ends = true; i++; continue; }
        size_t ul = unit_len(names[i] + at);
        size_t j = i + 1;
        while (j < hi && !strncmp(names[j] + at, names[i] + at, ul) && strlen(names[j] + at) >= ul) j++;
        const char *child = depth > 200 ? rest : key_trie(c, names, i, j, at + ul, depth + 1);
        if (!child) { free(b.p), free(cls.p), free(esc.p); return NULL; }
        if (alt) strbuf_puts(&b, " | ");
        gjs_put_lit(&b, names[i] + at, ul);
        strbuf_printf(&b, " %s", child);
        alt = true;
        if (names[i][at] == '\\') strbuf_put(&esc, names[i] + at + 1, 1);
        else class_char(&cls, names[i] + at, ul);
        i = j;
    }
    if (!ends) {
        if (alt) strbuf_puts(&b, " | ");
        strbuf_puts(&b, "\"\\\"\"");
        alt = true;
    }
    if (alt) strbuf_puts(&b, " | ");
    strbuf_printf(&b, "[^\"\\\\\\x00-\\x1F%s] %s", cls.p ? cls.p : "", rest);
    /* the escapes that are not a child's */
    const char *letters = "\"\\bfnrt";
    strbuf el = {0};
    for (const char *l = letters; *l; l++)
        if (!esc.p || !strchr(esc.p, *l)) strbuf_printf(&el, "%s%c", *l == '"' || *l == '\\' ? "\\" : "", *l);
    if (el.p) strbuf_printf(&b, " | \"\\\\\" [%s] %s", el.p, rest);
    strbuf_puts(&b, ")");
    free(el.p), free(cls.p), free(esc.p);
    const char *r = gjs_rule(c, "key", b.p);
    free(b.p);
    return r;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* "\"" + a key that is not one of the known names. */
static const char *other_key(gjs *c, json_t *names)
{
    size_t n = json_array_size(names);
    if (n == 0) return gjs_basic(c, "string");
    char **enc = calloc(n, sizeof *enc);
    if (!enc) return gjs_fail(c, "out of memory"), NULL;
    const char *r = NULL;
    size_t i;
    for (i = 0; i < n; i++)
        if (!(enc[i] = json_enc(json_string_value(json_array_get(names, i))))) break;
    if (i == n) {
        qsort(enc, n, sizeof *enc, cmp_str);
        gjs_basic(c, "jchar");
        const char *t = key_trie(c, enc, 0, n, 0, 0);
        if (t) {
            strbuf b = {0};
            strbuf_printf(&b, "\"\\\"\" %s", t);
            r = gjs_rule(c, "okey", b.p);
            free(b.p);
        }
    } else gjs_fail(c, "out of memory");
    for (i = 0; i < n; i++) free(enc[i]);
    free(enc);
    return r;
}

const char *gjs_string_not_in(gjs *c, json_t *names) { return other_key(c, names); }

static bool in_array(json_t *a, const char *s)
{
    size_t i;
    json_t *v;
    json_array_foreach(a, i, v) if (json_is_string(v) && !strcmp(json_string_value(v), s)) return true;
    return false;
}

const char *gjs_object(gjs *c, json_t *s)
{
    const char *w = c->ws;
    json_t *props = json_object_get(s, "properties");
    json_t *req = json_object_get(s, "required");
    json_t *ap = json_object_get(s, "additionalProperties");
    json_t *pp = json_object_get(s, "patternProperties");
    if (!ap) ap = json_object_get(s, "unevaluatedProperties");
    if (!ap && c->o && c->o->strict) ap = json_false();
    if (!json_is_array(req)) req = NULL;
    strbuf extra = {0};
    if (pp && (!json_is_object(pp) || json_object_size(pp) == 0)) pp = NULL;
    const char *k;
    json_t *v;
    /* dependencies, exactly: split on one trigger k into "k absent"
     * (properties.k = false) | "k present" (k and its needs required, or
     * its schema met); each split removes one entry, at most 6 */
    for (const char *const *kw = (const char *const[]){"dependentRequired", "dependencies", "dependentSchemas", NULL}; *kw; kw++) {
        json_t *d = json_object_get(s, *kw);
        if (!json_is_object(d)) continue;
        json_object_foreach(d, k, v)
        {
            bool arr = json_is_array(v);
            if (arr ? json_array_size(v) == 0 : gjs_is_trivial(v)) continue;
            if (json_object_size(d) > 6) return gjs_fail(c, "'%s' with more than 6 entries is not supported", *kw), NULL;
            bool trig_req = req && in_array(req, k);
            json_t *with = json_deep_copy(s), *without = trig_req ? NULL : json_deep_copy(s);
            json_object_del(json_object_get(with, *kw), k);
            json_t *rq = json_object_get(with, "required");
            if (!json_is_array(rq)) json_object_set_new(with, "required", rq = json_array());
            /* the needs first, then the trigger: the order people write them */
            size_t q;
            json_t *x;
            if (arr) json_array_foreach(v, q, x) if (json_is_string(x) && !in_array(rq, json_string_value(x))) json_array_append(rq, x);
            if (!in_array(rq, k)) json_array_append_new(rq, json_string(k));
            if (!arr) {
                json_t *m = json_pack("{s:[oO]}", "allOf", with, v);
                with = m;
            }
            json_array_append_new(c->keep, with);
            if (without) {
                json_object_del(json_object_get(without, *kw), k);
                json_t *pr = json_object_get(without, "properties");
                if (!json_is_object(pr)) json_object_set_new(without, "properties", pr = json_object());
                json_object_set_new(pr, k, json_false());
                json_array_append_new(c->keep, without);
            }
            bool d1 = false, d2 = false;
            const char *r1 = gjs_try_gen(c, with, &d1), *r2 = without ? gjs_try_gen(c, without, &d2) : NULL;
            if (c->failed) return NULL;
            if (!r1 && !r2) return gjs_unsat(c, "object schema cannot be satisfied (dependencies)"), NULL;
            if (!r1 || !r2) return r1 ? r1 : r2;
            strbuf b = {0};
            strbuf_printf(&b, "%s | %s", r1, r2);
            const char *r = gjs_rule(c, "dep", b.p);
            free(b.p);
            return r;
        }
    }
    json_t *forbid = json_array();
    json_array_append_new(c->keep, forbid);
    /* the member list: properties in schema order, then required names
     * the properties do not list (their value meets additionalProperties) */
    json_t *names = json_array(), *schemas = json_array();
    json_t *reqf = json_array();
    if (json_is_object(props)) {
        json_object_foreach(props, k, v)
        {
            bool r = req && in_array(req, k);
            if (json_is_object(v) && json_object_get(v, "allOf")) {
                json_t *m = gjs_flatten(c, v, 0);
                if (!m) goto fail;
                json_array_append_new(c->keep, m);
                if (json_object_get(m, GJS_FALSE_KEY)) v = json_false();
            }
            if (in_array(forbid, k)) continue;
            if (json_is_false(v) || (json_is_object(v) && json_object_get(v, GJS_FALSE_KEY))) {
                if (r) goto unsat;
                json_array_append_new(forbid, json_string(k));
                continue;
            }
            /* a property whose name a patternProperties regex matches meets both */
            if (pp) {
                const char *pk;
                json_t *pv;
                json_object_foreach(pp, pk, pv) if (!gjs_is_trivial(pv) && regex_search(pk, k))
                {
                    json_t *m = json_pack("{s:[OO]}", "allOf", v, pv);
                    json_array_append_new(c->keep, m);
                    v = m;
                }
            }
            json_array_append_new(names, json_string(k));
            json_array_append(schemas, v);
            json_array_append_new(reqf, json_boolean(r));
        }
    }
    size_t i;
    json_array_foreach(req, i, v)
    {
        if (!json_is_string(v) || in_array(names, json_string_value(v))) continue;
        if (json_is_object(props) && json_object_get(props, json_string_value(v))) continue;
        /* its value meets every patternProperties schema whose regex
         * matches the name, else additionalProperties */
        json_t *sch = NULL;
        if (pp) {
            const char *pk;
            json_t *pv;
            json_object_foreach(pp, pk, pv) if (regex_search(pk, json_string_value(v)))
            {
                json_t *m = sch ? json_pack("{s:[OO]}", "allOf", sch, pv) : json_incref(pv);
                json_array_append_new(c->keep, m);
                sch = m;
            }
        }
        if (!sch && json_is_false(ap)) goto unsat;
        json_array_append_new(names, json_string(json_string_value(v)));
        json_array_append(schemas, sch ? sch : ap ? ap : json_true());
        json_array_append_new(reqf, json_true());
    }
    size_t n = json_array_size(names), nreq = 0;
    for (i = 0; i < n; i++) nreq += json_is_true(json_array_get(reqf, i));
    /* additional members */
    bool pp_trivial = true;
    if (pp) json_object_foreach(pp, k, v) if (!gjs_is_trivial(v)) pp_trivial = false;
    if (!json_is_false(ap) && (!pp || pp_trivial)) {
        json_t *pn = json_object_get(s, "propertyNames");
        const char *key = NULL;
        if (pn && !gjs_is_trivial(pn)) {
            json_t *pat = json_object_get(pn, "pattern");
            if (n == 0 && json_is_string(pat) && json_object_size(pn) <= 2 &&
                (json_object_size(pn) == 1 || json_is_string(json_object_get(pn, "type"))))
                key = gjs_pattern_string(c, json_string_value(pat));
            else if (n == 0 && json_is_array(json_object_get(pn, "enum")))
                key = gjs_gen(c, pn);
            else { gjs_fail(c, "'propertyNames' is not supported here"); goto fail; }
        } else {
            json_t *excl = json_copy(names);
            size_t q;
            json_t *x;
            json_array_foreach(forbid, q, x) json_array_append(excl, x);
            key = other_key(c, excl);
            json_decref(excl);
        }
        bool dropped = false;
        const char *val = ap && !gjs_is_trivial(ap) ? gjs_try_gen(c, ap, &dropped) : gjs_basic(c, "value");
        if (!key || (!val && !dropped)) goto fail;
        if (val) strbuf_printf(&extra, "%s%s\":\"%s%s", key, w, w, val);
    } else if (pp) {
        /* keys from the patterns only (a subset when additionalProperties
         * is not false: docs/notes/schema.md) */
        json_object_foreach(pp, k, v)
        {
            bool dropped;
            const char *key = gjs_pattern_string(c, k), *val = key ? gjs_try_gen(c, v, &dropped) : NULL;
            if (!key || (!val && !dropped)) goto fail;
            if (!val) continue;
            strbuf_printf(&extra, "%s%s%s\":\"%s%s", extra.len ? " | " : "", key, w, w, val);
        }
    }
    const char *xr = NULL;
    if (extra.len) xr = gjs_rule(c, "extra", extra.p);
    free(extra.p);
    extra.p = NULL;
    if (extra.len && !xr) goto fail;
    /* property count limits */
    json_t *minp = json_object_get(s, "minProperties"), *maxp = json_object_get(s, "maxProperties");
    long long minv = gjs_count(minp, 0);
    if (minv > (long long)nreq && minv > 1) { gjs_fail(c, "'minProperties' %lld is not supported (more than the required properties)", minv); goto fail; }
    if (json_is_number(maxp)) {
        long long mx = gjs_count(maxp, 0);
        if (mx < (long long)nreq) goto unsat;
        if (xr || mx < (long long)n) {
            if (mx != 0) { gjs_fail(c, "'maxProperties' is not supported (fewer than the possible properties)"); goto fail; }
            /* maxProperties 0: only {} */
            json_decref(names), json_decref(schemas), json_decref(reqf);
            strbuf e = {0};
            strbuf_printf(&e, "\"{\"%s\"}\"", w);
            const char *r = gjs_rule(c, "obj", e.p);
            free(e.p);
            return r;
        }
    }
    /* members, from the end: S_i = after one was written, F_i = none yet */
    char *after = NULL, *first = NULL; /* rule names (strdup) or NULL = empty / none */
    if (xr) {
        strbuf b = {0};
        strbuf_printf(&b, "(%s\",\"%s%s)*", w, w, xr);
        const char *sr = gjs_rule(c, "oset", b.p);
        strbuf_puts(&b, "");
        free(b.p);
        b = (strbuf){0};
        strbuf_printf(&b, "%s (%s\",\"%s%s)*", xr, w, w, xr);
        const char *fr = gjs_rule(c, "ofirst", b.p);
        free(b.p);
        if (!sr || !fr) goto fail;
        after = strdup(sr), first = strdup(fr);
    }
    for (size_t idx = n; idx-- > 0;) {
        const char *name = json_string_value(json_array_get(names, idx));
        bool r = json_is_true(json_array_get(reqf, idx));
        bool dropped = false;
        const char *val = r ? gjs_gen(c, json_array_get(schemas, idx)) : gjs_try_gen(c, json_array_get(schemas, idx), &dropped);
        if (dropped) continue; /* an optional property that can match nothing: never written */
        if (!val) { free(after), free(first); goto fail; }
        strbuf kv = {0};
        char *enc = json_enc(name);
        strbuf lit = {0};
        strbuf_puts(&lit, "\"");
        strbuf_puts(&lit, enc ? enc : "");
        strbuf_puts(&lit, "\"");
        free(enc);
        gjs_put_lit(&kv, lit.p, lit.len);
        free(lit.p);
        strbuf_printf(&kv, "%s\":\"%s%s", w, w, val);
        const char *kvr = gjs_rule(c, "kv", kv.p);
        free(kv.p);
        if (!kvr) { free(after), free(first); goto fail; }
        strbuf sb = {0}, fb = {0};
        if (r) strbuf_printf(&sb, "%s\",\"%s%s%s%s", w, w, kvr, after ? " " : "", after ? after : "");
        else strbuf_printf(&sb, "(%s\",\"%s%s)?%s%s", w, w, kvr, after ? " " : "", after ? after : "");
        strbuf_printf(&fb, "%s%s%s", kvr, after ? " " : "", after ? after : "");
        if (!r && first) strbuf_printf(&fb, " | %s", first);
        const char *sr = gjs_rule(c, "oset", sb.p), *fr = gjs_rule(c, "ofirst", fb.p);
        free(sb.p), free(fb.p);
        free(after), free(first);
        after = sr ? strdup(sr) : NULL, first = fr ? strdup(fr) : NULL;
        if (!sr || !fr) { free(after), free(first); goto fail; }
    }
    json_decref(names), json_decref(schemas), json_decref(reqf);
    strbuf ob = {0};
    if (!first) strbuf_printf(&ob, "\"{\"%s\"}\"", w);
    else if (nreq == 0 && minv < 1) strbuf_printf(&ob, "\"{\"%s(%s%s)?\"}\"", w, first, w);
    else strbuf_printf(&ob, "\"{\"%s%s%s\"}\"", w, first, w);
    free(after), free(first);
    const char *r = gjs_rule(c, "obj", ob.p);
    free(ob.p);
    return r;
unsat:
    gjs_unsat(c, "object schema cannot be satisfied (a required property is forbidden)");
fail:
    free(extra.p);
    json_decref(names), json_decref(schemas), json_decref(reqf);
    return NULL;
}

/* ---- arrays ------------------------------------------------------------ */

/* contains C with minContains k (no maxContains, no prefixItems, no
 * maxItems, minItems <= k): "[" (I ,)* IC ((, I)* , IC){k-1} (, I)* "]"
 * where IC = items and C: some k positions meet C, exact (ambiguous). */
static const char *array_contains(gjs *c, json_t *s, json_t *cont, long long k)
{
    const char *w = c->ws;
    json_t *items = json_object_get(s, "items");
    json_t *mxc = json_object_get(s, "maxContains");
    if (json_object_get(s, "prefixItems") || json_is_array(items))
        return gjs_fail(c, "'contains' together with prefixItems is not supported"), NULL;
    if (json_object_get(s, "maxItems") || json_object_get(s, "unevaluatedItems"))
        return gjs_fail(c, "'contains' together with maxItems/unevaluatedItems is not supported"), NULL;
    if (json_is_true(json_object_get(s, "uniqueItems")))
        return gjs_fail(c, "'contains' together with uniqueItems is not supported"), NULL;
    if (gjs_count(json_object_get(s, "minItems"), 0) > k)
        return gjs_fail(c, "'contains' with minItems above minContains is not supported"), NULL;
    if (k > 16) return gjs_fail(c, "'minContains' %lld is over the limit 16", k), NULL;
    bool dropped = false;
    const char *R = items && !gjs_is_trivial(items) ? gjs_try_gen(c, items, &dropped) : gjs_basic(c, "value");
    if (!R) return dropped ? gjs_unsat(c, "'contains': no item can be written"), NULL : NULL;
    json_t *ic = json_pack("{s:[OO]}", "allOf", items ? items : json_true(), cont);
    json_array_append_new(c->keep, ic);
    const char *IC = gjs_try_gen(c, ic, &dropped);
    if (!IC && !(dropped && k == 0)) return dropped ? gjs_unsat(c, "'contains': no item matches"), NULL : NULL;
    if (mxc) {
        /* maxContains K: every item is IC or N = items and not contains (grammar_json_not.c),
         * and the IC count is in [k, K]:
         *   [ N Ns (, IC Ns){k,K} | IC Ns (, IC Ns){k-1,K-1} ]   Ns = (, N)*   (+ [] when k = 0) */
        long long K = gjs_count(mxc, 0);
        if (K < k) return gjs_unsat(c, "array schema cannot be satisfied (minContains > maxContains)"), NULL;
        if (K > 16) return gjs_fail(c, "'maxContains' %lld is over the limit 16", K), NULL;
        json_t *nc = gjs_negate(c, cont, 0);
        if (!nc) return NULL;
        json_t *ni = json_pack("{s:[Oo]}", "allOf", items ? items : json_true(), nc);
        json_array_append_new(c->keep, ni);
        bool nd = false;
        const char *N = gjs_try_gen(c, ni, &nd);
        if (!N && !nd) return NULL;
        strbuf ns = {0}, b = {0};
        if (N) strbuf_printf(&ns, "(%s\",\"%s%s)*", w, w, N);
        const char *NS = N ? gjs_rule(c, "ancs", ns.p) : NULL;
        free(ns.p);
        if (N && !NS) return NULL;
        bool alt = false;
        if (k == 0) strbuf_printf(&b, "\"[\"%s\"]\"", w), alt = true;
        if (N) {
            strbuf_printf(&b, "%s\"[\"%s%s %s", alt ? " | " : "", w, N, NS);
            if (IC && K > 0) strbuf_printf(&b, " (%s\",\"%s%s %s){%lld,%lld}", w, w, IC, NS, k, K);
            strbuf_printf(&b, "%s\"]\"", w);
            alt = true;
        }
        if (IC && K > 0) {
            strbuf_printf(&b, "%s\"[\"%s%s%s%s", alt ? " | " : "", w, IC, NS ? " " : "", NS ? NS : "");
            if (K > 1)
                strbuf_printf(&b, " (%s\",\"%s%s%s%s){%lld,%lld}", w, w, IC, NS ? " " : "", NS ? NS : "",
                              k > 0 ? k - 1 : 0, K - 1);
            strbuf_printf(&b, "%s\"]\"", w);
            alt = true;
        }
        const char *r = alt ? gjs_rule(c, "acont", b.p) : (gjs_unsat(c, "'contains': no array can be written"), NULL);
        free(b.p);
        return r;
    }
    if (!IC) return gjs_unsat(c, "'contains': no item matches"), NULL;
    strbuf b = {0};
    strbuf_printf(&b, "\"[\"%s(%s%s\",\"%s)* %s", w, R, w, w, IC);
    if (k > 1) strbuf_printf(&b, " ((%s\",\"%s%s)*%s\",\"%s%s){%lld}", w, w, R, w, w, IC, k - 1);
    strbuf_printf(&b, " (%s\",\"%s%s)*%s\"]\"", w, w, R, w);
    const char *r = gjs_rule(c, "acont", b.p);
    free(b.p);
    return r;
}

static bool value_has_type(json_t *v, json_t *type);

/* The values of a finite item schema (enum / const / boolean / null with
 * annotations only), deduplicated by JSON Schema equality (1 = 1.0), or
 * NULL. */
static json_t *finite_items(json_t *it)
{
    if (!json_is_object(it)) return NULL;
    json_t *vals = NULL;
    const char *k;
    json_t *v;
    json_t *type = json_object_get(it, "type");
    json_object_foreach(it, k, v)
    {
        if (!strcmp(k, "enum") || !strcmp(k, "const") || !strcmp(k, "type")) continue;
        if (!strcmp(k, "title") || !strcmp(k, "description") || !strcmp(k, "examples") || !strcmp(k, "default") ||
            !strcmp(k, "$comment"))
            continue;
        return NULL;
    }
    if (json_object_get(it, "const")) vals = json_pack("[O]", json_object_get(it, "const"));
    else if (json_is_array(json_object_get(it, "enum"))) vals = json_copy(json_object_get(it, "enum"));
    else if (json_is_string(type) && !strcmp(json_string_value(type), "boolean")) vals = json_pack("[bb]", 0, 1);
    else if (json_is_string(type) && !strcmp(json_string_value(type), "null")) vals = json_pack("[n]");
    if (!vals) return NULL;
    json_t *out = json_array();
    size_t i, j;
    json_t *x, *y;
    json_array_foreach(vals, i, x)
    {
        bool dup = false;
        json_array_foreach(out, j, y)
        {
            if (json_is_number(x) && json_is_number(y)) dup |= json_number_value(x) == json_number_value(y);
            else dup |= json_equal(x, y);
        }
        if (!dup) json_array_append(out, x);
    }
    json_decref(vals);
    return out;
}

/* uniqueItems over a finite item set of n <= 6 values: the arrays of
 * distinct values, a rule per set of values left (2^n), exact. */
static const char *array_unique_finite(gjs *c, json_t *s, json_t *vals, long long m, long long M)
{
    const char *w = c->ws;
    json_t *type = json_object_get(json_object_get(s, "items"), "type");
    int n = (int)json_array_size(vals);
    const char *V[6];
    int nv = 0;
    for (int i = 0; i < n; i++) {
        json_t *v = json_array_get(vals, (size_t)i);
        if (type && !value_has_type(v, type)) continue; /* a value the items' type excludes */
        json_t *one = json_pack("[O]", v);
        const char *r = gjs_enum(c, one, type);
        json_decref(one);
        if (!r) return NULL;
        V[nv++] = r;
    }
    if (M < 0 || M > nv) M = nv;
    if (m > M) return gjs_unsat(c, "array schema cannot be satisfied (uniqueItems: minItems above the distinct values)"), NULL;
    /* U[mask] (mask = values still free; length so far = nv - popcount) */
    char names[64][32];
    for (int mask = 0; mask < (1 << nv); mask++) { /* sub-masks first */
        int len = nv - __builtin_popcount((unsigned)mask);
        strbuf b = {0};
        bool alt = false;
        if (len >= m) strbuf_puts(&b, "\"\""), alt = true;
        if (len < M)
            for (int j = 0; j < nv; j++)
                if (mask & (1 << j)) {
                    strbuf_printf(&b, "%s%s\",\"%s%s %s", alt ? " | " : "", w, w, V[j], names[mask & ~(1 << j)]);
                    alt = true;
                }
        if (!alt) strbuf_puts(&b, "\"\"");
        const char *r = gjs_rule(c, "auniq", b.p);
        free(b.p);
        if (!r) return NULL;
        snprintf(names[mask], sizeof names[mask], "%s", r);
    }
    strbuf b = {0};
    bool alt = false;
    if (m == 0) strbuf_printf(&b, "\"[\"%s\"]\"", w), alt = true;
    if (M > 0)
        for (int j = 0; j < nv; j++) {
            strbuf_printf(&b, "%s\"[\"%s%s %s%s\"]\"", alt ? " | " : "", w, V[j], names[((1 << nv) - 1) & ~(1 << j)], w);
            alt = true;
        }
    const char *r = alt ? gjs_rule(c, "auarr", b.p) : (gjs_unsat(c, "array schema cannot be satisfied"), NULL);
    free(b.p);
    return r;
}

const char *gjs_array(gjs *c, json_t *s)
{
    const char *w = c->ws;
    json_t *prefix = json_object_get(s, "prefixItems"), *items = json_object_get(s, "items"), *rest = NULL;
    if (json_is_array(items)) prefix = items, rest = json_object_get(s, "additionalItems");
    else rest = items;
    if (!rest) rest = json_object_get(s, "unevaluatedItems");
    if (!json_is_array(prefix)) prefix = NULL;
    json_t *cont = json_object_get(s, "contains");
    if (cont) {
        long long k = gjs_count(json_object_get(s, "minContains"), 1);
        /* minContains 0 without maxContains: contains holds for every array */
        if (k > 0 || json_object_get(s, "maxContains")) return array_contains(c, s, cont, k < 0 ? 0 : k);
    }
    json_t *mi = json_object_get(s, "minItems"), *ma = json_object_get(s, "maxItems");
    long long m = gjs_count(mi, 0);
    if (m < 0) m = 0;
    long long M = gjs_count(ma, -1);
    if (M < -1) M = 0;
    if (json_is_true(json_object_get(s, "uniqueItems")) && !(M >= 0 && M <= 1)) {
        json_t *fl = prefix || !json_is_object(rest) ? NULL : gjs_flatten(c, rest, 0);
        json_t *vals = finite_items(fl);
        json_decref(fl);
        if (c->failed) return json_decref(vals), NULL;
        if (vals && json_array_size(vals) <= 6) {
            const char *r = array_unique_finite(c, s, vals, m, M);
            json_decref(vals);
            return r;
        }
        json_decref(vals);
        return gjs_fail(c, "'uniqueItems' is not supported (only over an enum of at most 6 values, or maxItems <= 1)"),
               NULL;
    }
    if (M > GJS_MAX_REPEAT) M = -1;
    if (m > GJS_MAX_REPEAT) return gjs_fail(c, "minItems %lld too large (limit %d)", m, GJS_MAX_REPEAT), NULL;
    if (M >= 0 && m > M) return gjs_unsat(c, "array schema cannot be satisfied (minItems > maxItems)"), NULL;
    long long k = prefix ? (long long)json_array_size(prefix) : 0;
    bool rest_false = json_is_false(rest) || (json_is_object(rest) && json_object_get(rest, GJS_FALSE_KEY));
    const char *R = NULL;
    bool dropped = false;
    if (!rest_false && (M < 0 || M > k)) R = rest && !gjs_is_trivial(rest) ? gjs_try_gen(c, rest, &dropped) : gjs_basic(c, "value");
    if (c->failed) return NULL;
    /* prefix items, first to last: one that matches nothing ends the array */
    long long upto = M >= 0 && M < k ? M : k;
    const char **P = calloc((size_t)upto + 1, sizeof *P);
    if (!P) return gjs_fail(c, "out of memory"), NULL;
    for (long long i = 1; i <= upto; i++) {
        P[i] = gjs_try_gen(c, json_array_get(prefix, (size_t)(i - 1)), &dropped);
        if (P[i]) continue;
        if (!dropped) { free(P); return NULL; }
        upto = i - 1, R = NULL, M = upto;
        break;
    }
    if (!R) {
        if (M < 0 || M > k) M = k;
        if (m > M) { free(P); return gjs_unsat(c, "array schema cannot be satisfied (minItems beyond the allowed items)"), NULL; }
    }
    strbuf b = {0};
    /* after position k: rest items, count in [max(0, m-k), M-k] */
    char *tail = NULL;
    if (R) {
        long long a = m > k ? m - k : 0, z = M < 0 ? -1 : M - k;
        strbuf t = {0};
        if (z < 0) strbuf_printf(&t, "(%s\",\"%s%s)%s", w, w, R, a == 0 ? "*" : a == 1 ? "+" : "");
        if (z < 0 && a > 1) strbuf_printf(&t, "{%lld,}", a);
        if (z >= 0) strbuf_printf(&t, "(%s\",\"%s%s){%lld,%lld}", w, w, R, a, z);
        const char *tr = z == 0 ? NULL : gjs_rule(c, "aset", t.p);
        free(t.p);
        if (z != 0 && !tr) { free(P); return NULL; }
        tail = tr ? strdup(tr) : NULL;
    }
    /* the first element, and the prefix chain */
    const char *first;
    if (k == 0) {
        if (!R) first = NULL;
        else {
            /* R then count-1 more: rest count [max(0,m-1), M-1] */
            long long a = m > 1 ? m - 1 : 0, z = M < 0 ? -1 : M - 1;
            free(tail);
            tail = NULL;
            strbuf_printf(&b, "%s", R);
            if (z < 0) {
                strbuf_printf(&b, " (%s\",\"%s%s)%s", w, w, R, a == 0 ? "*" : a == 1 ? "+" : "");
                if (a > 1) strbuf_printf(&b, "{%lld,}", a);
            } else if (z > 0) strbuf_printf(&b, " (%s\",\"%s%s){%lld,%lld}", w, w, R, a, z);
            first = gjs_rule(c, "afirst", b.p);
            free(b.p), b = (strbuf){0};
            if (!first) { free(P); return NULL; }
        }
    } else {
        char *after = tail;
        for (long long i = upto; i >= 1; i--) {
            strbuf e = {0};
            if (i == 1) strbuf_printf(&e, "%s%s%s", P[i], after ? " " : "", after ? after : "");
            else if (i <= m) strbuf_printf(&e, "%s\",\"%s%s%s%s", w, w, P[i], after ? " " : "", after ? after : "");
            else strbuf_printf(&e, "(%s\",\"%s%s%s%s)?", w, w, P[i], after ? " " : "", after ? after : "");
            const char *er = gjs_rule(c, i == 1 ? "afirst" : "aset", e.p);
            free(e.p);
            free(after);
            after = er ? strdup(er) : NULL;
            if (!er) { free(P); return NULL; }
        }
        first = after ? gjs_rule(c, "afirst", after) : NULL;
        free(after);
        tail = NULL;
    }
    free(P);
    free(tail);
    if (!first) strbuf_printf(&b, "\"[\"%s\"]\"", w);
    else if (m == 0) strbuf_printf(&b, "\"[\"%s(%s%s)?\"]\"", w, first, w);
    else strbuf_printf(&b, "\"[\"%s%s%s\"]\"", w, first, w);
    const char *r = gjs_rule(c, "arr", b.p);
    free(b.p);
    return r;
}

/* ---- enum / const ------------------------------------------------------ */

static bool value_has_type(json_t *v, json_t *type)
{
    if (!type) return true;
    switch (json_typeof(v)) {
    case JSON_OBJECT: return gjs_type_has(type, "object");
    case JSON_ARRAY: return gjs_type_has(type, "array");
    case JSON_STRING: return gjs_type_has(type, "string");
    case JSON_INTEGER: return gjs_type_has(type, "integer") || gjs_type_has(type, "number");
    case JSON_REAL: return gjs_type_has(type, "number");
    case JSON_TRUE:
    case JSON_FALSE: return gjs_type_has(type, "boolean");
    default: return gjs_type_has(type, "null");
    }
}

/* One JSON value as a grammar: whitespace between its tokens as
 * elsewhere, numbers in every spelling of the same value (1, 1.0, 1.00;
 * 1.5, 1.50), objects with their keys in the given order. */
static int value_expr(gjs *c, json_t *v, strbuf *b, int depth)
{
    const char *w = c->ws;
    if (depth > 64) return gjs_fail(c, "enum/const: value nested too deep");
    if (json_is_array(v)) {
        strbuf_printf(b, "\"[\"%s", w);
        size_t i;
        json_t *x;
        json_array_foreach(v, i, x)
        {
            if (i) strbuf_printf(b, "%s\",\"%s", w, w);
            if (value_expr(c, x, b, depth + 1)) return -1;
        }
        strbuf_printf(b, "%s\"]\"", json_array_size(v) ? w : "");
        return 0;
    }
    if (json_is_object(v)) {
        strbuf_printf(b, "\"{\"%s", w);
        const char *k;
        json_t *x;
        bool first = true;
        json_object_foreach(v, k, x)
        {
            if (!first) strbuf_printf(b, "%s\",\"%s", w, w);
            first = false;
            char *e = json_enc(k);
            strbuf lit = {0};
            strbuf_printf(&lit, "\"%s\"", e ? e : "");
            free(e);
            gjs_put_lit(b, lit.p, lit.len);
            free(lit.p);
            strbuf_printf(b, "%s\":\"%s", w, w);
            if (value_expr(c, x, b, depth + 1)) return -1;
        }
        strbuf_printf(b, "%s\"}\"", json_object_size(v) ? w : "");
        return 0;
    }
    if (json_is_number(v)) {
        double x = json_number_value(v);
        char t[64];
        if (json_is_integer(v)) snprintf(t, sizeof t, "%lld", (long long)json_integer_value(v));
        else if (x == (double)(long long)x && x > -1e15 && x < 1e15) snprintf(t, sizeof t, "%lld", (long long)x);
        else
            for (int p = 1; p <= 17; p++) {
                snprintf(t, sizeof t, "%.*g", p, x);
                if (strtod(t, NULL) == x) break;
            }
        strbuf_puts(b, "(");
        gjs_put_lit(b, t, strlen(t));
        if (!strpbrk(t, "eE")) strbuf_puts(b, strchr(t, '.') ? " \"0\"*" : " (\".\" \"0\"+)?");
        strbuf_puts(b, ")");
        return 0;
    }
    char *t = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
    if (!t) return gjs_fail(c, "out of memory");
    gjs_put_lit(b, t, strlen(t));
    free(t);
    return 0;
}

const char *gjs_enum(gjs *c, json_t *vals, json_t *type)
{
    strbuf b = {0};
    size_t i;
    json_t *v;
    json_array_foreach(vals, i, v)
    {
        if (!value_has_type(v, type)) continue;
        if (b.len) strbuf_puts(&b, " | ");
        if (value_expr(c, v, &b, 0)) break;
        if (b.len > GJS_MAX_OUT) { gjs_fail(c, "enum too large"); break; }
    }
    if (c->failed) { free(b.p); return NULL; }
    if (!b.len) { free(b.p); return gjs_unsat(c, "enum/const: no value allowed by the schema"), NULL; }
    const char *r = gjs_rule(c, "enum", b.p);
    free(b.p);
    return r;
}
