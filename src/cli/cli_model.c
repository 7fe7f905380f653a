/* cli_model — see cli_model.h. */
#include "cli/cli_model.h"

#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli_gguf.h"
#include "hub/hub.h"
#include "kernels/kernels.h"
#include "lora/lora_shard.h"
#include "model/gguf_model.h"
#include "util/cpu.h"
#include "util/log.h"

void cli_model_opts_init(cli_model_opts *o)
{
    memset(o, 0, sizeof *o);
    o->load.dtype = -1;
    o->load.load_format = MODEL_LOAD_AUTO;
    o->kv_dtype = -1;
}

static char g_model_dir[4096];

const char *cli_model_dir(void) { return g_model_dir; }

/* Every rank loaded its shard: meet on g (a rank that failed to load is
 * named here).  0; -1 after printing the error (a worker rank exits). */
static int cli_model_tp_meet(dist_group *g, int dp_rank)
{
    /* loading may take long on a slow disk: a long timeout for this one */
    if (!dist_barrier(g, 3600 * 1000)) return 0;
    if (dp_rank >= 0) fprintf(stderr, "error: dp_rank %d: tensor parallelism: %s\n", dp_rank, dist_error(g));
    else fprintf(stderr, "error: tensor parallelism: %s\n", dist_error(g));
    if (dist_rank(g) != 0) exit(1);
    return -1;
}

/* A worker rank's group k (DP x TP: one thread per replica). */
typedef struct tp_serve_arg {
    const cli_model_opts *o;
    model *m;
    dist_group *g;
    int k, n, rank;
    int rc;
} tp_serve_arg;

static void *tp_serve_main(void *arg)
{
    tp_serve_arg *a = arg;
    int n_slots, slot = cli_dist_slot(&a->o->dist, a->g, a->k, a->n, &n_slots);
    if (slot >= 0) { /* this replica's slot (cli_dist.h; mpirun places its own processes) */
        char who[64];
        snprintf(who, sizeof who, "dp_rank %d tensor-parallel rank %d", a->k, a->rank);
        cli_dist_pin_slot(&a->o->dist, slot, cli_threads(a->o), n_slots, who);
    }
    tpool *pool = tpool_create(cli_threads(a->o));
    a->rc = pool ? model_tp_worker_loop(a->m, pool) : -1;
    tpool_destroy(pool);
    if (a->rc && a->n > 1) { /* one broken replica: this process's other groups go with it (rank 0 exits) */
        log_error("dp_rank %d: tensor-parallel rank %d failed; exiting", a->k, a->rank);
        fflush(stdout), fflush(stderr);
        _exit(1);
    }
    return NULL;
}

/* A worker rank (> 0) after every group met: serve them (group 0 on this
 * thread, the others on threads of their own) until rank 0 shuts each
 * down, then exit (0; 1 on a failure).  Never returns. */
static void cli_model_tp_serve(const cli_model_opts *o, model **ms, dist_group **gs, dist_group **sgs, int n)
{
    lora_shard_install(); /* rank 0's LoRA loads reach this rank (lora/lora_shard.c) */
    tp_serve_arg a[CLI_DIST_MAX_RANKS];
    pthread_t th[CLI_DIST_MAX_RANKS];
    int started[CLI_DIST_MAX_RANKS] = {0}, rc = 0;
    for (int k = 0; k < n; k++)
        a[k] = (tp_serve_arg){.o = o, .m = ms[k], .g = gs[k], .k = k, .n = n, .rank = dist_rank(gs[k])};
    for (int k = 1; k < n; k++) {
        if (pthread_create(&th[k], NULL, tp_serve_main, &a[k])) {
            log_error("tensor-parallel rank %d: cannot start the thread of dp_rank %d", a[k].rank, k);
            fflush(stdout), fflush(stderr);
            _exit(1);
        }
        started[k] = 1;
    }
    tp_serve_main(&a[0]);
    rc |= a[0].rc;
    for (int k = 1; k < n; k++)
        if (started[k]) {
            pthread_join(th[k], NULL);
            rc |= a[k].rc;
        }
    for (int k = n - 1; k >= 0; k--) {
        model_free(ms[k]);
        dist_free(sgs[k]);
        dist_free(gs[k]);
    }
    exit(rc ? 1 : 0);
}

