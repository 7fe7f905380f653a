/* model_ep — expert parallelism, EPLB and the expert distribution
 * recorder (see model_ep.h for the design). */
#include "model/model_ep.h"

#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model/model_impl.h"
#include "model/model_load.h"
#include "util/errmsg.h"
#include "util/log.h"
#include "util/strbuf.h"

/* ---- the recorder -------------------------------------------------------- */

typedef struct erec_pass {
    long id;          /* forward pass id */
    int T;            /* tokens of the pass (per_token) */
    int32_t *cnt;     /* (L, E) choices per layer and expert */
    int32_t *ids;     /* (L, T, K) top-k ids (per_token), or NULL */
} erec_pass;

static struct {
    pthread_mutex_t mu;
    model_erec_mode mode;
    int cap;          /* ring size in passes */
    int unbounded;    /* buffer size -1 (SGLang: keep every pass): the ring grows, never wraps */
    int metrics;      /* --enable-expert-distribution-metrics */
    int recording;
    int L, E, K;      /* shape, set by the first MoE layer recorded (0: none yet) */
    long pass_id;     /* forwards seen */
    int touched;      /* the current pass recorded a layer */
    int cur_T, cur_idcap;
    int32_t *cur_cnt; /* (L, E) the current pass */
    int32_t *cur_ids; /* (L, cur_idcap) the current pass's ids (per_token) */
    erec_pass *ring;  /* (cap) */
    int n_ring, head; /* passes kept, next slot */
    int64_t *tot;     /* (L, E) metrics: every choice since start */
    long tot_passes;
} R = {.mu = PTHREAD_MUTEX_INITIALIZER};

int model_erec_configure(const char *mode, int buffer_size, int metrics, char *err, size_t errlen)
{
    model_erec_mode md = MODEL_EREC_OFF;
    if (!mode) md = metrics ? MODEL_EREC_STAT : MODEL_EREC_OFF; /* SGLang: metrics imply stat */
    else if (!strcmp(mode, "stat") || !strcmp(mode, "stat_approx")) md = MODEL_EREC_STAT;
    else if (!strcmp(mode, "per_pass")) md = MODEL_EREC_PER_PASS;
    else if (!strcmp(mode, "per_token")) md = MODEL_EREC_PER_TOKEN;
    else {
        errmsg_set(err, errlen, "--expert-distribution-recorder-mode %s: expected stat, stat_approx, "
                                "per_pass or per_token", mode);
        return -1;
    }
    pthread_mutex_lock(&R.mu);
    R.mode = md;
    R.unbounded = buffer_size < 0;
    R.cap = buffer_size > 0 ? buffer_size : R.unbounded ? 64 : 1000;
    R.metrics = metrics;
    R.recording = metrics && md != MODEL_EREC_OFF; /* SGLang auto-starts for the metrics */
    pthread_mutex_unlock(&R.mu);
    return 0;
}

model_erec_mode model_erec_mode_get(void) { return R.mode; }

static void ring_clear(void)
{
    for (int i = 0; R.ring && i < R.cap; i++) {
        free(R.ring[i].cnt), free(R.ring[i].ids);
        memset(&R.ring[i], 0, sizeof R.ring[i]);
    }
    R.n_ring = R.head = 0;
}

int model_erec_start(void)
{
    pthread_mutex_lock(&R.mu);
    int rc = R.mode == MODEL_EREC_OFF ? -1 : 0;
    if (!rc) {
        ring_clear();
        R.recording = 1;
    }
    pthread_mutex_unlock(&R.mu);
    return rc;
}

int model_erec_stop(void)
{
    pthread_mutex_lock(&R.mu);
    int rc = R.mode == MODEL_EREC_OFF ? -1 : 0;
    R.recording = 0;
    R.touched = 0;
    pthread_mutex_unlock(&R.mu);
    return rc;
}

/* (L, E) int32 counts as a JSON array of arrays. */
static json_t *counts_json(const int32_t *c, const int64_t *c64, int L, int E)
{
    json_t *a = json_array();
    for (int il = 0; a && il < L; il++) {
        json_t *row = json_array();
        for (int e = 0; row && e < E; e++)
            json_array_append_new(row, json_integer(c ? c[(size_t)il * E + e] : c64[(size_t)il * E + e]));
        json_array_append_new(a, row);
    }
    return a;
}

