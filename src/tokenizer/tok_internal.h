/* tok_internal — the structures behind tokenizer.h, shared by tok_*.c.
 *
 * DESIGN: everything is plain arrays and open-addressing hash tables built
 * once at load:
 *
 *   vocab:   id -> (offset, length) in one string pool   (tok_vocab)
 *   lookup:  string -> id, slots hold (hash, id); the key is the pool string
 *   merges:  (left id, right id) -> (rank, merged id)    (tok_pairmap)
 *   added:   byte trie over added-token contents          (tok_trie)
 *
 * Pipeline stages (normalizers, pre-tokenizers, decoders, post-processors)
 * are small tagged structs with arrays of children for Sequence.  Text flows
 * as UTF-8 in growable buffers; pre-tokenizer pieces are spans of an arena
 * buffer.
 */
#ifndef SGLC_TOK_INTERNAL_H
#define SGLC_TOK_INTERNAL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <limits.h>

#include "tokenizer/tokenizer.h"

/* ---- byte buffers ---------------------------------------------------- */
typedef struct tok_buf {
    char *p; /* (cap), owned; p[n] is kept 0 when n < cap */
    size_t n, cap;
} tok_buf;

int tok_buf_reserve(tok_buf *b, size_t extra);
int tok_buf_put(tok_buf *b, const void *s, size_t n);
int tok_buf_putc(tok_buf *b, char c);
void tok_buf_free(tok_buf *b);

/* ---- UTF-8 helpers --------------------------------------------------- */
/* Length of the valid UTF-8 char at s[0..n) or 0 if invalid/truncated. */
size_t tok_utf8_valid_len(const unsigned char *s, size_t n);
/* Decode one char of valid UTF-8 (caller guarantees validity). */
int32_t tok_utf8_decode(const char *s, size_t *len);
int tok_utf8_encode(int32_t cp, char out[4]);
/* Append s to b, replacing each maximal invalid subsequence with U+FFFD. */
int tok_utf8_sanitize(tok_buf *b, const char *s, size_t n);
bool tok_is_white_space(int32_t cp); /* Unicode White_Space */

/* ---- vocabulary and hash maps ---------------------------------------- */
typedef struct tok_vocab {
    char *pool;            /* (pool_n) all token strings, owned */
    size_t pool_n, pool_cap;
    struct tok_vocab_ent {
        uint32_t off;      /* offset in pool, UINT32_MAX = unused id */
        uint32_t len;
    } *ent;                /* (n), one cache line fetch per lookup */
    size_t n, ent_cap;     /* ids 0..n-1; allocated entries */
    /* string -> id lookup */
    uint64_t *slots;       /* (slot_cap) (hash32 << 32) | (id + 1); 0 = empty */
    size_t slot_cap, slot_used;
} tok_vocab;

uint64_t tok_hash(const void *s, size_t n);
int tok_vocab_set(tok_vocab *v, int32_t id, const char *s, size_t n); /* add or override */
int tok_vocab_reserve(tok_vocab *v, size_t n_entries, size_t pool_bytes); /* pre-size (a hint) */
int32_t tok_vocab_find(const tok_vocab *v, const char *s, size_t n);
void tok_vocab_free(tok_vocab *v);

/* Merge table: 8-byte slots ((left << 20 | right) << 24 | rank), so the
 * table for Qwen3's 151k merges is 4 MB; the merged id of rank r is
 * merged_of_rank[r].  Limits: ids < 2^20 - 1, ranks < 2^24 - 1 (checked). */
#define TOK_PAIR_EMPTY UINT64_MAX
#define TOK_PAIR_MAX_ID ((1 << 20) - 1)
#define TOK_PAIR_MAX_RANK ((1 << 24) - 1)

typedef struct tok_pairmap {
    uint64_t *slots;         /* (cap) packed entries, TOK_PAIR_EMPTY = free */
    size_t cap, used;
    int32_t *merged_of_rank; /* (rank_cap) */
    size_t rank_cap;
} tok_pairmap;

