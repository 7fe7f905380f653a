/* grammar_json_oneof — oneOf as a union of provably disjoint branches.
 *
 * DESIGN: oneOf means "exactly one branch", which a grammar cannot say in
 * general (it needs a complement).  But when no instance can match two
 * branches, oneOf = anyOf.  So the branches are checked pairwise for a
 * proof of disjointness:
 *   - their types cannot meet (from `type`, or from const/enum values);
 *   - both are finite value sets (const/enum) with no value in common;
 *   - both are objects and some property required by both has disjoint
 *     schemas there (the discriminator pattern: "kind": {"const": ...});
 *   - both are objects and one requires a key the other forbids
 *     (additionalProperties false without it, or the property is false).
 * Where a pair has no proof, a branch whose own keys include some that
 * every other branch forbids is narrowed to "at least one of those keys
 * present" (one variant per key): a subset of the branch, now disjoint
 * from the others.  A pair still without a proof is an error naming
 * oneOf; the result is never a grammar that accepts an instance matching
 * two branches.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "grammar/grammar_json_internal.h"

/* 1 the regex finds a match in str, 0 not, -1 PCRE2 cannot read it. */
static int re_search(const char *re, const char *str, size_t len)
{
    int ec;
    PCRE2_SIZE eo;
    pcre2_code *code = pcre2_compile((PCRE2_SPTR)re, PCRE2_ZERO_TERMINATED, PCRE2_UTF, &ec, &eo, NULL);
    if (!code) return -1;
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(code, NULL);
    int rc = md ? pcre2_match(code, (PCRE2_SPTR)str, len, 0, 0, md, NULL) : -1;
    pcre2_match_data_free(md);
    pcre2_code_free(code);
    return rc >= 0 ? 1 : rc == PCRE2_ERROR_NOMATCH ? 0 : -1;
}

/* Every value of vals is a string that string schema s rejects (its
 * pattern finds no match, or its lengths exclude it); s holds nothing
 * else that could matter. */
static bool strings_rejected(json_t *vals, json_t *s)
{
    const char *k;
    json_t *v;
    json_object_foreach(s, k, v)
    {
        if (!strcmp(k, "type") || !strcmp(k, "pattern") || !strcmp(k, "minLength") || !strcmp(k, "maxLength")) continue;
        if (!strcmp(k, "title") || !strcmp(k, "description") || !strcmp(k, "examples") || !strcmp(k, "default") || !strcmp(k, "format") || !strcmp(k, "$comment")) continue;
        return false;
    }
    json_t *pat = json_object_get(s, "pattern");
    size_t i;
    json_array_foreach(vals, i, v)
    {
        if (!json_is_string(v)) continue; /* other kinds: the type bits decide */
        bool rej = false;
        size_t n = json_string_length(v);
        json_t *mn = json_object_get(s, "minLength"), *mx = json_object_get(s, "maxLength");
        size_t cps = 0;
        for (const unsigned char *q = (const unsigned char *)json_string_value(v); *q; q++) cps += (*q & 0xC0) != 0x80;
        if (json_is_number(mn) && cps < json_number_value(mn)) rej = true;
        if (json_is_number(mx) && cps > json_number_value(mx)) rej = true;
        if (!rej && json_is_string(pat) && re_search(json_string_value(pat), json_string_value(v), n) == 0) rej = true;
        if (!rej) return false;
    }
    return true;
}

enum { T_NULL = 1, T_BOOL = 2, T_OBJ = 4, T_ARR = 8, T_STR = 16, T_INT = 32, T_FRAC = 64, T_ALL = 127 };

static int value_kind(json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return T_OBJ;
    case JSON_ARRAY: return T_ARR;
    case JSON_STRING: return T_STR;
    case JSON_INTEGER: return T_INT;
    case JSON_REAL: {
        double x = json_real_value(v);
        return x == (double)(long long)x ? T_INT : T_FRAC;
    }
    case JSON_TRUE:
    case JSON_FALSE: return T_BOOL;
    default: return T_NULL;
    }
}

