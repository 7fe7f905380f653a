/* model_ep — expert parallelism (--ep-size), EPLB and the expert
 * distribution recorder.
 *
 * DESIGN: the EP group lives inside the tensor-parallel group, as in
 * SGLang: with --tp-size T --ep-size E (E divides T) the T ranks form E
 * expert groups of T / E ranks (moe_tp); EP rank r / moe_tp holds whole
 * experts, each one sliced over the moe_tp ranks of its group like TP
 * slices them (moe_tp = 1 when E == T: whole experts).  Attention, dense
 * MLPs and shared experts stay TP-sharded.  Placement: n_phys = experts +
 * --ep-num-redundant-experts physical slots, n_phys / E per EP rank,
 * slot s on EP rank s / n_local holding logical expert p2l[layer][s]
 * (trivial: s % experts, SGLang's init_trivial; or --init-expert-location).
 *
 * No all-to-all (--moe-a2a-backend none, SGLang's path without DeepEP):
 * every rank routes every token (the router is replicated and its input
 * identical on every rank), computes the grouped rows of the experts it
 * holds and gives the others weight 0; the MoE block's existing
 * all-reduce sums the contributions.  An expert held by h EP ranks
 * (redundant copies) splits its rows in h contiguous parts, one per
 * holder, so every assignment is computed exactly once.
 *
 * EPLB (--enable-eplb): every rank counts its routing choices; every
 * --eplb-rebalance-num-iterations forwards, at the end of a forward (the
 * same point on every rank: workers run one forward per command), rank 0
 * broadcasts its counts, every rank computes the same new placement
 * (replicate the heaviest experts, pack the slots onto ranks by load) and
 * reloads from the checkpoint the experts it newly holds, freeing the ones
 * it gave up.  Results do not change (only the order of the sum).
 *
 * The recorder is process-wide (the routes have no model in hand): the
 * MoE block of rank 0 hands it each layer's choices; passes are kept in a
 * ring of --expert-distribution-recorder-buffer-size forwards. */
#ifndef SGLC_MODEL_EP_H
#define SGLC_MODEL_EP_H

#include <stddef.h>
#include <stdint.h>

/* ---- recorder (process-wide; used by api_expert.c) ---------------------- */

typedef enum model_erec_mode {
    MODEL_EREC_OFF = 0,
    MODEL_EREC_STAT = 1,     /* stat / stat_approx: counts per (layer, expert) */
    MODEL_EREC_PER_PASS = 2, /* the counts of each forward pass */
    MODEL_EREC_PER_TOKEN = 3 /* the top-k expert ids of each token of each pass */
} model_erec_mode;

/* Configure the recorder (once, at start-up): mode name (SGLang's, NULL =
 * off), ring size in forward passes (0: 1000, -1: every pass), metrics: count every
 * routed token for /metrics and start recording at once.  0, or -1 with a
 * message for an unknown mode. */
int model_erec_configure(const char *mode, int buffer_size, int metrics, char *err, size_t errlen);
model_erec_mode model_erec_mode_get(void);
/* Start / stop recording (start clears what was recorded).  -1 when off. */
int model_erec_start(void);
int model_erec_stop(void);
/* What was recorded as a JSON text (owned, free()), NULL when off / OOM. */
char *model_erec_dump_json(void);
/* Prometheus lines of the expert metrics (owned), "" when not enabled. */
char *model_erec_metrics_text(void);

/* ---- expert parallelism (internal to src/model) -------------------------- */

struct model_weights;
struct model;

typedef struct model_ep_opts {
    int ep_size;                /* --ep-size (<= 1: none) */
    int n_redundant;            /* --ep-num-redundant-experts */
    const char *init_location;  /* --init-expert-location: NULL / "trivial", a JSON file or text */
    int eplb_every;             /* --enable-eplb: forwards between rebalances (0: off) */
    const char *eplb_algorithm; /* "auto" | "deepseek" */
    int eplb_layers_per_chunk;  /* --eplb-rebalance-layers-per-chunk: MoE layers moved per forward (0: all) */
    double eplb_min_util;       /* --eplb-min-rebalancing-utilization-threshold: skip a rebalance when
                                 * the placement's balancedness is above it (1.0: never skip) */
} model_ep_opts;

