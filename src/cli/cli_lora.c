/* cli_lora — see cli_lora.h.
 *
 * SGLang's rules kept: --max-loaded-loras >= --max-loras-per-batch; the
 * adapters of --lora-paths count against --max-loaded-loras; names are
 * unique.  --max-lora-rank and --lora-target-modules, when given, bound
 * every adapter loaded later (SGLang needs them to size GPU buffers; here
 * they are limits only: without them any rank up to 512 and any supported
 * target loads). */
#include "cli/cli_lora.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lora/lora.h"
#include "util/log.h"

static lora_registry *g_reg;

int cli_lora_setup(const args_server *a, const model *m, sched_args *sa)
{
    size_t n_paths = a->lora_paths ? json_array_size(a->lora_paths) : 0;
    bool on = a->enable_lora || n_paths > 0;
    if (!on) return 0;
    lora_registry_opts o = {.m = m};
    if (a->max_lora_rank != ARGS_INT_NONE) {
        if (a->max_lora_rank < 1 || a->max_lora_rank > LINEAR_MAX_RANK) {
            fprintf(stderr, "error: --max-lora-rank must be in [1, %d]\n", LINEAR_MAX_RANK);
            return -1;
        }
        o.lim.max_rank = a->max_lora_rank;
    }
    size_t i;
    json_t *v;
    json_array_foreach(a->lora_target_modules, i, v) {
        unsigned b = json_is_string(v) ? lora_target_bits(json_string_value(v)) : 0;
        if (!b || !strcmp(json_string_value(v), "all-linear")) {
            fprintf(stderr, "error: --lora-target-modules: unknown module '%s' (q_proj, k_proj, v_proj, "
                    "o_proj, gate_proj, up_proj, down_proj, qkv_proj, gate_up_proj, lm_head, all)\n",
                    json_is_string(v) ? json_string_value(v) : "?");
            return -1;
        }
        o.lim.allowed |= b;
    }
    int per_batch = a->max_loras_per_batch != ARGS_INT_NONE ? a->max_loras_per_batch : 8;
    if (per_batch < 1 || per_batch > 64) {
        fprintf(stderr, "error: --max-loras-per-batch must be in [1, 64]\n");
        return -1;
    }
    if (a->max_loaded_loras != ARGS_INT_NONE) {
        if (a->max_loaded_loras < per_batch) {
            fprintf(stderr, "error: max_loaded_loras (%d) should be greater than or equal to "
                    "max_loras_per_batch (%d)\n", a->max_loaded_loras, per_batch);
            return -1;
        }
        o.max_loaded = a->max_loaded_loras;
    }
    if (a->max_loaded_loras != ARGS_INT_NONE && (int)n_paths > a->max_loaded_loras) {
        fprintf(stderr, "error: %zu --lora-paths adapters exceed --max-loaded-loras %d\n", n_paths,
                a->max_loaded_loras);
        return -1;
    }
    o.policy = a->lora_eviction_policy && !strcmp(a->lora_eviction_policy, "fifo") ? LORA_EVICT_FIFO
                                                                                  : LORA_EVICT_LRU;
    lora_registry *r = lora_registry_create(&o);
    if (!r) {
        fprintf(stderr, "error: out of memory\n");
        return -1;
    }
    json_array_foreach(a->lora_paths, i, v) {
        char *name, *path, err[1024];
        bool pinned;
        if (!json_is_string(v) || lora_parse_path_arg(json_string_value(v), &name, &path, &pinned, err, sizeof err) ||
            lora_registry_load(r, name, path, pinned, err, sizeof err)) {
            if (!json_is_string(v)) snprintf(err, sizeof err, "--lora-paths entries must be strings");
            fprintf(stderr, "error: %s\n", err);
            lora_registry_destroy(r);
            return -1;
        }
        lora_adapter *ad = lora_registry_get(r, name);
        log_info("LoRA adapter %s (%s): rank %d, %.1f MiB, loaded in %.1f ms%s", name, path, ad->cfg.r,
                 ad->bytes / 1048576.0, ad->load_ms, pinned ? ", pinned" : "");
        lora_adapter_unref(ad);
        free(name);
        free(path);
    }
    if (a->lora_backend && strcmp(a->lora_backend, "csgmv"))
        log_info("--lora-backend %s: sglc runs its one CPU kernel (grouped shrink/expand) for every backend name",
                 a->lora_backend);
    sa->max_loras_per_batch = per_batch;
    g_reg = r;
    lora_set_global(r);
    return 0;
}

void cli_lora_teardown(void)
{
    lora_set_global(NULL);
    lora_registry_destroy(g_reg);
    g_reg = NULL;
}
