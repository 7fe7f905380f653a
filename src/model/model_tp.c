/* model_tp — tensor parallelism of one model over a process group
 * (dist/dist.h): the shard arithmetic, rank 0's commands to the other
 * ranks, their worker loop, the all-reduce and the logits gather.
 *
 * DESIGN: tensor parallelism is invisible above model.h.  Rank 0 is driven
 * exactly like a one-process model (scheduler, generate, benchmarks); its
 * model_kv_create / model_kv_destroy / model_forward send a command to the
 * other ranks first, which run the same call on their shard in
 * model_tp_worker_loop.  A command is one broadcast of TP_MSG bytes (a
 * header and, when it fits, the payload; a second broadcast carries the
 * rest):
 *   FORWARD     kv id, counts, then tokens, positions, seq_start,
 *               seq_kv_len, logit_rows and every sequence's slots (int32);
 *               rank 0 checked the batch, so every rank runs it
 *   KV_CREATE   id, slots, dtype: the worker makes its own cache (its KV
 *               heads only), addressed by the same slots
 *   KV_DESTROY  id
 *   SHUTDOWN    the workers return 0 (rank 0's weights are freed)
 *   LORA_LOAD   uid + an opaque description (lora/lora_shard.c): each
 *               worker loads its shard of the adapter through the hooks,
 *               then every rank's status is gathered to rank 0
 *   LORA_FREE   uids: the workers free those shards (a failed load)
 *   MAMBA_STATES / MAMBA_COPY  hybrid Mamba2 (mamba2.c): the workers size
 *               their state pools / copy a slot as rank 0's scheduler did;
 *               FORWARD then also carries seq_state and the checkpoints
 * LoRA rides on FORWARD too: the uids rank 0 freed since the last step
 * (model_tp_lora_release, queued by any thread: the shards go first), the
 * batch's adapters as uids (model_adapter.tp_uid) and seq_adapter.  Rank 0
 * holds its group's recursive lock around each command sequence (a forward
 * from send to gather, a LoRA load from send to the status gather), so a
 * load on an HTTP thread slots in between the scheduler's steps; one lock
 * per group, so the rank-0 models of several groups in one process
 * (--dp-size with --tp-size, cli/cli_dp_tp.h) run side by side.
 * Inside a forward every rank computes the same rows: replicated
 * embeddings and norms, its heads and MLP columns, and after each
 * row-parallel projection (o, down, the MoE block) a sum over the group
 * (model_tp_allreduce, thread 0 of the pool talks, the others wait at the
 * pool barrier).  The LM head is vocabulary-parallel: each rank computes
 * logits for its rows [vocab0, vocab0 + vocab_n) and rank 0 gathers them
 * (blocks padded to vocab_max).  Workers wait for the next command without
 * a timeout (an idle server), every collective inside a command with the
 * group's (--dist-timeout); a dead peer ends either wait at once.
 *
 * Pipeline parallelism (--pp-size) uses the same commands: the ranks are
 * stages of whole layers [layer0, layer1) (an even split; each loads only
 * its layers, except from a dummy source, which makes every tensor in
 * order); stage 0 embeds, each stage runs its layers and broadcasts its
 * residual rows to the next (model_pp_before / model_pp_after), the last
 * one runs the final norm and LM head and broadcasts the output rows,
 * which rank 0 returns.  A forward of more sequences than the micro-batch
 * size runs pipelined (decoder.c forward_pp_micro): the same broadcasts,
 * one round per tick, so stage p computes micro-batch i while p + 1
 * computes i - 1; else the stages run one after the other.
 * TP x PP (--tp-size T --pp-size P): rank = stage * T + tp_rank; a stage's
 * T ranks shard its layers as above, their all-reduces and the last
 * stage's logits gather run on the stage's group (tg, a dist_split of g),
 * the boundaries on g from each stage's TP rank 0.  A broken stage group
 * breaks g with its error (model_tp_stage_failed) so no stage waits on.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model_impl.h"
#include "util/log.h"
#include "util/timeutil.h"

#define TP_MSG 16384
#define TP_MAX_KV 64

enum { TP_CMD_FORWARD = 1, TP_CMD_KV_CREATE = 2, TP_CMD_KV_DESTROY = 3, TP_CMD_SHUTDOWN = 4,
       TP_CMD_LORA_LOAD = 5, TP_CMD_LORA_FREE = 6 };
enum { TP_CMD_MAMBA_STATES = 7, TP_CMD_MAMBA_COPY = 8 }; /* n_slots states of dtype dt; slot n_slots <- n_seqs */

typedef struct tp_hdr {
    int32_t cmd, kv_id;
    int32_t n_tokens, n_seqs, n_logits, want_hidden;
    int32_t n_slots, dt;
    int32_t n_free, n_ad;  /* FORWARD / LORA_FREE: uids freed; FORWARD: the batch's adapters */
    int32_t mamba, n_snap; /* FORWARD: 1 seq_state, 2 Mamba checkpoints follow (n_snap of them) */
    int32_t pp_mb, pad;    /* FORWARD: > 0, the stages pipeline micro-batches of pp_mb sequences */
    int64_t payload;       /* bytes after the header */
} tp_hdr;

#define TP_STATUS 512 /* a rank's LORA_LOAD status block: int32 rc + message */

