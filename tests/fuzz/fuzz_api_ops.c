/* fuzz_api_ops — the operations parsers of the API layer on outside input.
 * First byte picks the target, the rest is its input:
 *   0  auth: "method\npath\nauthorization\nx-api-key\napi_key\nadmin_key"
 *      through api_auth_level_of + api_auth_decide (answer 0, 401 or 403)
 *   1  a /configure_logging body through api_reqlog_configure, then the
 *      same JSON logged as a request (OpenAI body, received, finished) at
 *      whatever level/format the body left, and exported as a request
 *      metrics record (--export-metrics-to-file) with the same JSON as
 *      request and output
 *   2  a JSON value through api_log_repr / api_log_transform with a
 *      max_len from the second byte (results non-NULL, transform dumps)
 *   3  an access-log line from the split fields
 * Log lines go to /dev/null (the request-log folder's file and the
 * metrics files of this hour and the next are symlinks to it). */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "api/api_ops.h"
#include "util/log.h"

static api_reqlog *g_log;
static api_access_log *g_access;
static api_mexport *g_mx;
static char g_mlink[2][700];
static FILE *g_null;
static char g_dir[64], g_link[700]; /* removed at exit */

static void cleanup(void)
{
    unlink(g_link);
    unlink(g_mlink[0]);
    unlink(g_mlink[1]);
    api_mexport_destroy(g_mx);
    rmdir(g_dir);
}

static void setup(void)
{
    log_set_level(LOG_CRITICAL);
    char dir[] = "/tmp/sglc_fuzz_ops_XXXXXX";
    if (!mkdtemp(dir)) abort();
    char host[256] = "localhost", path[600];
    gethostname(host, sizeof host - 1);
    snprintf(path, sizeof path, "%s/%s_0.log", dir, host);
    if (symlink("/dev/null", path)) abort();
    snprintf(g_dir, sizeof g_dir, "%s", dir);
    snprintf(g_link, sizeof g_link, "%s", path);
    for (int h = 0; h < 2; h++) {
        time_t at = time(NULL) + 3600 * h;
        struct tm tm;
        localtime_r(&at, &tm);
        char hour[16];
        strftime(hour, sizeof hour, "%Y%m%d_%H", &tm);
        snprintf(g_mlink[h], sizeof g_mlink[h], "%s/sglang-request-metrics-%s.log", dir, hour);
        if (symlink("/dev/null", g_mlink[h])) abort();
    }
    atexit(cleanup);
    json_t *t = json_pack("[s]", dir);
    char err[256];
    g_log = api_reqlog_create(false, 2, "text", t, err, sizeof err);
    json_decref(t);
    if (!g_log) abort();
    g_mx = api_mexport_create(dir, 2, err, sizeof err);
    if (!g_mx) abort();
    g_null = fopen("/dev/null", "w");
    g_access = api_access_log_create(LOG_INFO, NULL, g_null);
}

/* Split s (NUL-terminated copy) at '\n' into up to n fields. */
static int split(char *s, char **f, int n)
{
    int k = 0;
    f[k++] = s;
    for (char *p = s; *p && k < n; p++)
        if (*p == '\n') {
            *p = 0;
            f[k++] = p + 1;
        }
    for (int i = k; i < n; i++) f[i] = NULL;
    return k;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int init;
    if (!init) {
        setup();
        init = 1;
    }
    if (size < 1) return 0;
    int mode = data[0] % 4;
    const char *body = (const char *)data + 1;
    size_t len = size - 1;
    char *s = malloc(len + 1);
    memcpy(s, body, len);
    s[len] = 0;
    if (mode == 0 || mode == 3) {
        char *f[6];
        split(s, f, 6);
        if (mode == 0) {
            api_auth_level lv = api_auth_level_of(f[0], f[1]);
            int d = api_auth_decide(f[0], f[1], f[2], f[3], f[4], f[5], lv);
            if (d != 0 && d != 401 && d != 403) abort();
            for (int l = 0; l < 3; l++) {
                d = api_auth_decide(f[0], f[1], f[2], f[3], f[4], f[5], (api_auth_level)l);
                if (d != 0 && d != 401 && d != 403) abort();
            }
        } else {
            api_access_log_line(g_access, f[0], f[1], f[2], f[3], (int)(len % 600), f[4]);
        }
    } else if (mode == 1) {
        json_t *j = json_loadb(body, len, JSON_DECODE_ANY, NULL);
        if (j) {
            char err[300];
            if (api_reqlog_configure(g_log, j, err, sizeof err) && !err[0]) abort();
            log_set_level(LOG_CRITICAL);
            api_reqlog_openai(g_log, j, j);
            api_reqlog_received(g_log, j, NULL);
            api_reqlog_finished(g_log, j, j, j);
            api_mexport_write(g_mx, j, j);
            json_decref(j);
        }
    } else {
        size_t max_len = len ? (size_t)(unsigned char)body[0] : 0;
        json_t *j = len ? json_loadb(body + 1, len - 1, JSON_DECODE_ANY, NULL) : NULL;
        if (j) {
            static const char *const skip[] = {"text", "input_ids", NULL};
            char *r = api_log_repr(j, max_len, max_len & 1 ? "Obj" : NULL, skip);
            if (!r) abort();
            free(r);
            json_t *t = api_log_transform(j, max_len, skip);
            if (!t) abort();
            char *d = json_dumps(t, JSON_ENCODE_ANY);
            if (!d) abort();
            free(d);
            json_decref(t);
            json_decref(j);
        }
    }
    free(s);
    return 0;
}
