/* hfq — Hugging Face quantized checkpoints: detection and the weight source.
 *
 * DESIGN: a quantized checkpoint is a safetensors folder whose config.json
 * has a `quantization_config` (or a plain one loaded with `--quantization
 * w8a8_int8|fp8`, quantized at load).  hfq_config_parse reads that object
 * into an hfq_config (method, bits, group size, zero points, act-order,
 * fp8 block size, the modules left unquantized) and checks it against the
 * `--quantization` flag as SGLang's ModelConfig._verify_quantization does.
 * wsrc_open_hfq opens the safetensors source and, when the checkpoint is
 * quantized, wraps it (wsource_hfq.c): a request for `X.weight` finds the
 * packed tensors (`X.qweight`/`qzeros`/`scales`/`g_idx`, `X.weight` int8 or
 * fp8 with `X.weight_scale`/`weight_scale_inv`, `X.weight_packed`) and
 * returns an (out, in) weight the loader takes as it is:
 *   - a block-quantized kern_type when the format maps onto one exactly
 *     but for the f16 rounding of the scales (Q4_0 / Q4_1 / Q8_0; see
 *     docs/notes/hfq.md for the error), used in place by the int8 kernels;
 *   - otherwise the exact dequantized values (hfquant.c) in the
 *     checkpoint's torch_dtype (f32, f16 or bf16): GPTQ act-order, 2-bit,
 *     asymmetric 8-bit, fp8 (weight-only: CPUs have no fp8 arithmetic).
 * Tensors the checkpoint stores unquantized (lm_head, ignored modules)
 * pass through untouched.
 *
 * Lifetime and threading: as wsource.h; the buffers made for quantized
 * tensors belong to the source (freed at release_unused unless kept, or
 * at close).
 */
#ifndef SGLC_MODEL_HFQ_H
#define SGLC_MODEL_HFQ_H

#include <stddef.h>

#include "model/wsource.h"

typedef enum hfq_method {
    HFQ_NONE = 0,
    HFQ_AWQ,
    HFQ_GPTQ,
    HFQ_CT,          /* compressed-tensors */
    HFQ_FP8,
    HFQ_W8A8_INT8,
    HFQ_W8A8_FP8,
} hfq_method;

#define HFQ_MAX_IGNORE 512 /* MoE checkpoints list a router per layer or a module per expert */

typedef struct hfq_config {
    hfq_method method;
    int at_load;           /* 1: unquantized checkpoint, quantized while loading */
    int bits;              /* awq/gptq/ct weights: 2, 4, 8 */
    int group_size;        /* <= 0: per channel (one group over `in`) */
    int zero_point;        /* awq: zero points stored */
    int desc_act;          /* gptq act-order */
    int sym;               /* gptq / ct symmetric */
    int zeros_v2;          /* gptq checkpoint_format gptq_v2 */
    int block_out, block_in; /* fp8 weight_block_size; 0 = none */
    char ct_format[32];    /* compressed-tensors: int-quantized, pack-quantized, float-quantized, naive-quantized */
    int n_ignore;
    char ignore[HFQ_MAX_IGNORE][128]; /* ignore / modules_to_not_convert (names or "re:" patterns) */
    char name[32];         /* the method as SGLang spells it */
} hfq_config;

/* SGLang's name for a method (--quantization value) -> hfq_method, HFQ_NONE
 * for a name sglc accepts that is not a Hugging Face method here ("gguf"),
 * -1 for a method sglc refuses (message in err), -2 for an unknown name. */
int hfq_method_from_name(const char *name, char *err, size_t errlen);

/* config.json text (json, len) + the --quantization flag (NULL = none)
 * into *q.  HFQ_NONE when neither asks for a quantized load.  0, or -1
 * with the message in err (unsupported method or bits, flag and checkpoint
 * disagree). */
int hfq_config_parse(hfq_config *q, const char *json, size_t len, const char *flag, char *err,
                     size_t errlen);

/* 1 when module `name` (a tensor name without ".weight") is in the
 * ignore list. */
int hfq_ignored(const hfq_config *q, const char *module);

/* Open the safetensors checkpoint at path (see wsrc_open_safetensors); when
 * DIR/config.json or `flag` asks for a quantized load, wrap it as above.
 * 0, or -1 with the message in err. */
int wsrc_open_hfq(wsrc *s, const char *path, const char *flag, char *err, size_t errlen);
/* Wrap an open source without a checkpoint config (dummy weights) for
 * the at-load methods of `flag` (fp8, w8a8_int8): their matrices are
 * quantized as wsrc_open_hfq's at-load path does.  No-op for NULL / none;
 * -1 with a message for a method that needs a quantized checkpoint. */
int wsrc_wrap_hfq_at_load(wsrc *s, const char *flag, char *err, size_t errlen);

#endif