/* rank 0's lock over its group (recursive: a forward may free a KV
 * cache).  One lock per group, so the rank-0 models of several groups in
 * one process (--dp-size with --tp-size: one group per replica) never
 * wait for each other; a group's lock is made on its first use and lives
 * as long as the process (groups are few: at most TP_MAX_GROUPS). */
#define TP_MAX_GROUPS 64
static struct {
    const struct dist_group *g;
    pthread_mutex_t mu;
} tp_locks[TP_MAX_GROUPS];
static int n_tp_locks;
static pthread_mutex_t tp_locks_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t tp_spill_mu; /* groups past the table share it (correct, only slower) */
static pthread_once_t tp_spill_once = PTHREAD_ONCE_INIT;

static void init_recursive(pthread_mutex_t *mu)
{
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(mu, &a);
    pthread_mutexattr_destroy(&a);
}

static void tp_spill_init(void) { init_recursive(&tp_spill_mu); }

static pthread_mutex_t *group_lock(const struct dist_group *g)
{
    pthread_mutex_t *mu = NULL;
    pthread_mutex_lock(&tp_locks_mu);
    for (int i = 0; i < n_tp_locks && !mu; i++)
        if (tp_locks[i].g == g) mu = &tp_locks[i].mu;
    if (!mu && n_tp_locks < TP_MAX_GROUPS) {
        tp_locks[n_tp_locks].g = g;
        init_recursive(&tp_locks[n_tp_locks].mu);
        mu = &tp_locks[n_tp_locks++].mu;
    }
    pthread_mutex_unlock(&tp_locks_mu);
    if (!mu) {
        pthread_once(&tp_spill_once, tp_spill_init);
        mu = &tp_spill_mu;
    }
    return mu;
}

void model_tp_lock(const model *m)
{
    if (m->tp.size <= 1 || m->tp.rank != 0) return;
    pthread_mutex_lock(group_lock(m->tp.g));
}

void model_tp_unlock(const model *m)
{
    if (m->tp.size <= 1 || m->tp.rank != 0) return;
    pthread_mutex_unlock(group_lock(m->tp.g));
}

/* LoRA: the workers' hooks, and rank 0's uids freed since the last step
 * (one group per process) */
static model_tp_lora_hooks lora_hooks;
static pthread_mutex_t rel_mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t *rel_uid;
static int rel_n, rel_cap;

void model_tp_set_lora_hooks(const model_tp_lora_hooks *h) { lora_hooks = *h; }

void model_tp_lora_release(uint64_t uid)
{
    if (!uid) return;
    pthread_mutex_lock(&rel_mu);
    if (rel_n == rel_cap) {
        int cap = rel_cap ? 2 * rel_cap : 16;
        uint64_t *a = realloc(rel_uid, sizeof *a * (size_t)cap);
        if (a) rel_uid = a, rel_cap = cap;
    }
    if (rel_n < rel_cap) rel_uid[rel_n++] = uid;
    else log_error("LoRA: out of memory queueing the release of adapter %llu on the worker ranks",
                   (unsigned long long)uid);
    pthread_mutex_unlock(&rel_mu);
}

/* groups rank 0 already shut down (a KV cache freed after its model) */
static struct dist_group *shut_groups[TP_MAX_GROUPS];
static int n_shut;

int model_tp_group_shut(const struct dist_group *g); /* cli/cli_dist.c reads it too */
static int is_shut(struct dist_group *g) { return model_tp_group_shut(g); }

