/* fuzz_pt_reader — libFuzzer target for the torch.save reader
 * (pt_read_int_vector), the code that reads --speculative-token-map files.
 * The first input byte picks what the rest is:
 *   even  a whole file image (seeds: PT_SEED_DIR=DIR build/tests/test_pt_reader)
 *   odd   the pickle alone, wrapped here in a valid zip with a storage of
 *         64 bytes, so the fuzzer reaches the unpickler past the CRC-32 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/pt_reader.h"

#include "../unit/pt_build.h"

static ptb B;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    const uint8_t *p = data + 1;
    size_t n = size - 1;
    if (data[0] & 1) {
        static const uint8_t storage[64] = {1, 0, 0, 0, 0, 0, 0, 0, 2};
        if (n > sizeof B.p / 2) return 0;
        ptb_entry e[2] = {{"f/data.pkl", p, n}, {"f/data/0", storage, sizeof storage}};
        ptb_zip(&B, e, 2, 0);
        if (B.overflow) return 0;
        p = B.p;
        n = B.n;
    }
    int64_t *v = NULL, nv = 0;
    char err[512];
    if (pt_read_int_vector(p, n, &v, &nv, err, sizeof err) == 0) {
        volatile int64_t sink = 0;
        for (int64_t i = 0; i < nv; i++) sink ^= v[i]; /* every entry must be readable */
        (void)sink;
        free(v);
    }
    return 0;
}
