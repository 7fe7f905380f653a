/* cmd_grammar — `sglc grammar-check` and `sglc bench-grammar`: the grammar
 * engine without a model.
 *
 *   sglc grammar-check (--json-schema FILE | --regex PATTERN | --ebnf FILE) [--tokenizer-path DIR]
 *       stdin: one JSON string per line (a candidate output); stdout: one
 *       {"accepted": true|false} per line.  Without a tokenizer the text's
 *       bytes are walked; with one the text is tokenized and every token
 *       must be in the mask at its step (and the mask must agree with
 *       accept_token: a disagreement is reported as an "error" field), then
 *       an end token must be allowed.  A grammar that does not compile: the
 *       reason on stderr, exit 3.
 *   sglc bench-grammar --tokenizer-path DIR --schemas DIR [--result-filename F] [--limit N]
 *       compile time and per-token mask time over a folder of schemas
 *       (*.json: JSON Schema, or {"schema": ..., "tests": [...]} whose
 *       first valid test instance is walked; *.ebnf / *.gbnf / *.regex too;
 *       sub-folders one level down are read as well).  Without a test
 *       instance, a seeded random walk through the mask (a random-weight
 *       model, at most 256 tokens, ending as soon as the mask allows after
 *       64) is timed.  Prints and appends one JSON line with schemas,
 *       compiled, compile_ms_p50/p99, mask_us_p50/p99/p999 (wall clock)
 *       and mask_cpu_us_p50/p99/p999 (the thread's CPU time: on a shared
 *       machine the wall tail is mostly preemption).  SGLC_BENCH_STEPS=F
 *       writes one line per mask to F: schema index, step, wall µs, CPU µs. */
#include <dirent.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "cli/cli_args.h"
#include "grammar/grammar.h"
#include "tokenizer/tok_bytes.h"
#include "tokenizer/tokenizer.h"
#include "util/fileio.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct gvocab {
    tok_tokenizer *t;
    tok_bytes_table *tb;
    grammar_vocab *v;
} gvocab;

static int gvocab_load(gvocab *gv, const char *dir, const char *cmd)
{
    char err[512];
    tok_load_opts lo = {0};
    memset(gv, 0, sizeof *gv);
    gv->t = tok_load_dir(dir, &lo, err, sizeof err);
    if (!gv->t) {
        fprintf(stderr, "sglc %s: %s\n", cmd, err);
        return -1;
    }
    gv->tb = tok_bytes_build(gv->t);
    const int32_t *eos;
    size_t n_eos = tok_eos_ids(gv->t, &eos);
    if (gv->tb) gv->v = grammar_vocab_new(tok_bytes_vocab_size(gv->tb), tok_bytes_get, gv->tb, eos, n_eos);
    if (!gv->v) {
        fprintf(stderr, "sglc %s: out of memory building the vocabulary\n", cmd);
        return -1;
    }
    return 0;
}

static void gvocab_free(gvocab *gv)
{
    grammar_vocab_free(gv->v);
    tok_bytes_free(gv->tb);
    if (gv->t) tok_destroy(gv->t);
}

/* Compile per kind: 's' schema text, 'r' regex, 'e' EBNF. */
static grammar *compile_kind(int kind, const char *text, size_t len, char *err, size_t errlen)
{
    if (kind == 'r') return grammar_compile_regex(text, len, err, errlen);
    if (kind == 'e') return grammar_compile_ebnf(text, len, NULL, err, errlen);
    strbuf b = {0};
    grammar_json_opts o = {.whitespace_pattern = NULL, .any_whitespace = 1, .strict = 0};
    if (grammar_schema_to_ebnf(text, len, &o, &b, err, errlen) < 0) {
        free(strbuf_take(&b));
        return NULL;
    }
    char *ebnf = strbuf_take(&b);
    if (!ebnf) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    grammar *g = grammar_compile_ebnf(ebnf, strlen(ebnf), NULL, err, errlen);
    free(ebnf);
    return g;
}

static int mask_has(const uint32_t *mask, int32_t id) { return (mask[id >> 5] >> (id & 31)) & 1; }

