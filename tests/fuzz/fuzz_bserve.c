/* fuzz_bserve — what a (hostile) serving backend or dataset file gives
 * bench-serving: the first byte picks the parser (native SSE, OpenAI
 * completions SSE, OpenAI chat SSE, ShareGPT JSON) and, for streams, the
 * feed split; the rest is the input.  Must never crash or leak, and the
 * stream state must stay consistent (text NUL-terminated at text_len,
 * latencies finite and not negative for monotonic stamps). */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_bserve.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    unsigned sel = data[0] & 3, step = (data[0] >> 2) + 1;
    const char *p = (const char *)data + 1;
    size_t n = size - 1;
    if (sel == 3) {
        cli_bserve_conv *c;
        size_t nc;
        char err[128];
        if (cli_bserve_sharegpt_parse(p, n, &c, &nc, err, sizeof err) == 0) {
            for (size_t i = 0; i < nc; i++)
                if (!c[i].prompt || !c[i].completion) abort();
            cli_bserve_convs_free(c, nc);
        }
        return 0;
    }
    cli_bserve_stream s;
    cli_bserve_stream_init(&s, (cli_bserve_backend)sel, 0.0);
    double t = 0.0;
    for (size_t off = 0; off < n; off += step) {
        size_t k = n - off < step ? n - off : step;
        t += 0.001;
        cli_bserve_stream_feed(&s, p + off, k, t);
    }
    cli_bserve_stream_finish(&s, t + 0.001);
    if (s.text && s.text[s.text_len] != '\0') abort();
    if (s.chunks > 0 && !(s.ttft >= 0)) abort();
    for (size_t i = 0; i < s.n_itl; i++)
        if (!(s.itl[i] >= 0) || !isfinite(s.itl[i])) abort();
    cli_bserve_stream_free(&s);
    return 0;
}
