/* grammar_internal — the pieces of the grammar engine shared by its files.
 *
 * DESIGN (the whole engine, in one place):
 *
 *   text --(grammar_ebnf.c / grammar_regex.c)--> AST (ga_*)
 *        --(grammar_fsm.c)--> per rule a DFA over bytes and rule references
 *   matcher (grammar_match.c): a set of stacks, each stack a chain of frames
 *        (DFA node, parent frame), hash-consed so equal stacks share one id
 *   mask (grammar_mask.c): the vocabulary sorted by bytes is walked like a
 *        trie from the current stack set, pruned when every stack dies;
 *        per DFA node a cached, stack-independent classification of every
 *        token (accepted / rejected / depends on the stack below) means only
 *        the "depends" tokens are walked per step.
 *
 *   AST nodes live in one growing array (ga_ast); literals are UTF-8 bytes,
 *   char classes are sorted disjoint code point ranges (negation already
 *   applied, surrogates removed), so the FSM builder never sees syntax.
 */
#ifndef SGLC_GRAMMAR_INTERNAL_H
#define SGLC_GRAMMAR_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "grammar/grammar.h"

/* ---- AST --------------------------------------------------------------- */

typedef enum ga_kind {
    GA_EMPTY, /* matches "" */
    GA_LIT,   /* a: offset into bytes, b: length */
    GA_CLASS, /* a: offset into ranges (pairs), b: number of ranges */
    GA_REF,   /* a: rule id */
    GA_SEQ,   /* kids */
    GA_ALT,   /* kids */
    GA_REP,   /* kids[0] repeated a..b times, b = -1: unbounded */
} ga_kind;

typedef struct ga_node {
    ga_kind kind;
    int32_t a, b;
    int32_t kid_off, nkids; /* into ga_ast.kids */
} ga_node;

typedef struct ga_rule {
    char *name;    /* owned */
    int32_t body;  /* AST node, -1 until defined */
    int line;      /* of the first reference or the definition, for errors */
} ga_rule;

typedef struct ga_ast {
    ga_node *nodes; /* (n_nodes) owned */
    int32_t n_nodes, cap_nodes;
    int32_t *kids; /* (n_kids) */
    int32_t n_kids, cap_kids;
    uint8_t *bytes; /* (n_bytes) literal bytes */
    int32_t n_bytes, cap_bytes;
    uint32_t *ranges; /* (n_ranges, 2) code point ranges lo, hi inclusive */
    int32_t n_ranges, cap_ranges;
    ga_rule *rules; /* (n_rules) */
    int32_t n_rules, cap_rules;
    int oom;
} ga_ast;

void ga_free(ga_ast *a);
int32_t ga_new(ga_ast *a, ga_kind k, int32_t x, int32_t y);
/* A SEQ or ALT node over kids (copied); a single kid is returned as is. */
int32_t ga_list(ga_ast *a, ga_kind k, const int32_t *kids, int32_t n);
int32_t ga_lit(ga_ast *a, const uint8_t *s, int32_t n);
/* A class from code point ranges (any order, may overlap); negate =
 * complement over U+0000..U+10FFFF.  Surrogates are removed. */
int32_t ga_class(ga_ast *a, const uint32_t *ranges, int32_t n_pairs, int negate);
int32_t ga_rep(ga_ast *a, int32_t kid, int32_t min, int32_t max);
/* Rule id of name (created undefined if absent); -1 on OOM. */
int32_t ga_rule_id(ga_ast *a, const char *name, size_t len, int line);
/* Append node as a GBNF expression (rule refs by name) to out. */
void ga_print(const ga_ast *a, int32_t node, strbuf *out);
/* UTF-8 encode cp into out (1..4 bytes), returns length. */
int ga_utf8_encode(uint32_t cp, uint8_t *out);

/* grammar_ebnf.c: parse into a (rules created as found).  0 or -1 + err. */
int ga_parse_ebnf(ga_ast *a, const char *text, size_t len, char *err, size_t errlen);
/* grammar_regex.c: parse a regex into one AST node (>= 0), -1 + err. */
int32_t ga_parse_regex(ga_ast *a, const char *re, size_t len, char *err, size_t errlen);

/* ---- compiled grammar ---------------------------------------------------- */

