/* cli_sched — see cli_sched.h. */
#include "cli/cli_sched.h"

#include <stdlib.h>
#include <string.h>

#include "dist/dist.h"
#include "util/log.h"

sched *cli_sched_create(model *m, const cli_model_opts *mo, sched_args *sa)
{
    sa->kv_cache_dtype = (int)cli_kv_dtype(mo, m);
    sa->threads = cli_threads(mo);
    sa->random_seed = mo->load.random_seed;
    char err[512];
    sched *s = sched_create(m, sa, err, sizeof err);
    if (!s) fprintf(stderr, "error: %s\n", err);
    return s;
}

dp *cli_dp_create(model *m, const cli_model_opts *mo, sched_args *sa, const args_server *a, model **models)
{
    sa->kv_cache_dtype = (int)cli_kv_dtype(mo, m);
    sa->threads = cli_threads(mo);
    sa->random_seed = mo->load.random_seed;
    int method = dp_lb_parse(a->load_balance_method ? a->load_balance_method : "auto");
    if (method < 0) {
        fprintf(stderr, "error: unknown --load-balance-method '%s'\n", a->load_balance_method);
        for (int r = 1; models && r < (int)a->dp_size; r++) model_free(models[r]);
        return NULL;
    }
    dp_opts o = {.dp_size = a->dp_size == ARGS_INT_NONE ? 1 : (int)a->dp_size, .method = (dp_lb_method)method,
                 .threads = sa->threads, .pin = true, .models = models};
    if (models) { /* DP x TP: each replica's rank 0 has a rank's threads, at slot r x ranks (cli_dp_tp.h) */
        int ranks = (mo->dist.tp_size > 1 ? mo->dist.tp_size : 1) * (mo->dist.pp_size > 1 ? mo->dist.pp_size : 1);
        if (mo->dist.nnodes > 1 && ranks % mo->dist.nnodes == 0) ranks /= mo->dist.nnodes; /* this node's ranks */
        o.threads = sa->threads * o.dp_size;
        o.cpu_stride = sa->threads * ranks;
        const char *p = getenv("SGLC_TP_PIN");
        int msize, mrank;
        if (p && !strcmp(p, "0")) o.pin = false;
        if (dist_mpi_env(&msize, &mrank) && msize > 1) o.pin = false; /* mpirun binds the processes */
    }
    char err[768];
    dp *d = dp_create(m, sa, &o, err, sizeof err);
    if (!d) fprintf(stderr, "error: %s\n", err);
    return d;
}

int cli_results_init(cli_results *r, int n_req, const uint64_t *ids, const int *n_per, const bool *logprob)
{
    memset(r, 0, sizeof *r);
    r->n_req = n_req;
    r->ids = ids;
    r->n_per = n_per;
    r->offset = malloc(sizeof(int) * (size_t)(n_req ? n_req : 1));
    r->order = malloc(sizeof(int) * (size_t)(n_req ? n_req : 1));
    if (!r->offset || !r->order) return -1;
    for (int k = 0; k < n_req; k++) r->order[k] = k;
    /* insertion sort by id: the ids come nearly sorted (round robin, one
     * scheduler), so this is about linear */
    for (int k = 1; k < n_req; k++) {
        int v = r->order[k], j = k - 1;
        while (j >= 0 && ids[r->order[j]] > ids[v]) {
            r->order[j + 1] = r->order[j];
            j--;
        }
        r->order[j + 1] = v;
    }
    int t = 0;
    for (int k = 0; k < n_req; k++) {
        r->offset[k] = t;
        t += n_per[k];
    }
    r->total = t;
    r->res = calloc((size_t)(t ? t : 1), sizeof(sched_result));
    if (!r->res) return -1;
    for (int k = 0; k < n_req; k++)
        for (int j = 0; j < n_per[k]; j++) sched_result_init(&r->res[r->offset[k] + j], logprob ? logprob[k] : false);
    return 0;
}

void cli_results_free(cli_results *r)
{
    if (r->res)
        for (int k = 0; k < r->total; k++) sched_result_free(&r->res[k]);
    free(r->res);
    free(r->offset);
    free(r->order);
    memset(r, 0, sizeof *r);
}

static int find_req(const cli_results *r, uint64_t id)
{
    int lo = 0, hi = r->n_req - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        uint64_t v = r->ids[r->order[mid]];
        if (v == id) return r->order[mid];
        if (v < id) lo = mid + 1;
        else hi = mid - 1;
    }
    return -1;
}

int cli_sched_collect(sched *s, cli_results *r)
{
    int rc = sched_run_until_idle(s);
    sched_event *e;
    while ((e = sched_poll(s))) {
        int k = find_req(r, e->id);
        if (k < 0 || e->index < 0 || e->index >= r->n_per[k]) {
            log_error("event for unknown request %llu/%d", (unsigned long long)e->id, e->index);
            rc = -1;
        } else if (sched_result_add(&r->res[r->offset[k] + e->index], e)) {
            log_error("out of memory collecting results");
            rc = -1;
        }
        sched_event_free(e);
    }
    return rc;
}

int cli_dp_size(const args_server *a)
{
    return a->dp_size == ARGS_INT_NONE || a->dp_size < 1 ? 1 : (int)a->dp_size;
}

int cli_dp_check(const args_server *a, const char *name)
{
    if (a->dp_size == ARGS_INT_NONE || a->dp_size >= 1) return 0;
    fprintf(stderr, "sglc %s: --dp-size must be at least 1, got %lld\n", name, (long long)a->dp_size);
    return -1;
}

int cli_dp_collect(dp *d, cli_results *r, double timeout_s)
{
    int rc = 0, left = r->total;
    while (left > 0) {
        sched_event *e = dp_wait(d, timeout_s, NULL);
        if (!e) {
            log_error("no event from any replica in %.0f s with %d results unfinished", timeout_s, left);
            return -1;
        }
        int k = find_req(r, e->id);
        if (k < 0 || e->index < 0 || e->index >= r->n_per[k]) {
            log_error("event for unknown request %llu/%d", (unsigned long long)e->id, e->index);
            rc = -1;
        } else {
            sched_result *res = &r->res[r->offset[k] + e->index];
            bool was_done = res->done;
            if (sched_result_add(res, e)) {
                log_error("out of memory collecting results");
                rc = -1;
            }
            if (e->kind == SCHED_EV_FINISH && !was_done) left--;
        }
        sched_event_free(e);
    }
    return rc;
}

void cli_dp_stats(dp *d, bool snapshot, sched_stats *sum)
{
    memset(sum, 0, sizeof *sum);
    for (int i = 0; i < dp_size(d); i++) {
        sched_stats st;
        if (snapshot) sched_get_stats_snapshot(dp_sched(d, i), &st);
        else sched_get_stats(dp_sched(d, i), &st);
#define ADD(f) sum->f += st.f
        ADD(max_total_num_tokens), ADD(n_finished), ADD(prompt_tokens), ADD(cached_tokens);
        ADD(generated_tokens), ADD(num_retractions), ADD(num_preemptions), ADD(n_prefill_steps);
        ADD(n_decode_steps), ADD(n_mixed_steps), ADD(leak_checks), ADD(leak_failures), ADD(forward_s);
        ADD(sched_s), ADD(spec_verify_ct), ADD(spec_verify_tokens), ADD(spec_draft_tokens);
        ADD(spec_accepted_tokens), ADD(spec_tree_verifies), ADD(spec_tree_off_branch), ADD(n_running);
        ADD(n_waiting), ADD(n_grammar_queue), ADD(free_tokens);
        ADD(evictable_tokens), ADD(protected_tokens);
#undef ADD
    }
}
