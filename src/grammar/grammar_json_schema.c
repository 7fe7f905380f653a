/* grammar_json_schema — JSON Schema -> GBNF-style EBNF (grammar_schema_to_ebnf).
 *
 * DESIGN: the schema is parsed with jansson and walked once; every
 * subschema becomes one rule, and rules with the same body are emitted
 * once (so repeated shapes cost nothing).  A $ref gets one rule per
 * target, named before its body is generated, which is what makes
 * recursive definitions work.  Keywords are handled as follows (the list
 * with reasons is docs/notes/schema.md):
 *   - types: no `type` means every type, each with the keywords of its
 *     kind (the spec's reading: `properties` alone does not force an
 *     object); `type` arrays are alternatives.
 *   - objects: known properties in schema order, required ones present,
 *     optional ones skippable; then additional members (any key that is
 *     not a known name — exact, via a trie of the known names over a
 *     canonical encoding — or keys matching patternProperties).
 *   - allOf is merged into one schema (properties, required, bounds,
 *     types intersected ...); anyOf / oneOf with sibling keywords are
 *     distributed over the alternatives.  oneOf is generated as anyOf.
 *   - the numeric and string parts live in grammar_json_num.c and
 *     grammar_json_str.c.
 * Keywords that change the language and cannot be expressed are an error
 * naming the keyword; unknown and annotation keywords are ignored.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar_json_internal.h"

int gjs_fail(gjs *c, const char *fmt, ...)
{
    if (!c->failed && c->err && c->errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->err, c->errlen, fmt, ap);
        va_end(ap);
    }
    if (!c->failed) c->unsat = false;
    c->failed = true;
    return -1;
}

int gjs_unsat(gjs *c, const char *fmt, ...)
{
    if (c->failed) return -1;
    if (c->err && c->errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->err, c->errlen, fmt, ap);
        va_end(ap);
    }
    c->failed = c->unsat = true;
    return -1;
}

/* A point to roll the output back to. */
typedef struct snap {
    size_t rules_len, nb, nr;
} snap;

static snap take_snap(gjs *c)
{
    return (snap){c->rules.len, json_array_size(c->log_bodies), json_array_size(c->log_refs)};
}

/* Undo everything emitted since s and clear the (unsat) error. */
static void rollback(gjs *c, snap s)
{
    while (json_array_size(c->log_bodies) > s.nb) {
        size_t i = json_array_size(c->log_bodies) - 1;
        json_object_del(c->bodies, json_string_value(json_array_get(c->log_bodies, i)));
        json_array_remove(c->log_bodies, i);
    }
    while (json_array_size(c->log_refs) > s.nr) {
        size_t i = json_array_size(c->log_refs) - 1;
        json_object_del(c->refs, json_string_value(json_array_get(c->log_refs, i)));
        json_array_remove(c->log_refs, i);
    }
    c->rules.len = s.rules_len;
    if (c->rules.p) c->rules.p[c->rules.len] = 0;
    c->failed = c->unsat = false;
    if (c->err && c->errlen) c->err[0] = 0;
}

void gjs_put_lit(strbuf *b, const char *s, size_t len)
{
    strbuf_puts(b, "\"");
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '"' || ch == '\\') strbuf_printf(b, "\\%c", ch);
        else if (ch == '\n') strbuf_puts(b, "\\n");
        else if (ch == '\t') strbuf_puts(b, "\\t");
        else if (ch == '\r') strbuf_puts(b, "\\r");
        else if (ch < 0x20 || ch == 0x7f) strbuf_printf(b, "\\x%02X", ch);
        else strbuf_put(b, (const char *)&ch, 1);
    }
    strbuf_puts(b, "\"");
}

static void emit(gjs *c, const char *name, const char *body)
{
    strbuf_printf(&c->rules, "%s ::= %s\n", name, body);
    if (c->rules.len > GJS_MAX_OUT) gjs_fail(c, "grammar too large (over %u bytes)", GJS_MAX_OUT);
}

const char *gjs_rule(gjs *c, const char *hint, const char *body)
{
    if (c->failed) return NULL;
    if (!body) return gjs_fail(c, "out of memory"), NULL;
    json_t *have = json_object_get(c->bodies, body);
    if (have) return json_string_value(have);
    char name[48];
    snprintf(name, sizeof name, "%s%d", hint, c->nrule++);
    json_t *n = json_string(name);
    if (!n || json_object_set_new(c->bodies, body, n)) return gjs_fail(c, "out of memory"), NULL;
    json_array_append_new(c->log_bodies, json_string(body));
    emit(c, name, body);
    return c->failed ? NULL : json_string_value(n);
}

