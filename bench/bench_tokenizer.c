/* bench_tokenizer — tokenizer load time, memory and single-thread encode
 * throughput (docs/PERF.md, section "Tokenizer").
 *
 *   build/bench/bench_tokenizer --tokenizer-path DIR [--reps N] FILE...
 *
 * For each FILE (prose, code, ... from bench/tokenizer_texts.mjs) it first
 * validates: the ids must equal FILE.ids (written by the npm reference,
 * bench/bench_tokenizer_ref.mjs) when that file exists, otherwise
 * decode(encode(text)) must give the text back; a file that fails is
 * reported and not timed.
 * then times encode of the whole file N times and prints the median MB/s
 * and tokens. Load time is the median of N loads; memory is the tokenizer's
 * own count of retained heap bytes and the process RSS growth of one load,
 * both against the size of tokenizer.json.
 *
 * Times are this thread's CPU time (CLOCK_THREAD_CPUTIME_ID): the shared
 * build machines run many jobs at once, and CPU time of a single-threaded,
 * non-blocking loop is what wall time would be on an idle core.  Wall
 * medians are printed too. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "tokenizer/tokenizer.h"
#include "util/timeutil.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static long rss_kb(const char *field)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    long v = -1;
    size_t fl = strlen(field);
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, field, fl)) v = strtol(line + fl + 1, NULL, 10);
    fclose(f);
    return v;
}

static char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)len + 1);
    if (!buf || fread(buf, 1, (size_t)len, f) != (size_t)len) { free(buf); fclose(f); return NULL; }
    fclose(f);
    buf[len] = 0;
    *n = (size_t)len;
    return buf;
}

int main(int argc, char **argv)
{
    const char *dir = NULL;
    int reps = 5;
    const char *files[16];
    int nfiles = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--tokenizer-path") && i + 1 < argc) dir = argv[++i];
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (nfiles < 16) files[nfiles++] = argv[i];
    }
    if (!dir || reps < 1 || reps > 100) {
        fprintf(stderr, "usage: bench_tokenizer --tokenizer-path DIR [--reps N] FILE...\n");
        return 2;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    struct stat st;
    if (stat(path, &st)) { fprintf(stderr, "no %s\n", path); return 1; }
    double file_mb = (double)st.st_size / 1e6;

    char err[512];
    double loads[100], loads_wall[100];
    long rss0 = rss_kb("VmRSS:");
    tok_tokenizer *t = NULL;
    for (int r = 0; r < reps; r++) {
        double t0 = time_now_sec(), c0 = cpu_now();
        tok_tokenizer *x = tok_load_dir(dir, NULL, err, sizeof err);
        loads[r] = (cpu_now() - c0) * 1e3;
        loads_wall[r] = (time_now_sec() - t0) * 1e3;
        if (!x) { fprintf(stderr, "load failed: %s\n", err); return 1; }
        if (r == 0) t = x;
        else tok_destroy(x);
    }
    long rss1 = rss_kb("VmRSS:"), hwm = rss_kb("VmHWM:");
    printf("tokenizer: %s (tokenizer.json %.1f MB, vocab %zu)\n", dir, file_mb, tok_vocab_size(t));
    double lmed = median(loads, reps);
    printf("load: median %.1f ms CPU (%.1f ms wall) over %d loads, min %.1f ms CPU\n", lmed, median(loads_wall, reps),
           reps, loads[0]);
    printf("memory: retained %.1f MB (%.2fx file); RSS after loads +%.1f MB; peak RSS %.1f MB\n",
           (double)tok_memory_bytes(t) / 1e6, (double)tok_memory_bytes(t) / 1e6 / file_mb,
           (double)(rss1 - rss0) / 1e3, (double)hwm / 1e3);

    for (int f = 0; f < nfiles; f++) {
        size_t n = 0;
        char *text = slurp(files[f], &n);
        if (!text) { fprintf(stderr, "cannot read %s\n", files[f]); continue; }
        tok_ids ids = {0};
        if (tok_encode(t, text, n, false, &ids)) { fprintf(stderr, "encode failed\n"); return 1; }
        char ref[4200];
        snprintf(ref, sizeof ref, "%s.ids", files[f]);
        json_error_t je;
        json_t *want = json_load_file(ref, 0, &je);
        bool ok = true;
        const char *how = "round trip";
        if (want) {
            how = "npm reference ids";
            ok = json_is_array(want) && json_array_size(want) == ids.n;
            for (size_t i = 0; ok && i < ids.n; i++) ok = json_integer_value(json_array_get(want, i)) == ids.ids[i];
            json_decref(want);
        } else {
            char *back = NULL;
            size_t bn = 0;
            tok_decode_opts o = {0};
            ok = !tok_decode(t, ids.ids, ids.n, &o, &back, &bn) && bn == n && !memcmp(back, text, n);
            free(back);
        }
        if (!ok) {
            printf("%s: ids differ from the %s, not timed\n", files[f], how);
            free(text);
            tok_ids_free(&ids);
            continue;
        }
        printf("%s: validated against the %s\n", files[f], how);
        size_t ntok = ids.n;
        double rates[100], wall[100], cold[100];
        for (int r = 0; r < reps; r++) { /* cold: empty word cache each run */
            ids.n = 0;
            tok_thread_cache_clear();
            double c0 = cpu_now();
            tok_encode(t, text, n, false, &ids);
            cold[r] = (double)n / 1e6 / (cpu_now() - c0);
        }
        for (int r = 0; r < reps; r++) { /* warm: the cache filled by the previous run */
            ids.n = 0;
            double t0 = time_now_sec(), c0 = cpu_now();
            tok_encode(t, text, n, false, &ids);
            rates[r] = (double)n / 1e6 / (cpu_now() - c0);
            wall[r] = (double)n / 1e6 / (time_now_sec() - t0);
        }
        double med = median(rates, reps);
        printf("encode %s: %.2f MB, %zu tokens; median over %d runs: cold cache %.1f MB/s CPU, warm %.1f MB/s CPU "
               "(%.1f MB/s wall), %.2f M tokens/s warm\n",
               files[f], (double)n / 1e6, ntok, reps, median(cold, reps), med, median(wall, reps),
               med * (double)ntok / (double)n);
        tok_ids_free(&ids);
        free(text);
    }
    tok_destroy(t);
    return 0;
}