typedef struct gr_edge {
    uint8_t lo, hi;  /* byte range, inclusive */
    int32_t to;      /* node */
} gr_edge;

typedef struct gr_ref {
    int32_t rule;    /* pushed rule */
    int32_t to;      /* node to return to in this rule */
} gr_ref;

typedef struct gr_node {
    uint32_t e_off, r_off; /* into edges / refs */
    uint16_t ne, nr;
    uint8_t accept;        /* the rule may end here */
    int32_t rule;
} gr_node;

#define GR_CI_DEPTH 3 /* frames of context a cached classification is keyed by */

/* Stack-independent classification of every token at one node (cached per
 * vocabulary, see grammar_mask.c). */
typedef struct gr_ci {
    int32_t key[GR_CI_DEPTH]; /* the chain of nodes it is for (see grammar_mask.c) */
    uint32_t *accept;   /* (mask words) tokens accepted whatever the stack below */
    uint32_t *unc;      /* (n_unc) sorted ranks whose fate depends on the stack */
    int32_t n_unc;
} gr_ci;

typedef struct gr_cicache {
    uint64_t vocab_serial;
    gr_ci **tab;               /* (cap) open addressing by key, NULL = empty, owned */
    uint32_t cap, n;
    struct gr_cicache *next;
} gr_cicache;

struct grammar {
    gr_node *nodes;   /* (n_nodes) owned */
    int32_t n_nodes;
    gr_edge *edges;   /* (n_edges) owned */
    int32_t n_edges;
    gr_ref *refs;     /* (n_refs) owned */
    int32_t n_refs;
    int32_t *rule_start; /* (n_rules) start node of each rule, -1 if unproductive */
    char **rule_names;   /* (n_rules) owned */
    int32_t n_rules;
    int32_t root;        /* rule id */
    uint8_t *nullable;   /* (n_rules) the rule matches "" */
    size_t bytes;
    size_t ci_bytes;     /* held by the caches below (atomic) */
    pthread_mutex_t mu;  /* guards ci and close_dist */
    gr_cicache *ci;      /* owned */
    int32_t *close_dist; /* (n_nodes) owned or NULL: bytes from each node to its rule's end (grammar_close.c) */
};

/* grammar_fsm.c: build the compiled grammar from a parsed AST, root rule
 * named root.  NULL + err. */
grammar *gr_build(ga_ast *a, const char *root, char *err, size_t errlen);

/* ---- vocabulary -------------------------------------------------------- */

struct grammar_vocab {
    int32_t size;        /* ids 0..size-1 */
    uint64_t serial;     /* unique per vocabulary (cache key) */
    int32_t n_tok;       /* tokens with bytes, sorted */
    int32_t *rank_id;    /* (n_tok) id of the rank-th token in byte order */
    uint32_t *off;       /* (n_tok) offset of its bytes in blob */
    uint16_t *len;       /* (n_tok) */
    uint8_t *blob;       /* owned */
    int32_t *end_ids;    /* (n_end) */
    size_t n_end;
    int32_t *id_rank;    /* (size) rank of id, -1 = special / unused / empty */
    int32_t max_len;
    int32_t first_lo[257]; /* ranks starting with byte b: [first_lo[b], first_lo[b+1]) */
    /* each first-byte block split in two parts, tokens of at most
     * GV_SHORT bytes (most) and longer ones: part p = 2 * byte + long */
    int32_t part_off[513];  /* part p's ranks: part_ranks[part_off[p] .. part_off[p+1]) */
    int32_t *part_ranks;    /* (n_tok) sorted within each part */
    int32_t part_max[512];  /* longest token in part p */
    /* Shared across grammars: classification of the tokens starting with
     * byte b from a stack set, keyed by a hash of the set's structure
     * (grammar_memo.c).  Guarded by memo_mu; entries immutable. */
    pthread_mutex_t memo_mu;
    struct gv_memo **memo;  /* (memo_cap) open addressing, NULL = empty */
    uint32_t memo_cap, memo_n;
    size_t memo_bytes;
};

typedef struct gv_memo {
    uint64_t h1, h2;
    int32_t b;
    int32_t n_acc, n_unc;
    int32_t *acc, *unc; /* ranks, sorted */
} gv_memo;