/* Returns 0, -1 on allocation failure, -2 if an id or rank is over the limits. */
int tok_pairmap_put(tok_pairmap *m, int32_t a, int32_t b, int32_t rank, int32_t merged);
/* Rank of merging (a, b) and the merged id, or INT32_MAX if no such merge. */
static inline int32_t tok_pairmap_get(const tok_pairmap *m, int32_t a, int32_t b, int32_t *merged)
{
    if (!m->cap || (uint32_t)a >= TOK_PAIR_MAX_ID || (uint32_t)b >= TOK_PAIR_MAX_ID) return INT32_MAX;
    uint64_t key = ((uint64_t)(uint32_t)a << 20) | (uint32_t)b;
    uint64_t h = key * 0x9E3779B97F4A7C15ull;
    size_t j = (size_t)(h >> 24) & (m->cap - 1);
    for (;;) {
        uint64_t s = m->slots[j];
        if ((s >> 24) == key) {
            int32_t r = (int32_t)(s & TOK_PAIR_MAX_RANK);
            *merged = m->merged_of_rank[r];
            return r;
        }
        if (s == TOK_PAIR_EMPTY) return INT32_MAX;
        j = (j + 1) & (m->cap - 1);
    }
}
void tok_pairmap_free(tok_pairmap *m);

/* ---- byte trie (added tokens, unigram vocab) ------------------------- */
typedef struct tok_trie_node {
    uint32_t first_edge; /* index into edges */
    uint16_t n_edges;
    int32_t value;       /* payload (index) or -1 */
} tok_trie_node;

typedef struct tok_trie_edge {
    uint8_t byte;
    uint32_t child;
} tok_trie_edge;

typedef struct tok_trie {
    tok_trie_node *nodes; /* (n_nodes) */
    tok_trie_edge *edges; /* (n_edges), each node's edges contiguous and sorted */
    size_t n_nodes, n_edges;
    uint8_t first_byte[256]; /* 1 if some key starts with this byte */
} tok_trie;

/* Build from n keys; value of key i is i.  Returns 0 or -1. */
int tok_trie_build(tok_trie *t, const char *const *keys, const size_t *lens, size_t n);
/* Longest key that is a prefix of s[0..n): returns its value, *mlen its length; -1 if none. */
int32_t tok_trie_longest(const tok_trie *t, const char *s, size_t n, size_t *mlen);
/* Calls fn(value, len) for every key that is a prefix of s, shortest first. */
void tok_trie_prefixes(const tok_trie *t, const char *s, size_t n,
                       void (*fn)(void *ctx, int32_t value, size_t len), void *ctx);
void tok_trie_free(tok_trie *t);

/* ---- regex ----------------------------------------------------------- */
typedef struct tok_regex {
    pcre2_code *code;
    bool literal;   /* String pattern: matched with memmem, not PCRE2 */
    char *lit;      /* (lit_n) owned */
    size_t lit_n;
} tok_regex;

/* pattern_json_kind: 0 = {"String": s}, 1 = {"Regex": r}. */
int tok_regex_compile(tok_regex *r, int kind, const char *pat, size_t n, char *err, size_t errlen);
/* Find the next match at or after start in s[0..n).  Returns 1 and the
 * match span, 0 if none, -1 on error.  md is caller scratch (may be NULL
 * for literals). */
int tok_regex_next(const tok_regex *r, const char *s, size_t n, size_t start, pcre2_match_data *md,
                   size_t *ms, size_t *me);
void tok_regex_free(tok_regex *r);

/* ---- fast scan of model.vocab / model.merges (tok_jsonscan.c) ------- */
typedef struct tok_span {
    size_t off, len; /* byte span in the document */
} tok_span;

/* Find model.vocab (an object) and model.merges (an array, len 0 if absent)
 * in a tokenizer.json document.  -1 if the document is not in the simple
 * shape the scanner accepts (the caller then uses jansson for all of it). */
int tok_jsonscan_find(const char *doc, size_t n, tok_span *vocab, tok_span *merges);
int tok_jsonscan_vocab(const char *doc, tok_span s, int (*fn)(void *ctx, const char *tok, size_t n, int32_t id),
                       void *ctx);
int tok_jsonscan_merges(const char *doc, tok_span s,
                        int (*fn)(void *ctx, const char *a, size_t an, const char *b, size_t bn, size_t index),
                        void *ctx);

