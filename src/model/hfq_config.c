/* hfq_config — `quantization_config` and --quantization (see hfq.h).
 *
 * DESIGN: one pass over the JSON object with jansson, no JSON kept.  The
 * method comes from quant_method (compressed-tensors' per-group
 * `config_groups.*.weights` give bits / group size / symmetry); the flag
 * names a method by SGLang's spelling (awq_marlin / gptq_marlin are the
 * same weights as awq / gptq).  A flag on a checkpoint without
 * quantization_config means "quantize at load", which only w8a8_int8 and
 * fp8 do (as in SGLang); a flag that names another method than the
 * checkpoint's is SGLang's ValueError message. */
#include "model/hfq.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "util/errmsg.h"

static const struct { const char *name; hfq_method m; } k_methods[] = {
    {"awq", HFQ_AWQ},
    {"awq_marlin", HFQ_AWQ},
    {"gptq", HFQ_GPTQ},
    {"gptq_marlin", HFQ_GPTQ},
    {"compressed-tensors", HFQ_CT},
    {"compressed_tensors", HFQ_CT},
    {"fp8", HFQ_FP8},
    {"w8a8_int8", HFQ_W8A8_INT8},
    {"w8a8_fp8", HFQ_W8A8_FP8},
};

/* SGLang methods sglc knows and refuses (no CPU path here). */
static const char *const k_refused[] = {
    "blockwise_int8", "modelopt", "modelopt_fp8", "modelopt_fp4", "bitsandbytes", "marlin",
    "moe_wna16", "qoq", "w4afp8", "petit_nvfp4", "fbgemm_fp8", "quark", "mxfp4", "auto-round",
    "gptq_marlin_24", "awq_gemv", "modelslim", "mxfp8", "torchao", "experts_int8", "tpu_int8",
    "deepspeedfp", "aqlm", "hqq", "fp_quant", "ptpc_fp8",
};

int hfq_method_from_name(const char *name, char *err, size_t errlen)
{
    if (!name) return HFQ_NONE;
    for (size_t i = 0; i < sizeof k_methods / sizeof k_methods[0]; i++)
        if (!strcmp(name, k_methods[i].name)) return (int)k_methods[i].m;
    if (!strcmp(name, "gguf")) return HFQ_NONE;
    for (size_t i = 0; i < sizeof k_refused / sizeof k_refused[0]; i++)
        if (!strcmp(name, k_refused[i])) {
            errmsg_set(err, errlen,
                       "--quantization %s is not supported by sglc (supported: awq, awq_marlin, gptq, "
                       "gptq_marlin, compressed-tensors, fp8, w8a8_int8, w8a8_fp8, gguf)",
                       name);
            return -1;
        }
    errmsg_set(err, errlen,
               "unknown --quantization '%s' (supported: awq, awq_marlin, gptq, gptq_marlin, "
               "compressed-tensors, fp8, w8a8_int8, w8a8_fp8, gguf)",
               name);
    return -2;
}

static int jint(const json_t *o, const char *key, int dflt)
{
    const json_t *v = json_object_get(o, key);
    if (json_is_integer(v)) return (int)json_integer_value(v);
    if (json_is_boolean(v)) return json_is_true(v);
    return dflt;
}