/* grammar_memo.c */
const gv_memo *gv_memo_find(grammar_vocab *v, uint64_t h1, uint64_t h2, int32_t b);
/* Insert a copy (acc, unc); returns the stored entry or NULL (over budget /
 * OOM; the caller then uses its own lists). */
const gv_memo *gv_memo_put(grammar_vocab *v, uint64_t h1, uint64_t h2, int32_t b, const int32_t *acc, int32_t n_acc,
                           const int32_t *unc, int32_t n_unc);
void gv_memo_free(grammar_vocab *v);


/* ---- matcher internals shared by grammar_match.c and grammar_mask.c ------ */

#define GV_SHORT 16

#define GM_ROOT 0   /* parent of the root frame: popping here = may end */
#define GM_BOTTOM 1 /* parent in a stack-independent walk: popping = "depends" */
#define GM_CAN_END 1
#define GM_POPPED 2

typedef struct gm_frame {
    int32_t node, parent;
} gm_frame;

typedef struct gm_ibuf {
    int32_t *p;
    int32_t n, cap;
} gm_ibuf;

typedef struct gm_hist {
    int32_t tops_off, n_tops; /* into committed */
    uint8_t flags;            /* GM_CAN_END */
    uint8_t terminated;
    int32_t frame_mark;       /* frames in use at this point */
} gm_hist;

struct grammar_matcher {
    const grammar *g;
    const grammar_vocab *v;
    gr_cicache *ci;          /* borrowed from g (found or added at creation) */
    gm_frame *frames;        /* (n_frames) hash-consed stack frames; ids 0,1 reserved */
    int32_t n_frames, cap_frames;
    uint32_t *stamp;         /* (cap_frames) visited mark per frame */
    uint32_t gen;
    uint32_t *slots;         /* (cap_slots) hash table: frame id, 0 = empty */
    uint32_t cap_slots;
    uint32_t *slot_log;      /* (n_frames) slot of each frame, for LIFO release */
    gm_ibuf committed;       /* top sets of the history, concatenated */
    gm_hist *hist;           /* (n_hist) [0] = start */
    int32_t n_hist, cap_hist;
    gm_ibuf work;            /* closure worklist */
    gm_ibuf scratch;         /* walk: top sets per depth */
    int32_t *ser_local;      /* (g->n_nodes) gm_set_hash: local number of a node */
    uint32_t *ser_stamp;     /* (g->n_nodes) numbered in this hash */
    uint32_t *ser_done;      /* (g->n_nodes) described in this hash */
    uint32_t ser_gen;
    int32_t ser_n;
    gm_ibuf ser_buf, ser_queue, ser_next;
    int oom;
};

int gm_push(gm_ibuf *b, int32_t x);
/* 1 when id is one of the vocabulary's end tokens. */
int gv_is_end(const grammar_vocab *v, int32_t id);
/* Frames in use; releasing back to a mark drops every frame made since. */
void gm_release(grammar_matcher *m, int32_t mark);
/* One byte from the top set src->p[off..off+n): the next top set is
 * appended to out (which may be src); returns its flags (GM_CAN_END,
 * GM_POPPED). */
int gm_step(grammar_matcher *m, const gm_ibuf *src, int32_t off, int32_t n, uint8_t byte, gm_ibuf *out);
/* The frame (node, parent), made if new; -1 on OOM. */
int32_t gm_frame_get(grammar_matcher *m, int32_t node, int32_t parent);
/* The top set of a fresh frame (node, parent), closed (stack-independent
 * walks use parent GM_BOTTOM). */
int gm_start_set(grammar_matcher *m, int32_t node, int32_t parent, gm_ibuf *out);
const gm_hist *gm_cur(const grammar_matcher *m);

/* grammar_mask.c */
void gm_fill_mask_full(grammar_matcher *m, uint32_t *mask); /* no cache: the reference */
void gr_ci_free_all(grammar *g);
/* grammar_memo.c */
/* Structural hash of the top set src->p[off..off+n) with flags fl (the
 * nodes reachable from every frame of every stack within max_depth bytes,
 * numbered canonically).
 * 0, or -1 when the reachable part is too large to be worth it. */
int gm_set_hash(grammar_matcher *m, const gm_ibuf *src, int32_t off, int32_t n, int fl, int32_t max_depth,
                uint64_t *h1, uint64_t *h2);

#endif