char *model_erec_dump_json(void)
{
    pthread_mutex_lock(&R.mu);
    if (R.mode == MODEL_EREC_OFF) {
        pthread_mutex_unlock(&R.mu);
        return NULL;
    }
    static const char *const names[] = {"", "stat", "per_pass", "per_token"};
    json_t *o = json_pack("{s:i,s:s,s:i,s:i,s:i,s:i}", "rank", 0, "recorder_mode", names[R.mode],
                          "num_layers", R.L, "num_logical_experts", R.E, "top_k", R.K,
                          "num_passes", R.n_ring);
    int first = (R.head - R.n_ring + R.cap) % (R.cap > 0 ? R.cap : 1);
    if (o && R.mode == MODEL_EREC_STAT) {
        int64_t *sum = calloc((size_t)R.L * R.E + 1, sizeof *sum);
        for (int i = 0; sum && i < R.n_ring; i++) {
            const erec_pass *p = &R.ring[(first + i) % R.cap];
            for (size_t j = 0; j < (size_t)R.L * R.E; j++) sum[j] += p->cnt[j];
        }
        if (sum) json_object_set_new(o, "logical_count", counts_json(NULL, sum, R.L, R.E));
        free(sum);
    } else if (o) {
        json_t *recs = json_array();
        for (int i = 0; recs && i < R.n_ring; i++) {
            const erec_pass *p = &R.ring[(first + i) % R.cap];
            json_t *r = json_pack("{s:I,s:i}", "forward_pass_id", (json_int_t)p->id, "num_tokens", p->T);
            if (!r) continue;
            if (R.mode == MODEL_EREC_PER_PASS) {
                json_object_set_new(r, "logical_count", counts_json(p->cnt, NULL, R.L, R.E));
            } else {
                json_t *ly = json_array();
                for (int il = 0; ly && il < R.L; il++) {
                    json_t *toks = json_array();
                    for (int t = 0; toks && t < p->T; t++) {
                        json_t *k = json_array();
                        for (int j = 0; k && j < R.K; j++)
                            json_array_append_new(k, json_integer(p->ids[((size_t)il * p->T + t) * R.K + j]));
                        json_array_append_new(toks, k);
                    }
                    json_array_append_new(ly, toks);
                }
                json_object_set_new(r, "topk_ids", ly);
            }
            json_array_append_new(recs, r);
        }
        json_object_set_new(o, "records", recs);
    }
    pthread_mutex_unlock(&R.mu);
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return s;
}

char *model_erec_metrics_text(void)
{
    strbuf b = {0};
    pthread_mutex_lock(&R.mu);
    if (R.metrics && R.tot) {
        strbuf_printf(&b, "# HELP sglc:expert_routed_tokens_total Tokens the router sent to each expert "
                           "(top-k choices), since start.\n# TYPE sglc:expert_routed_tokens_total counter\n");
        for (int il = 0; il < R.L; il++)
            for (int e = 0; e < R.E; e++)
                if (R.tot[(size_t)il * R.E + e])
                    strbuf_printf(&b, "sglc:expert_routed_tokens_total{layer=\"%d\",expert=\"%d\"} %lld\n", il, e,
                                   (long long)R.tot[(size_t)il * R.E + e]);
        strbuf_printf(&b, "# HELP sglc:expert_balancedness Mean over max of the per-expert counts of a MoE "
                           "layer (1 = perfectly even), since start.\n# TYPE sglc:expert_balancedness gauge\n");
        for (int il = 0; il < R.L; il++) {
            int64_t mx = 0, s = 0;
            for (int e = 0; e < R.E; e++) {
                int64_t v = R.tot[(size_t)il * R.E + e];
                s += v;
                if (v > mx) mx = v;
            }
            if (mx) strbuf_printf(&b, "sglc:expert_balancedness{layer=\"%d\"} %.6f\n", il, (double)s / R.E / mx);
        }
        strbuf_printf(&b, "# HELP sglc:expert_forward_passes_total Forward passes that routed tokens.\n"
                           "# TYPE sglc:expert_forward_passes_total counter\nsglc:expert_forward_passes_total %ld\n",
                       R.tot_passes);
    }
    pthread_mutex_unlock(&R.mu);
    return strbuf_take(&b);
}

