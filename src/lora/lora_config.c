/* lora_config — adapter_config.json (PEFT's LoraConfig as saved) and the
 * target-module names (see lora.h).
 *
 * DESIGN: strict about what changes the math, lenient about what does
 * not.  Read: peft_type (must be "LORA" when present), r (1..), lora_alpha
 * (default 8), use_rslora, target_modules (a list of module names, or the
 * string "all-linear"; a regex string is refused; experts are their
 * gate/up/down_proj or Mixtral's w1/w3/w2, DeepSeek's MLA projections
 * q_a_proj, q_b_proj, kv_a_proj_with_mqa, kv_b_proj), base_model_name_or_path.
 * Refused when set to anything but their neutral value: use_dora,
 * rank_pattern / alpha_pattern (per-module ranks), bias (LoRA biases),
 * modules_to_save, fan_in_fan_out (GPT-2 Conv1D layout), layer_replication,
 * use_qalora, lora_bias, trainable_token_indices.  Ignored: training-only keys
 * (lora_dropout, init_lora_weights, task_type, inference_mode, revision,
 * layers_to_transform / layers_pattern: the tensors present say which
 * layers carry a delta). */
#include <jansson.h>
#include <math.h>
#include <string.h>

#include "lora/lora.h"
#include "util/errmsg.h"

typedef struct tname {
    const char *name;
    unsigned bits;
} tname;

static const tname TNAMES[] = {
    {"q_proj", 1u << MODEL_PROJ_Q},
    {"k_proj", 1u << MODEL_PROJ_K},
    {"v_proj", 1u << MODEL_PROJ_V},
    {"o_proj", 1u << MODEL_PROJ_O},
    {"gate_proj", 1u << MODEL_PROJ_GATE},
    {"up_proj", 1u << MODEL_PROJ_UP},
    {"down_proj", 1u << MODEL_PROJ_DOWN},
    {"lm_head", 1u << LORA_T_LM_HEAD},
    {"embed_tokens", 1u << LORA_T_EMBED},
    {"q_a_proj", 1u << LORA_T_Q_A},
    {"q_b_proj", 1u << LORA_T_Q_B},
    {"kv_a_proj_with_mqa", 1u << LORA_T_KV_A},
    {"kv_b_proj", 1u << LORA_T_KV_B},
    /* Mixtral's expert names (w1 gate, w3 up, w2 down) */
    {"w1", 1u << MODEL_PROJ_GATE},
    {"w3", 1u << MODEL_PROJ_UP},
    {"w2", 1u << MODEL_PROJ_DOWN},
    /* SGLang's fused names */
    {"qkv_proj", (1u << MODEL_PROJ_Q) | (1u << MODEL_PROJ_K) | (1u << MODEL_PROJ_V)},
    {"gate_up_proj", (1u << MODEL_PROJ_GATE) | (1u << MODEL_PROJ_UP)},
    {"all-linear", LORA_T_ALL_LINEAR},
    {"all", LORA_T_ALL_LINEAR | (1u << LORA_T_LM_HEAD) | (1u << LORA_T_EMBED)},
};

unsigned lora_target_bits(const char *name)
{
    for (size_t i = 0; i < sizeof TNAMES / sizeof TNAMES[0]; i++)
        if (!strcmp(TNAMES[i].name, name)) return TNAMES[i].bits;
    return 0;
}

void lora_targets_str(unsigned t, char *buf, size_t len)
{
    size_t o = 0;
    if (len) buf[0] = 0;
    for (int i = 0; i <= LORA_T_KV_B; i++) {
        if (!(t & (1u << i))) continue;
        const char *nm = TNAMES[i].name; /* the first LORA_T_KV_B + 1 entries are the single bits */
        int w = snprintf(buf + o, o < len ? len - o : 0, "%s%s", o ? "," : "", nm);
        if (w > 0) o += (size_t)w;
        if (o >= len) break;
    }
}

/* True when v is absent, null, false, 0, "" / "none", [] or {}. */
static int neutral(const json_t *v)
{
    if (!v || json_is_null(v) || json_is_false(v)) return 1;
    if (json_is_integer(v)) return json_integer_value(v) == 0;
    if (json_is_string(v)) return !*json_string_value(v) || !strcmp(json_string_value(v), "none");
    if (json_is_array(v)) return json_array_size(v) == 0;
    if (json_is_object(v)) return json_object_size(v) == 0;
    return 0;
}

