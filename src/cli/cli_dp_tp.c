/* cli_dp_tp — see cli_dp_tp.h. */
#include "cli/cli_dp_tp.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int ival(long long v, int none) { return v == ARGS_INT_NONE ? none : (int)v; }

bool cli_dp_tp_on(const args_server *a)
{
    int dp = ival(a->dp_size, 1), tp = ival(a->tp_size, 1), pp = ival(a->pp_size, 1);
    return dp > 1 && (tp > 1 || pp > 1);
}

int cli_dp_tp_check(const char *name, const args_server *a)
{
    if (!cli_dp_tp_on(a)) return 0;
    int dp = ival(a->dp_size, 1), tp = ival(a->tp_size, 1), pp = ival(a->pp_size, 1);
    char what[64];
    if (pp > 1) snprintf(what, sizeof what, "--pp-size %d", pp);
    else snprintf(what, sizeof what, "--tp-size %d", tp);
    if (strcmp(name, "serve") && strcmp(name, "generate") && strcmp(name, "bench-offline")) {
        fprintf(stderr, "sglc %s: --dp-size %d with %s is supported by serve, generate --requests and "
                        "bench-offline only (the commands with a data-parallel controller)\n", name, dp, what);
        return -1;
    }
    size_t n_lora = a->lora_paths ? json_array_size(a->lora_paths) : 0;
    if (a->enable_lora || n_lora) {
        fprintf(stderr, "sglc %s: LoRA (--enable-lora / --lora-paths) with --dp-size %d and %s is not supported "
                        "yet: an adapter's shards reach one tensor-parallel group per process; use --dp-size or %s\n",
                name, dp, what, pp > 1 ? "--pp-size" : "--tp-size");
        return -1;
    }
    if (ival(a->ep_size, 1) > 1) {
        fprintf(stderr, "sglc %s: --ep-size %d with --dp-size %d is not supported yet (expert parallelism "
                        "inside data-parallel replicas is not built)\n", name, ival(a->ep_size, 1), dp);
        return -1;
    }
    if (a->numa_node || ival(a->base_gpu_id, 0) != 0 || ival(a->gpu_id_step, 1) != 1) {
        fprintf(stderr, "sglc %s: --numa-node / --base-gpu-id / --gpu-id-step with --dp-size %d and %s are not "
                        "supported yet: replica k's rank r takes core group k x %d + r (docs/notes/dpxtp.md)\n",
                name, dp, what, tp * pp);
        return -1;
    }
    return 0;
}

model *cli_dp_tp_load(const cli_model_opts *mo, const args_server *a, model ***rest)
{
    *rest = NULL;
    if (!cli_dp_tp_on(a)) return cli_model_load(mo);
    int n = (int)a->dp_size;
    model **ms = calloc((size_t)n, sizeof *ms);
    if (!ms) {
        fprintf(stderr, "error: out of memory\n");
        return NULL;
    }
    if (cli_model_load_replicas(mo, n, ms)) {
        free(ms);
        return NULL;
    }
    *rest = ms;
    return ms[0];
}

void cli_dp_tp_free_rest(model **rest, const args_server *a)
{
    for (int r = 1; rest && r < (int)a->dp_size; r++) model_free(rest[r]);
    free(rest);
}
