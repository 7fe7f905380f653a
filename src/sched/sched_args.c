/* sched_args — the scheduler's server arguments with SGLang's names and
 * defaults, parsed locally until src/args owns the full table.
 *
 * DESIGN: one small table (name, kind, field offset, bounds) drives
 * parsing and --help; "--name value" and "--name=value" both work, as
 * argparse accepts them. */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "kv/kv_radix.h"
#include "sched/sched.h"

void sched_args_init(sched_args *a)
{
    memset(a, 0, sizeof *a);
    a->page_size = 1;
    a->mem_fraction_static = 0; /* derived: 0.3 of (free RAM + weights) on CPU */
    a->kv_cache_dtype = -1;
    a->max_prefill_tokens = 16384;
    a->chunked_prefill_size = 8192;
    a->schedule_conservativeness = 1.0;
    a->schedule_policy = SCHED_POLICY_FCFS;
    a->radix_eviction_policy = KV_EVICT_LRU;
    a->priority_scheduling_preemption_threshold = 10;
    a->stream_interval = 1;
}

static const char *const policy_names[] = {"fcfs", "lpm", "dfs-weight", "lof", "random"};

const char *sched_policy_name(sched_policy p)
{
    return (unsigned)p < sizeof policy_names / sizeof policy_names[0] ? policy_names[p] : "?";
}

typedef enum { A_INT, A_I64, A_DBL, A_FLAG, A_POLICY, A_EVICT } akind;

typedef struct {
    const char *name;
    akind kind;
    size_t off;
    double lo, hi;
    const char *help;
} aspec;

#define F(x) offsetof(sched_args, x)
static const aspec specs[] = {
    {"--page-size", A_INT, F(page_size), 1, 4096, "tokens per KV page (default 1)"},
    {"--max-total-tokens", A_I64, F(max_total_tokens), 1, 2147483647.0,
     "KV pool size in tokens (default: from --mem-fraction-static)"},
    {"--mem-fraction-static", A_DBL, F(mem_fraction_static), 0.001, 1.0,
     "share of (free RAM + weights) for weights + KV (default 0.3)"},
    {"--max-running-requests", A_INT, F(max_running_requests), 1, 1 << 24,
     "most requests decoding at once (default: derived from the pool)"},
    {"--max-queued-requests", A_INT, F(max_queued_requests), 1, 1 << 30,
     "reject beyond this many waiting requests (default: unbounded)"},
    {"--max-prefill-tokens", A_INT, F(max_prefill_tokens), 1, 1 << 30,
     "input tokens per prefill batch (default 16384)"},
    {"--chunked-prefill-size", A_INT, F(chunked_prefill_size), -1, 1 << 30,
     "tokens per prefill chunk; -1 disables chunking (default 8192)"},
    {"--prefill-max-requests", A_INT, F(prefill_max_requests), 1, 1 << 30,
     "requests per prefill batch (default: unbounded)"},
    {"--schedule-conservativeness", A_DBL, F(schedule_conservativeness), 0.0, 100.0,
     "scale of the decode reserve (default 1.0)"},
    {"--schedule-policy", A_POLICY, F(schedule_policy), 0, 0, "fcfs|lpm|dfs-weight|lof|random (default fcfs)"},
    {"--disable-radix-cache", A_FLAG, F(disable_radix_cache), 0, 0, "no prefix reuse"},
    {"--radix-eviction-policy", A_EVICT, F(radix_eviction_policy), 0, 0, "lru|lfu (default lru)"},
    {"--enable-mixed-chunk", A_FLAG, F(enable_mixed_chunk), 0, 0, "decode tokens ride in prefill steps"},
    {"--enable-priority-scheduling", A_FLAG, F(enable_priority_scheduling), 0, 0,
     "order and preempt by request priority"},
    {"--schedule-low-priority-values-first", A_FLAG, F(schedule_low_priority_values_first), 0, 0,
     "smaller priority values run first"},
    {"--priority-scheduling-preemption-threshold", A_INT, F(priority_scheduling_preemption_threshold), 0,
     1 << 30, "priority gap needed to preempt (default 10)"},
    {"--abort-on-priority-when-disabled", A_FLAG, F(abort_on_priority_when_disabled), 0, 0,
     "reject requests with a priority when priority scheduling is off"},
    {"--stream-interval", A_INT, F(stream_interval), 1, 1 << 30, "tokens per stream event (default 1)"},
};
#undef F

