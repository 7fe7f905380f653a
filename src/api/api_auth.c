/* api_auth — SGLang's API-key rules (python/sglang/srt/utils/auth.py).
 *
 * DESIGN: SGLang marks each endpoint with an auth level and one middleware
 * decides per request.  Here the levels live in a table keyed by path and
 * method, so a route is guarded by the same rule whether its handler is in
 * api.c, in another file, or not written yet.  The table is SGLang's list
 * of @auth_level(ADMIN_OPTIONAL) endpoints in http_server.py (control,
 * weights, profiling, cache and logging routes); none of SGLang's served
 * endpoints is ADMIN_FORCE today, the level exists for completeness.
 *
 * How --api-key and --admin-api-key combine (decide_request_auth):
 *   normal route:          api key if set (the admin key does NOT open
 *                          it); open when only the admin key is set
 *   admin-optional route:  admin key if set (the api key does not open
 *                          it), else api key if set, else open
 *   admin-force route:     admin key; 403 when the server has none
 * /health*, /ready*, /metrics* and OPTIONS are always open. */
#include <stdbool.h>
#include <string.h>
#include <strings.h>

#include "api/api_ops.h"

enum { M_GET = 1, M_POST = 2, M_PUT = 4, M_DELETE = 8 };

typedef struct {
    const char *path;
    int methods;
} admin_route;

/* SGLang's ADMIN_OPTIONAL endpoints and their methods. */
static const admin_route admin_optional[] = {
    {"/set_internal_state", M_POST | M_PUT},
    {"/flush_cache", M_GET | M_POST},
    {"/add_external_corpus", M_POST},
    {"/remove_external_corpus", M_POST},
    {"/list_external_corpora", M_GET},
    {"/clear_hicache_storage_backend", M_GET | M_POST},
    {"/hicache/storage-backend/clear", M_POST},
    {"/hicache/storage-backend", M_GET | M_PUT | M_DELETE},
    {"/start_profile", M_GET | M_POST},
    {"/stop_profile", M_GET | M_POST},
    {"/freeze_gc", M_GET | M_POST},
    {"/start_expert_distribution_record", M_GET | M_POST},
    {"/stop_expert_distribution_record", M_GET | M_POST},
    {"/dump_expert_distribution_record", M_GET | M_POST},
    {"/update_weights_from_disk", M_POST},
    {"/init_weights_send_group_for_remote_instance", M_POST},
    {"/send_weights_to_remote_instance", M_POST},
    {"/get_remote_instance_transfer_engine_info", M_GET},
    {"/remote_instance_transfer_engine_info", M_GET},
    {"/init_weights_update_group", M_POST},
    {"/destroy_weights_update_group", M_POST},
    {"/update_weights_from_tensor", M_POST},
    {"/update_weights_from_distributed", M_POST},
    {"/update_weights_from_ipc", M_POST},
    {"/update_weight_version", M_POST},
    {"/get_weights_by_name", M_GET | M_POST},
    {"/release_memory_occupation", M_GET | M_POST},
    {"/resume_memory_occupation", M_GET | M_POST},
    {"/weights_checker", M_GET | M_POST},
    {"/slow_down", M_GET | M_POST},
    {"/load_lora_adapter", M_POST},
    {"/unload_lora_adapter", M_POST},
    {"/configure_logging", M_GET | M_POST},
    {"/abort_request", M_POST},
    {"/pause_generation", M_POST},
    {"/continue_generation", M_POST},
};

static int method_bit(const char *m)
{
    if (!m) return 0;
    /* Starlette answers HEAD on every GET route */
    if (!strcmp(m, "GET") || !strcmp(m, "HEAD")) return M_GET;
    if (!strcmp(m, "POST")) return M_POST;
    if (!strcmp(m, "PUT")) return M_PUT;
    if (!strcmp(m, "DELETE")) return M_DELETE;
    return 0;
}

api_auth_level api_auth_level_of(const char *method, const char *path)
{
    if (!path) return API_AUTH_NORMAL;
    int bit = method_bit(method);
    for (size_t i = 0; i < sizeof admin_optional / sizeof admin_optional[0]; i++)
        if (!strcmp(path, admin_optional[i].path))
            return (admin_optional[i].methods & bit) ? API_AUTH_ADMIN_OPTIONAL : API_AUTH_NORMAL;
    return API_AUTH_NORMAL;
}

/* Constant-time equality (secrets.compare_digest): the time depends on
 * the lengths only, never on where the strings differ. */
static bool same_secret(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    unsigned char d = (unsigned char)(la != lb);
    for (size_t i = 0; i < la; i++) d |= (unsigned char)(a[i] ^ b[i % (lb ? lb : 1)]);
    return d == 0 && lb > 0;
}

static bool token_ok(const char *authorization, const char *x_api_key, const char *expected)
{
    if (authorization) {
        /* "<scheme> <token>": split at the first space, scheme "bearer" in any case */
        const char *sp = strchr(authorization, ' ');
        if (sp && (size_t)(sp - authorization) == 6 && !strncasecmp(authorization, "bearer", 6) &&
            same_secret(sp + 1, expected))
            return true;
    }
    return x_api_key && *x_api_key && same_secret(x_api_key, expected);
}

int api_auth_decide(const char *method, const char *path, const char *authorization,
                    const char *x_api_key, const char *api_key, const char *admin_api_key,
                    api_auth_level level)
{
    if (method && !strcmp(method, "OPTIONS")) return 0;
    if (path && (!strncmp(path, "/health", 7) || !strncmp(path, "/ready", 6) ||
                 !strncmp(path, "/metrics", 8)))
        return 0;
    bool have_api = api_key && *api_key, have_admin = admin_api_key && *admin_api_key;
    switch (level) {
    case API_AUTH_ADMIN_FORCE:
        if (!have_admin) return 403;
        return token_ok(authorization, x_api_key, admin_api_key) ? 0 : 401;
    case API_AUTH_ADMIN_OPTIONAL:
        if (have_admin) return token_ok(authorization, x_api_key, admin_api_key) ? 0 : 401;
        if (have_api) return token_ok(authorization, x_api_key, api_key) ? 0 : 401;
        return 0;
    case API_AUTH_NORMAL:
    default:
        if (have_api) return token_ok(authorization, x_api_key, api_key) ? 0 : 401;
        return 0;
    }
}
