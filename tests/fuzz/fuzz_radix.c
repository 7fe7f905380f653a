/* fuzz_radix — drives the radix cache simulation of tests/kv_model.h from
 * fuzz bytes: the first byte picks page size (1, 4, 16), eviction policy
 * and disable mode; the rest are scheduler steps (admit, extend, cache
 * unfinished, finish, probe, evict, reset).  Every step is checked
 * against the naive reference and the ownership / size invariants; any
 * disagreement aborts. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "../kv_model.h"
#include "util/log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static kvm m;
    if (size < 1) return 0;
    log_set_level(LOG_CRITICAL);
    static const int sizes[3] = {1, 4, 16};
    static const int64_t pages[3] = {96, 32, 12};
    int k = data[0] % 3;
    kv_evict_policy pol = (data[0] >> 2) & 1 ? KV_EVICT_LFU : KV_EVICT_LRU;
    bool disable = ((data[0] >> 3) & 7) == 7;
    if (size > 20000) size = 20000; /* the reference is quadratic */
    if (kvm_run(&m, data + 1, size - 1, sizes[k], pol, disable, pages[k]) != 0) {
        fprintf(stderr, "fuzz_radix: P=%d policy=%s disable=%d op=%lld: %s\n", sizes[k],
                kv_evict_policy_name(pol), disable, (long long)m.n_ops, m.err);
        abort();
    }
    return 0;
}