int model_tp_setup(model_weights *w, struct dist_group *g, struct dist_group *tg, int pp_size, char *err,
                   size_t errlen)
{
    const model_config *c = &w->cfg;
    model_tp *t = &w->tp;
    memset(t, 0, sizeof *t);
    t->g = g && dist_size(g) > 1 ? g : NULL;
    t->size = t->g ? dist_size(g) : 1;
    t->rank = t->g ? dist_rank(g) : 0;
    /* pipeline parallelism: the ranks are stages of whole layers, each stage
     * tp_n consecutive ranks (rank = stage * tp_n + tp_rank) */
    t->pp_n = pp_size > 1 && t->g ? pp_size : 1;
    if (t->size % t->pp_n) {
        snprintf(err, errlen, "--pp-size %d: the group's %d ranks do not split into that many stages", t->pp_n,
                 t->size);
        return -1;
    }
    t->tp_n = t->size / t->pp_n;
    t->stage = t->rank / t->tp_n;
    t->tp_rank = t->rank % t->tp_n;
    t->tg = t->tp_n > 1 ? (t->pp_n > 1 ? tg : t->g) : NULL;
    if (t->tp_n > 1 && (!t->tg || dist_size(t->tg) != t->tp_n || dist_rank(t->tg) != t->tp_rank)) {
        snprintf(err, errlen, "--tp-size %d with --pp-size %d: no stage group for rank %d", t->tp_n, t->pp_n,
                 t->rank);
        return -1;
    }
    if (t->pp_n > 1 && c->n_layer < t->pp_n) {
        snprintf(err, errlen, "--pp-size %d: the model has only %d layers", t->pp_n, c->n_layer);
        return -1;
    }
    t->layer0 = c->n_layer * t->stage / t->pp_n; /* SGLang's even split */
    t->layer1 = c->n_layer * (t->stage + 1) / t->pp_n;
    const int N = t->tp_n, r = t->tp_rank;
    /* the architectures whose every weight and decoder step is sharded here
     * (tests/scripts/test_tp.sh); another one's extra parts would run whole */
    static const char *const fams[] = {"llama", "mistral", "qwen2", "qwen3", "qwen3_moe", "qwen2_moe",
                                       "mixtral", "granitemoe", "phi3",
                                       "gemma2", "gemma3", /* post-norms after the all-reduce; caps per slice */
                                       "deepseek_v2", "deepseek_v3", /* MLA: heads split, latent replicated */
                                       };
    int known = 0;
    for (size_t i = 0; i < sizeof fams / sizeof fams[0]; i++)
        if (w->arch && w->arch->family && !strcmp(w->arch->family, fams[i])) known = 1;
    if (w->arch && w->arch->hybrid) known = 1; /* NemotronH: Mamba2 heads split below */
    if (N > 1 && !known) {
        snprintf(err, errlen, "--tp-size %d: tensor parallelism is not supported for %s yet", N,
                 c->architecture);
        return -1;
    }
    if (N > 1 && c->n_head % N) {
        snprintf(err, errlen, "--tp-size %d: num_attention_heads (%d) is not divisible by it", N, c->n_head);
        return -1;
    }
    if (N > 1 && c->n_kv_head % N && N % c->n_kv_head) {
        snprintf(err, errlen, "--tp-size %d: num_key_value_heads (%d) neither divides it nor is divisible by it",
                 N, c->n_kv_head);
        return -1;
    }
    if (N > 1 && c->intermediate_size % N) {
        snprintf(err, errlen, "--tp-size %d: intermediate_size (%d) is not divisible by it", N,
                 c->intermediate_size);
        return -1;
    }
    if (N > 1 && c->shared_inter % N) {
        snprintf(err, errlen, "--tp-size %d: the shared expert width (%d) is not divisible by it", N,
                 c->shared_inter);
        return -1;
    }
    /* the expert width is checked by model_ep_setup: under --ep-size only
     * the ranks of an expert group slice it */
    t->n_head = c->n_head / N;
    t->head0 = r * t->n_head;
    if (c->n_kv_head % N == 0) {
        t->n_kv_head = c->n_kv_head / N;
        t->kv_head0 = r * t->n_kv_head;
    } else { /* fewer KV heads than ranks: replicated, N / n_kv ranks per head */
        t->n_kv_head = 1;
        t->kv_head0 = r / (N / c->n_kv_head);
    }
    t->inter = c->intermediate_size / N;
    t->moe_inter = c->moe_inter % N ? 0 : c->moe_inter / N;
    t->shared_inter = c->shared_inter > 0 ? c->shared_inter / N : 0;
    t->vocab_max = (c->vocab_size + N - 1) / N;
    t->vocab0 = r * t->vocab_max;
    t->vocab_n = c->vocab_size - t->vocab0 < t->vocab_max ? c->vocab_size - t->vocab0 : t->vocab_max;
    if (t->vocab_n < 1) {
        snprintf(err, errlen, "--tp-size %d: a vocabulary of %d leaves rank %d no rows", N, c->vocab_size, r);
        return -1;
    }
    if (c->n_mamba && model_tp_setup_mamba(w, err, errlen)) return -1;
    /* a classifier's score head (n_labels x hidden) is whole on every rank:
     * it reads the replicated normed rows of the last stage, whose hidden
     * rows (the scores at their head) go back like an embedding's */
    return 0;
}

int model_tp_size(const model *m) { return m->tp.size; }
int model_tp_rank(const model *m) { return m->tp.rank; }
const char *model_tp_error(const model *m)
{
    const model_tp *t = &m->tp;
    if (t->tg && t->tg != t->g && dist_broken(t->tg) && !dist_broken(t->g)) return dist_error(t->tg);
    return t->g ? dist_error(t->g) : "";
}

/* One command: header + payload (inline when it fits). */
static int send_cmd(model_tp *t, const tp_hdr *h, const void *payload)
{
    char msg[TP_MSG];
    memcpy(msg, h, sizeof *h);
    size_t first = (size_t)h->payload < TP_MSG - sizeof *h ? (size_t)h->payload : TP_MSG - sizeof *h;
    if (first) memcpy(msg + sizeof *h, payload, first);
    if (dist_bcast(t->g, msg, TP_MSG, 0, DIST_TIMEOUT_DEFAULT)) return -1;
    if ((size_t)h->payload > first &&
        dist_bcast(t->g, (char *)payload + first, (size_t)h->payload - first, 0, DIST_TIMEOUT_DEFAULT))
        return -1;
    return 0;
}

