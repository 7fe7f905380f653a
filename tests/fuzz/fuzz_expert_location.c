/* fuzz_expert_location — libFuzzer target for --init-expert-location
 * (model_ep_parse_location): a JSON document with physical_to_logical_map
 * or logical_count.  Input: 3 bytes (layers 1..4, experts 1..16, EP ranks
 * 1..4 and redundant slots 0..3), then the JSON text.  A placement that
 * parses must name only valid experts, each at least once per MoE layer. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/config.h"
#include "model/model_ep.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 3) return 0;
    int L = 1 + data[0] % 4, E = 1 + data[1] % 16, R = 1 + (data[2] & 3), red = (data[2] >> 2) & 3;
    char cfg[512];
    snprintf(cfg, sizeof cfg,
             "{\"architectures\":[\"Qwen3MoeForCausalLM\"],\"hidden_size\":16,\"intermediate_size\":32,"
             "\"num_attention_heads\":2,\"num_key_value_heads\":1,\"num_hidden_layers\":%d,\"vocab_size\":32,"
             "\"num_experts\":%d,\"num_experts_per_tok\":1,\"moe_intermediate_size\":8}", L, E);
    model_config c;
    char err[512];
    if (model_config_parse(&c, cfg, strlen(cfg), NULL, 0, err, sizeof err)) abort(); /* the fixed config parses */
    char *spec = malloc(size - 3 + 2);
    if (!spec) return 0;
    spec[0] = '{'; /* always the JSON text form, never a file name */
    memcpy(spec + 1, data + 3, size - 3);
    spec[size - 2] = 0;
    int32_t *p2l = NULL;
    if (model_ep_parse_location(&c, R, red, spec, &p2l, err, sizeof err) == 0) {
        const int P = E + red;
        for (int il = 0; il < L; il++)
            for (int e = 0; e < E; e++) {
                int seen = 0;
                for (int s = 0; s < P; s++) {
                    int32_t v = p2l[(size_t)il * P + s];
                    if (v < 0 || v >= E) abort();
                    seen |= v == e;
                }
                if (!seen && model_config_layer_moe(&c, il)) abort();
            }
    }
    free(p2l);
    free(spec);
    return 0;
}
