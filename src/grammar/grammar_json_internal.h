/* grammar_json_internal — what the parts of the JSON Schema translator
 * (grammar_json_schema.c: schemas, objects, arrays, combinators, $ref;
 * grammar_json_num.c: integer/decimal ranges; grammar_json_str.c: string
 * formats, lengths and JSON-string-aware regular expressions) share.
 * Private to src/grammar/grammar_json_*.c. */
#ifndef SGLC_GRAMMAR_GRAMMAR_JSON_INTERNAL_H
#define SGLC_GRAMMAR_GRAMMAR_JSON_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "grammar/grammar.h"
#include "util/strbuf.h"

/* Bounds on the work one schema may cause (the fuzz target checks them). */
#define GJS_MAX_DEPTH 128          /* nested subschemas being generated at once */
#define GJS_MAX_OUT (16u << 20)    /* bytes of EBNF text */
#define GJS_MAX_REPEAT 100000      /* {m,n} counts (minLength, maxItems ...) */
#define GJS_MAX_DIGITS 400         /* digits of a numeric bound */
/* Key marking a merged schema that matches nothing (allOf with false). */
#define GJS_FALSE_KEY "\x01" "false"
/* Key of an internal string schema: a string that is none of the listed
 * ones (an array; from `not` of an enum, grammar_json_not.c). */
#define GJS_NOTIN_KEY "\x01" "notin"
/* Key of an internal number schema: a number that is not an integer
 * (from `not` of type integer; generated without an exponent, a subset). */
#define GJS_NONINT_KEY "\x01" "nonint"

/* One translation.  Owns bodies/refs/rules; borrows root and opts. */
typedef struct gjs {
    json_t *root;                  /* borrowed: the parsed schema */
    const grammar_json_opts *o;    /* borrowed */
    strbuf rules;                  /* the emitted "name ::= body\n" lines */
    json_t *bodies;                /* owned: body text -> rule name (dedupe) */
    json_t *refs;                  /* owned: resolved $ref key -> rule name */
    json_t *keep;                  /* owned: array of synthesized schemas kept alive */
    int nrule;                     /* rule name counter */
    int depth;                     /* current generation depth */
    char *err;                     /* borrowed: caller's buffer */
    size_t errlen;
    bool failed;                   /* an error was recorded (first one wins) */
    bool unsat;                    /* ... and it says "matches nothing" (recoverable) */
    json_t *log_bodies, *log_refs; /* owned: keys added, in order (rollback) */
    const char *ws;                /* " ws " or " " between tokens */
} gjs;

/* Record the first error (printf-style); returns -1. */
int gjs_fail(gjs *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The same for a subschema that matches nothing: the caller may drop it
 * (an optional property, an anyOf branch) and roll back. */
int gjs_unsat(gjs *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Emit `name ::= body` once per distinct body; returns the rule's name
 * (owned by c, stable for the translation) or NULL on error.  hint is a
 * short [a-z] prefix for the name. */
const char *gjs_rule(gjs *c, const char *hint, const char *body);
/* Append s (len bytes) as a GBNF string literal "..." to b. */
void gjs_put_lit(strbuf *b, const char *s, size_t len);
/* The shared basic rules (emitted on first use): any JSON value, string,
 * number, integer, JSON-string character, whitespace. */
const char *gjs_basic(gjs *c, const char *which);

/* A count keyword (minItems, maxProperties ...) as an integer clamped to
 * +-1e15 (values past it mean "unbounded" to every caller); def when v is
 * not a number. */
static inline long long gjs_count(json_t *v, long long def)
{
    if (!json_is_number(v)) return def;
    double x = json_number_value(v);
    return x > 1e15 ? (long long)1e15 : x < -1e15 ? (long long)-1e15 : (long long)x;
}

/* ---- the dispatch (grammar_json_schema.c) ---- */
/* The rule for any subschema s (NULL on error). */
const char *gjs_gen(gjs *c, json_t *s);
/* gjs_gen, but a subschema that matches nothing is rolled back: NULL with
 * *dropped set and no error, so the caller can leave it out. */
const char *gjs_try_gen(gjs *c, json_t *s, bool *dropped);
/* s holds no keyword that constrains (true, {}, annotations only). */
bool gjs_is_trivial(json_t *s);
/* s with its top-level $ref and allOf merged in (new reference). */
json_t *gjs_flatten(gjs *c, json_t *s, int depth);
/* type (a string or an array of them) names t. */
bool gjs_type_has(json_t *type, const char *t);

/* ---- objects, arrays, enum (grammar_json_obj.c) ---- */
const char *gjs_object(gjs *c, json_t *s);
const char *gjs_array(gjs *c, json_t *s);
/* The alternatives of vals allowed by type (NULL = any). */
const char *gjs_enum(gjs *c, json_t *vals, json_t *type);

/* A JSON string (quotes included) that is none of names (an array of
 * strings), in one canonical encoding: a rule name. */
const char *gjs_string_not_in(gjs *c, json_t *names);

/* ---- not, if/then/else (grammar_json_not.c) ---- */
/* not n as a schema without `not` (new reference: true / false / an
 * object), or NULL with an error naming the keyword it cannot negate. */
json_t *gjs_negate(gjs *c, json_t *n, int depth);
/* s with its `not` and `if`/`then`/`else` rewritten as allOf / anyOf
 * (new reference), or NULL with the error. */
json_t *gjs_rewrite_logic(gjs *c, json_t *s);

/* ---- oneOf (grammar_json_oneof.c) ---- */
/* oneOf's branches (an array of schemas) made provably pairwise disjoint:
 * a new array of [branch index, schema], or NULL with an error naming
 * oneOf when two branches may both match. */
json_t *gjs_oneof_disjoint(gjs *c, json_t *alts);

/* ---- numbers (grammar_json_num.c) ---- */
/* The rule for an integer/number schema s (its bounds, multipleOf), NULL
 * on error. is_int selects integer. */
const char *gjs_number(gjs *c, json_t *s, bool is_int);

/* ---- strings (grammar_json_str.c) ---- */
/* The rule for a string schema s (format, pattern, minLength/maxLength). */
const char *gjs_string(gjs *c, json_t *s);
/* A string whose decoded value matches the ECMA-262 regex re (searched,
 * not anchored, as JSON Schema's pattern), quotes included: a rule name. */
const char *gjs_pattern_string(gjs *c, const char *re);

/* The regex re (ECMA-262 syntax as JSON Schema uses it) as a GBNF
 * expression appended to out: over JSON string content (escaping " \\
 * and controls) when json, else over raw text (whitespace_pattern).  The
 * whole text must match (anchors ^ $ at the ends are accepted).  0/-1. */
int gjs_regex_ebnf(gjs *c, const char *re, bool json, strbuf *out);

#endif
