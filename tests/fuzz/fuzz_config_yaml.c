/* fuzz_config_yaml — the --config YAML loader on arbitrary bytes: must
 * return a status (never crash, leak or hang) and leave a struct that
 * args_validate / args_to_json / args_server_free handle. */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "args/args.h"
#include "util/log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    log_set_level(LOG_CRITICAL);
    args_server a;
    char err[256];
    if (args_server_init(&a) != ARGS_OK) return 0;
    (void)args_load_config_string(&a, (const char *)data, size, "fuzz.yaml", err, sizeof err);
    (void)args_validate(&a, err, sizeof err);
    json_t *j = args_to_json(&a);
    json_decref(j);
    args_server_free(&a);
    return 0;
}
