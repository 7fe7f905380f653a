/* fuzz_hfq_config — libFuzzer target for quantization_config parsing
 * (model/hfq_config.c).  Input: one byte choosing the --quantization flag
 * (none / each accepted name / a refused / an unknown one), then config.json
 * text.  A parsed config is checked for sane values and its ignore list
 * is matched against a few module names. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model/hfq.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const flags[] = {NULL, "awq", "awq_marlin", "gptq", "gptq_marlin", "compressed-tensors",
                                        "fp8", "w8a8_int8", "w8a8_fp8", "gguf", "marlin", "nonsense"};
    if (size < 1) return 0;
    const char *flag = flags[data[0] % (sizeof flags / sizeof flags[0])];
    char *buf = malloc(size);
    if (!buf) return 0;
    memcpy(buf, data + 1, size - 1);
    buf[size - 1] = 0;
    hfq_config q;
    char err[512];
    if (hfq_config_parse(&q, buf, size - 1, flag, err, sizeof err) == 0) {
        if (q.n_ignore < 0 || q.n_ignore > HFQ_MAX_IGNORE) abort();
        if ((int)q.method < HFQ_NONE || q.method > HFQ_W8A8_FP8) abort();
        (void)hfq_ignored(&q, "lm_head");
        (void)hfq_ignored(&q, "model.layers.0.mlp.gate");
        (void)hfq_ignored(&q, "");
    } else if (!err[0]) {
        abort(); /* a failure always says why */
    }
    free(buf);
    return 0;
}