int cli_model_load_replicas(const cli_model_opts *o, int n, model **out)
{
    for (int i = 0; i < n; i++) out[i] = NULL;
    if (kernels_init(NULL)) {
        fprintf(stderr, "error: kernel selection failed (SGLC_KERNELS?)\n");
        return -1;
    }
    char kline[512];
    log_info("kernels: %s; %s", kernels_desc(), kernels_choice_line(kline, sizeof kline));
    /* the LM head is f32 math already (f32 hidden states, bf16 weights
     * widened exactly, f32 accumulation: what SGLang's fp32 lm_head does;
     * it is x_exact, so the measured vdpbf16ps choice leaves it on FMA);
     * only the AVX-512 switch SGLC_BF16_DOT=1 rounds its activations */
    const char *dot = getenv("SGLC_BF16_DOT");
    if (o->fp32_lm_head && kernels_choice()->bf16_dot == 2) {
        fprintf(stderr, "error: --enable-fp32-lm-head: SGLC_BF16_DOT=%s rounds the activations of every bf16 "
                        "matmul, the LM head included, to bf16; unset it\n", dot);
        return -1;
    }
    kern_set_pack_threads(o->pack_threads > 0 ? o->pack_threads : cli_threads(o)); /* 0: the compute threads */
    char err[1024];
    model_load_opts lo = o->load;
    char dir[4096];
    struct stat st;
    if (lo.model_path && stat(lo.model_path, &st) == 0 && S_ISREG(st.st_mode)) {
        /* a model file (GGUF): no hub resolution */
        snprintf(g_model_dir, sizeof g_model_dir, "%s", lo.model_path);
    } else if (lo.model_path) {
        hub_opts ho = {0};
        ho.revision = o->revision;
        ho.cache_dir = o->download_dir;
        ho.skip_weights = lo.load_format == MODEL_LOAD_DUMMY;
        if (hub_resolve(lo.model_path, &ho, dir, sizeof dir, err, sizeof err) != 0) {
            fprintf(stderr, "error: %s\n", err);
            return -1;
        }
        lo.model_path = dir;
        snprintf(g_model_dir, sizeof g_model_dir, "%s", dir);
    }
    if (o->kv_dtype == -2) {
        fprintf(stderr, "error: --kv-cache-dtype fp4_e2m1 is not supported on CPUs (no fp4 attention path); "
                        "use fp8_e4m3, fp8_e5m2 or bfloat16\n");
        return -1;
    }
    if (o->kv_dtype == DTYPE_I8 && o->kv_scales_path) {
        fprintf(stderr, "error: --kv-cache-dtype int8 computes its scales per token and KV head when it "
                        "writes them; --quantization-param-path (per-layer fp8 scales) does not apply\n");
        return -1;
    }
    /* tensor parallelism: the groups first (rank 0 starts the other ranks;
     * a worker rank gets its one group and never returns from here) */
    dist_group *dgs[CLI_DIST_MAX_RANKS] = {NULL};
    if (n < 1 || n > CLI_DIST_MAX_RANKS) {
        fprintf(stderr, "error: %d model replicas: between 1 and %d\n", n, CLI_DIST_MAX_RANKS);
        return -1;
    }
    int ng = cli_dist_start_groups(&o->dist, cli_threads(o), n, dgs, err, sizeof err);
    if (ng < 0) {
        if (n > 1)
            fprintf(stderr, "error: --dp-size %d with --tp-size %d / --pp-size %d: %s\n", n, o->dist.tp_size,
                    o->dist.pp_size, err);
        else
            fprintf(stderr, "error: --tp-size %d / --pp-size %d: %s\n", o->dist.tp_size, o->dist.pp_size, err);
        return -1;
    }
    if (n > 1 && ng == 0) { /* no groups to make: callers share one model instead (dp.h) */
        fprintf(stderr, "error: %d model replicas without tensor or pipeline parallelism\n", n);
        return -1;
    }
    if (model_erec_configure(o->erec_mode, o->erec_buffer, o->erec_metrics, err, sizeof err)) {
        fprintf(stderr, "error: %s\n", err);
        for (int k = 0; k < ng; k++) dist_abort(dgs[k], err);
        return -1;
    }
    dist_group *sgs[CLI_DIST_MAX_RANKS] = {NULL};
    int want = ng > 1 ? ng : 1; /* groups this process is a rank of (every rank: all of them) */
    for (int k = 0; k < want; k++) {
        dist_group *dg = dgs[k], *sg = NULL; /* TP x PP: this rank's stage of group k */
        if (dg && cli_dist_stage_group(&o->dist, dg, &sg, err, sizeof err)) {
            fprintf(stderr, "error: --tp-size %d / --pp-size %d: %s\n", o->dist.tp_size, o->dist.pp_size, err);
            for (int q = k; q < ng; q++) dist_abort(dgs[q], err);
            for (int q = 0; q < k; q++) {
                model_free(out[q]);
                out[q] = NULL;
            }
            return -1;
        }
        sgs[k] = sg;
        model *m;
        if (k == 0) { /* this rank's shard, once */
            lo.dist = dg;
            lo.dist_tp = sg;
            lo.pp_size = o->dist.pp_size;
            lo.ep = &o->ep;
            m = model_load(&lo, err, sizeof err);
            char kerr[900];
            if (m && o->kv_scales_path && cli_kv_scales_load(m, o->kv_scales_path, o->kv_dtype, kerr, sizeof kerr)) {
                snprintf(err, sizeof err, "--quantization-param-path: %s", kerr);
                model_free(m);
                m = NULL;
            }
            if (m) model_set_pp_micro(m, o->dist.pp_micro);
        } else { /* replica k: the same shard, driving group k */
            m = model_share_group(out[0], dg, sg, err, sizeof err);
        }
        if (m && dg && dist_size(dg) > 1 && cli_model_tp_meet(dg, ng > 1 ? k : -1)) {
            model_free(m);
            m = NULL;
            err[0] = 0; /* printed */
        } else if (!m && ng > 1) {
            fprintf(stderr, "error: dp_rank %d: %s\n", k, err);
        } else if (!m) {
            fprintf(stderr, "error: %s\n", err);
        }
        if (!m) {
            for (int q = k; q < ng; q++)
                if (dgs[q] && !dist_broken(dgs[q])) dist_abort(dgs[q], err[0] ? err : "start-up failed");
            for (int q = 0; q < k; q++) {
                model_free(out[q]); /* tells its workers to stop */
                out[q] = NULL;
            }
            return -1;
        }
        out[k] = m;
        if (dg && dist_size(dg) > 1 && dist_rank(dg) == 0) cli_dist_watch(dg, ng > 1 ? k : -1);
        if (ng > 1 && dist_rank(dg) == 0) {
            if (k == 0)
                log_info("dp_rank 0: its tensor-parallel rank 0 loaded (%.2f GiB)",
                         (double)model_weight_bytes(m) / 1073741824.0);
            else
                log_info("dp_rank %d: its tensor-parallel rank 0 runs over dp_rank 0's shard (one copy)", k);
        }
    }
    if (dgs[0] && dist_size(dgs[0]) > 1 && dist_rank(dgs[0]) != 0) cli_model_tp_serve(o, out, dgs, sgs, want);
    return 0;
}