int lora_config_parse(const char *text, size_t len, lora_config *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    json_error_t je;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        errmsg_set(err, errlen, "adapter_config.json: invalid JSON at line %d: %s", je.line, je.text);
        return -1;
    }
    int rc = -1;
    if (!json_is_object(root)) {
        errmsg_set(err, errlen, "adapter_config.json: not a JSON object");
        goto out;
    }
    json_t *v = json_object_get(root, "peft_type");
    if (v && !json_is_null(v)) {
        if (!json_is_string(v) || strcmp(json_string_value(v), "LORA")) {
            errmsg_set(err, errlen, "adapter_config.json: peft_type %s is not supported (LoRA only)",
                       json_is_string(v) ? json_string_value(v) : "(not a string)");
            goto out;
        }
    }
    static const char *const refused[][2] = {
        {"use_dora", "DoRA (use_dora) adapters are not supported"},
        {"rank_pattern", "per-module ranks (rank_pattern) are not supported"},
        {"alpha_pattern", "per-module alphas (alpha_pattern) are not supported"},
        {"bias", "LoRA biases (bias other than \"none\") are not supported"},
        {"lora_bias", "LoRA biases (lora_bias) are not supported"},
        {"modules_to_save", "modules_to_save (fully trained modules) are not supported"},
        {"fan_in_fan_out", "fan_in_fan_out (Conv1D weight layout) is not supported"},
        {"layer_replication", "layer_replication is not supported"},
        {"use_qalora", "QA-LoRA (use_qalora) is not supported"},
        {"trainable_token_indices", "trainable_token_indices is not supported"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
        if (!neutral(json_object_get(root, refused[i][0]))) {
            errmsg_set(err, errlen, "adapter_config.json: %s", refused[i][1]);
            goto out;
        }
    v = json_object_get(root, "r");
    if (!v) {
        out->r = 8; /* PEFT's default */
    } else if (!json_is_integer(v) || json_integer_value(v) < 1 ||
               json_integer_value(v) > LINEAR_MAX_RANK) {
        errmsg_set(err, errlen, "adapter_config.json: r must be an integer in [1, %d]",
                   LINEAR_MAX_RANK);
        goto out;
    } else {
        out->r = (int)json_integer_value(v);
    }
    v = json_object_get(root, "lora_alpha");
    out->alpha = 8.0;
    if (v && !json_is_null(v)) {
        if (!json_is_number(v) || !isfinite(json_number_value(v))) {
            errmsg_set(err, errlen, "adapter_config.json: lora_alpha must be a number");
            goto out;
        }
        out->alpha = json_number_value(v);
    }
    v = json_object_get(root, "use_rslora");
    if (v && !json_is_null(v) && !json_is_boolean(v)) {
        errmsg_set(err, errlen, "adapter_config.json: use_rslora must be true or false");
        goto out;
    }
    out->use_rslora = v && json_is_true(v);
    v = json_object_get(root, "target_modules");
    if (!v || json_is_null(v)) {
        errmsg_set(err, errlen, "adapter_config.json: target_modules is missing");
        goto out;
    }
    if (json_is_string(v)) {
        unsigned b = lora_target_bits(json_string_value(v));
        if (!b) {
            errmsg_set(err, errlen,
                       "adapter_config.json: target_modules \"%.64s\" (a regular expression) is not "
                       "supported; give a list of module names",
                       json_string_value(v));
            goto out;
        }
        out->targets = b;
    } else if (json_is_array(v)) {
        size_t i;
        json_t *e;
        json_array_foreach(v, i, e) {
            if (!json_is_string(e)) {
                errmsg_set(err, errlen, "adapter_config.json: target_modules[%zu] is not a string", i);
                goto out;
            }
            unsigned b = lora_target_bits(json_string_value(e));
            if (!b || !strcmp(json_string_value(e), "all")) {
                errmsg_set(err, errlen,
                           "adapter_config.json: target module \"%.64s\" is not a module sglc can "
                           "adapt (q_proj, k_proj, v_proj, o_proj, qkv_proj, gate_proj, up_proj, "
                           "down_proj, gate_up_proj, w1, w2, w3, q_a_proj, q_b_proj, "
                           "kv_a_proj_with_mqa, kv_b_proj, lm_head, embed_tokens)",
                           json_string_value(e));
                goto out;
            }
            out->targets |= b;
        }
        if (!out->targets) {
            errmsg_set(err, errlen, "adapter_config.json: target_modules is empty");
            goto out;
        }
    } else {
        errmsg_set(err, errlen, "adapter_config.json: target_modules must be a list of names");
        goto out;
    }
    v = json_object_get(root, "base_model_name_or_path");
    if (json_is_string(v))
        snprintf(out->base_model, sizeof out->base_model, "%s", json_string_value(v));
    rc = 0;
out:
    json_decref(root);
    return rc;
}
