/* args_config — `--config FILE`: server arguments from a YAML mapping.
 *
 * DESIGN: libyaml loads the document into its node graph; each key of the
 * root mapping names an argument as in SGLang's config files ("tp-size"
 * or "tp_size", with or without leading dashes), and its value goes
 * through args_set, the same converter and support-status gate as the
 * command line.  Scalars are values, sequences are list values, a YAML
 * null sets None, `true`/`false` set flags.  Arguments of JSON kind may
 * also be written as YAML mappings or sequences; they are converted to JSON
 * text.  The conversion is bounded (depth and node count) so that alias
 * bombs in hostile files cannot blow up. */
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "args/args.h"

#define CONFIG_MAX_BYTES (4u << 20)
#define CONFIG_MAX_DEPTH 64
#define CONFIG_MAX_NODES 100000
#define CONFIG_MAX_ITEMS 512

static void errf(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void errf(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || !errlen) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

static const char *scalar_text(const yaml_node_t *n) { return (const char *)n->data.scalar.value; }

static bool scalar_is_null(const yaml_node_t *n)
{
    if (n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE) return false;
    const char *s = scalar_text(n);
    return !*s || !strcmp(s, "~") || !strcmp(s, "null") || !strcmp(s, "Null") || !strcmp(s, "NULL");
}

/* A plain scalar typed as YAML core schema would: null, bool, int, float,
 * else string. */
static json_t *scalar_to_json(const yaml_node_t *n)
{
    const char *s = scalar_text(n);
    if (n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE) return json_stringn(s, n->data.scalar.length);
    if (scalar_is_null(n)) return json_null();
    if (!strcmp(s, "true") || !strcmp(s, "True") || !strcmp(s, "TRUE")) return json_true();
    if (!strcmp(s, "false") || !strcmp(s, "False") || !strcmp(s, "FALSE")) return json_false();
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (*s && !*end && !errno) return json_integer(v);
    errno = 0;
    double d = strtod(s, &end);
    if (*s && !*end && !errno && isfinite(d)) return json_real(d);
    return json_stringn(s, n->data.scalar.length);
}

/* Convert a node graph to JSON; *budget counts nodes visited. */
static json_t *node_to_json(yaml_document_t *doc, yaml_node_t *n, int depth, long *budget)
{
    if (!n || depth > CONFIG_MAX_DEPTH || --*budget < 0) return NULL;
    switch (n->type) {
    case YAML_SCALAR_NODE: return scalar_to_json(n);
    case YAML_SEQUENCE_NODE: {
        json_t *arr = json_array();
        for (yaml_node_item_t *it = n->data.sequence.items.start; arr && it < n->data.sequence.items.top;
             it++) {
            json_t *v = node_to_json(doc, yaml_document_get_node(doc, *it), depth + 1, budget);
            if (!v || json_array_append_new(arr, v)) {
                json_decref(arr);
                return NULL;
            }
        }
        return arr;
    }
    case YAML_MAPPING_NODE: {
        json_t *obj = json_object();
        for (yaml_node_pair_t *p = n->data.mapping.pairs.start; obj && p < n->data.mapping.pairs.top;
             p++) {
            yaml_node_t *k = yaml_document_get_node(doc, p->key);
            if (!k || k->type != YAML_SCALAR_NODE) {
                json_decref(obj);
                return NULL;
            }
            json_t *v = node_to_json(doc, yaml_document_get_node(doc, p->value), depth + 1, budget);
            if (!v || json_object_set_new(obj, scalar_text(k), v)) {
                json_decref(obj);
                return NULL;
            }
        }
        return obj;
    }
    default: return NULL;
    }
}

/* Apply one `key: value` pair. */
static int apply_pair(args_server *a, yaml_document_t *doc, yaml_node_t *k, yaml_node_t *v,
                      const char *origin, char *err, size_t errlen)
{
    if (!k || k->type != YAML_SCALAR_NODE || !v) {
        errf(err, errlen, "%s: keys must be argument names", origin);
        return ARGS_EUSAGE;
    }
    const char *key = scalar_text(k);
    const args_spec *sp = args_find(key);
    char disp[160];
    snprintf(disp, sizeof disp, "--%.140s", key + strspn(key, "-"));
    for (char *c = disp; *c; c++)
        if (*c == '_') *c = '-';
    if (!sp) {
        /* args_set builds the "unrecognized ... did you mean" message */
        int rc = args_set(a, key, NULL, 0, ARGS_SRC_CONFIG, err, errlen);
        if (err && strlen(err) + 1 < errlen)
            snprintf(err + strlen(err), errlen - strlen(err), " (in %s)", origin);
        return rc;
    }
    if (sp == &args_specs[ARG_ID_config]) {
        errf(err, errlen, "%s: 'config' cannot appear inside a config file", origin);
        return ARGS_EUSAGE;
    }
    int rc;
    bool is_list = sp->kind == ARGS_KIND_LIST_STR || sp->kind == ARGS_KIND_LIST_INT ||
                   sp->kind == ARGS_KIND_LIST_FLOAT;
    if (v->type == YAML_SCALAR_NODE) {
        const char *s = scalar_text(v);
        bool null_is_choice = sp->kind == ARGS_KIND_CHOICE && sp->choices &&
                              strstr(sp->choices, "null") && !strcmp(s, "null");
        if (scalar_is_null(v) && !null_is_choice) {
            rc = args_set_none(a, sp, disp, ARGS_SRC_CONFIG, err, errlen);
        } else {
            const char *vals[1] = {s};
            rc = args_set(a, key, vals, 1, ARGS_SRC_CONFIG, err, errlen);
        }
    } else if (v->type == YAML_SEQUENCE_NODE && is_list) {
        const char *vals[CONFIG_MAX_ITEMS];
        int n = 0;
        for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top; it++) {
            yaml_node_t *item = yaml_document_get_node(doc, *it);
            if (!item || item->type != YAML_SCALAR_NODE || n >= CONFIG_MAX_ITEMS) {
                errf(err, errlen, "%s: %s expects a list of at most %d scalars", origin, disp,
                     CONFIG_MAX_ITEMS);
                return ARGS_EUSAGE;
            }
            vals[n++] = scalar_text(item);
        }
        rc = args_set(a, key, vals, n, ARGS_SRC_CONFIG, err, errlen);
    } else if (sp->kind == ARGS_KIND_JSON) {
        long budget = CONFIG_MAX_NODES;
        json_t *j = node_to_json(doc, v, 0, &budget);
        char *text = j ? json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
        json_decref(j);
        if (!text) {
            errf(err, errlen, "%s: %s: value too deep or too large to convert to JSON", origin, disp);
            return ARGS_EUSAGE;
        }
        const char *vals[1] = {text};
        rc = args_set(a, key, vals, 1, ARGS_SRC_CONFIG, err, errlen);
        free(text);
    } else {
        errf(err, errlen, "%s: %s expects a %s", origin, disp,
             is_list ? "list" : "single value, not a list or mapping");
        return ARGS_EUSAGE;
    }
    if (rc != ARGS_OK && err && strlen(err) + 1 < errlen)
        snprintf(err + strlen(err), errlen - strlen(err), " (in %s)", origin);
    return rc;
}