/* A fresh rule name whose body the caller emits later (recursion). */
static const char *new_name(gjs *c, const char *hint)
{
    char name[48];
    snprintf(name, sizeof name, "%s%d", hint, c->nrule++);
    json_t *n = json_string(name);
    if (!n || json_array_append_new(c->keep, n)) return gjs_fail(c, "out of memory"), NULL;
    return json_string_value(n);
}

/* The basic rules, each emitted on its first use. */
const char *gjs_basic(gjs *c, const char *which)
{
    static const char *const names[] = {"value", "object", "array", "string", "jchar", "number", "integer", "boolean", "null", NULL};
    int k = 0;
    while (names[k] && strcmp(names[k], which)) k++;
    if (!names[k]) return gjs_fail(c, "internal: no basic rule %s", which), NULL;
    char key[32];
    snprintf(key, sizeof key, "\x01%s", which);
    if (json_object_get(c->bodies, key)) return names[k];
    json_object_set_new(c->bodies, key, json_true());
    json_array_append_new(c->log_bodies, json_string(key));
    const char *w = c->ws;
    strbuf b = {0};
    switch (k) {
    case 0:
        gjs_basic(c, "object"), gjs_basic(c, "array"), gjs_basic(c, "string"), gjs_basic(c, "number");
        strbuf_puts(&b, "object | array | string | number | \"true\" | \"false\" | \"null\"");
        break;
    case 1:
        gjs_basic(c, "string"), gjs_basic(c, "value");
        strbuf_printf(&b, "\"{\"%s\"}\" | \"{\"%sstring%s\":\"%svalue (%s\",\"%sstring%s\":\"%svalue)*%s\"}\"", w, w, w, w, w, w, w, w, w);
        break;
    case 2:
        gjs_basic(c, "value");
        strbuf_printf(&b, "\"[\"%s\"]\" | \"[\"%svalue (%s\",\"%svalue)*%s\"]\"", w, w, w, w, w);
        break;
    case 3:
        gjs_basic(c, "jchar");
        strbuf_puts(&b, "\"\\\"\" jchar* \"\\\"\"");
        break;
    case 4:
        /* one character of a JSON string; \u escapes of lone surrogates are
         * left out so every unit is one code point (minLength counts them) */
        strbuf_puts(&b, "[^\"\\\\\\x00-\\x1F] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" ([0-9a-cA-CefEF] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2}))");
        break;
    case 5:
        strbuf_puts(&b, "\"-\"? (\"0\" | [1-9] [0-9]*) (\".\" [0-9]+)? ([eE] [-+]? [0-9]+)?");
        break;
    case 6:
        strbuf_puts(&b, "\"-\"? (\"0\" | [1-9] [0-9]*)");
        break;
    case 7:
        strbuf_puts(&b, "\"true\" | \"false\"");
        break;
    case 8:
        strbuf_puts(&b, "\"null\"");
        break;
    }
    if (b.oom) gjs_fail(c, "out of memory");
    else emit(c, names[k], b.p);
    free(b.p);
    return c->failed ? NULL : names[k];
}


/* gen, but a subschema that matches nothing is rolled back and reported
 * in *dropped (NULL returned, no error) so the caller can leave it out. */
const char *gjs_try_gen(gjs *c, json_t *s, bool *dropped)
{
    snap sn = take_snap(c);
    const char *r = gjs_gen(c, s);
    *dropped = false;
    if (!r && c->unsat) rollback(c, sn), *dropped = true;
    return r;
}

/* ---- keywords ---------------------------------------------------------- */

/* Keywords that only annotate (ignored); anything not listed here and not
 * handled below is unknown and ignored as the spec says. */
static bool is_annotation(const char *k)
{
    static const char *const ann[] = {"title", "description", "examples", "example", "default", "$schema", "$id", "id",
                                      "$comment", "deprecated", "readOnly", "writeOnly", "$defs", "definitions",
                                      "$anchor", "$vocabulary", "contentMediaType", "contentEncoding", "contentSchema",
                                      "$dynamicAnchor", "$recursiveAnchor", NULL};
    for (int i = 0; ann[i]; i++)
        if (!strcmp(k, ann[i])) return true;
    return false;
}

