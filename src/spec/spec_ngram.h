/* spec_ngram — SGLang's n-gram ("lookahead") draft cache: a trie over
 * every token sequence the engine has seen (prompts and outputs), asked
 * for the likeliest continuation of a sequence's last tokens.
 *
 * DESIGN
 * Every position i of an inserted sequence starts a path of at most
 * max_trie_depth tokens (seq[i], seq[i+1], ...) from the root, so the
 * trie holds every n-gram up to that length; a node counts how often its
 * path was inserted (freq) and when it was last touched (stamp).
 *
 *   root ─┬─ "Once" ─ "upon" ─ "a" ─ "time"      node: token, freq, stamp,
 *         ├─ "upon" ─ "a" ─ "time"                     parent, children
 *         └─ "a" ─┬─ "time"                     children: a (parent, token)
 *                 └─ "little"                    hash table + sibling list
 *
 * Drafting (SGLang's TrieCache::buildRecency / buildFrequency): the last
 * w tokens of the sequence are looked up for w = min(len, max_window)
 * down to min_window; every window found is an anchor.  From the anchors,
 * longest first, a draft tree of at most n_draft nodes is grown:
 *   BFS   breadth-first; an anchor matched with window w starts with
 *         breadth (max_window - w) * scale + min_bfs, scale =
 *         (max_bfs - min_bfs) / (max_window - min_window + 1), shrinking
 *         by scale per level; each level takes the most recently touched
 *         children (a long match gives a narrow, deep tree)
 *   PROB  best-first on path probability: a node's top max_bfs children
 *         by freq, normalized among themselves, times the parent's
 *         probability
 * The scheduler verifies the whole tree in one forward
 * (spec_ngram_draft_tree, a tree attention mask); where it cannot (page
 * size > 1, tensor parallelism) the draft is the tree's first branch (at
 * every node, the child the build added first: the most recent, resp.
 * most probable, continuation of the longest anchor).
 *
 * A growing sequence keeps a cursor (spec_ngram_cursor): the node where
 * each of its open paths (the last max_trie_depth positions) ends, so a
 * new token costs one lookup per open path and the match windows are
 * read off the cursor (~3 us per drafter call for one 460-token story on
 * this machine, against ~16 us re-walking every path from the root).
 * spec_ngram_insert / spec_ngram_draft are the cursor-less reference
 * (tests check the cursor against them).
 *
 * Capacity: at most `capacity` nodes; before an insertion needs more,
 * the least recently touched leaves are evicted (a global LRU list; a
 * node at its tail that still has children is moved to the head instead,
 * so what goes is always a leaf).
 * Nodes are allocated as the trie grows, not up front.
 *
 * Ownership: the trie owns its arrays; callers own the token buffers.
 * Not thread-safe (one scheduler thread calls it). */
#ifndef SGLC_SPEC_NGRAM_H
#define SGLC_SPEC_NGRAM_H

#include <stddef.h>
#include <stdint.h>

typedef enum { SPEC_MATCH_BFS = 0, SPEC_MATCH_PROB = 1 } spec_match_type;

/* SGLang's --speculative-ngram-* arguments (defaults in spec_ngram_params_init). */
typedef struct spec_ngram_params {
    int min_match_window;   /* --speculative-ngram-min-match-window-size, 1 */
    int max_match_window;   /* --speculative-ngram-max-match-window-size, 12 */
    int min_bfs_breadth;    /* --speculative-ngram-min-bfs-breadth, 1 */
    int max_bfs_breadth;    /* --speculative-ngram-max-bfs-breadth, 10 */
    spec_match_type match_type; /* --speculative-ngram-match-type BFS|PROB */
    int max_trie_depth;     /* --speculative-ngram-max-trie-depth (branch length), 18 */
    int64_t capacity;       /* --speculative-ngram-capacity: trie nodes, 10,000,000 */
} spec_ngram_params;