int model_tp_send_forward(model *m, model_kv *kv, const model_batch *b, int pp_mb)
{
    model_tp *t = &m->tp;
    if (t->size <= 1 || t->rank != 0) return 0;
    size_t nslot = 0;
    for (int s = 0; s < b->n_seqs; s++) nslot += (size_t)b->seq_kv_len[s];
    const int n_ad = b->seq_adapter && b->n_adapters > 0 ? b->n_adapters : 0;
    for (int i = 0; i < n_ad; i++)
        if (!b->adapters[i]->tp_uid) {
            log_error("LoRA: adapter %d of the batch was not loaded on the worker ranks", i);
            return -1;
        }
    pthread_mutex_lock(&rel_mu); /* the shards rank 0 freed go first */
    const int n_free = rel_n;
    size_t n = 2 * (size_t)b->n_tokens + (size_t)(2 * b->n_seqs + 1) + (size_t)b->n_logits + nslot +
               2 * (size_t)(n_free + n_ad) + (n_ad ? (size_t)b->n_seqs : 0);
    const int n_snap = b->seq_snap ? b->seq_snap[b->n_seqs] : 0; /* Mamba2 states (mamba2.c) */
    n += (b->seq_state ? (size_t)b->n_seqs : 0) + (b->seq_snap ? (size_t)b->n_seqs + 1 + 2 * (size_t)n_snap : 0);
    int32_t *p = malloc(n * sizeof(int32_t) + 1);
    if (!p) {
        pthread_mutex_unlock(&rel_mu);
        log_error("out of memory for a tensor-parallel batch message");
        return -1;
    }
    if (n_free) memcpy(p, rel_uid, sizeof(uint64_t) * (size_t)n_free);
    rel_n = 0;
    pthread_mutex_unlock(&rel_mu);
    int32_t *q = p + 2 * n_free;
    for (int i = 0; i < n_ad; i++, q += 2) memcpy(q, &b->adapters[i]->tp_uid, sizeof(uint64_t));
    if (n_ad) memcpy(q, b->seq_adapter, sizeof(int32_t) * (size_t)b->n_seqs), q += b->n_seqs;
    memcpy(q, b->tokens, sizeof(int32_t) * (size_t)b->n_tokens), q += b->n_tokens;
    memcpy(q, b->positions, sizeof(int32_t) * (size_t)b->n_tokens), q += b->n_tokens;
    memcpy(q, b->seq_start, sizeof(int32_t) * (size_t)(b->n_seqs + 1)), q += b->n_seqs + 1;
    memcpy(q, b->seq_kv_len, sizeof(int32_t) * (size_t)b->n_seqs), q += b->n_seqs;
    if (b->n_logits) memcpy(q, b->logit_rows, sizeof(int32_t) * (size_t)b->n_logits), q += b->n_logits;
    for (int s = 0; s < b->n_seqs; s++) {
        memcpy(q, b->seq_slots[s], sizeof(int32_t) * (size_t)b->seq_kv_len[s]);
        q += b->seq_kv_len[s];
    }
    if (b->seq_state) memcpy(q, b->seq_state, sizeof(int32_t) * (size_t)b->n_seqs), q += b->n_seqs;
    if (b->seq_snap) {
        memcpy(q, b->seq_snap, sizeof(int32_t) * (size_t)(b->n_seqs + 1)), q += b->n_seqs + 1;
        memcpy(q, b->snap_pos, sizeof(int32_t) * (size_t)n_snap), q += n_snap;
        memcpy(q, b->snap_state, sizeof(int32_t) * (size_t)n_snap), q += n_snap;
    }
    tp_hdr h = {.cmd = TP_CMD_FORWARD, .kv_id = kv->tp_id, .n_tokens = b->n_tokens,
                .n_seqs = b->n_seqs, .n_logits = b->n_logits, .want_hidden = b->want_hidden,
                .n_free = n_free, .n_ad = n_ad, .payload = (int64_t)(n * sizeof(int32_t)),
                .mamba = (b->seq_state ? 1 : 0) | (b->seq_snap ? 2 : 0), .n_snap = n_snap, .pp_mb = pp_mb};
    int rc = send_cmd(t, &h, p);
    free(p);
    return rc;
}

/* Only the last stage computes logits (its TP ranks a vocabulary slice each). */
static int lm_stage(const model_tp *t) { return t->stage == t->pp_n - 1; }

float *model_tp_logits_out(model *m, const model_batch *b, float *logits)
{
    model_tp *t = &m->tp;
    if (t->tp_n <= 1 || !lm_stage(t) || b->want_hidden || !b->n_logits) return logits;
    size_t need = (size_t)b->n_logits * t->vocab_max;
    if (need > m->tp_cap) {
        float *a = realloc(m->tp_logits, need * sizeof(float));
        if (!a) return NULL;
        m->tp_logits = a;
        if (t->tp_rank == 0) {
            float *gb = realloc(m->tp_gather, need * t->tp_n * sizeof(float));
            if (!gb) return NULL;
            m->tp_gather = gb;
        }
        m->tp_cap = need;
    }
    return m->tp_logits;
}

int model_tp_gather_logits(model *m, const model_batch *b, float *logits)
{
    model_tp *t = &m->tp;
    if (t->tp_n <= 1 || !lm_stage(t) || b->want_hidden || !b->n_logits) return 0;
    const int L = b->n_logits, vm = t->vocab_max, V = m->w->cfg.vocab_size;
    float *mine = m->tp_logits;
    if (t->vocab_n < vm) /* rows of vocab_n -> blocks of vocab_max (last rank) */
        for (int i = L - 1; i >= 0; i--) {
            memmove(mine + (size_t)i * vm, mine + (size_t)i * t->vocab_n, sizeof(float) * t->vocab_n);
            memset(mine + (size_t)i * vm + t->vocab_n, 0, sizeof(float) * (size_t)(vm - t->vocab_n));
        }
    size_t block = (size_t)L * vm;
    if (dist_gather(t->tg, mine, block * sizeof(float), m->tp_gather, 0, DIST_TIMEOUT_DEFAULT)) return -1;
    if (t->tp_rank != 0) return 0; /* under PP: the stage's rank 0 broadcasts them (model_pp_after) */
    for (int r = 0; r < t->tp_n; r++) {
        int v0 = r * vm, vn = V - v0 < vm ? V - v0 : vm;
        const float *src = m->tp_gather + (size_t)r * block;
        for (int i = 0; i < L; i++)
            memcpy(logits + (size_t)i * V + v0, src + (size_t)i * vm, sizeof(float) * (size_t)vn);
    }
    return 0;
}

