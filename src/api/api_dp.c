/* api_dp — the front's side of data parallelism (dp/dp.h): a request's
 * replica fields and /get_load.
 *
 * DESIGN: the routes never pick a replica; api.c reads the body's
 * data_parallel_rank / bootstrap_room here (on the tokenizer worker,
 * before the route builds its job) and api_job_submit hands them to the
 * controller.  /get_load reports what each replica holds: num_reqs as the
 * controller counts them (submitted, no FINISH yet: queued, running, held
 * while paused), running / waiting from the replica's scheduler, and
 * num_tokens its KV pool in use (neither free nor evictable cache). */
#include "api/api_job.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

int api_dp_fields(api_server *a, const json_t *body, int *rank, int64_t *room, char *err, size_t errlen)
{
    *rank = -1, *room = -1;
    int n = a->dp ? dp_size(a->dp) : 1;
    const json_t *v = json_object_get(body, "data_parallel_rank");
    if (v && !json_is_null(v)) {
        if (!json_is_integer(v)) {
            snprintf(err, errlen, "data_parallel_rank must be an integer or null");
            return -1;
        }
        json_int_t x = json_integer_value(v);
        if (x < 0 || x >= n) {
            snprintf(err, errlen, "data_parallel_rank %" PRId64 " is out of range: the server has --dp-size %d "
                     "(ranks 0 to %d)", (int64_t)x, n, n - 1);
            return -1;
        }
        *rank = (int)x;
    }
    v = json_object_get(body, "bootstrap_room");
    if (v && !json_is_null(v)) {
        if (!json_is_integer(v) || json_integer_value(v) < 0) {
            snprintf(err, errlen, "bootstrap_room must be a non-negative integer or null");
            return -1;
        }
        *room = (int64_t)json_integer_value(v);
    }
    return 0;
}

json_t *api_dp_load_json(api_server *a)
{
    json_t *arr = json_array();
    int n = a->dp ? dp_size(a->dp) : 1;
    for (int r = 0; arr && r < n; r++) {
        sched_stats st;
        memset(&st, 0, sizeof st);
        dp_lb_load l;
        memset(&l, 0, sizeof l);
        if (a->dp) {
            sched_get_stats_snapshot(dp_sched(a->dp, r), &st);
            dp_get_load(a->dp, r, &l);
        } else { /* dry run: the registry's count */
            pthread_mutex_lock(&a->mu);
            l.reqs = a->n_reqs;
            pthread_mutex_unlock(&a->mu);
        }
        int64_t used = st.max_total_num_tokens - st.free_tokens - st.evictable_tokens;
        json_array_append_new(arr, json_pack("{s:i,s:I,s:i,s:i,s:I}", "dp_rank", r, "num_reqs", (json_int_t)l.reqs,
                                             "num_running_reqs", st.n_running, "num_waiting_reqs", st.n_waiting,
                                             "num_tokens", (json_int_t)(used > 0 ? used : 0)));
    }
    return arr;
}