/* Shape the recorder on first use (lock held).  0, or -1 (other shape / OOM). */
static int erec_shape(int L, int E, int K)
{
    if (R.L) return R.L == L && R.E == E && R.K == K ? 0 : -1;
    R.cur_cnt = calloc((size_t)L * E, sizeof(int32_t));
    R.ring = calloc((size_t)R.cap, sizeof *R.ring);
    R.tot = calloc((size_t)L * E, sizeof(int64_t));
    if (!R.cur_cnt || !R.ring || !R.tot) {
        free(R.cur_cnt), free(R.ring), free(R.tot);
        R.cur_cnt = NULL, R.ring = NULL, R.tot = NULL;
        return -1;
    }
    R.L = L, R.E = E, R.K = K;
    return 0;
}

/* One MoE layer's choices into the recorder (rank 0's forward). */
static void erec_layer(int L, int E, int il, int T, int K, const int32_t *sel)
{
    if (R.mode == MODEL_EREC_OFF) return;
    pthread_mutex_lock(&R.mu);
    if ((R.recording || R.metrics) && !erec_shape(L, E, K)) {
        if (R.metrics) {
            for (int a = 0; a < T * K; a++) R.tot[(size_t)il * E + sel[a]]++;
            R.touched |= 2;
        }
        if (R.recording) {
            if (!(R.touched & 1)) { /* the pass's first layer */
                memset(R.cur_cnt, 0, sizeof(int32_t) * (size_t)L * E);
                R.cur_T = T;
            }
            R.touched |= 1;
            for (int a = 0; a < T * K; a++) R.cur_cnt[(size_t)il * E + sel[a]]++;
            if (R.mode == MODEL_EREC_PER_TOKEN && T == R.cur_T) {
                if (R.cur_idcap < T * K) {
                    free(R.cur_ids);
                    R.cur_ids = calloc((size_t)L * T * K, sizeof(int32_t));
                    R.cur_idcap = R.cur_ids ? T * K : 0;
                }
                if (R.cur_ids) memcpy(R.cur_ids + (size_t)il * T * K, sel, sizeof(int32_t) * (size_t)T * K);
            }
        }
    }
    pthread_mutex_unlock(&R.mu);
}

/* End of a forward: keep the pass in the ring. */
static void erec_pass_end(void)
{
    if (R.mode == MODEL_EREC_OFF) return;
    pthread_mutex_lock(&R.mu);
    R.pass_id++;
    if (R.touched & 2) R.tot_passes++;
    if ((R.touched & 1) && R.recording && R.unbounded && R.n_ring == R.cap) { /* grow (head == n_ring) */
        erec_pass *g = realloc(R.ring, sizeof *g * (size_t)R.cap * 2);
        if (g) {
            memset(g + R.cap, 0, sizeof *g * (size_t)R.cap);
            R.ring = g;
            R.head = R.cap;
            R.cap *= 2;
        }
    }
    if ((R.touched & 1) && R.recording) {
        erec_pass *p = &R.ring[R.head];
        free(p->cnt), free(p->ids);
        size_t n = (size_t)R.L * R.E;
        p->cnt = malloc(n * sizeof(int32_t));
        p->ids = NULL;
        if (p->cnt) memcpy(p->cnt, R.cur_cnt, n * sizeof(int32_t));
        if (R.mode == MODEL_EREC_PER_TOKEN && R.cur_ids) {
            size_t ni = (size_t)R.L * R.cur_T * R.K;
            p->ids = calloc(ni + 1, sizeof(int32_t));
            /* the first cur_idcap-wide rows were written at stride T*K */
            if (p->ids) memcpy(p->ids, R.cur_ids, ni * sizeof(int32_t));
        }
        p->id = R.pass_id - 1;
        p->T = R.cur_T;
        if (p->cnt && (R.mode != MODEL_EREC_PER_TOKEN || p->ids)) {
            R.head = (R.head + 1) % R.cap;
            if (R.n_ring < R.cap) R.n_ring++;
        }
    }
    R.touched = 0;
    pthread_mutex_unlock(&R.mu);
}

