/* api_grammar — the OpenAI routes' constrained-decoding fields mapped to
 * SGLang's sampling params, as SGLang's serving_chat /
 * serving_completions build them:
 *
 *   response_format {"type": "text"}                    nothing
 *   response_format {"type": "json_object"}             json_schema = {"type": "object"}
 *   response_format {"type": "json_schema",
 *                    "json_schema": {name, schema, strict}}
 *                                                       json_schema = schema (compact JSON);
 *                                                       strict: additionalProperties false
 *                                                       by default (OpenAI's strict mode)
 *   response_format {"type": "structural_tag", structures, triggers}
 *                                                       structural_tag = the whole object
 *   regex, ebnf (SGLang's extra fields)                 regex, ebnf
 *
 * More than one of them set ends in SamplingParams.verify's message at
 * submit ("Only one of regex, json_schema, or ebnf can be set."). */
#include "api/api_job.h"

#include <stdio.h>
#include <string.h>

int api_oai_grammar_params(const json_t *body, json_t *sp, bool *strict, char *err, size_t errlen)
{
    *strict = false;
    static const char *const extras[] = {"regex", "ebnf", NULL};
    for (int k = 0; extras[k]; k++) {
        json_t *v = json_object_get(body, extras[k]);
        if (!v || json_is_null(v)) continue;
        if (!json_is_string(v)) {
            snprintf(err, errlen, "%s must be a string", extras[k]);
            return -1;
        }
        json_object_set(sp, extras[k], v);
    }
    json_t *rf = json_object_get(body, "response_format");
    if (!rf || json_is_null(rf)) return 0;
    json_t *t = json_object_get(rf, "type");
    const char *ty = json_is_string(t) ? json_string_value(t) : NULL;
    if (!json_is_object(rf) || !ty) {
        snprintf(err, errlen, "response_format must be an object with a string 'type'");
        return -1;
    }
    if (!strcmp(ty, "text")) return 0;
    if (!strcmp(ty, "json_object")) {
        json_object_set_new(sp, "json_schema", json_string("{\"type\": \"object\"}"));
        return 0;
    }
    if (!strcmp(ty, "json_schema")) {
        json_t *js = json_object_get(rf, "json_schema");
        if (!json_is_object(js)) {
            snprintf(err, errlen, "response_format.json_schema must be an object with 'name' and 'schema'");
            return -1;
        }
        json_t *schema = json_object_get(js, "schema");
        if (!schema) schema = json_object_get(js, "schema_"); /* SGLang's field name */
        char *text = schema && !json_is_null(schema) ? json_dumps(schema, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
        json_object_set_new(sp, "json_schema", json_string(text ? text : "{}"));
        free(text);
        *strict = json_is_true(json_object_get(js, "strict"));
        return 0;
    }
    if (!strcmp(ty, "structural_tag")) {
        char *text = json_dumps(rf, JSON_COMPACT);
        if (!text) {
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        json_object_set_new(sp, "structural_tag", json_string(text));
        free(text);
        return 0;
    }
    snprintf(err, errlen, "response_format.type must be one of 'text', 'json_object', 'json_schema', "
                          "'structural_tag', got '%s'", ty);
    return -1;
}