int sched_args_parse(sched_args *a, int argc, char **argv, int *i)
{
    const char *arg = argv[*i];
    for (size_t k = 0; k < sizeof specs / sizeof specs[0]; k++) {
        const aspec *sp = &specs[k];
        size_t n = strlen(sp->name);
        if (strncmp(arg, sp->name, n) != 0 || (arg[n] != 0 && arg[n] != '=')) continue;
        char *field = (char *)a + sp->off;
        if (sp->kind == A_FLAG) {
            if (arg[n] == '=') {
                fprintf(stderr, "error: %s takes no value\n", sp->name);
                return -1;
            }
            *(bool *)field = true;
            (*i)++;
            return 1;
        }
        const char *v;
        if (arg[n] == '=') {
            v = arg + n + 1;
            (*i)++;
        } else {
            if (*i + 1 >= argc) {
                fprintf(stderr, "error: %s needs a value\n", sp->name);
                return -1;
            }
            v = argv[*i + 1];
            *i += 2;
        }
        char *end;
        errno = 0;
        switch (sp->kind) {
        case A_INT:
        case A_I64: {
            long long x = strtoll(v, &end, 10);
            if (errno || !*v || *end || x < sp->lo || x > sp->hi || (sp->off == offsetof(sched_args, chunked_prefill_size) && x == 0)) {
                fprintf(stderr, "error: %s must be an integer in [%.0f, %.0f]%s (got '%s')\n", sp->name, sp->lo,
                        sp->hi, sp->off == offsetof(sched_args, chunked_prefill_size) ? ", not 0" : "", v);
                return -1;
            }
            if (sp->kind == A_INT) *(int *)field = (int)x;
            else *(int64_t *)field = x;
            return 1;
        }
        case A_DBL: {
            double x = strtod(v, &end);
            if (errno || !*v || *end || !(x >= sp->lo && x <= sp->hi)) {
                fprintf(stderr, "error: %s must be a number in [%g, %g] (got '%s')\n", sp->name, sp->lo, sp->hi, v);
                return -1;
            }
            *(double *)field = x;
            return 1;
        }
        case A_POLICY:
            for (int p = 0; p < (int)(sizeof policy_names / sizeof policy_names[0]); p++)
                if (!strcmp(v, policy_names[p])) {
                    *(sched_policy *)field = (sched_policy)p;
                    return 1;
                }
            fprintf(stderr, "error: --schedule-policy must be fcfs, lpm, dfs-weight, lof or random (got '%s')\n", v);
            return -1;
        case A_EVICT: {
            int p = kv_evict_policy_parse(v);
            if (p < 0) {
                fprintf(stderr, "error: --radix-eviction-policy must be lru or lfu (got '%s')\n", v);
                return -1;
            }
            *(int *)field = p;
            return 1;
        }
        case A_FLAG:
            break;
        }
    }
    return 0;
}

void sched_args_help(FILE *f)
{
    fprintf(f, "scheduler options (SGLang server arguments):\n");
    for (size_t k = 0; k < sizeof specs / sizeof specs[0]; k++) {
        const aspec *sp = &specs[k];
        char left[64];
        snprintf(left, sizeof left, "%s%s", sp->name, sp->kind == A_FLAG ? "" : " V");
        fprintf(f, "  %-44s %s\n", left, sp->help);
    }
}