/* Keywords this translator reads (so a schema with none of them is `{}`). */
static bool is_language(const char *k)
{
    static const char *const kw[] = {
        "type", "enum", "const", "properties", "required", "additionalProperties", "patternProperties",
        "propertyNames", "minProperties", "maxProperties", "items", "prefixItems", "additionalItems", "minItems",
        "maxItems", "uniqueItems", "contains", "minContains", "maxContains", "anyOf", "oneOf", "allOf", "not", "$ref",
        "pattern", "format", "minLength", "maxLength", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
        "multipleOf", "if", "then", "else", "dependentSchemas", "dependentRequired", "dependencies",
        "unevaluatedProperties", "unevaluatedItems", "$dynamicRef", "$recursiveRef", GJS_FALSE_KEY, GJS_NOTIN_KEY, GJS_NONINT_KEY, NULL};
    for (int i = 0; kw[i]; i++)
        if (!strcmp(k, kw[i])) return true;
    return false;
}

bool gjs_is_trivial(json_t *s)
{
    if (json_is_true(s)) return true;
    if (!json_is_object(s)) return false;
    const char *k;
    json_t *v;
    json_object_foreach(s, k, v) if (is_language(k)) return false;
    return true;
}

/* ---- $ref -------------------------------------------------------------- */

static json_t *find_anchor(json_t *s, const char *name, const char *base, int depth)
{
    if (depth > 200) return NULL;
    if (json_is_object(s)) {
        json_t *a = json_object_get(s, "$anchor");
        if (json_is_string(a) && !strcmp(json_string_value(a), name)) return s;
        const char *ids[2] = {"$id", "id"};
        for (int i = 0; i < 2; i++) {
            json_t *id = json_object_get(s, ids[i]);
            if (!json_is_string(id)) continue;
            const char *t = json_string_value(id);
            if (name && t[0] == '#' && !strcmp(t + 1, name)) return s;
            if (base && *base) {
                size_t lt = strlen(t), lb = strlen(base);
                if (!strcmp(t, base) || (lt > lb && t[lt - lb - 1] == '/' && !strcmp(t + lt - lb, base)) ||
                    (lb > lt && base[lb - lt - 1] == '/' && !strcmp(base + lb - lt, t)))
                    return s;
            }
        }
        const char *k;
        json_t *v;
        json_object_foreach(s, k, v)
        {
            if (!strcmp(k, "enum") || !strcmp(k, "const")) continue;
            json_t *r = find_anchor(v, name, base, depth + 1);
            if (r) return r;
        }
    } else if (json_is_array(s)) {
        size_t i;
        json_t *v;
        json_array_foreach(s, i, v)
        {
            json_t *r = find_anchor(v, name, base, depth + 1);
            if (r) return r;
        }
    }
    return NULL;
}

static int hexv(int ch)
{
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
    return -1;
}

/* Resolve a $ref against the root: "#", "#/json/pointer" (~0 ~1 and
 * %-escapes), "#anchor", and a base that names the root's or an
 * embedded schema's $id.  Other documents are an error. */
static json_t *resolve(gjs *c, const char *ref)
{
    const char *hash = strchr(ref, '#');
    size_t nb = hash ? (size_t)(hash - ref) : strlen(ref);
    const char *frag = hash ? hash + 1 : "";
    json_t *doc = c->root;
    if (nb > 0) {
        char base[512];
        if (nb >= sizeof base) return gjs_fail(c, "$ref %.60s: too long", ref), NULL;
        memcpy(base, ref, nb);
        base[nb] = 0;
        doc = find_anchor(c->root, NULL, base, 0);
        if (!doc) return gjs_fail(c, "$ref %.100s: remote references are not supported", ref), NULL;
    }
    if (*frag && *frag != '/') {
        json_t *t = find_anchor(doc, frag, NULL, 0);
        if (!t) return gjs_fail(c, "$ref %.100s: no such anchor", ref), NULL;
        return t;
    }
    json_t *cur = doc;
    const char *p = frag;
    while (*p == '/') {
        p++;
        char tok[512];
        size_t n = 0;
        while (*p && *p != '/' && n < sizeof tok - 1) {
            int ch = (unsigned char)*p++;
            if (ch == '%' && hexv(p[0]) >= 0 && hexv(p[1]) >= 0) ch = hexv(p[0]) * 16 + hexv(p[1]), p += 2;
            if (ch == '~' && *p == '0') ch = '~', p++;
            else if (ch == '~' && *p == '1') ch = '/', p++;
            tok[n++] = (char)ch;
        }
        tok[n] = 0;
        if (json_is_object(cur)) cur = json_object_get(cur, tok);
        else if (json_is_array(cur)) {
            char *end;
            long i = strtol(tok, &end, 10);
            cur = (*end || n == 0) ? NULL : json_array_get(cur, (size_t)i);
        } else cur = NULL;
        if (!cur) return gjs_fail(c, "$ref %.100s: target not found", ref), NULL;
    }
    return cur;
}

