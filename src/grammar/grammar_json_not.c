/* grammar_json_not — `not` and `if`/`then`/`else` for the JSON Schema
 * translator, by rewriting them into keywords it already generates
 * (grammar_json_schema.c holds the DESIGN and the dispatch).
 *
 * DESIGN: a schema is the conjunction of its keywords, so its negation
 * is the disjunction of its keywords' negations:
 *     not S  =  anyOf [ neg(k) for each keyword group k of S ]
 * where each group's negation is exact or the whole `not` is refused with
 * an error naming the keyword (never a superset):
 *   type T             the other types ("integer" without "number": the
 *                      numbers with a non-zero fraction digit and no
 *                      exponent, GJS_NONINT_KEY: a subset)
 *   enum / const E     per type, the values not in E: null / true / false
 *                      left out, strings "none of E's strings" (GJS_NOTIN_KEY,
 *                      the key trie of objects), numbers the open intervals
 *                      between E's numbers (exclusive bounds), objects /
 *                      arrays only when E holds none of that type
 *   required R         an object without one of R (that key's property false)
 *   properties P       an object where some key of P is present and fails
 *                      its schema (neg of that schema)
 *   minLength, maxLength, minimum, maximum, exclusiveMinimum,
 *   exclusiveMaximum, minItems, maxItems
 *                      the other types, or the complementary bound
 *   anyOf [A, B ..]    allOf [neg A, neg B ..]
 *   not X              X
 *   $ref / allOf       folded first (gjs_flatten)
 * Then  S' = {allOf: [S without not, not S]}  is generated as any allOf
 * (merged).  if/then/else: {allOf: [S', anyOf [allOf [if, then],
 * allOf [neg if, else]]]}, exact (the branches are disjoint) whenever
 * neg if is. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar_json_internal.h"

static const char *const all_types[] = {"null", "boolean", "object", "array", "number", "string", NULL};

/* {type: every type but t} (t one of all_types) */
static json_t *other_types(const char *t)
{
    json_t *a = json_array();
    for (int i = 0; all_types[i]; i++)
        if (strcmp(all_types[i], t)) json_array_append_new(a, json_string(all_types[i]));
    return json_pack("{s:o}", "type", a);
}

static bool is_annotation_only(const char *k)
{
    static const char *const ann[] = {"title", "description", "examples", "example", "default", "$schema", "$id", "id",
                                      "$comment", "deprecated", "readOnly", "writeOnly", "$defs", "definitions",
                                      "$anchor", "$vocabulary", "contentMediaType", "contentEncoding", "contentSchema",
                                      "$dynamicAnchor", "$recursiveAnchor", NULL};
    for (int i = 0; ann[i]; i++)
        if (!strcmp(k, ann[i])) return true;
    return false;
}

/* neg of a bound keyword: the other types | the same type past the bound */
static json_t *neg_bound(gjs *c, const char *k, json_t *v)
{
    static const struct {
        const char *kw, *type, *neg; /* neg: the keyword of the complement */
        int shift;                   /* counts: the complement is v - 1 / v + 1 */
    } tb[] = {
        {"minLength", "string", "maxLength", -1}, {"maxLength", "string", "minLength", 1},
        {"minItems", "array", "maxItems", -1},    {"maxItems", "array", "minItems", 1},
        {"minimum", "number", "exclusiveMaximum", 0}, {"maximum", "number", "exclusiveMinimum", 0},
        {"exclusiveMinimum", "number", "maximum", 0}, {"exclusiveMaximum", "number", "minimum", 0},
    };
    for (size_t i = 0; i < sizeof tb / sizeof *tb; i++) {
        if (strcmp(tb[i].kw, k)) continue;
        if (!json_is_number(v)) return gjs_fail(c, "'not': '%s' must be a number", k), NULL;
        json_t *alt = json_array();
        json_array_append_new(alt, other_types(tb[i].type));
        if (tb[i].shift) {
            long long n = gjs_count(v, 0);
            if (n < 0) n = 0;
            long long m = n + tb[i].shift;
            if (m >= 0) json_array_append_new(alt, json_pack("{s:s,s:I}", "type", tb[i].type, tb[i].neg, (json_int_t)m));
        } else {
            json_array_append_new(alt, json_pack("{s:s,s:O}", "type", tb[i].type, tb[i].neg, v));
        }
        return json_pack("{s:o}", "anyOf", alt);
    }
    return NULL;
}