void model_tp_allreduce(model *m, float *x, size_t n, int ith, tpool *pool)
{
    model_tp *t = &m->tp;
    if (t->tp_n <= 1) return;
    if (ith == 0) {
        double t0 = time_now_sec();
        dist_allreduce(t->tg, x, n, DIST_F32, DIST_TIMEOUT_DEFAULT); /* failure: the group is broken */
        m->tp_comm_s += time_now_sec() - t0;
        m->tp_n_allreduce++;
    }
    tpool_barrier(pool);
}

/* Pipeline boundaries of one forward, in the order every rank calls them:
 * x after stage 0, 1, ..., pp_n - 2 (each broadcast over the whole group
 * from that stage's TP rank 0, rank s * tp_n: after the stage's last
 * all-reduce every rank of it holds the same rows), then the output rows
 * from the last stage's TP rank 0 (which gathered the vocabulary slices).
 * Under TP x PP a boundary waits twice the group's timeout: the wait spans
 * the stage's whole pass, so a rank hung inside it is named first by its
 * own stage's all-reduce timeout (which then breaks the group). */
static int pp_timeout(const model_tp *t)
{
    return t->tp_n > 1 && t->g->timeout_ms > 0 ? 2 * t->g->timeout_ms : DIST_TIMEOUT_DEFAULT;
}

int model_pp_before(model *m, const model_batch *b)
{
    model_tp *t = &m->tp;
    if (t->pp_n <= 1) return 0;
    size_t bytes = sizeof(float) * (size_t)b->n_tokens * m->w->cfg.hidden_size;
    for (int s = 0; s < t->stage; s++) /* the last one is this stage's input */
        if (dist_bcast(t->g, m->x, bytes, s * t->tp_n, pp_timeout(t))) return -1;
    return 0;
}

int model_pp_after(model *m, const model_batch *b, float *out)
{
    model_tp *t = &m->tp;
    if (t->pp_n <= 1) return 0;
    const model_config *c = &m->w->cfg;
    size_t bytes = sizeof(float) * (size_t)b->n_tokens * c->hidden_size;
    for (int s = t->stage; s < t->pp_n - 1; s++) /* ours first (x is done), then pass-through */
        if (dist_bcast(t->g, m->x, bytes, s * t->tp_n, pp_timeout(t))) return -1;
    size_t width = b->want_hidden ? (size_t)c->hidden_size : (size_t)c->vocab_size;
    if (b->n_logits && dist_bcast(t->g, out, sizeof(float) * (size_t)b->n_logits * width,
                                  (t->pp_n - 1) * t->tp_n, pp_timeout(t)))
        return -1;
    return 0;
}

int model_pp_bcast(model *m, void *buf, size_t bytes, int stage)
{
    model_tp *t = &m->tp;
    return bytes ? dist_bcast(t->g, buf, bytes, stage * t->tp_n, pp_timeout(t)) : 0;
}

int model_tp_stage_failed(model *m)
{
    model_tp *t = &m->tp;
    if (t->tg && t->tg != t->g && dist_broken(t->tg)) dist_break_from(t->g, t->tg);
    return model_tp_failed(m);
}

int model_tp_kv_created(model *m, model_kv *kv)
{
    model_tp *t = &m->tp;
    kv->tp_id = -1;
    kv->tp_w = NULL;
    if (t->size <= 1 || t->rank != 0) return 0;
    if (t->next_kv_id >= TP_MAX_KV) {
        log_error("tensor parallelism: more than %d KV caches", TP_MAX_KV);
        return -1;
    }
    model_tp_lock(m);
    kv->tp_id = t->next_kv_id++;
    tp_hdr h = {.cmd = TP_CMD_KV_CREATE, .kv_id = kv->tp_id, .n_slots = kv->n_slots, .dt = (int32_t)kv->dt};
    int rc = send_cmd(t, &h, NULL);
    model_tp_unlock(m);
    if (rc) {
        log_error("tensor parallelism: %s", dist_error(t->g));
        return -1;
    }
    kv->tp_w = t->g;
    return 0;
}

int model_tp_mamba_states(model *m, model_kv *kv, int n_states, dtype ssm_dt)
{
    model_tp *t = &m->tp;
    if (t->size <= 1 || t->rank != 0 || !kv->tp_w) return 0;
    model_tp_lock(m);
    tp_hdr h = {.cmd = TP_CMD_MAMBA_STATES, .kv_id = kv->tp_id, .n_slots = n_states, .dt = (int32_t)ssm_dt};
    int rc = send_cmd(t, &h, NULL);
    model_tp_unlock(m);
    if (rc) log_error("tensor parallelism: %s", dist_error(t->g));
    return rc;
}

int model_tp_mamba_copy(model_kv *kv, int dst, int src)
{
    struct dist_group *g = kv->tp_w;
    if (!g) return 0;
    if (is_shut(g) || dist_broken(g)) {
        log_error("tensor parallelism: cannot copy a Mamba state on the other ranks: %s", dist_error(g));
        return -1;
    }
    model_tp t = {.g = g, .size = dist_size(g)};
    tp_hdr h = {.cmd = TP_CMD_MAMBA_COPY, .kv_id = kv->tp_id, .n_slots = dst, .n_seqs = src};
    pthread_mutex_t *mu = group_lock(g);
    pthread_mutex_lock(mu);
    int rc = send_cmd(&t, &h, NULL);
    pthread_mutex_unlock(mu);
    if (rc) log_error("tensor parallelism: %s", dist_error(g));
    return rc;
}