/* ---- placement ----------------------------------------------------------- */

/* A balanced placement of E experts with counts c (E) on `size` ranks of
 * n_local slots: the n_phys - E spare slots go one by one to the expert
 * with the most load per copy (at most one copy per rank while it can),
 * then the copies, heaviest first, each to the least loaded rank with a
 * free slot that does not hold the expert yet.  p2l (size * n_local).
 * Deterministic (ties: lowest index).  0, or -1 (OOM). */
static int place_balanced(const int64_t *c, int E, int size, int n_local, int32_t *p2l)
{
    const int P = size * n_local;
    int *rep = calloc((size_t)E, sizeof(int)), *fill = calloc((size_t)size, sizeof(int));
    double *load = calloc((size_t)size, sizeof(double));
    int *item = malloc(sizeof(int) * (size_t)P);
    int rc = -1;
    if (!rep || !fill || !load || !item) goto out;
    for (int e = 0; e < E; e++) rep[e] = 1;
    for (int x = E; x < P; x++) {
        int best = -1;
        for (int pass = 0; pass < 2 && best < 0; pass++)
            for (int e = 0; e < E; e++) {
                if (pass == 0 && rep[e] >= size) continue;
                if (best < 0 || (double)c[e] / rep[e] > (double)c[best] / rep[best]) best = e;
            }
        rep[best]++;
    }
    int n = 0;
    for (int e = 0; e < E; e++)
        for (int j = 0; j < rep[e]; j++) item[n++] = e;
    /* heaviest copy first (stable insertion sort: P is small) */
    for (int i = 1; i < n; i++) {
        int v = item[i], j = i;
        while (j > 0 && (double)c[item[j - 1]] / rep[item[j - 1]] < (double)c[v] / rep[v]) {
            item[j] = item[j - 1];
            j--;
        }
        item[j] = v;
    }
    for (int i = 0; i < n; i++) {
        int e = item[i], best = -1;
        for (int pass = 0; pass < 2 && best < 0; pass++)
            for (int r = 0; r < size; r++) {
                if (fill[r] >= n_local) continue;
                if (pass == 0) {
                    int has = 0;
                    for (int s = 0; s < fill[r]; s++) has |= p2l[r * n_local + s] == e;
                    if (has) continue;
                }
                if (best < 0 || load[r] < load[best]) best = r;
            }
        p2l[best * n_local + fill[best]++] = e;
        load[best] += (double)c[e] / rep[e];
    }
    rc = 0;
out:
    free(rep), free(fill), free(load), free(item);
    return rc;
}

/* nhold / myidx of layer il from its p2l row. */
static void derive_layer(model_ep *ep, int il)
{
    const int E = ep->E;
    int16_t *nh = ep->nhold + (size_t)il * E, *mi = ep->myidx + (size_t)il * E;
    const int32_t *p = ep->p2l + (size_t)il * ep->n_phys;
    for (int e = 0; e < E; e++) nh[e] = 0, mi[e] = -1;
    for (int r = 0; r < ep->size; r++)
        for (int e = 0; e < E; e++) {
            int has = 0;
            for (int s = 0; s < ep->n_local; s++) has |= p[r * ep->n_local + s] == e;
            if (!has) continue;
            if (r == ep->rank) mi[e] = nh[e];
            nh[e]++;
        }
}

/* --init-expert-location: a JSON document (text or file) with
 * "physical_to_logical_map" ((layers, n_phys) or one (n_phys) row for
 * every layer) or "logical_count" ((layers, E) or (E)) placed balanced. */