static const char *gen_ref(gjs *c, const char *ref)
{
    json_t *t = resolve(c, ref);
    /* follow chains of bare $refs, refusing a cycle that consumes nothing */
    for (int hops = 0; t && json_is_object(t) && json_object_size(t) >= 1; hops++) {
        json_t *r = json_object_get(t, "$ref");
        if (!json_is_string(r)) break;
        bool only = true;
        const char *k;
        json_t *v;
        json_object_foreach(t, k, v) if (strcmp(k, "$ref") && is_language(k)) only = false;
        if (!only) break;
        if (hops > 64) return gjs_fail(c, "$ref %.100s: a cycle of references", ref), NULL;
        t = resolve(c, json_string_value(r));
    }
    if (!t) return NULL;
    char key[32];
    snprintf(key, sizeof key, "%p", (void *)t);
    json_t *have = json_object_get(c->refs, key);
    if (have) return json_string_value(have);
    const char *name = new_name(c, "def");
    if (!name) return NULL;
    json_object_set_new(c->refs, key, json_string(name));
    json_array_append_new(c->log_refs, json_string(key));
    const char *body = gjs_gen(c, t);
    if (!body) return NULL;
    emit(c, name, body);
    return c->failed ? NULL : name;
}

/* ---- allOf: merging ---------------------------------------------------- */

static json_t *merge(gjs *c, json_t *a, json_t *b, int depth);

/* A schema with its top-level $ref and allOf folded in (a new reference). */
json_t *gjs_flatten(gjs *c, json_t *s, int depth)
{
    if (depth > 32) return gjs_fail(c, "allOf/$ref: nested too deep (recursive allOf?)"), NULL;
    if (json_is_true(s)) return json_object();
    if (json_is_false(s)) return json_pack("{s:b}", GJS_FALSE_KEY, 1);
    if (!json_is_object(s)) return gjs_fail(c, "schema is not an object or boolean"), NULL;
    json_t *r = json_copy(s);
    json_t *ref = json_object_get(s, "$ref");
    if (json_is_string(ref)) {
        json_t *t = resolve(c, json_string_value(ref));
        json_object_del(r, "$ref");
        if (!t) { json_decref(r); return NULL; }
        json_t *m = merge(c, r, t, depth + 1);
        json_decref(r);
        r = m;
        if (!r) return NULL;
    }
    json_t *all = json_object_get(r, "allOf");
    if (json_is_array(all)) {
        json_incref(all);
        json_object_del(r, "allOf");
        size_t i;
        json_t *v;
        json_array_foreach(all, i, v)
        {
            json_t *m = merge(c, r, v, depth + 1);
            json_decref(r);
            r = m;
            if (!r) break;
        }
        json_decref(all);
    }
    return r;
}

static json_t *all_of2(json_t *x, json_t *y)
{
    return json_pack("{s:[OO]}", "allOf", x, y);
}

bool gjs_type_has(json_t *t, const char *name)
{
    if (json_is_string(t)) return !strcmp(json_string_value(t), name);
    size_t i;
    json_t *v;
    json_array_foreach(t, i, v) if (json_is_string(v) && !strcmp(json_string_value(v), name)) return true;
    return false;
}

static json_t *type_meet(json_t *a, json_t *b)
{
    static const char *const all[] = {"null", "boolean", "object", "array", "number", "string", "integer", NULL};
    json_t *r = json_array();
    for (int i = 0; all[i]; i++) {
        bool in_a = gjs_type_has(a, all[i]) || (!strcmp(all[i], "integer") && gjs_type_has(a, "number"));
        bool in_b = gjs_type_has(b, all[i]) || (!strcmp(all[i], "integer") && gjs_type_has(b, "number"));
        if (!strcmp(all[i], "integer") && gjs_type_has(a, "number") && gjs_type_has(b, "number")) continue;
        if (in_a && in_b) json_array_append_new(r, json_string(all[i]));
    }
    return r;
}

/* The schema a key's value must meet in branch x when x does not list
 * it: NULL = anything, false schema = not allowed. */
static json_t *extra_schema(json_t *x, const char *key)
{
    json_t *props = json_object_get(x, "properties");
    if (json_is_object(props) && json_object_get(props, key)) return NULL;
    json_t *ap = json_object_get(x, "additionalProperties");
    if (!ap || json_is_true(ap) || json_object_get(x, "patternProperties")) return NULL;
    return ap;
}

