/* cmd_grammar_sample — `sglc grammar-sample`: random outputs constrained
 * by a JSON Schema, standing in for a random-weight model.
 *
 *   sglc grammar-sample (--json-schema FILE | --schemas-from LIST) --tokenizer-path DIR
 *                       [--n N] [--seed S] [--max-tokens T] [--strict]
 *
 * LIST is a file of schema paths, one per line (one process for a whole
 * benchmark); --n 0 only translates and compiles (a compile-rate run).
 * For each schema: translate, compile, then N times walk the token mask
 * from the start: at each step a token is drawn uniformly
 * among the allowed ones, with a growing preference for ending — with
 * probability p = step / (T/2) (capped at 0.95) an end token is taken
 * when the grammar may end, else one of the allowed single-byte closers
 * (" } ]) when there is one — until an end token is accepted, the grammar
 * terminates, or T tokens; over the last T/4 (>= 64) steps the mask is narrowed to
 * tokens that still let the grammar complete inside T
 * (grammar_matcher_fill_mask_within).  Prints one JSON line per schema:
 *   {"file", "compiled", "error"?, "translate_ms", "compile_ms",
 *    "samples": [{"text", "finished", "tokens"}]}
 * "finished": false means the cap was hit (the text is a prefix, not an
 * output).  The JSONSchemaBench test validates the finished texts with an
 * independent validator (tests/scripts/jsonschemabench.py).
 *
 * DESIGN: the sampler only uses the engine's public contract
 * (grammar.h), as the scheduler does; the xorshift generator is seeded
 * per (seed, schema index, sample index) so a run reproduces. */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "grammar/grammar.h"
#include "tokenizer/tok_bytes.h"
#include "tokenizer/tokenizer.h"
#include "util/fileio.h"

static double ms_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static uint64_t rng_next(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    return *s = x;
}

static double rng_unit(uint64_t *s) { return (double)(rng_next(s) >> 11) * (1.0 / 9007199254740992.0); }

typedef struct sampler {
    tok_tokenizer *t;
    tok_bytes_table *tb;
    grammar_vocab *v;
    int32_t nvocab;
    const int32_t *eos;
    size_t n_eos;
    uint32_t *mask;   /* (mask words) */
    int32_t *allowed; /* (nvocab) scratch */
    int32_t *closers; /* (nvocab) scratch */
} sampler;

/* One sample: appends its JSON object to arr. */
static void sample_one(sampler *sp, const grammar *g, uint64_t seed, int max_tokens, json_t *arr)
{
    grammar_matcher *m = grammar_matcher_new(g, sp->v);
    if (!m) return;
    uint64_t rs = seed * 0x9E3779B97F4A7C15ull + 1;
    for (int i = 0; i < 4; i++) rng_next(&rs);
    char *text = NULL;
    size_t tl = 0, tcap = 0;
    int steps = 0, finished = 0;
    for (; steps < max_tokens; steps++) {
        if (grammar_matcher_is_terminated(m)) { finished = 1; break; }
        /* the last quarter (at least 64 steps): only tokens after which the grammar can still
         * complete inside the cap (the scheduler's finish-in-budget mask) */
        if (max_tokens - steps <= (max_tokens / 4 > 64 ? max_tokens / 4 : 64)) grammar_matcher_fill_mask_within(m, sp->mask, max_tokens - steps);
        else grammar_matcher_fill_mask(m, sp->mask);
        size_t na = 0, nc = 0;
        int can_end_tok = -1;
        for (int32_t w = 0; w * 32 < sp->nvocab; w++) {
            uint32_t bits = sp->mask[w];
            while (bits) {
                int b = __builtin_ctz(bits);
                bits &= bits - 1;
                int32_t id = w * 32 + b;
                if (id >= sp->nvocab) break;
                bool is_end = false;
                for (size_t e = 0; e < sp->n_eos; e++)
                    if (sp->eos[e] == id) is_end = true;
                if (is_end) { can_end_tok = id; continue; }
                sp->allowed[na++] = id;
                size_t l;
                const char *by = tok_bytes_get(sp->tb, id, &l);
                if (by && l == 1 && (by[0] == '"' || by[0] == '}' || by[0] == ']')) sp->closers[nc++] = id;
            }
        }
        double p = (double)steps / (max_tokens / 2.0);
        if (p > 0.95) p = 0.95;
        int32_t pick;
        if (can_end_tok >= 0 && (na == 0 || rng_unit(&rs) < (p > 0.05 ? p : 0.05))) pick = can_end_tok;
        else if (na == 0) break; /* stuck: nothing allowed and no end (a grammar bug) */
        else if (nc > 0 && rng_unit(&rs) < p) pick = sp->closers[rng_next(&rs) % nc];
        else pick = sp->allowed[rng_next(&rs) % na];
        if (!grammar_matcher_accept_token(m, pick)) break; /* the mask allowed it: a mismatch */
        if (pick == can_end_tok) { finished = 1; steps++; break; }
        size_t l;
        const char *by = tok_bytes_get(sp->tb, pick, &l);
        if (by && l) {
            if (tl + l + 1 > tcap) {
                tcap = (tl + l + 1) * 2;
                char *nt = realloc(text, tcap);
                if (!nt) break;
                text = nt;
            }
            memcpy(text + tl, by, l);
            tl += l;
        }
    }
    /* at the cap: a text that is already a complete sentence counts */
    if (!finished && (grammar_matcher_is_terminated(m) || grammar_matcher_can_end(m))) finished = 1;
    json_t *o = json_object();
    json_object_set_new(o, "text", json_stringn(text ? text : "", tl));
    if (!json_object_get(o, "text")) json_object_set_new(o, "text", json_string(""));
    json_object_set_new(o, "finished", json_boolean(finished));
    json_object_set_new(o, "tokens", json_integer(steps));
    json_array_append_new(arr, o);
    free(text);
    grammar_matcher_free(m);
}