/* the values not in vals (an array), per type */
static json_t *neg_values(gjs *c, json_t *vals)
{
    bool has[6] = {0}, t = false, f = false;
    json_t *strs = json_array();
    size_t i;
    json_t *v;
    json_array_foreach(vals, i, v)
    {
        if (json_is_null(v)) has[0] = true;
        else if (json_is_true(v)) t = true;
        else if (json_is_false(v)) f = true;
        else if (json_is_object(v)) has[2] = true;
        else if (json_is_array(v)) has[3] = true;
        else if (json_is_number(v)) has[4] = true;
        else if (json_is_string(v)) json_array_append(strs, v);
    }
    const char *kind = has[2] ? "object" : has[3] ? "array" : NULL;
    if (kind) {
        json_decref(strs);
        return gjs_fail(c, "'not' of an enum/const holding %s values is not supported", kind), NULL;
    }
    /* numbers other than the listed ones: the open intervals between them (bounds are exact decimals) */
    json_t *nums = json_array();
    json_array_foreach(vals, i, v) if (json_is_number(v))
    {
        size_t j = 0;
        while (j < json_array_size(nums) && json_number_value(json_array_get(nums, j)) < json_number_value(v)) j++;
        if (j < json_array_size(nums) && json_number_value(json_array_get(nums, j)) == json_number_value(v)) continue;
        json_array_insert(nums, j, v);
    }
    if (json_array_size(nums) > 32) {
        json_decref(strs), json_decref(nums);
        return gjs_fail(c, "'not' of an enum holding more than 32 numbers is not supported"), NULL;
    }
    json_t *alt = json_array();
    size_t nn = json_array_size(nums);
    for (size_t k = 0; k <= nn && nn; k++) {
        json_t *iv = json_pack("{s:s}", "type", "number");
        if (k > 0) json_object_set(iv, "exclusiveMinimum", json_array_get(nums, k - 1));
        if (k < nn) json_object_set(iv, "exclusiveMaximum", json_array_get(nums, k));
        json_array_append_new(alt, iv);
    }
    json_decref(nums);
    if (!has[0]) json_array_append_new(alt, json_pack("{s:s}", "type", "null"));
    if (!t || !f) {
        if (!t && !f) json_array_append_new(alt, json_pack("{s:s}", "type", "boolean"));
        else json_array_append_new(alt, json_pack("{s:[b]}", "enum", !t));
    }
    json_array_append_new(alt, json_pack("{s:s}", "type", "object"));
    json_array_append_new(alt, json_pack("{s:s}", "type", "array"));
    if (!has[4]) json_array_append_new(alt, json_pack("{s:s}", "type", "number"));
    if (json_array_size(strs)) json_array_append_new(alt, json_pack("{s:s,s:o}", "type", "string", GJS_NOTIN_KEY, strs));
    else json_decref(strs), json_array_append_new(alt, json_pack("{s:s}", "type", "string"));
    return json_pack("{s:o}", "anyOf", alt);
}

