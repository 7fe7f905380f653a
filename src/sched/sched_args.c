/* sched_args — the scheduler's arguments: engine defaults and policy names.
 *
 * DESIGN: the command line is parsed once, by src/args (the server
 * argument table); cli_sched_args_from_args (src/cli/cli_args.c) maps the
 * parsed arguments onto this struct.  Here only the engine-side defaults
 * for SGLang's None values and the policy name table remain. */
#include <stddef.h>
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
    a->mamba_ssm_dtype = DTYPE_F32;
    a->mamba_full_memory_ratio = 0.9;
    a->mamba_strategy = SCHED_MAMBA_AUTO;
    a->mamba_track_interval = 256; /* SGLang's default */
}

static const char *const policy_names[] = {"fcfs", "lpm", "dfs-weight", "lof", "random"};

const char *sched_policy_name(sched_policy p)
{
    return (unsigned)p < sizeof policy_names / sizeof policy_names[0] ? policy_names[p] : "?";
}

int sched_policy_parse(const char *name)
{
    for (int p = 0; name && p < (int)(sizeof policy_names / sizeof policy_names[0]); p++)
        if (!strcmp(name, policy_names[p])) return p;
    return -1;
}
