/* sched_ctl — control messages on the scheduler thread: pause (abort /
 * retract / in place), continue, flush the radix cache, swap the model's
 * weights (update_weights_from_disk).
 *
 * DESIGN
 * Layer 11 (sched_impl.h "Layers"): includes sched_util, sched_retract,
 * sched_inbox.  A message (ctl_msg) belongs to its waiting caller
 * (sched_control); it is answered by setting `done` under in.mu and
 * broadcasting ctl.cv.  A swap waits (s->ctl.swap_wait) until no request is
 * in flight or generation is paused; requests arriving meanwhile are
 * held (sched_inbox). */
#include "sched/sched_ctl.h"

#include <string.h>

#include "sched/sched_inbox.h"
#include "sched/sched_retract.h"
#include "sched/sched_util.h"
#include "util/log.h"

static void ctl_done(sched *s, ctl_msg *m)
{
    pthread_mutex_lock(&s->in.mu);
    m->done = true;
    pthread_cond_broadcast(&s->ctl.cv);
    pthread_mutex_unlock(&s->in.mu);
}

static void set_paused(sched *s, bool on)
{
    pthread_mutex_lock(&s->in.mu);
    s->ctl.paused = on;
    pthread_mutex_unlock(&s->in.mu);
}


/* SGLang's flush_cache: only when no request holds KV; while paused,
 * waiting requests (they hold none) do not prevent it. */
static int ctl_flush(sched *s, char *msg, size_t len)
{
    if (s->q.n_running || s->q.chunked || (s->q.n_waiting && !s->ctl.paused)) {
        snprintf(msg, len, "Cache not flushed because there are pending requests (%d running, %d waiting).",
                 s->q.n_running + (s->q.chunked ? 1 : 0), s->q.n_waiting);
        log_warn("flush_cache refused: %s", msg);
        return -1;
    }
    for (int i = 0; i < s->q.n_waiting; i++) s->q.waiting[i]->pol.est_node = NULL;
    if (kv_radix_reset(s->eng.tree)) {
        snprintf(msg, len, "Internal error: the radix cache could not be reset.");
        return -1;
    }
    snprintf(msg, len, "Cache flushed.");
    log_info("radix cache flushed");
    return 0;
}

/* Is the new model a drop-in for the running one?  The KV tensors, the
 * scratch sizes, the vocabulary and the request limits depend on these. */
static int swap_compatible(const sched *s, model *nm, char *msg, size_t len)
{
    const model_config *a = s->eng.c, *b = model_get_config(nm);
#define SWAP_CHECK(f)                                                                                        \
    if (a->f != b->f) {                                                                                      \
        snprintf(msg, len, "The new model is not compatible with the running one: " #f " %d != %d.",          \
                 (int)b->f, (int)a->f);                                                                      \
        return -1;                                                                                           \
    }
    if (strcmp(a->architecture, b->architecture)) {
        snprintf(msg, len, "The new model is not compatible with the running one: architecture %s != %s.",
                 b->architecture, a->architecture);
        return -1;
    }
    SWAP_CHECK(hidden_size)
    SWAP_CHECK(intermediate_size)
    SWAP_CHECK(n_layer)
    SWAP_CHECK(n_head)
    SWAP_CHECK(n_kv_head)
    SWAP_CHECK(head_dim)
    SWAP_CHECK(vocab_size)
    SWAP_CHECK(context_length)
    SWAP_CHECK(tie_word_embeddings)
    SWAP_CHECK(attention_bias)
    SWAP_CHECK(mlp_bias)
    SWAP_CHECK(n_expert)
    SWAP_CHECK(n_expert_used)
    SWAP_CHECK(moe_inter)
    SWAP_CHECK(shared_inter)
    SWAP_CHECK(kv_lora_rank) /* MLA: the latent KV row */
#undef SWAP_CHECK
    if (model_weight_dtype(nm) != model_weight_dtype(s->eng.m)) {
        snprintf(msg, len, "The new model is not compatible with the running one: weight dtype %s != %s.",
                 dtype_name(model_weight_dtype(nm)), dtype_name(model_weight_dtype(s->eng.m)));
        return -1;
    }
    return 0;
}

/* The swap itself, between steps: KV of the old weights is dropped from
 * the tree (SGLang flushes after update_weights_from_disk). */