/* Merge two schemas into one meeting both (allOf).  New reference. */
static json_t *merge(gjs *c, json_t *a0, json_t *b0, int depth)
{
    json_t *a = gjs_flatten(c, a0, depth), *b = a ? gjs_flatten(c, b0, depth) : NULL;
    if (!a || !b) { json_decref(a); json_decref(b); return NULL; }
    if (json_object_get(a, "if") && json_object_get(b, "if")) {
        /* two if/then/else (allOf of conditionals): b's as its anyOf form (grammar_json_not.c) */
        json_t *rb = gjs_rewrite_logic(c, b);
        json_decref(b);
        b = rb ? gjs_flatten(c, rb, depth) : NULL;
        json_decref(rb);
        if (!b) { json_decref(a); return NULL; }
    }
    json_t *r = json_copy(a);
    /* properties: union; a key in both meets both; a key only one side
     * lists meets the other side's additionalProperties */
    json_t *pa = json_object_get(a, "properties"), *pb = json_object_get(b, "properties");
    if (pa || pb) {
        json_t *np = json_object();
        const char *k;
        json_t *v;
        for (int side = 0; side < 2; side++) {
            json_t *p = side ? pb : pa, *other = side ? a : b;
            if (!json_is_object(p)) continue;
            json_object_foreach(p, k, v)
            {
                json_t *cur = json_object_get(np, k);
                json_t *x = cur ? all_of2(cur, v) : json_incref(v);
                json_t *e = cur ? NULL : extra_schema(other, k);
                if (e) {
                    json_t *y = all_of2(x, e);
                    json_decref(x);
                    x = y;
                }
                json_object_set_new(np, k, x);
            }
        }
        json_object_set_new(r, "properties", np);
    }
    const char *k;
    json_t *v;
    json_object_foreach(b, k, v)
    {
        if (!strcmp(k, "properties")) continue;
        json_t *cur = json_object_get(r, k);
        if (!cur || is_annotation(k) || !is_language(k)) {
            if (!cur) json_object_set(r, k, v);
            continue;
        }
        if (json_equal(cur, v)) continue;
        if (!strcmp(k, "type")) {
            json_object_set_new(r, k, type_meet(cur, v));
        } else if (!strcmp(k, "required")) {
            json_t *u = json_copy(cur);
            size_t i;
            json_t *x;
            json_array_foreach(v, i, x)
            {
                bool have = false;
                size_t j;
                json_t *y;
                json_array_foreach(u, j, y) if (json_equal(x, y)) have = true;
                if (!have) json_array_append(u, x);
            }
            json_object_set_new(r, k, u);
        } else if (!strcmp(k, "enum") || !strcmp(k, "const")) {
            json_t *ea = !strcmp(k, "const") ? json_pack("[O]", cur) : json_incref(cur);
            json_t *eb = !strcmp(k, "const") ? json_pack("[O]", v) : json_incref(v);
            json_t *u = json_array();
            size_t i, j;
            json_t *x, *y;
            json_array_foreach(ea, i, x) json_array_foreach(eb, j, y) if (json_equal(x, y)) json_array_append(u, x);
            json_decref(ea), json_decref(eb);
            json_object_del(r, "const");
            json_object_set_new(r, "enum", u);
        } else if ((!strncmp(k, "min", 3) || !strncmp(k, "max", 3) || !strncmp(k, "exclusive", 9)) && json_is_number(cur) &&
                   json_is_number(v)) {
            bool lower = !strncmp(k, "min", 3) || !strcmp(k, "exclusiveMinimum");
            double x = json_number_value(cur), y = json_number_value(v);
            if (lower ? y > x : y < x) json_object_set(r, k, v);
        } else if (!strcmp(k, "additionalProperties") || !strcmp(k, "items") || !strcmp(k, "additionalItems") ||
                   !strcmp(k, "propertyNames") || !strcmp(k, "unevaluatedProperties")) {
            if (json_is_array(cur) || json_is_array(v)) {
                json_decref(r), r = NULL;
                gjs_fail(c, "allOf: cannot merge two different array-form '%s'", k);
                break;
            }
            json_object_set_new(r, k, all_of2(cur, v));
        } else if (!strcmp(k, "anyOf") || !strcmp(k, "oneOf")) {
            /* both sides choose: the product of the alternatives */
            if (json_array_size(cur) * json_array_size(v) > 256) {
                json_decref(r), r = NULL;
                gjs_fail(c, "allOf: '%s' on both sides with too many alternatives", k);
                break;
            }
            json_t *u = json_array();
            size_t i, j;
            json_t *x, *y;
            json_array_foreach(cur, i, x) json_array_foreach(v, j, y) json_array_append_new(u, all_of2(x, y));
            json_object_set_new(r, k, u);
        } else if (!strcmp(k, GJS_FALSE_KEY)) {
        } else if (!strcmp(k, "not")) { /* not A and not B = not (A or B) */
            json_object_set_new(r, k, json_pack("{s:[OO]}", "anyOf", cur, v));
        } else if (!strcmp(k, GJS_NOTIN_KEY)) {
            json_t *u = json_copy(cur);
            json_array_extend(u, v);
            json_object_set_new(r, k, u);
        } else {
            json_decref(r), r = NULL;
            gjs_fail(c, "allOf: cannot merge two different '%s'", k);
            break;
        }
    }
    if (r) {
        /* a branch that forbids additional properties forbids the other
         * branch's properties it does not list: handled per key above;
         * the merged additionalProperties already meets both */
        json_t *fa = json_object_get(a, GJS_FALSE_KEY), *fb = json_object_get(b, GJS_FALSE_KEY);
        if (fa || fb) json_object_set_new(r, GJS_FALSE_KEY, json_true());
    }
    json_decref(a), json_decref(b);
    return r;
}