void model_tp_kv_destroyed(model_kv *kv)
{
    struct dist_group *g = kv->tp_w;
    if (!g || is_shut(g) || dist_broken(g)) return;
    model_tp t = {.g = g, .size = dist_size(g)};
    tp_hdr h = {.cmd = TP_CMD_KV_DESTROY, .kv_id = kv->tp_id};
    pthread_mutex_t *mu = group_lock(g);
    pthread_mutex_lock(mu);
    send_cmd(&t, &h, NULL);
    pthread_mutex_unlock(mu);
}

void model_tp_shutdown(model_tp *t)
{
    if (t->size <= 1 || t->rank != 0 || !t->g || is_shut(t->g)) return;
    /* marked first: a watcher must not take the workers' exit for a failure */
    int slot = __atomic_fetch_add(&n_shut, 1, __ATOMIC_ACQ_REL);
    if (slot < (int)(sizeof shut_groups / sizeof shut_groups[0]))
        __atomic_store_n(&shut_groups[slot], t->g, __ATOMIC_RELEASE);
    if (!dist_broken(t->g)) {
        tp_hdr h = {.cmd = TP_CMD_SHUTDOWN};
        pthread_mutex_t *mu = group_lock(t->g);
        pthread_mutex_lock(mu);
        send_cmd(t, &h, NULL);
        pthread_mutex_unlock(mu);
    }
}

int model_tp_lora_load(model *m, uint64_t uid, const void *msg, size_t len, char *err, size_t errlen)
{
    model_tp *t = &m->tp;
    if (t->size <= 1 || t->rank != 0) return 0;
    char *pay = malloc(sizeof uid + len), *st = malloc((size_t)t->size * TP_STATUS);
    if (!pay || !st) {
        free(pay), free(st);
        snprintf(err, errlen, "out of memory for a LoRA load message");
        return -1;
    }
    memcpy(pay, &uid, sizeof uid);
    memcpy(pay + sizeof uid, msg, len);
    char mine[TP_STATUS] = {0}; /* rank 0 loaded its shard already: rc 0 */
    tp_hdr h = {.cmd = TP_CMD_LORA_LOAD, .payload = (int64_t)(sizeof uid + len)};
    model_tp_lock(m);
    int rc = -1;
    /* shards rank 0 freed since the last step go first (an eviction for this load) */
    pthread_mutex_lock(&rel_mu);
    tp_hdr f0 = {.cmd = TP_CMD_LORA_FREE, .n_free = rel_n, .payload = (int64_t)(sizeof(uint64_t) * (size_t)rel_n)};
    int frc = rel_n && !dist_broken(t->g) ? send_cmd(t, &f0, rel_uid) : 0;
    if (!frc) rel_n = 0;
    pthread_mutex_unlock(&rel_mu);
    if (frc || dist_broken(t->g) || send_cmd(t, &h, pay) ||
        dist_gather(t->g, mine, TP_STATUS, st, 0, DIST_TIMEOUT_DEFAULT)) {
        snprintf(err, errlen, "tensor parallelism: %s", dist_error(t->g));
    } else {
        rc = 0;
        for (int r = 1; r < t->size && !rc; r++) {
            int32_t rrc;
            memcpy(&rrc, st + (size_t)r * TP_STATUS, sizeof rrc);
            if (rrc) {
                st[(size_t)(r + 1) * TP_STATUS - 1] = 0;
                snprintf(err, errlen, "rank %d: %s", r, st + (size_t)r * TP_STATUS + sizeof rrc);
                rc = -1;
            }
        }
        if (rc) { /* the ranks that loaded it drop it now: no half-loaded adapter */
            tp_hdr f = {.cmd = TP_CMD_LORA_FREE, .n_free = 1, .payload = sizeof uid};
            if (send_cmd(t, &f, &uid)) log_error("tensor parallelism: %s", dist_error(t->g));
        }
    }
    model_tp_unlock(m);
    free(pay), free(st);
    return rc;
}

int model_tp_group_shut(const struct dist_group *g)
{
    for (int i = 0; i < (int)(sizeof shut_groups / sizeof shut_groups[0]); i++)
        if (__atomic_load_n(&shut_groups[i], __ATOMIC_ACQUIRE) == g) return 1;
    return 0;
}

double model_tp_comm_seconds(const model *m, long *n_allreduce, double *wait_s)
{
    if (n_allreduce) *n_allreduce = m->tp_n_allreduce;
    if (wait_s) *wait_s = 0;
    if (wait_s && m->tp.tg) dist_allreduce_stats(m->tp.tg, NULL, wait_s, NULL);
    return m->tp_comm_s;
}

/* A worker's adapters: uid -> its shard. */
typedef struct tp_lora_tab {
    uint64_t *uid;
    const model_adapter **ad;
    int n, cap;
} tp_lora_tab;

static const model_adapter *tab_find(const tp_lora_tab *tb, uint64_t uid)
{
    for (int i = 0; i < tb->n; i++)
        if (tb->uid[i] == uid) return tb->ad[i];
    return NULL;
}