/* ---- grammar-check ---------------------------------------------------------- */

int cmd_grammar_check(int argc, char **argv)
{
    const char *schema = NULL, *regex = NULL, *ebnf = NULL;
    static const int shown[] = {ARG_ID_tokenizer_path, ARG_COUNT};
    const args_extra extra[] = {
        {.name = "--json-schema", .metavar = "FILE", .help = "A JSON Schema file.", .value = &schema},
        {.name = "--regex", .metavar = "PATTERN", .help = "A regular expression (the whole output must match).", .value = &regex},
        {.name = "--ebnf", .metavar = "FILE", .help = "A GBNF-style EBNF grammar file (start rule root).", .value = &ebnf},
        {0},
    };
    const args_cmd c = {
        .usage = "usage: sglc grammar-check (--json-schema FILE | --regex PATTERN | --ebnf FILE) [--tokenizer-path DIR]",
        .about = "Reads one JSON string per line on stdin (a candidate output), writes {\"accepted\": true|false} "
                 "per line. With --tokenizer-path the text is tokenized and each token checked against the "
                 "mask. A grammar that does not compile: the reason on stderr, exit 3.",
        .extra = extra,
        .shown = shown,
        .only_shown = true,
    };
    args_server a;
    int prc = cli_args_parse("grammar-check", &c, false, &a, argc, argv);
    if (prc >= 0) return prc;
    int nsrc = !!schema + !!regex + !!ebnf;
    if (nsrc != 1) {
        fprintf(stderr, "sglc grammar-check: give exactly one of --json-schema, --regex, --ebnf\n");
        args_server_free(&a);
        return 2;
    }
    char err[1024] = "";
    size_t len = 0;
    char *text = NULL;
    int kind = regex ? 'r' : ebnf ? 'e' : 's';
    if (regex) {
        text = strdup(regex);
        len = strlen(regex);
    } else {
        text = fileio_read(schema ? schema : ebnf, 64u << 20, &len);
        if (!text) {
            fprintf(stderr, "sglc grammar-check: cannot read %s\n", schema ? schema : ebnf);
            args_server_free(&a);
            return 2;
        }
    }
    grammar *g = compile_kind(kind, text, len, err, sizeof err);
    free(text);
    if (!g) {
        fprintf(stderr, "sglc grammar-check: the grammar does not compile: %s\n", err);
        args_server_free(&a);
        return 3;
    }
    gvocab gv = {0};
    int use_tok = a.tokenizer_path != NULL;
    if (use_tok && gvocab_load(&gv, a.tokenizer_path, "grammar-check") < 0) {
        gvocab_free(&gv);
        grammar_free(g);
        args_server_free(&a);
        return 1;
    }
    args_server_free(&a);
    grammar_matcher *m = grammar_matcher_new(g, use_tok ? gv.v : NULL);
    uint32_t *mask = use_tok ? calloc(grammar_mask_words(gv.v), sizeof *mask) : NULL;
    if (!m || (use_tok && !mask)) {
        fprintf(stderr, "sglc grammar-check: out of memory\n");
        return 1;
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    while ((n = getline(&line, &cap, stdin)) >= 0) {
        size_t l = (size_t)n;
        while (l && (line[l - 1] == '\n' || line[l - 1] == '\r')) l--;
        if (!l) continue;
        json_error_t je;
        json_t *s = json_loadb(line, l, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
        if (!s || !json_is_string(s)) {
            printf("{\"accepted\":false,\"error\":\"each line must be a JSON string\"}\n");
            json_decref(s);
            fflush(stdout);
            continue;
        }
        const char *str = json_string_value(s);
        size_t sl = json_string_length(s);
        grammar_matcher_reset(m);
        int ok = 1;
        const char *why = NULL;
        if (!use_tok) {
            ok = grammar_matcher_accept_bytes(m, str, sl) && grammar_matcher_can_end(m);
        } else {
            tok_ids ids = {0};
            if (tok_encode(gv.t, str, sl, false, &ids) < 0) ok = 0, why = "tokenizing failed";
            for (size_t i = 0; ok && i < ids.n; i++) {
                grammar_matcher_fill_mask(m, mask);
                int in = mask_has(mask, ids.ids[i]);
                int acc = grammar_matcher_accept_token(m, ids.ids[i]);
                if (in != acc) why = "mask disagrees with accept_token", ok = 0;
                else ok = acc;
            }
            if (ok) {
                grammar_matcher_fill_mask(m, mask);
                const int32_t *eos;
                size_t n_eos = tok_eos_ids(gv.t, &eos);
                ok = 0;
                for (size_t k = 0; k < n_eos; k++) ok |= mask_has(mask, eos[k]);
                if (ok != grammar_matcher_can_end(m)) why = "end-token mask disagrees with can_end", ok = 0;
            }
            tok_ids_free(&ids);
        }
        if (why) printf("{\"accepted\":false,\"error\":\"%s\"}\n", why);
        else printf("{\"accepted\":%s}\n", ok ? "true" : "false");
        fflush(stdout);
        json_decref(s);
    }
    free(line);
    free(mask);
    grammar_matcher_free(m);
    grammar_free(g);
    gvocab_free(&gv);
    return 0;
}

/* ---- bench-grammar ---------------------------------------------------------- */

typedef struct dvec {
    double *p;
    size_t n, cap;
} dvec;

static void dpush(dvec *d, double x)
{
    if (d->n == d->cap) {
        d->cap = d->cap ? d->cap * 2 : 1024;
        double *np = realloc(d->p, d->cap * sizeof *np);
        if (!np) return;
        d->p = np;
    }
    d->p[d->n++] = x;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double pct(dvec *d, double q)
{
    if (!d->n) return 0;
    size_t i = (size_t)(q * (double)(d->n - 1) + 0.5);
    return d->p[i];
}

typedef struct slist {
    char **p;
    size_t n, cap;
} slist;

static void spush(slist *l, const char *s)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 256;
        char **np = realloc(l->p, l->cap * sizeof *np);
        if (!np) return;
        l->p = np;
    }
    l->p[l->n++] = strdup(s);
}

static int cmp_s(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

static void list_dir(const char *dir, int depth, slist *out)
{
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (ends_with(e->d_name, ".json") || ends_with(e->d_name, ".ebnf") || ends_with(e->d_name, ".gbnf") ||
            ends_with(e->d_name, ".regex"))
            spush(out, path);
        else if (depth == 0) list_dir(path, 1, out);
    }
    closedir(d);
}

static FILE *steps_f; /* SGLC_BENCH_STEPS */
static size_t steps_schema;

/* One timed mask: wall µs into mt, CPU µs into mc. */
static void timed_mask(grammar_matcher *m, uint32_t *mask, dvec *mt, dvec *mc, int step)
{
    double c0 = cpu_s(), t0 = now_s();
    grammar_matcher_fill_mask(m, mask);
    double t1 = now_s(), c1 = cpu_s();
    dpush(mt, (t1 - t0) * 1e6);
    dpush(mc, (c1 - c0) * 1e6);
    if (steps_f) fprintf(steps_f, "%zu %d %.1f %.1f\n", steps_schema, step, (t1 - t0) * 1e6, (c1 - c0) * 1e6);
}

/* Walk one instance (text != NULL) or a random walk; mask times into
 * mt (wall) and mc (CPU). */
static void bench_walk(grammar_matcher *m, const gvocab *gv, uint32_t *mask, const char *text, size_t tl,
                       dvec *mt, dvec *mc, unsigned *seed)
{
    int32_t V = grammar_vocab_size(gv->v);
    if (text) {
        tok_ids ids = {0};
        if (tok_encode(gv->t, text, tl, false, &ids) == 0)
            for (size_t i = 0; i < ids.n; i++) {
                timed_mask(m, mask, mt, mc, (int)i);
                if (!grammar_matcher_accept_token(m, ids.ids[i])) break;
            }
        tok_ids_free(&ids);
        return;
    }
    const int32_t *eos;
    size_t n_eos = tok_eos_ids(gv->t, &eos);
    for (int step = 0; step < 256; step++) {
        timed_mask(m, mask, mt, mc, step);
        if (step >= 64 && n_eos && mask_has(mask, eos[0])) break;
        /* a uniformly random allowed token (the k-th set bit), skipping
         * the end token before step 64 when anything else is allowed */
        size_t words = grammar_mask_words(gv->v);
        int32_t na = 0;
        for (size_t k = 0; k < words; k++) na += __builtin_popcount(mask[k]);
        int end_on = n_eos && mask_has(mask, eos[0]);
        if (end_on && na > 1 && step < 64) mask[eos[0] >> 5] &= ~(1u << (eos[0] & 31)), na--;
        if (!na) break;
        *seed = *seed * 1103515245u + 12345u;
        int32_t kth = (int32_t)((*seed >> 8) % (uint32_t)na), pick = -1;
        for (size_t k = 0; k < words && pick < 0; k++) {
            int c = __builtin_popcount(mask[k]);
            if (kth >= c) {
                kth -= c;
                continue;
            }
            uint32_t x = mask[k];
            for (; kth > 0; kth--) x &= x - 1;
            pick = (int32_t)(k * 32 + (size_t)__builtin_ctz(x));
        }
        if (pick < 0 || pick >= V) break;
        if (!grammar_matcher_accept_token(m, pick) || grammar_matcher_is_terminated(m)) break;
    }
}

int cmd_bench_grammar(int argc, char **argv)
{
    const char *schemas = NULL, *result = NULL;
    long long limit = 0;
    static const int shown[] = {ARG_ID_tokenizer_path, ARG_COUNT};
    const args_extra extra[] = {
        {.name = "--schemas", .metavar = "DIR", .help = "Folder of schemas (*.json, *.ebnf, *.gbnf, *.regex; one level of sub-folders).", .value = &schemas},
        {.name = "--result-filename", .metavar = "F", .help = "Append the result JSON line here.", .value = &result},
        {.name = "--limit", .metavar = "N", .help = "At most N schemas (sorted by path; 0 = all).", .ival = &limit, .lo = 0, .hi = 1e9, .def = "0"},
        {0},
    };
    const args_cmd c = {
        .usage = "usage: sglc bench-grammar --tokenizer-path DIR --schemas DIR [--result-filename F] [--limit N]",
        .about = "Compile time and per-token mask time over a folder of schemas, one thread; prints and appends "
                 "{schemas, compiled, compile_ms_p50, compile_ms_p99, mask_us_p50, mask_us_p99, mask_us_p999, mask_cpu_us_p50, "
                 "mask_cpu_us_p99, mask_cpu_us_p999} (wall and thread-CPU µs per mask).",
        .extra = extra,
        .shown = shown,
        .only_shown = true,
    };
    args_server a;
    int prc = cli_args_parse("bench-grammar", &c, false, &a, argc, argv);
    if (prc >= 0) return prc;
    if (!a.tokenizer_path || !schemas) {
        fprintf(stderr, "sglc bench-grammar: --tokenizer-path and --schemas are required\n");
        args_server_free(&a);
        return 2;
    }
    gvocab gv;
    if (gvocab_load(&gv, a.tokenizer_path, "bench-grammar") < 0) {
        gvocab_free(&gv);
        args_server_free(&a);
        return 1;
    }
    slist files = {0};
    list_dir(schemas, 0, &files);
    qsort(files.p, files.n, sizeof *files.p, cmp_s);
    if (limit > 0 && files.n > (size_t)limit) {
        for (size_t i = (size_t)limit; i < files.n; i++) free(files.p[i]);
        files.n = (size_t)limit;
    }
    dvec ct = {0}, mt = {0}, mc = {0};
    const char *steps_path = getenv("SGLC_BENCH_STEPS");
    steps_f = steps_path ? fopen(steps_path, "w") : NULL;
    size_t compiled = 0;
    uint32_t *mask = calloc(grammar_mask_words(gv.v), sizeof *mask);
    unsigned seed = 1234;
    int verbose = getenv("SGLC_BENCH_VERBOSE") != NULL; /* per-schema lines on stderr */
    for (size_t i = 0; i < files.n && mask; i++) {
        size_t len;
        char *text = fileio_read(files.p[i], 64u << 20, &len);
        if (!text) continue;
        int kind = ends_with(files.p[i], ".regex") ? 'r' : ends_with(files.p[i], ".json") ? 's' : 'e';
        char *inst = NULL;
        size_t inst_len = 0;
        const char *src = text;
        size_t src_len = len;
        char *schema_txt = NULL;
        json_t *doc = NULL;
        if (kind == 's') {
            json_error_t je;
            doc = json_loadb(text, len, 0, &je);
            json_t *sch = doc ? json_object_get(doc, "schema") : NULL;
            json_t *tests = doc ? json_object_get(doc, "tests") : NULL;
            if (sch && json_is_array(tests)) {
                schema_txt = json_dumps(sch, JSON_COMPACT | JSON_ENCODE_ANY);
                if (schema_txt) src = schema_txt, src_len = strlen(schema_txt);
                for (size_t k = 0; k < json_array_size(tests) && !inst; k++) {
                    json_t *t = json_array_get(tests, k);
                    json_t *valid = json_object_get(t, "valid");
                    json_t *data = json_object_get(t, "data");
                    if (data && (!valid || json_is_true(valid))) {
                        inst = json_dumps(data, JSON_COMPACT | JSON_ENCODE_ANY);
                        if (inst) inst_len = strlen(inst);
                    }
                }
            }
        }
        char err[512];
        double t0 = now_s();
        grammar *g = compile_kind(kind, src, src_len, err, sizeof err);
        double dt = now_s() - t0;
        if (!g && verbose) fprintf(stderr, "%s: %s\n", files.p[i], err);
        if (g) {
            compiled++;
            dpush(&ct, dt * 1e3);
            grammar_matcher *m = grammar_matcher_new(g, gv.v);
            size_t n0 = mt.n;
            double w0 = now_s();
            if (m) {
                steps_schema = i;
                bench_walk(m, &gv, mask, inst, inst_len, &mt, &mc, &seed);
            }
            if (verbose)
                fprintf(stderr, "%s: compile %.3f ms, %zu masks, walk %.1f ms, grammar %zu bytes\n", files.p[i], dt * 1e3,
                        mt.n - n0, (now_s() - w0) * 1e3, grammar_bytes(g));
            grammar_matcher_free(m);
            grammar_free(g);
        }
        free(inst);
        free(schema_txt);
        json_decref(doc);
        free(text);
    }
    qsort(ct.p, ct.n, sizeof *ct.p, cmp_d);
    qsort(mt.p, mt.n, sizeof *mt.p, cmp_d);
    qsort(mc.p, mc.n, sizeof *mc.p, cmp_d);
    if (steps_f) fclose(steps_f);
    steps_f = NULL;
    char line[1024];
    snprintf(line, sizeof line,
             "{\"schemas\":%zu,\"compiled\":%zu,\"compile_ms_p50\":%.3f,\"compile_ms_p99\":%.3f,"
             "\"mask_us_p50\":%.1f,\"mask_us_p99\":%.1f,\"mask_us_p999\":%.1f,\"mask_cpu_us_p50\":%.1f,"
             "\"mask_cpu_us_p99\":%.1f,\"mask_cpu_us_p999\":%.1f,\"masks\":%zu,\"vocab\":%d}",
             files.n, compiled, pct(&ct, 0.5), pct(&ct, 0.99), pct(&mt, 0.5), pct(&mt, 0.99), pct(&mt, 0.999), pct(&mc, 0.5),
             pct(&mc, 0.99), pct(&mc, 0.999), mt.n,
             grammar_vocab_size(gv.v));
    puts(line);
    if (result) {
        FILE *f = fopen(result, "a");
        if (f) {
            fprintf(f, "%s\n", line);
            fclose(f);
        } else fprintf(stderr, "sglc bench-grammar: cannot append to %s\n", result);
    }
    for (size_t i = 0; i < files.n; i++) free(files.p[i]);
    free(files.p);
    free(ct.p);
    free(mt.p);
    free(mc.p);
    free(mask);
    gvocab_free(&gv);
    args_server_free(&a);
    return 0;
}