/* ---- one schema -------------------------------------------------------- */

static const char *gen_type(gjs *c, json_t *s, const char *t)
{
    if (json_object_get(s, GJS_NONINT_KEY) && (!strcmp(t, "number") || !strcmp(t, "integer"))) {
        /* from not {type: integer}: a fraction with a non-zero digit, no exponent (a subset) */
        if (!strcmp(t, "integer")) return gjs_unsat(c, "an integer that is not an integer"), NULL;
        static const char *const kw[] = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", NULL};
        for (int i = 0; kw[i]; i++)
            if (json_object_get(s, kw[i])) return gjs_fail(c, "'not' of type integer together with '%s' is not supported", kw[i]), NULL;
        return gjs_rule(c, "nonint", "\"-\"? (\"0\" | [1-9] [0-9]*) \".\" [0-9]* [1-9] [0-9]*");
    }
    if (!strcmp(t, "string")) return gjs_string(c, s);
    if (!strcmp(t, "integer")) return gjs_number(c, s, true);
    if (!strcmp(t, "number")) return gjs_number(c, s, false);
    if (!strcmp(t, "object")) return gjs_object(c, s);
    if (!strcmp(t, "array")) return gjs_array(c, s);
    if (!strcmp(t, "boolean")) return gjs_basic(c, "boolean");
    if (!strcmp(t, "null")) return gjs_basic(c, "null");
    return gjs_fail(c, "unknown type '%.40s'", t), NULL;
}

/* The siblings of a combinator (s without key), or NULL when they hold no
 * language keyword. */
static json_t *siblings(json_t *s, const char *key)
{
    const char *k;
    json_t *v;
    bool any = false;
    json_object_foreach(s, k, v) if (strcmp(k, key) && is_language(k)) any = true;
    if (!any) return NULL;
    json_t *r = json_copy(s);
    json_object_del(r, key);
    return r;
}

