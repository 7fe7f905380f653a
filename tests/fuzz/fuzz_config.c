/* fuzz_config — libFuzzer target for config.json parsing with overrides.
 * Input: config text, optionally followed by "\n#OVERRIDE\n" and an
 * override JSON text (--json-model-override-args). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model/config.h"
#include "model/rope.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = malloc(size + 1);
    if (!buf) return 0;
    memcpy(buf, data, size);
    buf[size] = 0;
    const char *ov = NULL;
    size_t len = size;
    char *sep = memmem(buf, size, "\n#OVERRIDE\n", 11);
    if (sep) {
        *sep = 0;
        len = (size_t)(sep - buf);
        ov = sep + 11;
    }
    model_config c;
    char err[512];
    if (model_config_parse(&c, buf, len, ov, 0, err, sizeof err) == 0) {
        /* a parsed config must give sane rope tables */
        int dim = model_rope_dim(&c);
        float *inv = malloc(sizeof(float) * (size_t)(dim / 2 + 1));
        if (inv) {
            model_rope_inv_freq(&c, c.context_length, inv);
            if (c.rope_local_theta > 0) model_rope_local_inv_freq(&c, inv);
            free(inv);
        }
        for (int l = 0; l < c.n_layer; l++) {
            (void)model_config_layer_window(&c, l);
            (void)model_config_layer_moe(&c, l);
            (void)model_config_layer_sliding(&c, l);
        }
    }
    free(buf);
    return 0;
}