model *cli_model_load(const cli_model_opts *o)
{
    model *m = NULL;
    return cli_model_load_replicas(o, 1, &m) ? NULL : m;
}

/* SGLang's KV-cache scales file (its kv_cache_scales_loader schema):
 *   {"model_type": ..., "kv_cache": {"dtype": "float8_e4m3fn",
 *    "scaling_factor": {"<tp rank>": {"<layer>": scale, ...}}}}
 * One scale per layer, used for both K and V; sglc runs one rank, so rank
 * "0".  Every layer must have a finite positive scale; the dtype, when
 * the cache is fp8, must be the cache's. */
int cli_kv_scales_load(model *m, const char *path, int kv_dtype, char *err, size_t errlen)
{
    json_error_t je;
    json_t *j = json_load_file(path, 0, &je);
    if (!j) {
        snprintf(err, errlen, "%s: %s (line %d)", path, je.text, je.line);
        return -1;
    }
    int rc = -1, n = model_get_config(m)->n_layer;
    float *sc = calloc((size_t)(n > 0 ? n : 1), sizeof(float));
    json_t *kvc = json_object_get(j, "kv_cache");
    const char *fdt = json_string_value(json_object_get(kvc, "dtype"));
    json_t *rank = json_object_get(json_object_get(kvc, "scaling_factor"), "0");
    if (!sc) {
        snprintf(err, errlen, "out of memory");
    } else if (!json_is_object(rank)) {
        snprintf(err, errlen, "%s: no kv_cache.scaling_factor[\"0\"] object (SGLang's KV scales format)", path);
    } else if (fdt && (kv_dtype == DTYPE_F8_E4M3 || kv_dtype == DTYPE_F8_E5M2) &&
               dtype_parse(fdt) != kv_dtype) {
        snprintf(err, errlen, "%s: scales are for %s, the KV cache is %s", path, fdt, dtype_name((dtype)kv_dtype));
    } else {
        rc = 0;
        for (int l = 0; l < n && !rc; l++) {
            char key[16];
            snprintf(key, sizeof key, "%d", l);
            json_t *v = json_object_get(rank, key);
            double d = json_is_number(v) ? json_number_value(v) : -1.0;
            if (!(d > 0.0 && d < 1e30)) {
                snprintf(err, errlen, "%s: layer %d has no positive scale", path, l);
                rc = -1;
            }
            sc[l] = (float)d;
        }
        if (!rc && json_object_size(rank) != (size_t)n) {
            snprintf(err, errlen, "%s: %zu scales for a model of %d layers", path, json_object_size(rank), n);
            rc = -1;
        }
        if (!rc && model_set_kv_scales(m, sc, sc, n)) {
            snprintf(err, errlen, "out of memory");
            rc = -1;
        }
    }
    free(sc);
    json_decref(j);
    return rc;
}