typedef struct model_ep {
    int size, rank;             /* EP ranks, this rank's EP index */
    int moe_tp, moe_tp_rank;    /* ranks per EP group (tp / ep) and this rank's index in it */
    int E, n_layer;             /* logical experts, layers */
    int n_phys, n_local;        /* physical slots, slots per EP rank */
    int32_t *p2l;               /* (n_layer, n_phys) logical expert of each slot */
    int16_t *nhold;             /* (n_layer, E) EP ranks holding the expert */
    int16_t *myidx;             /* (n_layer, E) this rank's index among them, -1: not held */
    int64_t *cnt;               /* (n_layer, E) EPLB: choices since the last rebalance */
    int every;                  /* EPLB period in forwards (0: off) */
    double min_util;            /* rebalance only at or below this balancedness */
    int chunk;                  /* MoE layers applied per forward (0: all at once) */
    int32_t *pending;           /* (n_layer, n_phys) placement being applied, when pend_on */
    int pend_on, pend_layer, pend_steps; /* a rebalance in progress: next layer, forwards so far */
    long pend_moved;            /* n_moved when it began */
    long iters;                 /* forwards since the last rebalance */
    int n_rebalance;            /* rebalances done */
    long n_moved;               /* experts loaded by rebalances on this rank */
} model_ep;

/* The placement --init-expert-location `spec` gives config c over `size`
 * EP ranks with n_redundant spare slots: *out (n_layer, n_experts +
 * n_redundant) logical expert per physical slot, owned (free()).  0, or
 * -1 with a message (also for sizes that do not divide).  Exposed for
 * tests/fuzz/fuzz_expert_location.c. */
struct model_config;
int model_ep_parse_location(const struct model_config *c, int size, int n_redundant, const char *spec,
                            int32_t **out, char *err, size_t errlen);
/* After model_tp_setup: the EP layout of w from o (NULL: none).  Sets
 * w->ep (owned) and this rank's expert width in w->tp.moe_inter.  0, or
 * -1 with a message (bad combination, bad placement). */
int model_ep_setup(struct model_weights *w, const model_ep_opts *o, char *err, size_t errlen);
void model_ep_free(model_ep *ep);
/* First column of this rank's expert slice (moe_inter units). */
int model_ep_inter0(const struct model_weights *w);
/* Whether this rank loads expert e of layer il. */
int model_ep_holds(const struct model_weights *w, int il, int e);
/* Assignments [*p0, *p1) of expert e's grouped rows [off, off + n) that
 * this rank computes; 0 when none. */
static inline int model_ep_rows(const model_ep *ep, int il, int e, int off, int n, int *p0, int *p1)
{
    if (!ep) {
        *p0 = off, *p1 = off + n;
        return n > 0;
    }
    int j = ep->myidx[(size_t)il * ep->E + e], h = ep->nhold[(size_t)il * ep->E + e];
    if (j < 0) return 0;
    *p0 = off + (int)((int64_t)n * j / h);
    *p1 = off + (int)((int64_t)n * (j + 1) / h);
    return *p1 > *p0;
}
/* Thread 0 of the MoE block of layer il, after routing and grouping:
 * record the choices (recorder, EPLB counts) and zero the weights of the
 * assignments another rank computes.  sel (T*K), w (T*K), order / off as
 * moe_group made them. */
void model_ep_routed(struct model *m, int il, int T, int K, const int32_t *sel, float *w,
                     const int32_t *order, const int32_t *off);
/* End of one forward on every rank: the recorder's pass boundary and the
 * EPLB period.  0, or -1 (a rebalance failed: the group is broken). */
int model_ep_after_forward(struct model *m);

#endif