static const char *jstr(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

static int add_ignores(hfq_config *q, const json_t *arr, char *err, size_t errlen)
{
    if (!json_is_array(arr)) return 0;
    size_t i;
    const json_t *v;
    json_array_foreach(arr, i, v) {
        if (!json_is_string(v)) continue;
        if (q->n_ignore == HFQ_MAX_IGNORE || strlen(json_string_value(v)) >= sizeof q->ignore[0]) {
            errmsg_set(err, errlen, "quantization_config: ignore list too long (%d entries of < %zu chars at most)",
                       HFQ_MAX_IGNORE, sizeof q->ignore[0]);
            return -1;
        }
        snprintf(q->ignore[q->n_ignore++], sizeof q->ignore[0], "%s", json_string_value(v));
    }
    return 0;
}

/* compressed-tensors: the one weight scheme of config_groups. */
static int parse_ct(hfq_config *q, const json_t *qc, char *err, size_t errlen)
{
    const char *fmt = jstr(qc, "format");
    snprintf(q->ct_format, sizeof q->ct_format, "%s", fmt ? fmt : "");
    const json_t *groups = json_object_get(qc, "config_groups");
    const char *key;
    const json_t *g, *wts = NULL;
    int n = 0;
    json_object_foreach((json_t *)groups, key, g) {
        if (json_object_get(g, "weights")) wts = json_object_get(g, "weights"), n++;
    }
    if (n != 1 || !json_is_object(wts)) {
        errmsg_set(err, errlen, "compressed-tensors: %d weight schemes in config_groups (sglc reads exactly one)", n);
        return -1;
    }
    q->bits = jint(wts, "num_bits", 8);
    q->sym = jint(wts, "symmetric", 1);
    const char *type = jstr(wts, "type");
    const char *strategy = jstr(wts, "strategy");
    q->group_size = strategy && !strcmp(strategy, "group") ? jint(wts, "group_size", 0) : 0;
    if (strategy && !strcmp(strategy, "block")) {
        const json_t *bs = json_object_get(wts, "block_structure");
        if (json_array_size(bs) == 2) {
            q->block_out = (int)json_integer_value(json_array_get(bs, 0));
            q->block_in = (int)json_integer_value(json_array_get(bs, 1));
        }
    }
    int is_float = type && !strcmp(type, "float");
    if (is_float ? q->bits != 8 : (q->bits != 4 && q->bits != 8 && q->bits != 2)) {
        errmsg_set(err, errlen, "compressed-tensors: %d-bit %s weights are not supported (int 2/4/8, float 8)",
                   q->bits, type ? type : "int");
        return -1;
    }
    if (!strcmp(q->ct_format, "pack-quantized") && !q->sym) {
        errmsg_set(err, errlen, "compressed-tensors: asymmetric pack-quantized weights are not supported");
        return -1;
    }
    return add_ignores(q, json_object_get(qc, "ignore"), err, errlen);
}

int hfq_config_parse(hfq_config *q, const char *json, size_t len, const char *flag, char *err,
                     size_t errlen)
{
    memset(q, 0, sizeof *q);
    int fm = hfq_method_from_name(flag, err, errlen);
    if (fm < 0) return -1;
    json_error_t jerr;
    json_t *root = json ? json_loadb(json, len, 0, &jerr) : NULL;
    const json_t *qc = root ? json_object_get(root, "quantization_config") : NULL;
    if (!qc && root && json_object_get(root, "quant_method")) qc = root; /* quantize_config.json */
    int rc = -1;
    if (!json_is_object(qc)) {
        if (fm != HFQ_NONE && fm != HFQ_W8A8_INT8 && fm != HFQ_FP8) {
            errmsg_set(err, errlen,
                       "--quantization %s: the checkpoint has no quantization_config, and only "
                       "w8a8_int8 and fp8 quantize an unquantized checkpoint at load", flag);
            goto out;
        }
        q->method = (hfq_method)fm;
        q->at_load = fm != HFQ_NONE;
        if (flag) snprintf(q->name, sizeof q->name, "%s", flag);
        rc = 0;
        goto out;
    }
    const char *qm = jstr(qc, "quant_method");
    if (!qm) {
        errmsg_set(err, errlen, "config.json: quantization_config has no quant_method");
        goto out;
    }
    char e2[256];
    int cm = hfq_method_from_name(qm, e2, sizeof e2);
    if (cm < 0 || (cm == HFQ_NONE && strcmp(qm, "gguf"))) {
        errmsg_set(err, errlen, "config.json: quantization method '%s' is not supported by sglc "
                   "(supported: awq, gptq, compressed-tensors, fp8, w8a8_int8, w8a8_fp8)", qm);
        goto out;
    }
    if (flag && fm != cm) {
        errmsg_set(err, errlen,
                   "Quantization method specified in the model config (%s) does not match the "
                   "quantization method specified in the `quantization` argument (%s).", qm, flag);
        goto out;
    }
    q->method = (hfq_method)cm;
    snprintf(q->name, sizeof q->name, "%s", qm);
    q->bits = jint(qc, "bits", jint(qc, "w_bit", 4));
    q->group_size = jint(qc, "group_size", jint(qc, "q_group_size", -1));
    q->zero_point = jint(qc, "zero_point", 1);
    q->desc_act = jint(qc, "desc_act", 0);
    q->sym = jint(qc, "sym", 1);
    const char *cf = jstr(qc, "checkpoint_format");
    q->zeros_v2 = cf && !strcmp(cf, "gptq_v2");
    const json_t *bs = json_object_get(qc, "weight_block_size");
    if (json_array_size(bs) == 2) {
        q->block_out = (int)json_integer_value(json_array_get(bs, 0));
        q->block_in = (int)json_integer_value(json_array_get(bs, 1));
        if (q->block_out <= 0 || q->block_in <= 0) {
            errmsg_set(err, errlen, "quantization_config: bad weight_block_size");
            goto out;
        }
    }
    if (add_ignores(q, json_object_get(qc, "modules_to_not_convert"), err, errlen) ||
        add_ignores(q, json_object_get(qc, "ignored_layers"), err, errlen))
        goto out;
    switch (q->method) {
    case HFQ_AWQ:
        if (q->bits != 4) {
            errmsg_set(err, errlen, "awq: %d-bit weights are not supported (4 only)", q->bits);
            goto out;
        }
        if (!q->zero_point) {
            errmsg_set(err, errlen, "awq: zero_point false is not supported");
            goto out;
        }
        break;
    case HFQ_GPTQ:
        if (q->bits != 2 && q->bits != 4 && q->bits != 8) {
            errmsg_set(err, errlen, "gptq: %d-bit weights are not supported (2, 4, 8)", q->bits);
            goto out;
        }
        break;
    case HFQ_CT:
        if (parse_ct(q, qc, err, errlen)) goto out;
        break;
    default:
        break;
    }
    rc = 0;
out:
    json_decref(root);
    return rc;
}

int hfq_ignored(const hfq_config *q, const char *module)
{
    for (int i = 0; i < q->n_ignore; i++) {
        const char *p = q->ignore[i];
        if (!strncmp(p, "re:", 3)) {
            /* a regex in compressed-tensors' lists: sglc matches the common
             * forms ".*name" / "name" as a suffix */
            p += 3;
            if (!strncmp(p, ".*", 2)) p += 2;
            size_t lp = strlen(p), lm = strlen(module);
            if (lp && p[lp - 1] == '$') lp--;
            if (lm >= lp && !strncmp(module + lm - lp, p, lp)) return 1;
            continue;
        }
        size_t lp = strlen(p), lm = strlen(module);
        /* a module name, or the last part of one (AWQ lists "lm_head", "gate") */
        if (!strcmp(module, p)) return 1;
        if (lm > lp && module[lm - lp - 1] == '.' && !strcmp(module + lm - lp, p)) return 1;
    }
    return 0;
}