int cli_tokenizer_load(const char *dir, bool required, tok_tokenizer **out)
{
    *out = NULL;
    char gpath[4096], gerr[512];
    if (gguf_model_path(dir, 0, gpath, sizeof gpath, gerr, sizeof gerr) == 1)
        return cli_tokenizer_load_gguf(gpath, required, out);
    char tjson[4200], terr[512];
    snprintf(tjson, sizeof tjson, "%s/tokenizer.json", dir);
    if (!required && access(tjson, R_OK) != 0) return 0;
    tok_load_opts to = {0};
    *out = tok_load_dir(dir, &to, terr, sizeof terr);
    if (!*out) {
        fprintf(stderr, "error: tokenizer: %s\n", terr);
        return -1;
    }
    return 0;
}

dtype cli_kv_dtype(const cli_model_opts *o, const model *m)
{
    if (o->kv_dtype >= 0) return (dtype)o->kv_dtype;
    return model_weight_dtype(m) == DTYPE_BF16 ? DTYPE_BF16 : DTYPE_F32;
}

int cli_threads(const cli_model_opts *o)
{
    int n = o->threads > 0 ? o->threads : cpu_get()->n_cores;
    if (n < 1) n = 1;
    int tp = (o->dist.tp_size > 1 ? o->dist.tp_size : 1) * (o->dist.pp_size > 1 ? o->dist.pp_size : 1); /* the total is shared by the ranks */
    if (tp > 1 && o->dist.dp_size > 1) tp *= o->dist.dp_size; /* DP x TP: by every replica's ranks */
    return n / tp > 0 ? n / tp : 1;
}