void sched_ctl_swap(sched *s, ctl_msg *m)
{
    sched_ctl *c = m->c;
    c->n_affected = sched_retract_all(s);
    model *old = s->eng.m;
    s->eng.m = c->new_model;
    s->eng.c = model_get_config(s->eng.m);
    s->lim.n_eos = s->eng.c->n_eos;
    for (int i = 0; i < s->eng.c->n_eos && i < MODEL_MAX_EOS; i++) s->lim.eos[i] = s->eng.c->eos_token_ids[i];
    c->old_model = old;
    char fmsg[256];
    if (!c->keep_cache && ctl_flush(s, fmsg, sizeof fmsg)) log_error("after the weight update: %s", fmsg);
    if (c->stay_paused) set_paused(s, true);
    c->rc = 0;
    snprintf(c->msg, sizeof c->msg, "Succeeded to update model weights.");
    log_info("model weights updated (%d request(s) retracted, radix cache flushed)", c->n_affected);
    s->ctl.swap_wait = NULL;
    if (!s->ctl.paused) sched_inbox_release_held(s);
    ctl_done(s, m);
}

static void handle_ctl(sched *s, ctl_msg *m)
{
    sched_ctl *c = m->c;
    c->rc = 0;
    c->msg[0] = 0;
    c->n_affected = 0;
    switch (c->kind) {
    case SCHED_CTL_PAUSE:
        if (c->pause_mode == SCHED_PAUSE_ABORT) {
            int n = s->q.n_running + s->q.n_waiting + (s->q.chunked ? 1 : 0);
            sched_abort_key all = {NULL, 0};
            sreq *held = s->ctl.held_head; /* arrived after the pause began: kept */
            s->ctl.held_head = s->ctl.held_tail = NULL;
            sched_inbox_abort(s, &all);
            s->ctl.held_head = held;
            for (sreq *r = held; r; r = r->life.next) s->ctl.held_tail = r;
            c->n_affected = n;
        } else if (c->pause_mode == SCHED_PAUSE_RETRACT) {
            c->n_affected = sched_retract_all(s);
        }
        set_paused(s, true);
        log_info("generation paused (mode %s, %d request(s) %s)",
                 c->pause_mode == SCHED_PAUSE_ABORT ? "abort" : c->pause_mode == SCHED_PAUSE_RETRACT ? "retract" : "in_place",
                 c->n_affected, c->pause_mode == SCHED_PAUSE_ABORT ? "aborted" : "retracted");
        snprintf(c->msg, sizeof c->msg, "Generation paused successfully.");
        if (s->ctl.swap_wait) sched_ctl_swap(s, s->ctl.swap_wait); /* a waiting swap need not wait any more */
        break;
    case SCHED_CTL_CONTINUE:
        set_paused(s, false);
        if (!s->ctl.swap_wait) sched_inbox_release_held(s);
        log_info("generation continued");
        snprintf(c->msg, sizeof c->msg, "Generation continued successfully.");
        break;
    case SCHED_CTL_FLUSH_CACHE:
        c->rc = ctl_flush(s, c->msg, sizeof c->msg);
        break;
    case SCHED_CTL_SWAP_MODEL:
        if (!c->new_model || swap_compatible(s, c->new_model, c->msg, sizeof c->msg)) {
            if (!c->new_model) snprintf(c->msg, sizeof c->msg, "No model given.");
            c->rc = -1;
            log_error("update_weights_from_disk refused: %s", c->msg);
            break;
        }
        if (s->ctl.swap_wait) {
            c->rc = -1;
            snprintf(c->msg, sizeof c->msg, "Another weight update is in progress.");
            break;
        }
        s->ctl.swap_wait = m;
        if (s->ctl.paused || (!s->q.n_running && !s->q.n_waiting && !s->q.chunked)) sched_ctl_swap(s, m);
        return; /* done by do_swap, now or when the requests in flight finish */
    default:
        c->rc = -1;
        snprintf(c->msg, sizeof c->msg, "Unknown control message.");
        break;
    }
    ctl_done(s, m);
}

void sched_ctl_drain(sched *s)
{
    pthread_mutex_lock(&s->in.mu);
    ctl_msg *m = s->ctl.head;
    s->ctl.head = s->ctl.tail = NULL;
    pthread_mutex_unlock(&s->in.mu);
    while (m) {
        ctl_msg *n = m->next; /* m belongs to its waiting caller once done */
        m->next = NULL;
        handle_ctl(s, m);
        m = n;
    }
}

/* Refuse every control message still queued or waiting (shutdown).  A
 * message's caller frees it once it sees `done` (under in.mu, held here). */
void sched_ctl_fail_pending(sched *s)
{
    pthread_mutex_lock(&s->in.mu);
    ctl_msg *m = s->ctl.head;
    s->ctl.head = s->ctl.tail = NULL;
    ctl_msg *w = s->ctl.swap_wait;
    s->ctl.swap_wait = NULL;
    while (m || w) {
        ctl_msg *x = m ? m : w;
        if (m) m = m->next;
        else w = NULL;
        x->c->rc = -1;
        snprintf(x->c->msg, sizeof x->c->msg, "The scheduler is stopped.");
        x->done = true;
    }
    pthread_cond_broadcast(&s->ctl.cv);
    pthread_mutex_unlock(&s->in.mu);
}
