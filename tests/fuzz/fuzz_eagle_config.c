/* fuzz_eagle_config — libFuzzer target for an EAGLE head's config.json
 * (spec_eagle_config_parse, spec/spec_eagle.h) against a fixed 4-layer
 * Llama target of hidden 128 and vocabulary 2048.  Input: one byte
 * choosing EAGLE (even) or EAGLE3 (odd), then the text.  A parsed config
 * must match the target and have capture points inside it; a failure
 * always says why. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "spec/spec_eagle.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    int eagle3 = data[0] & 1;
    char *buf = malloc(size);
    if (!buf) return 0;
    memcpy(buf, data + 1, size - 1);
    buf[size - 1] = 0;
    model_config tc;
    memset(&tc, 0, sizeof tc);
    tc.hidden_size = 128;
    tc.vocab_size = 2048;
    tc.n_layer = 4;
    char err[512] = {0};
    spec_eagle_config hc;
    if (spec_eagle_config_parse(buf, size - 1, &tc, eagle3, &hc, err, sizeof err) == 0) {
        if (hc.cfg.hidden_size != 128 || hc.cfg.vocab_size != 2048) abort();
        if (hc.n_at != (eagle3 ? 3 : 1)) abort();
        for (int i = 0; eagle3 && i < 3; i++)
            if (hc.at[i] < 0 || hc.at[i] >= 4 || (i && hc.at[i] < hc.at[i - 1])) abort();
        if (hc.draft_vocab < 0 || hc.draft_vocab > 2048) abort();
    } else if (!err[0]) {
        abort();
    }
    free(buf);
    return 0;
}
