/* gguf_model — GGUF files as sglc models: the Hugging Face <-> GGUF tensor
 * names, the model config from GGUF metadata, and finding the file.
 *
 * DESIGN: the loader (model.c) asks for tensors by their Hugging Face
 * names; one table here maps them to llama.cpp's GGUF names (both ways:
 * the GGUF weight source looks names up, `sglc quantize` writes them):
 *
 *   model.embed_tokens.weight                  token_embd.weight
 *   lm_head.weight                             output.weight (absent = tied)
 *   model.norm.weight                          output_norm.weight
 *   model.layers.N.input_layernorm.weight      blk.N.attn_norm.weight
 *   model.layers.N.self_attn.{q,k,v,o}_proj.*  blk.N.attn_{q,k,v,output}.*
 *   model.layers.N.self_attn.{q,k}_norm.weight blk.N.attn_{q,k}_norm.weight
 *   model.layers.N.post_attention_layernorm.*  blk.N.ffn_norm.weight
 *   model.layers.N.mlp.{gate,up,down}_proj.*   blk.N.ffn_{gate,up,down}.*
 *   ...mlp.gate.weight / block_sparse_moe.gate blk.N.ffn_gate_inp.weight
 *   ...mlp.experts.E.{gate,up,down}_proj.weight  expert E of
 *   ...block_sparse_moe.experts.E.{w1,w3,w2}     blk.N.ffn_{gate,up,down}_exps.weight
 *
 * Per architecture (gguf_name_from_hf_arch), as llama.cpp's llama-arch.cpp
 * and convert_hf_to_gguf.py name them:
 *   gemma2/3: post_attention_layernorm   blk.N.post_attention_norm.weight
 *             pre_feedforward_layernorm  blk.N.ffn_norm.weight
 *             post_feedforward_layernorm blk.N.post_ffw_norm.weight
 *             every *norm.weight stored as HF's w + 1 (gguf_norm_plus_one)
 *   phi3:     self_attn.qkv_proj         blk.N.attn_qkv.weight (fused, as HF)
 *             mlp.gate_up_proj           blk.N.ffn_up.weight (gate rows, up rows)
 *             longrope factors           rope_factors_{long,short}.weight
 *   qwen2moe: mlp.shared_expert.X_proj   blk.N.ffn_X_shexp.weight
 *             mlp.shared_expert_gate     blk.N.ffn_gate_inp_shexp.weight
 *   deepseek2: self_attn.q_a_proj / q_a_layernorm / q_b_proj  blk.N.attn_q_a / _q_a_norm / _q_b
 *             self_attn.kv_a_proj_with_mqa / kv_a_layernorm  blk.N.attn_kv_a_mqa / _kv_a_norm
 *             self_attn.kv_b_proj        blk.N.attn_kv_b.weight (older files; current ones
 *                                        split it: attn_k_b / attn_v_b, wsource_gguf.c)
 *             mlp.gate.e_score_correction_bias  blk.N.exp_probs_b.bias
 *             mlp.shared_experts.X_proj  blk.N.ffn_X_shexp.weight
 *
 * The config is built as the config.json a Hugging Face export of the
 * same model would have and parsed by model_config_parse, so GGUF models
 * get the same validation, defaults and --json-model-override-args.
 */
#ifndef SGLC_MODEL_GGUF_MODEL_H
#define SGLC_MODEL_GGUF_MODEL_H

#include <stddef.h>

#include "model/config.h"
#include "model/gguf.h"

/* HF tensor name -> GGUF name into out.  1 mapped (*expert = the expert
 * index for a slice of a 3-D *_exps tensor, else -1), 0 no GGUF name. */
int gguf_name_from_hf(const char *hf, char *out, size_t n, int *expert);

/* The same for GGUF architecture `garch` (general.architecture; NULL =
 * "llama"): gemma2 / gemma3 (post_attention_norm, ffn_norm = the pre-MLP
 * norm, post_ffw_norm), phi3 (attn_qkv, ffn_up = fused gate_up), qwen2moe
 * (ffn_{gate,up,down}_shexp, ffn_gate_inp_shexp), deepseek2 (MLA, exp_probs_b,
 * *_shexp) have their own rows. */
int gguf_name_from_hf_arch(const char *garch, const char *hf, char *out, size_t n, int *expert);

/* Does llama.cpp store this GGUF tensor of architecture garch as the HF
 * weight + 1 (Gemma's RMSNorm (1 + w) weights: every *norm.weight)? */
int gguf_norm_plus_one(const char *garch, const char *gguf_name);

/* Is `path` a GGUF model: a file whose name ends in .gguf, or a folder
 * holding exactly one .gguf file (and, unless `force`, no config.json)?
 * 1 with the file's path in out, 0 no, -1 with a message (a folder with
 * several .gguf files, a --load-format gguf path without one). */
int gguf_model_path(const char *path, int force, char *out, size_t n, char *err, size_t errlen);

/* The model config from the file's metadata (architectures llama, qwen2,
 * qwen3, qwen3moe, qwen2moe, gemma2, gemma3, phi3, deepseek2 = DeepSeek V2
 * or V3 by its routing; llama with experts =
 * Mixtral; others refused naming the architecture).  0, or -1 with err. */
int gguf_model_config(const gguf_file *g, const char *override_json, int context_length,
                      model_config *c, char *err, size_t errlen);

/* The config.json text (malloc'd) gguf_model_config parses; NULL with err. */
char *gguf_model_config_json(const gguf_file *g, char *err, size_t errlen);

/* The GGUF file behind an open GGUF weight source (wsrc_open_gguf), or
 * NULL when the source is another kind. */
struct wsrc;
const gguf_file *wsrc_gguf_file(const struct wsrc *s);

#endif