static void run_schema(sampler *sp, const char *path, long idx, int n, uint64_t seed, int max_tokens, int strict)
{
    json_t *r = json_object();
    json_object_set_new(r, "file", json_string(path));
    size_t len = 0;
    char *text = fileio_read(path, 64u << 20, &len);
    char err[1024] = "";
    grammar *g = NULL;
    if (!text) snprintf(err, sizeof err, "cannot read the file");
    else {
        strbuf b = {0};
        grammar_json_opts o = {.whitespace_pattern = NULL, .any_whitespace = 1, .strict = strict};
        double t0 = ms_now();
        int rc = grammar_schema_to_ebnf(text, len, &o, &b, err, sizeof err);
        double t1 = ms_now();
        char *ebnf = strbuf_take(&b);
        if (rc == 0 && ebnf) g = grammar_compile_ebnf(ebnf, strlen(ebnf), NULL, err, sizeof err);
        else if (rc == 0) snprintf(err, sizeof err, "out of memory");
        json_object_set_new(r, "translate_ms", json_real(t1 - t0));
        json_object_set_new(r, "compile_ms", json_real(ms_now() - t1));
        free(ebnf);
    }
    free(text);
    json_object_set_new(r, "compiled", json_boolean(g != NULL));
    if (!g) json_object_set_new(r, "error", json_string(err));
    else {
        json_t *arr = json_array();
        for (int i = 0; i < n; i++) sample_one(sp, g, seed ^ ((uint64_t)idx << 20) ^ (uint64_t)i, max_tokens, arr);
        json_object_set_new(r, "samples", arr);
        grammar_free(g);
    }
    char *line = json_dumps(r, JSON_COMPACT | JSON_ENSURE_ASCII);
    if (line) puts(line);
    fflush(stdout);
    free(line);
    json_decref(r);
}

int cmd_grammar_sample(int argc, char **argv)
{
    const char *schema = NULL, *list = NULL, *tokdir = NULL;
    int n = 1, max_tokens = 512, strict = 0;
    uint64_t seed = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--strict")) { strict = 1; continue; }
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            printf("usage: sglc grammar-sample (--json-schema FILE | --schemas-from LIST) --tokenizer-path DIR "
                   "[--n N] [--seed S] [--max-tokens T] [--strict]\n"
                   "Random outputs constrained by each schema (a stand-in for a random-weight model); one JSON "
                   "line per schema with its samples.\n");
            return 0;
        }
        if (!v) { fprintf(stderr, "sglc grammar-sample: %s needs a value\n", a); return 2; }
        if (!strcmp(a, "--json-schema")) schema = v;
        else if (!strcmp(a, "--schemas-from")) list = v;
        else if (!strcmp(a, "--tokenizer-path")) tokdir = v;
        else if (!strcmp(a, "--n")) n = atoi(v);
        else if (!strcmp(a, "--seed")) seed = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--max-tokens")) max_tokens = atoi(v);
        else { fprintf(stderr, "sglc grammar-sample: unknown argument %s\n", a); return 2; }
        i++;
    }
    if (!!schema + !!list != 1 || !tokdir || n < 0 || max_tokens < 1) {
        fprintf(stderr, "usage: sglc grammar-sample (--json-schema FILE | --schemas-from LIST) --tokenizer-path DIR "
                        "[--n N] [--seed S] [--max-tokens T] [--strict]\n");
        return 2;
    }
    sampler sp = {0};
    char err[512];
    tok_load_opts lo = {0};
    sp.t = tok_load_dir(tokdir, &lo, err, sizeof err);
    if (!sp.t) { fprintf(stderr, "sglc grammar-sample: %s\n", err); return 1; }
    sp.tb = tok_bytes_build(sp.t);
    sp.n_eos = tok_eos_ids(sp.t, &sp.eos);
    if (sp.tb) sp.nvocab = tok_bytes_vocab_size(sp.tb);
    if (sp.tb) sp.v = grammar_vocab_new(sp.nvocab, tok_bytes_get, sp.tb, sp.eos, sp.n_eos);
    if (sp.v) {
        sp.mask = calloc(grammar_mask_words(sp.v), sizeof *sp.mask);
        sp.allowed = calloc((size_t)sp.nvocab, sizeof *sp.allowed);
        sp.closers = calloc((size_t)sp.nvocab, sizeof *sp.closers);
    }
    int rc = 0;
    if (!sp.v || !sp.mask || !sp.allowed || !sp.closers || sp.n_eos == 0) {
        fprintf(stderr, "sglc grammar-sample: %s\n", sp.n_eos == 0 ? "the tokenizer has no end token" : "out of memory");
        rc = 1;
    } else if (schema) {
        run_schema(&sp, schema, 0, n, seed, max_tokens, strict);
    } else {
        FILE *f = fopen(list, "r");
        if (!f) { fprintf(stderr, "sglc grammar-sample: cannot read %s\n", list); rc = 2; }
        char *line = NULL;
        size_t cap = 0;
        ssize_t l;
        long idx = 0;
        while (f && (l = getline(&line, &cap, f)) >= 0) {
            while (l > 0 && (line[l - 1] == '\n' || line[l - 1] == '\r')) line[--l] = 0;
            if (l > 0) run_schema(&sp, line, idx++, n, seed, max_tokens, strict);
        }
        free(line);
        if (f) fclose(f);
    }
    free(sp.mask), free(sp.allowed), free(sp.closers);
    grammar_vocab_free(sp.v);
    tok_bytes_free(sp.tb);
    tok_destroy(sp.t);
    return rc;
}
