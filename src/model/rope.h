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
 * batched == one-by-one).
 */
#ifndef SGLC_MODEL_ROPE_H
#define SGLC_MODEL_ROPE_H

#include "model/config.h"

/* Rotary dims: head_dim * partial_rotary_factor. */
int model_rope_dim(const model_config *c);

/* Fill inv_freq (model_rope_dim(c)/2) for a sequence of seq_len tokens
 * (only the dynamic type looks at seq_len) and return the attention factor
 * (the scale applied to cos and sin; 1 except for yarn). */
float model_rope_inv_freq(const model_config *c, int seq_len, float *inv_freq);

/* Gemma 3's sliding layers: the default rope of base c->rope_local_theta
 * (rope_local_base_freq), never scaled (transformers builds that rotary
 * embedding with rope_scaling {"rope_type": "default"}).  Fills
 * model_rope_dim(c)/2 values. */
void model_rope_local_inv_freq(const model_config *c, float *inv_freq);

#endif
