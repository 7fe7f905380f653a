/* rope — rotary embedding frequencies for every rope_scaling type.
 *
 * DESIGN: inv_freq (rot_dim/2 floats) and the cos/sin scale
 * ("attention_factor") are computed exactly as transformers'
 * modeling_rope_utils._compute_*_parameters does, in the same order of f32
 * tensor operations (python-side scalars in double), so positions far out
 * rotate the same way as in the reference.  Static types are computed once
 * at load; dynamic NTK depends on the sequence length and is recomputed by
 * the forward for each sequence whose length exceeds
 * max_position_embeddings (HF recomputes it from the max position in the
 * call; we do it per sequence, which is the same for one sequence and keeps
 * batched == one-by-one).  longrope has two static tables (short and
 * long factors), both made at load; the forward picks one per sequence.
 */
#ifndef SGLC_MODEL_ROPE_H
#define SGLC_MODEL_ROPE_H

#include "model/config.h"

/* Rotary dims: head_dim * partial_rotary_factor. */
int model_rope_dim(const model_config *c);

/* Fill inv_freq (model_rope_dim(c)/2) for a sequence of seq_len tokens
 * (only dynamic and longrope look at seq_len) and return the attention
 * factor (the scale applied to cos and sin; 1 except for yarn and
 * longrope). */
float model_rope_inv_freq(const model_config *c, int seq_len, float *inv_freq);

/* Gemma 3's sliding layers: the default rope of base c->rope_local_theta
 * (rope_local_base_freq), never scaled (transformers builds that rotary
 * embedding with rope_scaling {"rope_type": "default"}).  Fills
 * model_rope_dim(c)/2 values. */
void model_rope_local_inv_freq(const model_config *c, float *inv_freq);
/* longrope (Phi-3 / Phi-4), as transformers' _compute_longrope_parameters:
 * inv_freq[i] = 1 / (ext[i] * base^(2i/rot_dim)) with ext the long factors
 * when use_long, else the short ones.  The model picks the long table for
 * a sequence whose length exceeds model_rope_longrope_switch(c) (HF:
 * max(position_ids) + 1 > original_max_position_embeddings). */
void model_rope_longrope_inv_freq(const model_config *c, int use_long, float *inv_freq);
/* The cos/sin scale of longrope, for both tables: attention_factor when
 * given, else 1 when factor <= 1, else sqrt(1 + ln(factor) / ln(orig)),
 * factor = rope_scaling.factor or max_position_embeddings / orig. */
float model_rope_longrope_attn_factor(const model_config *c);
/* Sequence length above which the long factors apply (original_max_pos). */
int model_rope_longrope_switch(const model_config *c);

#endif
