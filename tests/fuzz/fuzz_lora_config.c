/* fuzz_lora_config — libFuzzer target for the LoRA parsers (lora/lora.h):
 * adapter_config.json (lora_config_parse) and one --lora-paths entry
 * (lora_parse_path_arg: NAME=PATH, PATH or a JSON object).  Input: one
 * byte choosing the parser, then the text.  A parsed config is checked
 * for sane values; a failure always says why. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lora/lora.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    int mode = data[0] % 2;
    char *buf = malloc(size);
    if (!buf) return 0;
    memcpy(buf, data + 1, size - 1);
    buf[size - 1] = 0;
    char err[512] = {0};
    if (mode == 0) {
        lora_config c;
        if (lora_config_parse(buf, size - 1, &c, err, sizeof err) == 0) {
            if (c.r < 1 || c.r > LINEAR_MAX_RANK || !c.targets) abort();
            if (c.targets >> (LORA_T_KV_B + 1)) abort(); /* the highest target bit */
            char names[256];
            lora_targets_str(c.targets, names, sizeof names);
            if (!names[0]) abort();
        } else if (!err[0]) {
            abort();
        }
    } else {
        char *name = NULL, *path = NULL;
        bool pinned;
        if (lora_parse_path_arg(buf, &name, &path, &pinned, err, sizeof err) == 0) {
            if (!name || !path || !*name || !*path) abort();
            (void)lora_target_bits(name);
        } else if (!err[0] || name || path) {
            abort();
        }
        free(name);
        free(path);
    }
    free(buf);
    return 0;
}
