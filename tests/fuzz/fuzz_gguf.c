/* fuzz_gguf — libFuzzer target for the GGUF reader (gguf_parse_buffer)
 * and what is built from its metadata (gguf_model_config: the config.json
 * made from {arch}.* keys, sglc.hf_config, rope_freqs), the code that
 * reads untrusted model files.  The input is a whole file image.  Seeds
 * (tests/fuzz/corpus/fuzz_gguf) are written by gguf_writer:
 * GGUF_SEED_DIR=DIR build/tests/test_gguf. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model/config.h"
#include "model/gguf.h"
#include "model/gguf_model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gguf_file g;
    char err[512];
    if (gguf_parse_buffer(&g, data, size, "fuzz.gguf", err, sizeof err) == 0) {
        /* every tensor's bytes lie inside the buffer */
        volatile uint8_t sink = 0;
        for (int64_t i = 0; i < g.n_tensors; i++) {
            const uint8_t *p = g.tensors[i].data;
            if (g.tensors[i].nbytes) sink ^= p[0] ^ p[g.tensors[i].nbytes - 1];
        }
        for (int64_t i = 0; i < g.n_kv; i++) {
            const gguf_value *v = &g.kv[i].v;
            if (v->type == GGUF_T_ARRAY && v->n && v->arr_data) sink ^= (uint8_t)gguf_arr_int(v, v->n - 1);
            if (v->type == GGUF_T_ARRAY && v->n && v->strs && v->strs[v->n - 1].len)
                sink ^= (uint8_t)v->strs[v->n - 1].s[v->strs[v->n - 1].len - 1];
        }
        (void)sink;
        model_config c;
        gguf_model_config(&g, NULL, 0, &c, err, sizeof err);
        gguf_close(&g);
    }
    return 0;
}