static int init_location(model_ep *ep, const model_config *c, const char *spec, char *err, size_t errlen)
{
    json_error_t je;
    json_t *j = spec[0] == '{' ? json_loads(spec, 0, &je) : json_load_file(spec, 0, &je);
    if (!j) {
        errmsg_set(err, errlen, "--init-expert-location %s: not trivial, and not a readable JSON document "
                                "(%s, line %d)", spec, je.text, je.line);
        return -1;
    }
    json_t *map = json_object_get(j, "physical_to_logical_map"), *cnt = json_object_get(j, "logical_count");
    const int want = map ? ep->n_phys : ep->E;
    json_t *a = map ? map : cnt;
    int rc = -1;
    if (!json_is_array(a)) {
        errmsg_set(err, errlen, "--init-expert-location: expected a \"physical_to_logical_map\" or "
                                "\"logical_count\" array");
        goto out;
    }
    int per_layer = json_is_array(json_array_get(a, 0));
    if (per_layer && (int)json_array_size(a) != c->n_layer) {
        errmsg_set(err, errlen, "--init-expert-location: %zu rows for %d layers", json_array_size(a), c->n_layer);
        goto out;
    }
    int64_t *row = calloc((size_t)want, sizeof *row);
    if (!row) goto out;
    for (int il = 0; il < c->n_layer; il++) {
        json_t *r = per_layer ? json_array_get(a, (size_t)il) : a;
        if (!json_is_array(r) || (int)json_array_size(r) != want) {
            errmsg_set(err, errlen, "--init-expert-location: layer %d: expected %d values (%s)", il, want,
                       map ? "physical experts = experts + --ep-num-redundant-experts" : "experts");
            free(row);
            goto out;
        }
        for (int k = 0; k < want; k++) {
            json_t *v = json_array_get(r, (size_t)k);
            row[k] = json_is_integer(v) ? json_integer_value(v) : -1;
            if (row[k] < 0 || (map && row[k] >= ep->E)) {
                errmsg_set(err, errlen, "--init-expert-location: layer %d entry %d is not %s", il, k,
                           map ? "an expert id" : "a count >= 0");
                free(row);
                goto out;
            }
        }
        int32_t *p = ep->p2l + (size_t)il * ep->n_phys;
        if (map) {
            for (int k = 0; k < want; k++) p[k] = (int32_t)row[k];
            for (int e = 0; e < ep->E; e++) {
                int seen = 0;
                for (int k = 0; k < want; k++) seen |= p[k] == e;
                if (!seen && model_config_layer_moe(c, il)) {
                    errmsg_set(err, errlen, "--init-expert-location: layer %d places expert %d nowhere", il, e);
                    free(row);
                    goto out;
                }
            }
        } else if (place_balanced(row, ep->E, ep->size, ep->n_local, p)) {
            errmsg_set(err, errlen, "out of memory");
            free(row);
            goto out;
        }
    }
    free(row);
    rc = 0;
out:
    json_decref(j);
    return rc;
}

int model_ep_parse_location(const model_config *c, int size, int n_redundant, const char *spec, int32_t **out,
                            char *err, size_t errlen)
{
    *out = NULL;
    model_ep ep = {.size = size, .E = c->n_expert, .n_layer = c->n_layer, .n_phys = c->n_expert + n_redundant};
    if (size < 1 || ep.E < 1 || n_redundant < 0 || c->n_layer < 1 || ep.n_phys % size) {
        errmsg_set(err, errlen, "%d experts + %d redundant do not divide over %d ranks", ep.E, n_redundant, size);
        return -1;
    }
    ep.n_local = ep.n_phys / size;
    ep.p2l = calloc((size_t)c->n_layer * ep.n_phys, sizeof(int32_t));
    if (!ep.p2l) {
        errmsg_set(err, errlen, "out of memory");
        return -1;
    }
    if (init_location(&ep, c, spec, err, errlen)) {
        free(ep.p2l);
        return -1;
    }
    *out = ep.p2l;
    return 0;
}

/* ---- setup --------------------------------------------------------------- */