static const char *gen_inner(gjs *c, json_t *s)
{
    if (json_is_true(s)) return gjs_basic(c, "value");
    if (json_is_false(s)) return gjs_unsat(c, "schema 'false' matches nothing"), NULL;
    if (!json_is_object(s)) return gjs_fail(c, "a schema must be an object or a boolean"), NULL;
    if (json_object_get(s, GJS_FALSE_KEY)) return gjs_unsat(c, "schema cannot be satisfied"), NULL;
    if (json_object_get(s, "$dynamicRef") || json_object_get(s, "$recursiveRef"))
        return gjs_fail(c, "'$dynamicRef'/'$recursiveRef' are not supported"), NULL;
    if (json_object_get(s, "not") || (json_object_get(s, "if") && (json_object_get(s, "then") || json_object_get(s, "else")))) {
        /* rewritten as allOf / anyOf where exact, else an error naming them (grammar_json_not.c) */
        json_t *m = gjs_rewrite_logic(c, s);
        if (!m) return NULL;
        json_array_append_new(c->keep, m);
        return gjs_gen(c, m);
    }
    json_t *ref = json_object_get(s, "$ref");
    json_t *all = json_object_get(s, "allOf");
    if (json_is_string(ref) || json_is_array(all)) {
        if (json_is_string(ref) && !all) {
            json_t *sib = siblings(s, "$ref");
            if (!sib) return gen_ref(c, json_string_value(ref));
            json_decref(sib);
        }
        json_t *m = gjs_flatten(c, s, 0);
        if (!m) return NULL;
        json_array_append_new(c->keep, m);
        return gjs_gen(c, m);
    }
    json_t *any = json_object_get(s, "anyOf"), *one = json_object_get(s, "oneOf");
    if (json_is_array(any) && json_is_array(one)) {
        /* both: one anyOf over the pairs */
        if (json_array_size(any) * json_array_size(one) > 256) return gjs_fail(c, "anyOf with oneOf: too many alternatives"), NULL;
        json_t *m = json_copy(s), *u = json_array();
        size_t i, j;
        json_t *x, *y;
        json_array_foreach(any, i, x) json_array_foreach(one, j, y) json_array_append_new(u, json_pack("{s:[OO]}", "allOf", x, y));
        json_object_del(m, "oneOf");
        json_object_set_new(m, "anyOf", u);
        json_array_append_new(c->keep, m);
        return gjs_gen(c, m);
    }
    json_t *alts = json_is_array(any) ? any : json_is_array(one) ? one : NULL;
    if (alts) {
        json_t *sib = siblings(s, alts == any ? "anyOf" : "oneOf");
        /* the branches with the siblings merged in */
        json_t *xs = json_array();
        size_t i;
        json_t *v;
        json_array_foreach(alts, i, v)
        {
            if (json_is_false(v)) continue;
            json_t *x = sib ? merge(c, sib, v, 0) : (alts == one ? gjs_flatten(c, v, 0) : json_incref(v));
            if (!x) break;
            if (json_is_object(x) && json_object_get(x, GJS_FALSE_KEY)) { json_decref(x); continue; }
            json_array_append_new(xs, x);
        }
        json_decref(sib);
        if (!c->failed && alts == one) {
            /* oneOf: only provably disjoint branches (grammar_json_oneof.c) */
            json_t *d = gjs_oneof_disjoint(c, xs);
            json_t *flat = json_array();
            json_array_foreach(d, i, v) json_array_append(flat, json_array_get(v, 1));
            json_decref(d);
            json_decref(xs);
            xs = flat;
        }
        json_array_append_new(c->keep, xs);
        strbuf b = {0};
        json_array_foreach(xs, i, v)
        {
            if (c->failed) break;
            bool dropped;
            const char *r = gjs_try_gen(c, v, &dropped);
            if (dropped) continue;
            if (!r) break;
            strbuf_printf(&b, "%s%s", b.len ? " | " : "", r);
        }
        if (c->failed) { free(b.p); return NULL; }
        if (!b.len) { free(b.p); return gjs_unsat(c, "anyOf/oneOf: no alternative can be satisfied"), NULL; }
        const char *r = gjs_rule(c, "alt", b.p);
        free(b.p);
        return r;
    }
    json_t *type = json_object_get(s, "type");
    if (type && !json_is_string(type) && !json_is_array(type)) return gjs_fail(c, "'type' must be a string or an array"), NULL;
    json_t *cv = json_object_get(s, "const");
    json_t *notin = json_object_get(s, GJS_NOTIN_KEY), *nonint = json_object_get(s, GJS_NONINT_KEY);
    if ((notin || nonint) && (cv || json_is_array(json_object_get(s, "enum")))) {
        /* values and "none of these strings": the values without them */
        json_t *m = json_copy(s), *vals = cv ? json_pack("[O]", cv) : json_copy(json_object_get(s, "enum"));
        json_t *keep = json_array();
        size_t i, j;
        json_t *v, *x;
        json_array_foreach(vals, i, v)
        {
            bool out = false;
            if (json_is_string(v) && notin) json_array_foreach(notin, j, x) if (json_equal(v, x)) out = true;
            if (nonint && (json_is_integer(v) || (json_is_real(v) && json_real_value(v) == (double)(long long)json_real_value(v))))
                out = true;
            if (!out) json_array_append(keep, v);
        }
        json_decref(vals);
        json_object_del(m, "const"), json_object_del(m, GJS_NOTIN_KEY), json_object_del(m, GJS_NONINT_KEY);
        json_object_set_new(m, "enum", keep);
        json_array_append_new(c->keep, m);
        return gjs_gen(c, m);
    }
    if (cv) {
        json_t *a = json_pack("[O]", cv);
        json_t *e = json_object_get(s, "enum");
        if (json_is_array(e)) {
            bool in = false;
            size_t i;
            json_t *v;
            json_array_foreach(e, i, v) if (json_equal(v, cv)) in = true;
            if (!in) json_array_clear(a);
        }
        const char *r = gjs_enum(c, a, type);
        json_decref(a);
        return r;
    }
    json_t *e = json_object_get(s, "enum");
    if (e) {
        if (!json_is_array(e)) return gjs_fail(c, "'enum' must be an array"), NULL;
        return gjs_enum(c, e, type);
    }
    if (gjs_is_trivial(s)) return gjs_basic(c, "value");
    static const char *const all_types[] = {"object", "array", "string", "number", "boolean", "null", NULL};
    strbuf b = {0};
    if (json_is_string(type)) {
        const char *r = gen_type(c, s, json_string_value(type));
        free(b.p);
        return r;
    }
    size_t nt = type ? json_array_size(type) : 6;
    bool has_num = type && gjs_type_has(type, "number");
    for (size_t i = 0; i < nt; i++) {
        const char *t = type ? json_string_value(json_array_get(type, i)) : all_types[i];
        if (!t) { free(b.p); return gjs_fail(c, "'type' entries must be strings"), NULL; }
        if (has_num && !strcmp(t, "integer")) continue;
        const char *r = gen_type(c, s, t);
        if (!r) { free(b.p); return NULL; }
        strbuf_printf(&b, "%s%s", b.len ? " | " : "", r);
    }
    if (!b.len) { free(b.p); return gjs_unsat(c, "'type' is empty: nothing matches"), NULL; }
    const char *r = gjs_rule(c, "any", b.p);
    free(b.p);
    return r;
}

