/* quantize_ct — `sglc quantize --type W8A8 | W4A16`: a Hugging Face
 * folder to a compressed-tensors folder (the layout of RedHatAI's
 * *-quantized.w8a8 / *-quantized.w4a16 checkpoints), loadable by vLLM,
 * SGLang and sglc's own compressed-tensors loader (wsource_hfq.c).
 * See quantize_ct.c's DESIGN comment and docs/notes/hfq.md. */
#ifndef SGLC_CLI_QUANTIZE_CT_H
#define SGLC_CLI_QUANTIZE_CT_H

#include <stddef.h>

typedef enum quantize_ct_kind {
    QUANTIZE_CT_NONE = 0,
    QUANTIZE_CT_W8A8,   /* int-quantized: int8 per channel, dynamic int8 per-token activations */
    QUANTIZE_CT_W4A16,  /* pack-quantized: 4-bit symmetric per group, weight-only */
} quantize_ct_kind;

typedef struct quantize_ct_opts {
    quantize_ct_kind kind;
    int group_size;          /* W4A16: inputs per scale (multiple of 8), or -1 per channel */
    size_t max_shard_bytes;  /* a new shard when one would grow past this (0: one file) */
} quantize_ct_opts;

/* "W8A8", "w8a8_int8", "W4A16", ... -> the kind; QUANTIZE_CT_NONE for
 * anything else (a GGUF type). */
quantize_ct_kind quantize_ct_kind_of(const char *type);
const char *quantize_ct_kind_name(quantize_ct_kind k);

/* Quantize folder dir into the new folder out (created; it may exist as an
 * empty directory).  Prints what it did and any error to stderr with the
 * "sglc quantize:" prefix.  0, or 1 on any failure (nothing left in out
 * but what was there before). */
int quantize_ct_run(const char *dir, const char *out, const quantize_ct_opts *o);

#endif
