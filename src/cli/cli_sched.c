/* cli_sched — see cli_sched.h. */
#include "cli/cli_sched.h"

#include <stdlib.h>
#include <string.h>

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

dp *cli_dp_create(model *m, const cli_model_opts *mo, sched_args *sa, const args_server *a)
{
    sa->kv_cache_dtype = (int)cli_kv_dtype(mo, m);
    sa->threads = cli_threads(mo);
    sa->random_seed = mo->load.random_seed;
    int method = dp_lb_parse(a->load_balance_method ? a->load_balance_method : "auto");
    if (method < 0) {
        fprintf(stderr, "error: unknown --load-balance-method '%s'\n", a->load_balance_method);
        return NULL;
    }
    dp_opts o = {.dp_size = a->dp_size > 0 ? (int)a->dp_size : 1, .method = (dp_lb_method)method,
                 .threads = sa->threads, .pin = true};
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
    if (!r->offset) return -1;
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
    memset(r, 0, sizeof *r);
}

static int find_req(const cli_results *r, uint64_t id)
{
    int lo = 0, hi = r->n_req - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (r->ids[mid] == id) return mid;
        if (r->ids[mid] < id) lo = mid + 1;
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