int model_ep_setup(model_weights *w, const model_ep_opts *o, char *err, size_t errlen)
{
    const model_config *c = &w->cfg;
    w->ep = NULL;
    const int ES = o && o->ep_size > 1 ? o->ep_size : 1, T = w->tp.tp_n;
    const int red = o && o->n_redundant > 0 ? o->n_redundant : 0;
    const int loc = o && o->init_location && strcmp(o->init_location, "trivial");
    if (ES == 1) {
        if (T > 1 && c->n_expert > 0 && c->moe_inter % T) {
            errmsg_set(err, errlen, "--tp-size %d: the expert width (%d) is not divisible by it", T, c->moe_inter);
            return -1;
        }
        if (red) {
            errmsg_set(err, errlen, "--ep-num-redundant-experts %d needs --ep-size > 1", red);
            return -1;
        }
        if (o && o->eplb_every > 0) {
            errmsg_set(err, errlen, "--enable-eplb needs --ep-size > 1 (it moves experts between the "
                                    "expert-parallel ranks)");
            return -1;
        }
        if (loc) {
            errmsg_set(err, errlen, "--init-expert-location %s needs --ep-size > 1", o->init_location);
            return -1;
        }
        return 0;
    }
    if (w->tp.pp_n > 1) {
        errmsg_set(err, errlen, "--ep-size %d with --pp-size %d is not supported yet", ES, w->tp.pp_n);
        return -1;
    }
    if (T % ES) {
        errmsg_set(err, errlen, "--ep-size %d must divide --tp-size %d (the expert-parallel group lives "
                                "inside the tensor-parallel one)", ES, T);
        return -1;
    }
    if (c->n_expert <= 0) {
        errmsg_set(err, errlen, "--ep-size %d: %s has no experts (expert parallelism needs a MoE model)", ES,
                   c->architecture);
        return -1;
    }
    const int P = c->n_expert + red, moe_tp = T / ES;
    if (P % ES) {
        errmsg_set(err, errlen, "--ep-size %d: %d experts%s do not divide evenly over the %d expert-parallel "
                                "ranks", ES, P, red ? " (with the redundant ones)" : "", ES);
        return -1;
    }
    if (c->moe_inter % moe_tp) {
        errmsg_set(err, errlen, "--ep-size %d: the expert width (%d) is not divisible by the %d ranks of an "
                                "expert group", ES, c->moe_inter, moe_tp);
        return -1;
    }
    model_ep *ep = calloc(1, sizeof *ep);
    if (!ep) {
        errmsg_set(err, errlen, "out of memory");
        return -1;
    }
    ep->size = ES, ep->moe_tp = moe_tp;
    ep->rank = w->tp.tp_rank / moe_tp, ep->moe_tp_rank = w->tp.tp_rank % moe_tp; /* SGLang's split */
    ep->E = c->n_expert, ep->n_layer = c->n_layer;
    ep->n_phys = P, ep->n_local = P / ES;
    ep->every = o->eplb_every > 0 ? o->eplb_every : 0;
    ep->min_util = o->eplb_min_util;
    ep->chunk = o->eplb_layers_per_chunk;
    ep->p2l = calloc((size_t)c->n_layer * P, sizeof(int32_t));
    ep->nhold = calloc((size_t)c->n_layer * c->n_expert, sizeof(int16_t));
    ep->myidx = calloc((size_t)c->n_layer * c->n_expert, sizeof(int16_t));
    ep->cnt = calloc((size_t)c->n_layer * c->n_expert, sizeof(int64_t));
    ep->pending = ep->every ? calloc((size_t)c->n_layer * P, sizeof(int32_t)) : NULL;
    if (!ep->p2l || !ep->nhold || !ep->myidx || !ep->cnt || (ep->every && !ep->pending)) {
        model_ep_free(ep);
        errmsg_set(err, errlen, "out of memory");
        return -1;
    }
    for (int il = 0; il < c->n_layer; il++)
        for (int s = 0; s < P; s++) ep->p2l[(size_t)il * P + s] = s % c->n_expert; /* trivial */
    if (loc && init_location(ep, c, o->init_location, err, errlen)) {
        model_ep_free(ep);
        return -1;
    }
    for (int il = 0; il < c->n_layer; il++) derive_layer(ep, il);
    w->ep = ep;
    w->tp.moe_inter = c->moe_inter / moe_tp;
    int held = 0, il0 = 0;
    while (il0 < c->n_layer - 1 && !model_config_layer_moe(c, il0)) il0++;
    for (int e = 0; e < c->n_expert; e++) held += ep->myidx[(size_t)il0 * c->n_expert + e] >= 0;
    log_info("expert parallelism: rank %d (EP rank %d) holds %d of %d experts of layer %d", w->tp.rank, ep->rank,
             held, c->n_expert, il0);
    if (w->tp.rank == 0)
        log_info("expert parallelism: %d ranks of %d experts%s (%d physical, %d per rank), %d rank%s per "
                 "expert, no all-to-all (--moe-a2a-backend none)%s", ES, c->n_expert,
                 red ? " + redundant" : "", P, P / ES, moe_tp, moe_tp > 1 ? "s" : "",
                 ep->every ? ", EPLB on" : "");
    return 0;
}