/* ---- normalizers ----------------------------------------------------- */
typedef enum tok_norm_kind {
    TOK_NORM_SEQUENCE, TOK_NORM_NFC, TOK_NORM_NFD, TOK_NORM_NFKC, TOK_NORM_NFKD,
    TOK_NORM_LOWERCASE, TOK_NORM_PREPEND, TOK_NORM_REPLACE, TOK_NORM_STRIP,
    TOK_NORM_STRIP_ACCENTS, TOK_NORM_BERT,
} tok_norm_kind;

typedef struct tok_normalizer {
    tok_norm_kind kind;
    struct tok_normalizer *children; /* (n_children) for SEQUENCE, owned */
    size_t n_children;
    char *str;                       /* prepend text / replace content, owned */
    size_t str_n;
    tok_regex pattern;               /* REPLACE */
    bool left, right;                /* STRIP */
    bool clean_text, chinese_chars, lowercase;
    int strip_accents;               /* BERT: -1 = null (follows lowercase), 0, 1 */
} tok_normalizer;

/* Normalize in[0..n) into out (cleared first). */
int tok_normalize(const tok_normalizer *nm, const char *in, size_t n, tok_buf *out, pcre2_match_data *md);
void tok_normalizer_free(tok_normalizer *nm);

/* ---- pre-tokenizers -------------------------------------------------- */
typedef enum tok_split_behavior {
    TOK_SPLIT_REMOVED, TOK_SPLIT_ISOLATED, TOK_SPLIT_MERGED_PREV, TOK_SPLIT_MERGED_NEXT,
    TOK_SPLIT_CONTIGUOUS,
} tok_split_behavior;

typedef enum tok_pre_kind {
    TOK_PRE_SEQUENCE, TOK_PRE_BYTELEVEL, TOK_PRE_SPLIT, TOK_PRE_METASPACE, TOK_PRE_DIGITS,
    TOK_PRE_PUNCTUATION, TOK_PRE_WHITESPACE, TOK_PRE_WHITESPACE_SPLIT, TOK_PRE_BERT,
} tok_pre_kind;

typedef struct tok_pretok {
    tok_pre_kind kind;
    struct tok_pretok *children; /* (n_children), owned */
    size_t n_children;
    tok_regex pattern;           /* SPLIT, BYTELEVEL with use_regex, WHITESPACE */
    tok_split_behavior behavior;
    bool invert;
    bool add_prefix_space, use_regex; /* BYTELEVEL */
    char repl[8];                /* METASPACE replacement char (UTF-8) */
    size_t repl_n;
    int prepend_scheme;          /* METASPACE 0 always, 1 first, 2 never */
    bool split;                  /* METASPACE */
    bool individual_digits;      /* DIGITS */
} tok_pretok;

/* A piece: span [off, off+len) of the arena buffer. */
typedef struct tok_piece {
    uint32_t off, len;
} tok_piece;

typedef struct tok_pieces {
    tok_piece *v; /* (n) */
    size_t n, cap;
} tok_pieces;

int tok_pieces_push(tok_pieces *p, size_t off, size_t len);

/* Apply pre-tokenizer pt to pieces `in` (spans of arena); results in `out`
 * (cleared first; new strings are appended to arena).  first_section says
 * whether this is the first section of the input (Metaspace "first"). */
int tok_pretokenize(const tok_pretok *pt, tok_buf *arena, const tok_pieces *in, tok_pieces *out,
                    bool first_section, pcre2_match_data *md);
bool tok_pretok_is_bytelevel(const tok_pretok *pt);
void tok_pretok_free(tok_pretok *pt);

/* ---- model ----------------------------------------------------------- */
typedef enum tok_model_kind { TOK_MODEL_BPE, TOK_MODEL_WORDPIECE, TOK_MODEL_UNIGRAM } tok_model_kind;