const char *gjs_gen(gjs *c, json_t *s)
{
    if (c->failed) return NULL;
    if (c->depth >= GJS_MAX_DEPTH) return gjs_fail(c, "schema nested too deep (over %d levels)", GJS_MAX_DEPTH), NULL;
    c->depth++;
    const char *r = gen_inner(c, s);
    c->depth--;
    if (!r && !c->failed) gjs_fail(c, "out of memory");
    return r;
}

int grammar_schema_to_ebnf(const char *schema, size_t len, const grammar_json_opts *o, strbuf *out, char *err,
                           size_t errlen)
{
    gjs c = {0};
    grammar_json_opts def = {.whitespace_pattern = NULL, .any_whitespace = 1, .strict = 0};
    c.o = o ? o : &def;
    c.err = err, c.errlen = errlen;
    if (err && errlen) err[0] = 0;
    c.bodies = json_object(), c.refs = json_object(), c.keep = json_array();
    c.log_bodies = json_array(), c.log_refs = json_array();
    json_t *root = NULL;
    if (schema) {
        json_error_t je;
        root = json_loadb(schema, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
        /* integers past int64 (9223372036854775808 as a bound): read every
         * number as a double instead */
        if (!root && strstr(je.text, "too big")) root = json_loadb(schema, len, JSON_DECODE_ANY | JSON_ALLOW_NUL | JSON_DECODE_INT_AS_REAL, &je);
        if (!root) {
            gjs_fail(&c, "schema is not JSON: %s (line %d, column %d)", je.text, je.line, je.column);
            goto done;
        }
    }
    c.root = root;
    if (c.o->whitespace_pattern) {
        strbuf wb = {0};
        if (gjs_regex_ebnf(&c, c.o->whitespace_pattern, false, &wb) == 0) {
            strbuf body = {0};
            strbuf_printf(&body, "%s", wb.p ? wb.p : "\"\"");
            emit(&c, "ws", body.p ? body.p : "\"\"");
            free(body.p);
        }
        free(wb.p);
        c.ws = " ws ";
    } else if (c.o->any_whitespace) {
        emit(&c, "ws", "[ \\t\\n\\r]*");
        c.ws = " ws ";
    } else {
        c.ws = " ";
    }
    const char *r = root ? gjs_gen(&c, root) : gjs_basic(&c, "object");
    if (r && !c.failed) {
        strbuf_printf(out, "root ::= %s\n", r);
        strbuf_put(out, c.rules.p ? c.rules.p : "", c.rules.len);
        if (c.rules.oom || out->oom) gjs_fail(&c, "out of memory");
    }
done:
    json_decref(root);
    json_decref(c.bodies), json_decref(c.refs), json_decref(c.keep);
    json_decref(c.log_bodies), json_decref(c.log_refs);
    free(c.rules.p);
    return c.failed ? -1 : 0;
}
