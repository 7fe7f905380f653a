/* template_impl — internal types of the Jinja engine: arena, values, AST.
 *
 * DESIGN: a value is an immutable tagged struct (tv) allocated from an
 * arena; lists and dicts hold pointers to values and are never changed
 * after construction (the sandbox transformers uses is immutable too), so
 * values are shared freely without reference counts.  The two mutable
 * objects are namespaces (namespace(...)) and the scope frames.  Strings
 * are UTF-8 with an explicit length.  Dicts keep insertion order (Python
 * dicts do) and are searched linearly: chat-template dicts are small.
 *
 *   arena: [chunk]->[chunk]->...   bump allocation, freed all at once
 *
 * The AST (tnode) is built by template_parse.c in the template's own arena
 * and only read by template_eval.c. */
#ifndef SGLC_TEMPLATE_IMPL_H
#define SGLC_TEMPLATE_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

/* ---- arena ---------------------------------------------------------------- */
typedef struct tarena_chunk tarena_chunk;
typedef struct tarena {
    tarena_chunk *head; /* owned list of chunks */
    size_t used;        /* bytes handed out so far (all chunks) */
    size_t cap;         /* refuse allocations beyond this many bytes */
    int failed;         /* set once an allocation was refused */
} tarena;

void tarena_init(tarena *a, size_t cap);
void tarena_free(tarena *a);
/* Zeroed memory of n bytes, or NULL (and a->failed) past the cap. */
void *tarena_alloc(tarena *a, size_t n);
char *tarena_strndup(tarena *a, const char *s, size_t n);

/* ---- growable byte buffer (malloc'd) ----------------------------------- */
typedef struct tbuf {
    char *p;      /* owned, NUL-terminated when non-NULL */
    size_t len;
    size_t cap;
    size_t limit; /* 0 = unlimited; appending beyond sets over */
    int over;     /* set when limit was hit or malloc failed */
} tbuf;