static void tab_free_uid(tp_lora_tab *tb, uint64_t uid)
{
    for (int i = 0; i < tb->n; i++)
        if (tb->uid[i] == uid) {
            if (lora_hooks.release) lora_hooks.release(tb->ad[i]);
            tb->uid[i] = tb->uid[tb->n - 1], tb->ad[i] = tb->ad[tb->n - 1];
            tb->n--;
            return;
        }
}

/* Room for one more entry.  0 or -1. */
static int tab_reserve(tp_lora_tab *tb)
{
    if (tb->n < tb->cap) return 0;
    int cap = tb->cap ? 2 * tb->cap : 16;
    uint64_t *u = realloc(tb->uid, sizeof *u * (size_t)cap);
    if (!u) return -1;
    tb->uid = u;
    const model_adapter **a = realloc(tb->ad, sizeof *a * (size_t)cap);
    if (!a) return -1;
    tb->ad = a;
    tb->cap = cap;
    return 0;
}

/* LORA_LOAD on a worker: load through the hooks, answer the status gather.
 * A failure is the load's (reported to rank 0), not the group's.  0, or -1
 * when the group failed. */
static int worker_lora_load(model *m, tp_lora_tab *tb, const char *pay, size_t len)
{
    model_tp *t = &m->tp;
    char st[TP_STATUS] = {0};
    int32_t rc = -1;
    uint64_t uid = 0;
    if (len >= sizeof uid) memcpy(&uid, pay, sizeof uid);
    char *msg = st + sizeof rc;
    const size_t mlen = TP_STATUS - sizeof rc;
    if (len < sizeof uid || !uid) {
        snprintf(msg, mlen, "malformed LoRA load command");
    } else if (!lora_hooks.load) {
        snprintf(msg, mlen, "this rank cannot load LoRA adapters (no hooks installed)");
    } else if (tab_find(tb, uid)) {
        snprintf(msg, mlen, "adapter id %llu is loaded already", (unsigned long long)uid);
    } else if (tab_reserve(tb)) {
        snprintf(msg, mlen, "out of memory");
    } else {
        const model_adapter *ad = lora_hooks.load(m, pay + sizeof uid, len - sizeof uid, uid, msg, mlen);
        if (ad) {
            tb->uid[tb->n] = uid, tb->ad[tb->n++] = ad;
            rc = 0;
        }
    }
    memcpy(st, &rc, sizeof rc);
    if (rc) log_error("tensor-parallel rank %d: %s", t->rank, msg);
    return dist_gather(t->g, st, TP_STATUS, NULL, 0, DIST_TIMEOUT_DEFAULT) ? -1 : 0;
}

