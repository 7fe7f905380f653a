/* cli_watchdog — SGLang's scheduler watchdog for `sglc serve`.
 *
 * DESIGN: one thread polls the scheduler's progress view
 * (sched_get_progress) every min(timeout / 4, 0.5 s) (at least every
 * millisecond).  A step that has been working (scheduling + forward) for
 * longer than --watchdog-timeout is a hung server: the watchdog logs
 * "Scheduler watchdog timeout (watchdog_timeout=T, soft=False)" with what
 * the step runs and exits the process with status 1 (SGLang kills its
 * process tree with SIGQUIT).  --soft-watchdog-timeout only logs the same
 * diagnostics (soft=True), once per stuck step.  The check lives in cli/
 * because only main and the commands may end the process.
 *
 * Ownership: the watchdog borrows the scheduler (stop the watchdog before
 * destroying it). */
#ifndef SGLC_CLI_WATCHDOG_H
#define SGLC_CLI_WATCHDOG_H

#include "sched/sched.h"

typedef struct cli_watchdog cli_watchdog;

/* hard_s / soft_s: seconds, <= 0 or NaN = off.  NULL when both are off
 * (nothing to watch) or the thread cannot start (logged). */
cli_watchdog *cli_watchdog_start(sched *s, double hard_s, double soft_s);
void cli_watchdog_stop(cli_watchdog *w);

#endif
