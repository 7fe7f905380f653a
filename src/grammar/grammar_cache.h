/* grammar_cache — compiled grammars by (kind, text, options), shared by
 * every request that asks for the same grammar, bounded in bytes, LRU.
 *
 * DESIGN
 * SGLang caches compiled grammars by (kind, text) in its grammar backend;
 * here the key also holds the JSON options (strict, whitespace) since
 * they change the compiled language.  An entry is either a compiled
 * value or the compile error (SGLang caches InvalidGrammarObject too: a
 * bad schema sent again fails at once, without a second compile).
 *
 *   table: hash(key) -> chain of entries
 *   lru:   most recently used <-> ... <-> least recently used
 *
 * Entries are reference counted: a lookup or insert hands the caller a
 * reference, the cache holds one of its own while the entry is in the
 * table.  Eviction (over max_bytes, least recently used first) only
 * unlinks an entry; the value is freed when the last reference goes, so
 * a request keeps walking its grammar after the cache dropped it.
 *
 * The value is opaque to the cache (a `grammar *` in the server; the
 * unit tests store anything) and freed with the free function given at
 * create.  All calls are thread-safe (one mutex; each holds it for a
 * hash lookup or a list splice, never for a compile).
 *
 * Ownership: the cache owns its table and its references; a caller owns
 * the references it got (grammar_entry_release). */
#ifndef SGLC_GRAMMAR_GRAMMAR_CACHE_H
#define SGLC_GRAMMAR_GRAMMAR_CACHE_H

#include <stddef.h>
#include <stdint.h>

/* The input language of a grammar request (SGLang's key[0]). */
typedef enum {
    GRAMMAR_KIND_JSON = 0,       /* json_schema (response_format json_schema / json_object) */
    GRAMMAR_KIND_REGEX,
    GRAMMAR_KIND_EBNF,
    GRAMMAR_KIND_STRUCTURAL_TAG,
    GRAMMAR_KIND_COUNT
} grammar_kind;

/* "json", "regex", "ebnf", "structural_tag": SGLang's names in its
 * messages ("Failed to compile json grammar: ..."). */
const char *grammar_kind_name(grammar_kind k);

typedef struct grammar_key {
    grammar_kind kind;
    const char *text;            /* borrowed; len bytes (need not be NUL-terminated) */
    size_t len;
    uint32_t opts;               /* option bits that change the language (GRAMMAR_OPT_*) */
} grammar_key;

enum {
    GRAMMAR_OPT_STRICT = 1u << 0,   /* JSON: additionalProperties false by default */
    GRAMMAR_OPT_COMPACT = 1u << 1,  /* JSON: no whitespace between tokens, whatever the server's
                                     * whitespace options (a forced tool call: a weak model
                                     * cannot loop on whitespace) */
};

typedef struct grammar_cache grammar_cache;
typedef struct grammar_entry grammar_entry;

typedef struct grammar_cache_stats {
    int64_t entries, bytes, max_bytes;
    int64_t hits, misses, inserts, evictions;
} grammar_cache_stats;

/* max_bytes: the bound on the sum of entry sizes (value bytes + key
 * text); 0 = 64 MiB.  free_value frees a value (NULL: values are not
 * freed).  NULL when out of memory. */
grammar_cache *grammar_cache_create(size_t max_bytes, void (*free_value)(void *value));
/* Drops the cache's references; entries still referenced elsewhere live
 * on until released. */
void grammar_cache_destroy(grammar_cache *c);

/* A reference to key's entry (moved to the front of the LRU), or NULL on
 * a miss. */
grammar_entry *grammar_cache_get(grammar_cache *c, const grammar_key *key);
/* Insert a compiled value (value != NULL, bytes its size) or a failure
 * (value NULL, err the reason) and return a reference to the entry.  If
 * the key is already present (another compile of the same key finished
 * first) the present entry is returned and value is freed.  Evicts least
 * recently used entries until the bound holds (the new entry stays even
 * when it alone is larger).  NULL when out of memory (value freed). */
grammar_entry *grammar_cache_put(grammar_cache *c, const grammar_key *key, void *value, size_t bytes,
                                 const char *err);
/* Drop everything (SGLang's flush_cache resets the grammar backend). */
void grammar_cache_clear(grammar_cache *c);
void grammar_cache_get_stats(grammar_cache *c, grammar_cache_stats *out);

/* Another reference to e (any thread). */
grammar_entry *grammar_entry_ref(grammar_entry *e);
/* Drop a reference; the last one frees the value (any thread). */
void grammar_entry_release(grammar_entry *e);
/* The compiled value (NULL for a failure). */
void *grammar_entry_value(const grammar_entry *e);
/* The compile error of a failed entry ("" for a compiled one). */
const char *grammar_entry_error(const grammar_entry *e);

#endif