int model_tp_worker_loop(model *m, tpool *pool)
{
    model_tp *t = &m->tp;
    if (t->size <= 1 || t->rank == 0) {
        log_error("model_tp_worker_loop: not a worker rank");
        return -1;
    }
    model_kv *kvs[TP_MAX_KV] = {0};
    char msg[TP_MSG];
    int32_t *pay = NULL;
    size_t pay_cap = 0;
    const int32_t **slots = NULL;
    float *out = NULL;
    size_t out_cap = 0;
    tp_lora_tab tab = {0};
    const model_adapter **bad = NULL; /* the batch's adapters */
    int rc = -1;
    if (t->pp_n > 1 && t->tp_n > 1)
        log_info("rank %d of %d ready (%s backend): pipeline stage %d of %d (layers %d-%d), tensor-parallel rank %d "
                 "of %d", t->rank, t->size, dist_backend(t->g), t->stage, t->pp_n, t->layer0, t->layer1 - 1,
                 t->tp_rank, t->tp_n);
    else
        log_info("tensor-parallel rank %d of %d ready (%s backend)", t->rank, t->size, dist_backend(t->g));
    for (;;) {
        if (dist_bcast(t->g, msg, TP_MSG, 0, DIST_TIMEOUT_FOREVER)) break;
        tp_hdr h;
        memcpy(&h, msg, sizeof h);
        if (h.cmd == TP_CMD_SHUTDOWN) {
            rc = 0;
            break;
        }
        if (h.kv_id < 0 || h.kv_id >= TP_MAX_KV) {
            dist_abort(t->g, "bad KV cache id in a command");
            break;
        }
        if (h.cmd == TP_CMD_KV_CREATE) {
            kvs[h.kv_id] = model_kv_create(m, h.n_slots, (dtype)h.dt);
            if (!kvs[h.kv_id]) {
                char e[128];
                snprintf(e, sizeof e, "rank %d: cannot make a KV cache of %d slots", t->rank, h.n_slots);
                dist_abort(t->g, e);
                break;
            }
            continue;
        }
        if (h.cmd == TP_CMD_MAMBA_STATES || h.cmd == TP_CMD_MAMBA_COPY) {
            if (!kvs[h.kv_id] ||
                (h.cmd == TP_CMD_MAMBA_STATES ? model_kv_set_mamba_states(m, kvs[h.kv_id], h.n_slots, (dtype)h.dt)
                                              : model_kv_mamba_copy(kvs[h.kv_id], h.n_slots, h.n_seqs))) {
                char e[128];
                snprintf(e, sizeof e, "rank %d: Mamba state command %d failed", t->rank, h.cmd);
                dist_abort(t->g, e);
                break;
            }
            continue;
        }
        if (h.cmd == TP_CMD_KV_DESTROY) {
            model_kv_destroy(kvs[h.kv_id]);
            kvs[h.kv_id] = NULL;
            continue;
        }
        if ((h.cmd == TP_CMD_LORA_LOAD || h.cmd == TP_CMD_LORA_FREE) && h.payload >= 0) {
            size_t need = (size_t)h.payload, first = need < TP_MSG - sizeof h ? need : TP_MSG - sizeof h;
            char *lp = malloc(need + 8);
            if (!lp) {
                dist_abort(t->g, "out of memory for a LoRA command");
                break;
            }
            memcpy(lp, msg + sizeof h, first);
            if (need > first && dist_bcast(t->g, lp + first, need - first, 0, DIST_TIMEOUT_DEFAULT)) {
                free(lp);
                break;
            }
            int lrc = 0;
            if (h.cmd == TP_CMD_LORA_LOAD) {
                lrc = worker_lora_load(m, &tab, lp, need);
            } else {
                for (int i = 0; i < h.n_free && (size_t)(i + 1) * 8 <= need; i++) {
                    uint64_t u;
                    memcpy(&u, lp + (size_t)i * 8, 8);
                    tab_free_uid(&tab, u);
                }
            }
            free(lp);
            if (lrc) break;
            continue;
        }
        if (h.cmd != TP_CMD_FORWARD || !kvs[h.kv_id] || h.payload < 0) {
            dist_abort(t->g, "unknown command or KV cache");
            break;
        }
        size_t need = (size_t)h.payload;
        if (need > pay_cap) {
            free(pay);
            pay = malloc(need + 4);
            pay_cap = pay ? need : 0;
        }
        free(slots);
        slots = malloc(sizeof *slots * (size_t)(h.n_seqs > 0 ? h.n_seqs : 1));
        const model_config *mc = &m->w->cfg; /* PP: every rank takes the last stage's logits */
        size_t out_need = (size_t)h.n_logits *
                              (size_t)(mc->vocab_size > mc->hidden_size ? mc->vocab_size : mc->hidden_size) + 1;
        if (out_need > out_cap) {
            free(out);
            out = malloc(out_need * sizeof(float));
            out_cap = out ? out_need : 0;
        }
        if (!pay || !slots || !out) {
            dist_abort(t->g, "out of memory for a batch");
            break;
        }
        size_t first = need < TP_MSG - sizeof h ? need : TP_MSG - sizeof h;
        memcpy(pay, msg + sizeof h, first);
        if (need > first && dist_bcast(t->g, (char *)pay + first, need - first, 0, DIST_TIMEOUT_DEFAULT))
            break;
        const int32_t *q = pay;
        model_batch b = {.n_tokens = h.n_tokens, .n_seqs = h.n_seqs, .n_logits = h.n_logits,
                         .want_hidden = h.want_hidden};
        /* LoRA: the shards rank 0 freed, then the batch's adapters by uid */
        for (int i = 0; i < h.n_free; i++, q += 2) {
            uint64_t u;
            memcpy(&u, q, sizeof u);
            tab_free_uid(&tab, u);
        }
        if (h.n_ad > 0) {
            free(bad);
            bad = malloc(sizeof *bad * (size_t)h.n_ad);
            if (!bad) {
                dist_abort(t->g, "out of memory for a batch");
                break;
            }
            int missing = 0;
            for (int i = 0; i < h.n_ad; i++, q += 2) {
                uint64_t u;
                memcpy(&u, q, sizeof u);
                if (!(bad[i] = tab_find(&tab, u))) missing = 1;
            }
            if (missing) {
                char e[128];
                snprintf(e, sizeof e, "rank %d: a batch names a LoRA adapter this rank did not load", t->rank);
                dist_abort(t->g, e);
                break;
            }
            b.n_adapters = h.n_ad, b.adapters = bad, b.seq_adapter = q;
            q += h.n_seqs;
        }
        b.tokens = q, q += h.n_tokens;
        b.positions = q, q += h.n_tokens;
        b.seq_start = q, q += h.n_seqs + 1;
        b.seq_kv_len = q, q += h.n_seqs;
        b.logit_rows = h.n_logits ? q : NULL, q += h.n_logits;
        for (int s = 0; s < h.n_seqs; s++) {
            slots[s] = q;
            q += b.seq_kv_len[s];
        }
        b.seq_slots = slots;
        if (h.mamba & 1) b.seq_state = q, q += h.n_seqs;
        if (h.mamba & 2) {
            b.seq_snap = q, q += h.n_seqs + 1;
            b.snap_pos = q, q += h.n_snap;
            b.snap_state = q, q += h.n_snap;
        }
        if (m->chunk_tokens < h.n_tokens) m->chunk_tokens = h.n_tokens; /* rank 0 chunked already */
        m->pp_mb_rx = h.pp_mb; /* rank 0 decided the micro-batches (every rank runs the same plan) */
        if (model_forward(m, kvs[h.kv_id], &b, out, pool)) {
            model_tp_stage_failed(m); /* TP x PP: the stage group's error, to every rank */
            if (!dist_broken(t->g)) dist_abort(t->g, "a forward failed on a worker rank");
            break;
        }
    }
    if (rc) log_error("tensor-parallel rank %d: %s", t->rank, dist_error(t->g));
    for (int i = 0; i < TP_MAX_KV; i++) model_kv_destroy(kvs[i]);
    while (tab.n) tab_free_uid(&tab, tab.uid[tab.n - 1]);
    free(tab.uid), free(tab.ad), free(bad);
    free(pay), free(slots), free(out);
    return rc;
}
