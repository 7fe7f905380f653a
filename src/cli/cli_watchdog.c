/* cli_watchdog — see cli_watchdog.h. */
#include "cli/cli_watchdog.h"

#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "util/log.h"
#include "util/timeutil.h"

struct cli_watchdog {
    sched *s;        /* borrowed */
    double hard_s, soft_s;
    atomic_bool stop;
    pthread_t th;
};

static void report(const cli_watchdog *w, const sched_progress *pg, double elapsed, double limit, bool soft)
{
    sched_stats st;
    sched_get_stats_snapshot(w->s, &st);
    log_error("Scheduler watchdog timeout (watchdog_timeout=%g, soft=%s): a %s step has run for %.3f s "
              "(%d request(s), %" PRId64 " token(s) in the batch; %" PRIu64 " steps done; %d running, %d waiting "
              "as of the last step)",
              limit, soft ? "True" : "False", pg->decode ? "decode" : "prefill/extend", elapsed, pg->batch_reqs,
              pg->batch_tokens, pg->steps, st.n_running, st.n_waiting);
}

static void *watch_main(void *arg)
{
    cli_watchdog *w = arg;
    double lim = w->hard_s > 0 ? w->hard_s : w->soft_s;
    if (w->soft_s > 0 && w->soft_s < lim) lim = w->soft_s;
    double period = fmin(fmax(lim / 4, 0.001), 0.5);
    struct timespec ts = {(time_t)period, (long)((period - floor(period)) * 1e9)};
    double soft_reported = -1; /* busy_since of the step already reported softly */
    while (!atomic_load(&w->stop)) {
        nanosleep(&ts, NULL);
        sched_progress pg;
        sched_get_progress(w->s, &pg);
        if (pg.busy_since <= 0) continue;
        double el = time_now_sec() - pg.busy_since;
        if (w->soft_s > 0 && el > w->soft_s && soft_reported != pg.busy_since) {
            report(w, &pg, el, w->soft_s, true);
            soft_reported = pg.busy_since;
        }
        if (w->hard_s > 0 && el > w->hard_s) {
            report(w, &pg, el, w->hard_s, false);
            log_error("the scheduler is stuck: exiting (status 1)");
            fflush(stderr);
            fflush(stdout);
            _exit(1);
        }
    }
    return NULL;
}

cli_watchdog *cli_watchdog_start(sched *s, double hard_s, double soft_s)
{
    if (!(hard_s > 0) && !(soft_s > 0)) return NULL;
    cli_watchdog *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    w->s = s;
    w->hard_s = hard_s > 0 ? hard_s : 0;
    w->soft_s = soft_s > 0 ? soft_s : 0;
    if (pthread_create(&w->th, NULL, watch_main, w)) {
        log_error("cannot start the watchdog thread");
        free(w);
        return NULL;
    }
    return w;
}

void cli_watchdog_stop(cli_watchdog *w)
{
    if (!w) return;
    atomic_store(&w->stop, true);
    pthread_join(w->th, NULL);
    free(w);
}