static int type_bits(json_t *s)
{
    int t = T_ALL;
    json_t *ty = json_object_get(s, "type");
    if (ty) {
        static const struct { const char *n; int b; } m[] = {{"null", T_NULL}, {"boolean", T_BOOL}, {"object", T_OBJ},
                                                           {"array", T_ARR}, {"string", T_STR}, {"integer", T_INT},
                                                           {"number", T_INT | T_FRAC}};
        t = 0;
        for (size_t i = 0; i < sizeof m / sizeof m[0]; i++)
            if (gjs_type_has(ty, m[i].n)) t |= m[i].b;
    }
    json_t *cv = json_object_get(s, "const"), *e = json_object_get(s, "enum");
    if (cv) t &= value_kind(cv);
    else if (json_is_array(e)) {
        int u = 0;
        size_t i;
        json_t *v;
        json_array_foreach(e, i, v) u |= value_kind(v);
        t &= u;
    }
    return t;
}

/* JSON Schema equality: numbers by value. */
static bool same_value(json_t *a, json_t *b)
{
    if (json_is_number(a) && json_is_number(b)) return json_number_value(a) == json_number_value(b);
    return json_equal(a, b);
}

static json_t *values(json_t *s)
{
    json_t *cv = json_object_get(s, "const");
    if (cv) return json_pack("[O]", cv);
    json_t *e = json_object_get(s, "enum");
    return json_is_array(e) ? json_incref(e) : NULL;
}

static bool in_req(json_t *s, const char *k)
{
    json_t *r = json_object_get(s, "required");
    size_t i;
    json_t *v;
    json_array_foreach(r, i, v) if (json_is_string(v) && !strcmp(json_string_value(v), k)) return true;
    return false;
}

/* s rejects every object holding key k. */
static bool forbids(gjs *c, json_t *s, const char *k)
{
    json_t *props = json_object_get(s, "properties");
    json_t *p = json_is_object(props) ? json_object_get(props, k) : NULL;
    if (p) return json_is_false(p);
    if (json_object_get(s, "patternProperties")) return false;
    json_t *ap = json_object_get(s, "additionalProperties");
    if (!ap) ap = json_object_get(s, "unevaluatedProperties");
    return json_is_false(ap) || (!ap && c->o && c->o->strict);
}

static bool disjoint(gjs *c, json_t *a, json_t *b, int depth)
{
    if (depth > 8 || !json_is_object(a) || !json_is_object(b)) return false;
    if (json_object_get(a, "anyOf") || json_object_get(a, "oneOf") || json_object_get(b, "anyOf") || json_object_get(b, "oneOf"))
        return (type_bits(a) & type_bits(b)) == 0;
    int ta = type_bits(a), tb = type_bits(b);
    if ((ta & tb) == 0) return true;
    json_t *va = values(a), *vb = values(b);
    bool d = false;
    if (va && vb) {
        d = true;
        size_t i, j;
        json_t *x, *y;
        json_array_foreach(va, i, x) json_array_foreach(vb, j, y) if (same_value(x, y)) d = false;
    }
    if (!d && va && !vb && (tb & ~T_STR) == 0 && strings_rejected(va, b)) d = true;
    if (!d && vb && !va && (ta & ~T_STR) == 0 && strings_rejected(vb, a)) d = true;
    json_decref(va), json_decref(vb);
    if (d) return true;
    if ((ta & tb) != T_OBJ) return false;
    json_t *req = json_object_get(a, "required"), *pa = json_object_get(a, "properties"), *pb = json_object_get(b, "properties");
    size_t i;
    json_t *v;
    json_array_foreach(req, i, v)
    {
        if (!json_is_string(v)) continue;
        const char *k = json_string_value(v);
        if (forbids(c, b, k)) return true;
        json_t *x = json_is_object(pa) ? json_object_get(pa, k) : NULL, *y = json_is_object(pb) ? json_object_get(pb, k) : NULL;
        if (x && y && in_req(b, k)) {
            json_t *fx = gjs_flatten(c, x, 0), *fy = fx ? gjs_flatten(c, y, 0) : NULL;
            bool dd = fx && fy && disjoint(c, fx, fy, depth + 1);
            json_decref(fx), json_decref(fy);
            if (c->failed) return false;
            if (dd) return true;
        }
    }
    json_array_foreach(json_object_get(b, "required"), i, v) if (json_is_string(v) && forbids(c, a, json_string_value(v))) return true;
    return false;
}