int args_load_config_string(args_server *a, const char *text, size_t len, const char *origin,
                            char *err, size_t errlen)
{
    if (!origin) origin = "config";
    yaml_parser_t parser;
    yaml_document_t doc;
    if (!yaml_parser_initialize(&parser)) {
        errf(err, errlen, "%s: cannot initialise the YAML parser", origin);
        return ARGS_ENOMEM;
    }
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    if (!yaml_parser_load(&parser, &doc)) {
        errf(err, errlen, "%s: YAML error: %s at line %zu column %zu", origin,
             parser.problem ? parser.problem : "unknown", parser.problem_mark.line + 1,
             parser.problem_mark.column + 1);
        yaml_parser_delete(&parser);
        return ARGS_EUSAGE;
    }
    int rc = ARGS_OK;
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    if (root && !(root->type == YAML_SCALAR_NODE && scalar_is_null(root))) {
        if (root->type != YAML_MAPPING_NODE) {
            errf(err, errlen, "%s: the top level must be a mapping of argument: value", origin);
            rc = ARGS_EUSAGE;
        } else {
            for (yaml_node_pair_t *p = root->data.mapping.pairs.start;
                 rc == ARGS_OK && p < root->data.mapping.pairs.top; p++)
                rc = apply_pair(a, &doc, yaml_document_get_node(&doc, p->key),
                                yaml_document_get_node(&doc, p->value), origin, err, errlen);
        }
    }
    yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
    return rc;
}

int args_load_config_file(args_server *a, const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        errf(err, errlen, "--config %s: %s", path, strerror(errno));
        return ARGS_EIO;
    }
    char *buf = malloc(CONFIG_MAX_BYTES + 1);
    if (!buf) {
        fclose(f);
        errf(err, errlen, "--config %s: out of memory", path);
        return ARGS_ENOMEM;
    }
    size_t n = fread(buf, 1, CONFIG_MAX_BYTES + 1, f);
    int bad = ferror(f);
    fclose(f);
    if (bad || n > CONFIG_MAX_BYTES) {
        free(buf);
        errf(err, errlen, "--config %s: %s", path, bad ? "read error" : "file larger than 4 MiB");
        return ARGS_EIO;
    }
    int rc = args_load_config_string(a, buf, n, path, err, errlen);
    free(buf);
    return rc;
}