typedef struct tok_model {
    tok_model_kind kind;
    int32_t unk_id;           /* -1 if none */
    bool fuse_unk, byte_fallback, ignore_merges;
    bool byte_level;          /* pieces are raw bytes mapped through bytes_to_unicode */
    int32_t byte_id[256];     /* byte-level: id of each byte's char; byte_fallback: id of <0xXX> */
    int32_t bl_cp[256];       /* GPT-2 bytes_to_unicode code point of each byte */
    tok_pairmap merges;
    char *cont_prefix;        /* BPE continuing_subword_prefix / WordPiece prefix, owned */
    size_t cont_prefix_n;
    char *eow_suffix;         /* BPE end_of_word_suffix, owned */
    size_t eow_suffix_n;
    size_t max_chars_per_word; /* WordPiece */
    /* Unigram */
    double *scores;           /* (vocab n) */
    double unk_score;
    tok_trie utrie;           /* value = id */
} tok_model;

/* ---- post-processor -------------------------------------------------- */
typedef enum tok_post_kind {
    TOK_POST_NONE, TOK_POST_TEMPLATE, TOK_POST_BYTELEVEL, TOK_POST_BERT, TOK_POST_ROBERTA,
    TOK_POST_SEQUENCE,
} tok_post_kind;

typedef struct tok_post {
    tok_post_kind kind;
    struct tok_post *children; /* (n_children), owned */
    size_t n_children;
    /* TEMPLATE single: ids before and after $A (special token ids expanded) */
    int32_t *pre_ids, *post_ids; /* (n_pre), (n_post), owned */
    size_t n_pre, n_post;
    bool has_a;                  /* template contains $A */
} tok_post;

/* ---- decoders -------------------------------------------------------- */
typedef enum tok_dec_kind {
    TOK_DEC_SEQUENCE, TOK_DEC_BYTELEVEL, TOK_DEC_BYTEFALLBACK, TOK_DEC_FUSE, TOK_DEC_STRIP,
    TOK_DEC_REPLACE, TOK_DEC_METASPACE, TOK_DEC_WORDPIECE, TOK_DEC_BPE,
} tok_dec_kind;

typedef struct tok_decoder {
    tok_dec_kind kind;
    struct tok_decoder *children; /* (n_children), owned */
    size_t n_children;
    tok_regex pattern;           /* REPLACE */
    char *str;                   /* REPLACE content / STRIP content / WORDPIECE prefix / BPE suffix / METASPACE repl, owned */
    size_t str_n;
    int start, stop;             /* STRIP */
    bool cleanup;                /* WORDPIECE */
} tok_decoder;

/* ---- added tokens and the tokenizer ---------------------------------- */
typedef struct tok_added {
    int32_t id;
    char *content;   /* owned */
    size_t content_n;
    bool special, lstrip, rstrip, single_word, normalized;
} tok_added;

struct tok_tokenizer {
    tok_vocab vocab;          /* model vocab plus added tokens */
    tok_model model;
    tok_normalizer *normalizer; /* NULL if none, owned */
    tok_pretok *pretok;         /* NULL if none, owned */
    tok_post post;
    tok_decoder *decoder;       /* NULL if none, owned */

    tok_added *added;           /* (n_added), owned */
    size_t n_added;
    tok_trie trie_raw;          /* non-normalized added tokens; value = index in added[] */
    tok_trie trie_norm;         /* normalized contents; value = index in added[] */
    char **norm_content;        /* (n_added) normalized content or NULL, owned */
    size_t *norm_content_n;     /* (n_added) */
    bool any_raw, any_norm;

    uint8_t *is_special;        /* (vocab.n) 1 for special tokens, owned */
    uint8_t *is_added;          /* (vocab.n) 1 for added tokens, owned */

    int32_t bos_id, pad_id, unk_id;
    int32_t *eos_ids;           /* (n_eos), owned */
    size_t n_eos;
    bool clean_up_spaces;       /* tokenizer_config clean_up_tokenization_spaces (default true) */
    tok_mode mode;
    uint64_t serial;            /* unique per loaded tokenizer (word cache tag) */
    size_t mem_bytes;           /* retained heap estimate */
};

/* tok_model.c */
int tok_model_encode(const tok_tokenizer *t, const char *arena, const tok_pieces *pieces,
                     tok_ids *out);
void tok_model_free(tok_model *m);

int tok_bytelevel_cp(unsigned b); /* bytes_to_unicode, slow: fill tables with it */

/* tok_decode.c */
void tok_decoder_free(tok_decoder *d);
/* tok_post (tok_encode.c) */
void tok_post_free(tok_post *p);

#endif
