/* rope — see rope.h.  Each branch names the transformers function it
 * mirrors. */
#include "model/rope.h"

#include <math.h>

int model_rope_dim(const model_config *c)
{
    return (int)(c->head_dim * c->rope.partial_rotary_factor);
}

/* _compute_default_rope_parameters: 1 / base ** (arange(0, dim, 2).float() / dim) */
static void default_inv_freq(double base, int dim, float *inv)
{
    for (int i = 0; i < dim / 2; i++) {
        float expo = (float)(2 * i) / (float)dim;
        float p = powf((float)base, expo);
        inv[i] = 1.0f / p;
    }
}

static double yarn_get_mscale(double scale, double mscale)
{
    if (scale <= 1.0) return 1.0;
    return 0.1 * mscale * log(scale) + 1.0;
}

static double yarn_correction_dim(double rot, int dim, double base, double max_pos)
{
    return ((double)dim * log(max_pos / (rot * 2.0 * M_PI))) / (2.0 * log(base));
}

void model_rope_longrope_inv_freq(const model_config *c, int use_long, float *inv)
{
    const model_rope_cfg *r = &c->rope;
    int dim = model_rope_dim(c);
    const float *ext = use_long ? r->long_factor : r->short_factor;
    for (int i = 0; i < dim / 2; i++) {
        /* base ** (arange(0, dim, 2).float() / dim) in f32, times ext, inverted */
        float shape = (float)(2 * i) / (float)dim;
        float p = powf((float)r->theta, shape);
        float f = i < r->n_factors ? ext[i] : 1.0f;
        inv[i] = 1.0f / (f * p);
    }
}

float model_rope_longrope_attn_factor(const model_config *c)
{
    const model_rope_cfg *r = &c->rope;
    if (r->attention_factor >= 0) return (float)r->attention_factor;
    double orig = (double)model_rope_longrope_switch(c);
    double factor = r->factor > 0 ? r->factor : (double)c->max_position_embeddings / orig;
    if (factor <= 1.0 || orig < 2) return 1.0f;
    return (float)sqrt(1.0 + log(factor) / log(orig));
}

int model_rope_longrope_switch(const model_config *c)
{
    return c->rope.original_max_pos > 0 ? c->rope.original_max_pos : c->max_position_embeddings;
}

float model_rope_inv_freq(const model_config *c, int seq_len, float *inv)
{
    const model_rope_cfg *r = &c->rope;
    int dim = model_rope_dim(c), half = dim / 2;
    double base = r->theta;
    switch (r->kind) {
    case MODEL_ROPE_DEFAULT:
        default_inv_freq(base, dim, inv);
        return 1.0f;
    case MODEL_ROPE_LINEAR: /* _compute_linear_scaling_rope_parameters */
        default_inv_freq(base, dim, inv);
        for (int i = 0; i < half; i++) inv[i] = (float)(inv[i] / r->factor);
        return 1.0f;
    case MODEL_ROPE_DYNAMIC: { /* _compute_dynamic_ntk_parameters */
        double maxp = (double)c->max_position_embeddings;
        double sl = seq_len > c->max_position_embeddings ? (double)seq_len : maxp;
        double b = base * pow((r->factor * sl / maxp) - (r->factor - 1.0),
                              (double)dim / (double)(dim - 2));
        default_inv_freq(b, dim, inv);
        return 1.0f;
    }
    case MODEL_ROPE_LLAMA3: { /* _compute_llama3_parameters */
        default_inv_freq(base, dim, inv);
        double old_ctx = (double)r->original_max_pos;
        double low_wl = old_ctx / r->low_freq_factor, high_wl = old_ctx / r->high_freq_factor;
        for (int i = 0; i < half; i++) {
            float f = inv[i];
            float wavelen = (float)(2.0 * M_PI) / f;
            float scaled = wavelen > (float)low_wl ? (float)(f / r->factor) : f;
            float smooth = (float)(((float)(old_ctx / wavelen) - r->low_freq_factor) /
                                   (r->high_freq_factor - r->low_freq_factor));
            float smoothed = (float)((1.0f - smooth) * scaled / r->factor) + smooth * scaled;
            int medium = !(wavelen < (float)high_wl) && !(wavelen > (float)low_wl);
            inv[i] = medium ? smoothed : scaled;
        }
        return 1.0f;
    }
    case MODEL_ROPE_YARN: { /* _compute_yarn_parameters */
        double factor = r->factor;
        double orig = (double)c->max_position_embeddings;
        if (r->original_max_pos > 0) {
            orig = (double)r->original_max_pos;
            factor = (double)c->max_position_embeddings / orig;
        }
        double af = r->attention_factor;
        if (af < 0) {
            if (r->mscale > 0 && r->mscale_all_dim > 0)
                af = yarn_get_mscale(factor, r->mscale) / yarn_get_mscale(factor, r->mscale_all_dim);
            else
                af = yarn_get_mscale(factor, 1.0);
        }
        double beta_fast = r->beta_fast > 0 ? r->beta_fast : 32.0;
        double beta_slow = r->beta_slow > 0 ? r->beta_slow : 1.0;
        double low = yarn_correction_dim(beta_fast, dim, base, orig);
        double high = yarn_correction_dim(beta_slow, dim, base, orig);
        if (r->truncate) {
            low = floor(low);
            high = ceil(high);
        }
        if (low < 0) low = 0;
        if (high > dim - 1) high = dim - 1;
        if (low == high) high += 0.001;
        for (int i = 0; i < half; i++) {
            float pos_freq = powf((float)base, (float)(2 * i) / (float)dim);
            float extra = 1.0f / pos_freq;
            float inter = 1.0f / (float)(factor * pos_freq);
            float ramp = (float)(((float)i - low) / (high - low));
            if (ramp < 0) ramp = 0;
            if (ramp > 1) ramp = 1;
            float ef = 1.0f - ramp; /* inv_freq_extrapolation_factor */
            inv[i] = inter * (1.0f - ef) + extra * ef;
        }
        return (float)af;
    }
    case MODEL_ROPE_LONGROPE:
        model_rope_longrope_inv_freq(c, seq_len > model_rope_longrope_switch(c), inv);
        return model_rope_longrope_attn_factor(c);
    }
    default_inv_freq(base, dim, inv);
    return 1.0f;
}

void model_rope_local_inv_freq(const model_config *c, float *inv)
{
    default_inv_freq(c->rope_local_theta, model_rope_dim(c), inv);
}
