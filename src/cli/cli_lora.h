/* cli_lora — the LoRA server arguments (--enable-lora, --lora-paths, ...)
 * turned into the process's adapter registry (lora/lora.h).
 *
 * DESIGN: one registry per process (lora_set_global), made after the
 * model loads and before the scheduler starts: the --lora-paths adapters
 * are loaded (a bad one stops start-up with its message) and the
 * scheduler gets --max-loras-per-batch. */
#ifndef SGLC_CLI_LORA_H
#define SGLC_CLI_LORA_H

#include "args/args.h"
#include "model/model.h"
#include "sched/sched.h"

/* The LoRA group, for commands that list the server arguments they take. */
#define CLI_LORA_ARG_IDS                                                                            \
    ARG_ID_enable_lora, ARG_ID_enable_lora_overlap_loading, ARG_ID_lora_paths, ARG_ID_max_lora_rank, \
        ARG_ID_lora_target_modules, ARG_ID_max_loras_per_batch, ARG_ID_max_loaded_loras,           \
        ARG_ID_lora_eviction_policy, ARG_ID_lora_backend, ARG_ID_max_lora_chunk_size

/* LoRA on when --enable-lora or --lora-paths is given (SGLang turns
 * enable_lora on for --lora-paths).  Validates the group's arguments,
 * creates the registry, loads --lora-paths, sets sa->max_loras_per_batch.
 * 0 (also when LoRA is off), or -1 after printing "error: ...". */
int cli_lora_setup(const args_server *a, const model *m, sched_args *sa);
/* Drop the registry (after the scheduler is destroyed). */
void cli_lora_teardown(void);

#endif
