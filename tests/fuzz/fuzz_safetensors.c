/* fuzz_safetensors — libFuzzer target for the safetensors header parser
 * and validator (st_parse_buffer), the code that reads untrusted
 * checkpoint files.  The input is a whole file image. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "model/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    st_archive a;
    memset(&a, 0, sizeof a);
    char err[512];
    if (st_parse_buffer(&a, data, size, 0, "fuzz.safetensors", err, sizeof err) == 0) {
        /* touch every tensor's bytes: they must lie inside the buffer */
        volatile uint8_t sink = 0;
        for (int i = 0; i < a.n_tensors; i++) {
            const uint8_t *p = a.tensors[i].data;
            if (a.tensors[i].nbytes) sink ^= p[0] ^ p[a.tensors[i].nbytes - 1];
        }
        (void)sink;
    }
    st_close(&a);
    return 0;
}