void model_ep_free(model_ep *ep)
{
    if (!ep) return;
    free(ep->p2l), free(ep->nhold), free(ep->myidx), free(ep->cnt), free(ep->pending);
    free(ep);
}

int model_ep_inter0(const model_weights *w)
{
    return (w->ep ? w->ep->moe_tp_rank : w->tp.tp_rank) * w->tp.moe_inter;
}

int model_ep_holds(const model_weights *w, int il, int e)
{
    return !w->ep || w->ep->myidx[(size_t)il * w->ep->E + e] >= 0;
}

/* ---- forward hooks ------------------------------------------------------- */

void model_ep_routed(model *m, int il, int T, int K, const int32_t *sel, float *wt, const int32_t *order,
                     const int32_t *off)
{
    model_weights *w = m->w;
    const model_config *c = &w->cfg;
    if (w->tp.rank == 0) erec_layer(c->n_layer, c->n_expert, il, T, K, sel);
    model_ep *ep = w->ep;
    if (!ep) return;
    if (ep->every)
        for (int a = 0; a < T * K; a++) ep->cnt[(size_t)il * ep->E + sel[a]]++;
    for (int e = 0; e < ep->E; e++) { /* assignments of another rank weigh 0 here */
        int p0, p1, n = off[e + 1] - off[e];
        if (!n) continue;
        if (!model_ep_rows(ep, il, e, off[e], n, &p0, &p1)) p0 = p1 = off[e];
        for (int p = off[e]; p < off[e + 1]; p++)
            if (p < p0 || p >= p1) wt[order[p]] = 0.0f;
    }
}

/* Move to the placement p2l_new of layer il: load the experts this rank
 * now holds and did not, free those it gave up.  0 or -1 (err). */
static int apply_layer(model_weights *w, int il, const int32_t *p2l_new, char *err, size_t errlen)
{
    model_ep *ep = w->ep;
    model_layer *l = &w->layers[il];
    const int E = ep->E;
    int16_t *old = malloc(sizeof(int16_t) * (size_t)E);
    if (!old) {
        errmsg_set(err, errlen, "out of memory");
        return -1;
    }
    memcpy(old, ep->myidx + (size_t)il * E, sizeof(int16_t) * (size_t)E);
    memcpy(ep->p2l + (size_t)il * ep->n_phys, p2l_new, sizeof(int32_t) * (size_t)ep->n_phys);
    derive_layer(ep, il);
    int rc = 0;
    for (int e = 0; e < E && !rc; e++) {
        int had = old[e] >= 0, has = ep->myidx[(size_t)il * E + e] >= 0;
        if (has && !had) {
            rc = model_load_expert(w, il, e, err, errlen);
            ep->n_moved++;
        } else if (had && !has) {
            linear_free(&l->egate[e]), linear_free(&l->eup[e]), linear_free(&l->edown[e]);
            memset(&l->egate[e], 0, sizeof l->egate[e]);
            memset(&l->eup[e], 0, sizeof l->eup[e]);
            memset(&l->edown[e], 0, sizeof l->edown[e]);
        }
    }
    free(old);
    return rc;
}

/* Apply the pending placement to the next chunk of MoE layers (all of
 * them when --eplb-rebalance-layers-per-chunk is unset).  0, or -1 after
 * breaking the group with the rank's message. */