json_t *gjs_negate(gjs *c, json_t *n0, int depth)
{
    if (depth > 16) return gjs_fail(c, "'not' nested too deeply"), NULL;
    if (json_is_false(n0)) return json_true();
    if (gjs_is_trivial(n0)) return json_false();
    json_t *n = gjs_flatten(c, n0, depth);
    if (!n) return NULL;
    json_t *alt = json_array(), *res = NULL;
    if (json_object_get(n, GJS_FALSE_KEY)) { /* n matches nothing */
        res = json_true();
        goto out;
    }
    const char *k;
    json_t *v;
    json_object_foreach(n, k, v)
    {
        json_t *x = NULL;
        if (is_annotation_only(k)) {
            continue;
        } else if (!strcmp(k, GJS_NOTIN_KEY)) { /* not (a string none of E): a non-string, or one of E */
            x = json_pack("{s:[o,{s:O}]}", "anyOf", other_types("string"), "enum", v);
        } else if (!strcmp(k, "type")) {
            json_t *a = json_array();
            bool num = gjs_type_has(v, "number"), integer = gjs_type_has(v, "integer");
            for (int i = 0; all_types[i]; i++)
                if (!gjs_type_has(v, all_types[i]) && !(integer && !strcmp(all_types[i], "number")))
                    json_array_append_new(a, json_string(all_types[i]));
            x = json_array_size(a) ? json_pack("{s:o}", "type", a) : (json_decref(a), json_false());
            if (integer && !num) /* the numbers that are not integers (no exponent forms: a subset) */
                x = json_pack("{s:[o,{s:s,s:b}]}", "anyOf", x, "type", "number", GJS_NONINT_KEY, 1);
        } else if (!strcmp(k, "enum") || !strcmp(k, "const")) {
            if (!strcmp(k, "enum") && !json_is_array(v)) {
                gjs_fail(c, "'enum' must be an array");
                goto out;
            }
            json_t *vals = !strcmp(k, "const") ? json_pack("[O]", v) : json_incref(v);
            x = neg_values(c, vals);
            json_decref(vals);
        } else if (!strcmp(k, "required")) {
            json_t *a = json_array();
            size_t i;
            json_t *r;
            json_array_foreach(v, i, r) if (json_is_string(r))
                json_array_append_new(a, json_pack("{s:s,s:{s:b}}", "type", "object", "properties",
                                                   json_string_value(r), 0));
            x = json_array_size(a) ? json_pack("{s:o}", "anyOf", a) : (json_decref(a), json_false());
        } else if (!strcmp(k, "properties")) {
            if (json_object_get(n, "additionalProperties") || json_object_get(n, "patternProperties")) {
                gjs_fail(c, "'not' of properties with additionalProperties/patternProperties is not supported");
                goto out;
            }
            json_t *a = json_array();
            const char *pk;
            json_t *ps;
            json_object_foreach(v, pk, ps)
            {
                json_t *np = gjs_negate(c, ps, depth + 1);
                if (!np) {
                    json_decref(a);
                    goto out;
                }
                if (json_is_false(np)) {
                    json_decref(np);
                    continue;
                }
                json_array_append_new(a, json_pack("{s:s,s:[s],s:{s:o}}", "type", "object", "required", pk,
                                                   "properties", pk, np));
            }
            x = json_array_size(a) ? json_pack("{s:o}", "anyOf", a) : (json_decref(a), json_false());
        } else if (!strcmp(k, "anyOf")) {
            if (!json_is_array(v)) {
                gjs_fail(c, "'anyOf' must be an array");
                goto out;
            }
            json_t *a = json_array();
            size_t i;
            json_t *b;
            json_array_foreach(v, i, b)
            {
                json_t *nb = gjs_negate(c, b, depth + 1);
                if (!nb) {
                    json_decref(a);
                    goto out;
                }
                json_array_append_new(a, nb);
            }
            x = json_pack("{s:o}", "allOf", a);
        } else if (!strcmp(k, "not")) {
            x = json_incref(v);
        } else if ((x = neg_bound(c, k, v))) {
        } else if (c->failed) {
            goto out;
        } else {
            gjs_fail(c, "'not' of a schema with '%.40s' is not supported", k);
            goto out;
        }
        if (!x) goto out;
        if (json_is_true(x)) { /* one keyword always fails: not S is true */
            json_decref(x);
            res = json_true();
            goto out;
        }
        if (json_is_false(x)) json_decref(x);
        else json_array_append_new(alt, x);
    }
    res = json_array_size(alt) ? json_pack("{s:O}", "anyOf", alt) : json_false();
out:
    json_decref(alt);
    json_decref(n);
    return res;
}

json_t *gjs_rewrite_logic(gjs *c, json_t *s)
{
    json_t *nt = json_object_get(s, "not"), *iff = json_object_get(s, "if");
    json_t *th = json_object_get(s, "then"), *el = json_object_get(s, "else");
    json_t *rest = json_copy(s);
    json_object_del(rest, "not"), json_object_del(rest, "if"), json_object_del(rest, "then"),
        json_object_del(rest, "else");
    json_t *all = json_array();
    json_array_append_new(all, rest);
    if (nt) {
        json_t *x = gjs_negate(c, nt, 0);
        if (!x) goto fail;
        json_array_append_new(all, x);
    }
    if (iff && (th || el)) {
        json_t *ni = gjs_negate(c, iff, 0);
        if (!ni) {
            if (c->err && c->errlen) {
                char tmp[512];
                snprintf(tmp, sizeof tmp, "'if'/'then'/'else' (as not-if): %s", c->err);
                snprintf(c->err, c->errlen, "%s", tmp);
            }
            goto fail;
        }
        json_t *a = json_pack("{s:[O,O]}", "allOf", iff, th ? th : json_true());
        json_array_append_new(all, json_pack("{s:[o,{s:[o,O]}]}", "anyOf", a, "allOf", ni, el ? el : json_true()));
    }
    return json_pack("{s:o}", "allOf", all);
fail:
    json_decref(all);
    return NULL;
}