void spec_ngram_params_init(spec_ngram_params *p);
/* SGLang's checks (Ngram::Ngram): 0 < min_window <= max_window <
 * max_trie_depth, 0 < min_bfs <= max_bfs, capacity > max_trie_depth.
 * 0, or -1 with the message in err. */
int spec_ngram_params_check(const spec_ngram_params *p, char *err, size_t errlen);

typedef struct spec_ngram spec_ngram;

/* NULL with a message on bad parameters or out of memory. */
spec_ngram *spec_ngram_create(const spec_ngram_params *p, char *err, size_t errlen);
void spec_ngram_destroy(spec_ngram *t);

/* Insert the n-grams of seq that start at positions from..len-1 (each
 * up to max_trie_depth tokens, cut at len).  `seen` is how far this
 * sequence had been inserted before (0 = never): the parts of those
 * paths that lie below `seen` were counted then and are only touched
 * now, so calling it again as the sequence grows counts every n-gram
 * once.  Callers pass from = max(0, seen - max_trie_depth + 1).  0, or
 * -1 out of memory (the trie stays consistent). */
int spec_ngram_insert(spec_ngram *t, const int32_t *seq, int64_t len, int64_t seen);

/* The draft for the continuation of seq (its last max_match_window
 * tokens are what matters): at most max_draft tokens written to draft,
 * the count returned (0 = no match).  The tree is grown with a budget of
 * max_draft nodes as SGLang's with draft_token_num - 1. */
int spec_ngram_draft(spec_ngram *t, const int32_t *seq, int64_t len, int32_t *draft, int max_draft);

/* A sequence's place in the trie, kept by its owner between calls (the
 * drafter keeps one per request): for each of the sequence's last
 * max_trie_depth positions, the node where the path starting there ends
 * now, with the node's generation (an evicted node is noticed).  With it,
 * each new token costs one lookup per open path instead of re-walking
 * every path from the root, and the match windows are read off the ring
 * instead of looked up. */
typedef struct spec_ngram_cursor {
    uint32_t *node, *gen;        /* (max_trie_depth) owned ring, by position % max_trie_depth */
    int64_t len;                 /* tokens of the sequence consumed */
} spec_ngram_cursor;

/* 0, or -1 out of memory. */
int spec_ngram_cursor_init(const spec_ngram *t, spec_ngram_cursor *c);
void spec_ngram_cursor_free(spec_ngram_cursor *c);
/* Insert the n-grams that seq[c->len .. len) adds (each new token extends
 * every open path by one node and starts one; every occurrence counts
 * once), as spec_ngram_insert with seen = c->len.  A path whose end was
 * evicted is dropped.  0, or -1 when eviction failed (cannot happen). */
int spec_ngram_advance(spec_ngram *t, spec_ngram_cursor *c, const int32_t *seq, int64_t len);
/* spec_ngram_draft with the anchors taken from c (advanced to len);
 * windows whose path was dropped are looked up from the root. */
int spec_ngram_draft_cursor(spec_ngram *t, const spec_ngram_cursor *c, const int32_t *seq, int64_t len,
                            int32_t *draft, int max_draft);
/* The whole draft tree (what the scheduler verifies with a tree mask):
 * its nodes but the root (= seq[len - 1]) in build order, at most
 * max_draft; draft[k] a node's token, parent[k] the node it hangs from (an
 * earlier k, or -1 for the root).  The chain of spec_ngram_draft is its
 * first branch.  c may be NULL (anchors looked up from the root). */
int spec_ngram_draft_tree(spec_ngram *t, const spec_ngram_cursor *c, const int32_t *seq, int64_t len, int32_t *draft,
                          int32_t *parent, int max_draft);
/* The freq of the node at path[0..n) from the root, 0 when absent (tests). */
uint32_t spec_ngram_freq(const spec_ngram *t, const int32_t *path, int n);

/* Nodes in use (root excluded) and evictions so far (tests, logs). */
int64_t spec_ngram_size(const spec_ngram *t);
int64_t spec_ngram_evictions(const spec_ngram *t);

#endif