static int apply_chunk(model *m)
{
    model_weights *w = m->w;
    model_ep *ep = w->ep;
    const model_config *c = &w->cfg;
    char err[512] = "";
    int done = 0, rc = 0;
    while (ep->pend_layer < c->n_layer && (ep->chunk <= 0 || done < ep->chunk) && !rc) {
        int il = ep->pend_layer++;
        if (!model_config_layer_moe(c, il)) continue;
        rc = apply_layer(w, il, ep->pending + (size_t)il * ep->n_phys, err, sizeof err);
        done++;
    }
    ep->pend_steps++;
    if (rc) {
        char msg[600];
        snprintf(msg, sizeof msg, "EPLB rebalance failed on rank %d: %s", w->tp.rank, err[0] ? err : "out of memory");
        log_error("%s", msg);
        if (w->tp.g) dist_abort(w->tp.g, msg);
        return -1;
    }
    while (ep->pend_layer < c->n_layer && !model_config_layer_moe(c, ep->pend_layer)) ep->pend_layer++;
    if (ep->pend_layer < c->n_layer) return 0;
    ep->pend_on = 0;
    ep->n_rebalance++;
    log_info("EPLB: rebalance %d on rank %d: %d experts loaded here, in %d step%s", ep->n_rebalance, w->tp.rank,
             (int)(ep->n_moved - ep->pend_moved), ep->pend_steps, ep->pend_steps > 1 ? "s" : "");
    return 0;
}

/* EPLB: rank 0's counts to every rank, the same new placement everywhere. */
static int rebalance(model *m)
{
    model_weights *w = m->w;
    model_ep *ep = w->ep;
    const model_config *c = &w->cfg;
    size_t n = (size_t)c->n_layer * ep->E;
    if (w->tp.g && dist_bcast(w->tp.g, ep->cnt, n * sizeof(int64_t), 0, DIST_TIMEOUT_DEFAULT)) return -1;
    /* SGLang's _check_rebalance_needed: the current placement's balancedness
     * (per MoE layer: mean over max of the ranks' loads, an expert's count
     * shared by its copies), averaged over the layers that routed tokens */
    double util = 0.0;
    int n_util = 0;
    double *load = calloc((size_t)ep->size, sizeof(double));
    for (int il = 0; load && il < c->n_layer; il++) {
        if (!model_config_layer_moe(c, il)) continue;
        memset(load, 0, sizeof(double) * (size_t)ep->size);
        const int32_t *pl = ep->p2l + (size_t)il * ep->n_phys;
        const int64_t *cl = ep->cnt + (size_t)il * ep->E;
        for (int s = 0; s < ep->n_phys; s++) load[s / ep->n_local] += (double)cl[pl[s]] / ep->nhold[(size_t)il * ep->E + pl[s]];
        double mx = 0.0, sum = 0.0;
        for (int r = 0; r < ep->size; r++) sum += load[r], mx = load[r] > mx ? load[r] : mx;
        if (mx > 0.0) util += sum / ep->size / mx, n_util++;
    }
    free(load);
    if (n_util && util / n_util > ep->min_util) {
        if (w->tp.rank == 0)
            log_info("EPLB: skipped rebalancing: balancedness %.3f > --eplb-min-rebalancing-utilization-threshold %.3f",
                     util / n_util, ep->min_util);
        memset(ep->cnt, 0, n * sizeof(int64_t));
        ep->iters = 0;
        return 0;
    }
    /* the new placement of every MoE layer now (same counts on every rank);
     * applied --eplb-rebalance-layers-per-chunk layers per forward */
    for (int il = 0; il < c->n_layer; il++)
        if (model_config_layer_moe(c, il) &&
            place_balanced(ep->cnt + (size_t)il * ep->E, ep->E, ep->size, ep->n_local,
                           ep->pending + (size_t)il * ep->n_phys)) {
            if (w->tp.g) dist_abort(w->tp.g, "EPLB: out of memory");
            return -1;
        }
    ep->pend_on = 1, ep->pend_layer = 0, ep->pend_steps = 0, ep->pend_moved = ep->n_moved;
    memset(ep->cnt, 0, n * sizeof(int64_t));
    ep->iters = 0;
    return apply_chunk(m);
}

int model_ep_after_forward(model *m)
{
    if (m->w->tp.rank == 0) erec_pass_end();
    model_ep *ep = m->w->ep;
    if (!ep || !ep->every) return 0;
    int rc = ep->pend_on ? apply_chunk(m) : 0; /* a rebalance in chunks goes on */
    if (++ep->iters < ep->every || ep->pend_on || rc) return rc;
    return rebalance(m);
}