void tbuf_put(tbuf *b, const char *s, size_t n);
void tbuf_puts(tbuf *b, const char *s);
void tbuf_putc(tbuf *b, char c);
void tbuf_printf(tbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void tbuf_free(tbuf *b);

/* ---- values --------------------------------------------------------------- */
typedef enum tv_type {
    TV_UNDEF, /* Jinja Undefined; hint says what was missing */
    TV_NONE,
    TV_BOOL,
    TV_INT,
    TV_FLOAT,
    TV_STR,
    TV_LIST,  /* also tuples (is_tuple) */
    TV_DICT,
    TV_NS,    /* namespace(): a mutable dict */
    TV_FUNC,  /* callables: methods, macros, globals */
    TV_LOOP,  /* the `loop` object of a for loop */
} tv_type;

typedef struct tv tv;
struct tnode;
struct tscope;

typedef enum tfn_kind {
    TFN_METHOD,  /* a method of `self` named `name` (str/dict/list methods) */
    TFN_GLOBAL,  /* a global function named `name` */
    TFN_MACRO,   /* a macro: node + closure scope */
    TFN_CALLER,  /* caller() inside {% call %} */
} tfn_kind;

typedef struct tloop {
    int64_t index0;
    int64_t length;
    tv **items;           /* (length) the iterated items, for previtem/nextitem */
    int depth;            /* 1 for the outermost level of a recursive loop */
    const struct tnode *node;  /* the for statement (recursive loops call it again) */
    struct tscope *scope;      /* the scope the for statement runs in */
    tv *changed_last;     /* loop.changed(): the previous arguments, NULL at first */
} tloop;

struct tv {
    uint8_t type;
    uint8_t is_tuple;     /* TV_LIST: print as (a, b) */
    uint8_t is_gen;       /* TV_LIST made by a lazy filter (map, select, ...): Jinja
                           * returns a generator: always true, no len(), no [i] */
    uint8_t is_markup;    /* TV_STR that is a markupsafe.Markup (from |e, |safe): + escapes
                           * the other operand, repr is Markup('...') */
    union {
        int b;
        int64_t i;
        double f;
        struct { const char *s; size_t len; } str;       /* UTF-8, not NUL-terminated */
        struct { tv **items; size_t n; const char *err; } list; /* (n); err: a generator
                                                   * whose iteration raises err (jinja2's lazy filters) */
        struct { tv **keys; tv **vals; size_t n, cap; } dict; /* (n) each, insertion order */
        struct { int kind; const char *name; tv *self; const struct tnode *node;
                 struct tscope *scope; } fn;
        tloop *loop;
        const char *hint;                                  /* TV_UNDEF: message or NULL */
    } u;
};

/* Singletons (never freed, never written). */
extern tv tv_undef_v, tv_none_v, tv_true_v, tv_false_v;

tv *tv_str(tarena *a, const char *s, size_t n);      /* copies s */
tv *tv_str_nocopy(tarena *a, const char *s, size_t n);
tv *tv_int(tarena *a, int64_t i);
tv *tv_float(tarena *a, double f);
tv *tv_bool(int b);
tv *tv_undef(tarena *a, const char *hint);           /* hint copied */
tv *tv_list(tarena *a, size_t n);                   /* n NULL items to fill */
tv *tv_dict(tarena *a, size_t cap);
/* Set key->val in a dict or namespace (replaces an existing key). -1 on OOM. */
int tv_dict_set(tarena *a, tv *d, tv *key, tv *val);
tv *tv_dict_get(const tv *d, const char *key, size_t klen);
tv *tv_dict_getv(const tv *d, const tv *key);

tv *tv_from_json(tarena *a, const json_t *j);
/* Convert to JSON (new reference), NULL when the value has no JSON form. */
json_t *tv_to_json(const tv *v);

int tv_truthy(const tv *v);
int tv_equal(const tv *a, const tv *b);
/* Python ordering: *res = -1/0/1; returns -1 when the types don't order. */
int tv_compare(const tv *a, const tv *b, int *res);
const char *tv_type_name(const tv *v);

/* str(v) (Jinja's rendering of a value) appended to b. */
void tv_write_str(tbuf *b, const tv *v);
/* repr(v) appended to b. */
void tv_write_repr(tbuf *b, const tv *v);
/* json.dumps(v, ensure_ascii, indent=indent (<0: None; or indent_str),
 * separators, sort_keys).  Returns -1 (and writes nothing useful) when a
 * value is not serializable. */
int tv_write_json(tbuf *b, const tv *v, int ensure_ascii, int indent, const char *indent_str,
                  const char *item_sep, const char *key_sep, int sort_keys, int depth);
void tv_write_float(tbuf *b, double f);

/* ---- UTF-8 / Python string helpers ------------------------------------- */
/* Decode one code point at s[*i] (advances *i); invalid bytes decode as
 * U+FFFD one byte at a time. */
uint32_t tutf8_next(const char *s, size_t n, size_t *i);
void tutf8_put(tbuf *b, uint32_t cp);
size_t tutf8_len(const char *s, size_t n);   /* code points */
int tpy_isspace(uint32_t cp);

/* ---- AST ------------------------------------------------------------------ */
typedef enum tnode_kind {
    /* expressions */
    TN_LIT, TN_NAME, TN_GETATTR, TN_GETITEM, TN_SLICE, TN_CALL, TN_FILTER, TN_TEST,
    TN_BINOP, TN_NEG, TN_POS, TN_NOT, TN_AND, TN_OR, TN_COMPARE, TN_COND, TN_LIST,
    TN_TUPLE, TN_DICT, TN_CONCAT,
    /* statements */
    TN_BODY, TN_TEXT, TN_PRINT, TN_IF, TN_FOR, TN_SET, TN_SET_BLOCK, TN_MACRO, TN_CALL_BLOCK,
    TN_FILTER_BLOCK, TN_BREAK, TN_CONTINUE,
} tnode_kind;

typedef enum tbinop {
    TOP_ADD, TOP_SUB, TOP_MUL, TOP_DIV, TOP_FLOORDIV, TOP_MOD, TOP_POW,
    TOP_EQ, TOP_NE, TOP_LT, TOP_LE, TOP_GT, TOP_GE, TOP_IN, TOP_NOTIN,
} tbinop;

typedef struct tnode tnode;
struct tnode {
    uint8_t kind;
    uint8_t op;        /* TN_BINOP: tbinop; TN_TEST: negated */
    int line, col;
    tv *lit;           /* TN_LIT, TN_TEXT (a string) */
    const char *name;  /* NAME, GETATTR attr, FILTER/TEST name, MACRO name, SET target */
    tnode *a, *b, *c, *d; /* operands / children; see template_parse.c */
    tnode **l1;        /* (n1) args, items, body statements, keys ... */
    size_t n1;
    tnode **l2;        /* (n2) kwarg values, dict values, else body ... */
    size_t n2;
    const char **names; /* (nn) kwarg names, macro params, for/set targets */
    size_t nn;
};

/* The filter and test names the interpreter implements (its tables in
 * template_filters.c / template_tests.c); the parser refuses others. */
int tr_filter_known(const char *name);
int tr_test_known(const char *name);

/* Compiled template (opaque in template.h). */
struct tmpl_template {
    tarena arena;  /* owns the AST */
    tnode *root;   /* TN_BODY */
};

#endif