/* d[i * n + j]: what is generated for branch i can never match the
 * original branch j (directional: narrowing i proves i -> j only; an
 * instance must match exactly one of the original branches). */
json_t *gjs_oneof_disjoint(gjs *c, json_t *alts)
{
    size_t n = json_array_size(alts);
    if (n > 64) return gjs_fail(c, "oneOf with more than 64 branches is not supported"), NULL;
    json_t *out = json_array(); /* per branch: an array of its generated variants */
    bool *d = calloc(n * n + 1, sizeof *d);
    if (!d) { json_decref(out); return gjs_fail(c, "out of memory"), NULL; }
    for (size_t i = 0; i < n; i++) {
        json_array_append_new(out, json_pack("[O]", json_array_get(alts, i)));
        for (size_t j = i + 1; j < n; j++) {
            d[i * n + j] = d[j * n + i] = disjoint(c, json_array_get(alts, i), json_array_get(alts, j), 0);
            if (c->failed) { free(d); json_decref(out); return NULL; }
        }
    }
    for (size_t i = 0; i < n; i++) {
        json_t *a = json_array_get(alts, i);
        bool all = true;
        for (size_t j = 0; j < n; j++)
            if (j != i && !d[i * n + j]) all = false;
        json_t *props = json_object_get(a, "properties");
        if (all || !json_is_object(props) || !(type_bits(a) & T_OBJ) || (type_bits(a) & ~T_OBJ)) continue;
        /* keys of a that every other branch forbids: require one of them */
        json_t *u = json_array();
        const char *k;
        json_t *v;
        json_object_foreach(props, k, v)
        {
            if (json_is_false(v)) continue;
            bool every = true;
            for (size_t j = 0; j < n && every; j++)
                if (j != i && !forbids(c, json_array_get(alts, j), k)) every = false;
            if (every) json_array_append_new(u, json_string(k));
        }
        if (json_array_size(u) > 0 && json_array_size(u) <= 16) {
            json_t *vars = json_array();
            size_t q;
            json_array_foreach(u, q, v)
            {
                json_t *x = json_deep_copy(a), *r = json_object_get(x, "required");
                if (!json_is_array(r)) json_object_set_new(x, "required", r = json_array());
                json_array_append(r, v);
                json_array_append_new(vars, x);
            }
            json_array_set_new(out, i, vars);
            for (size_t j = 0; j < n; j++) d[i * n + j] = true;
        }
        json_decref(u);
    }
    /* object branches still without a proof against j: give up a key j
     * requires (properties.k = false), so no generated instance meets j */
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++) {
            if (i == j || d[i * n + j]) continue;
            json_t *vars = json_array_get(out, i), *b = json_array_get(alts, j);
            if (json_array_size(vars) != 1 || !(type_bits(b) & T_OBJ)) continue;
            json_t *a = json_array_get(vars, 0);
            if (!(type_bits(a) & T_OBJ)) continue;
            const char *kb = NULL;
            size_t q;
            json_t *v;
            json_array_foreach(json_object_get(b, "required"), q, v) if (json_is_string(v) && !in_req(a, json_string_value(v)) && !kb) kb = json_string_value(v);
            if (!kb) continue;
            json_t *na = json_deep_copy(a), *pr = json_object_get(na, "properties");
            if (!json_is_object(pr)) json_object_set_new(na, "properties", pr = json_object());
            json_object_set_new(pr, kb, json_false());
            /* and only objects: a non-object meets every required-only branch */
            json_object_set_new(na, "type", json_string("object"));
            json_array_set_new(vars, 0, na);
            d[i * n + j] = true;
        }
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++)
            if (i != j && !d[i * n + j]) {
                free(d);
                json_decref(out);
                return gjs_fail(c, "'oneOf' branches %zu and %zu may both match (not supported)", i < j ? i : j, i < j ? j : i), NULL;
            }
    free(d);
    json_t *flat = json_array();
    size_t i;
    json_t *vars;
    json_array_foreach(out, i, vars)
    {
        size_t q;
        json_t *v;
        json_array_foreach(vars, q, v) json_array_append_new(flat, json_pack("[iO]", (json_int_t)i, v));
    }
    json_decref(out);
    return flat;
}
