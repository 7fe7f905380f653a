/* api_expert — SGLang's expert distribution routes:
 *   /start_expert_distribution_record   (GET, POST)  clear and start recording
 *   /stop_expert_distribution_record    (GET, POST)  stop
 *   /dump_expert_distribution_record    (GET, POST)  write what was recorded
 * and the expert lines of /metrics (--enable-expert-distribution-metrics).
 *
 * DESIGN: the recorder lives in the model layer (model/model_ep.h: the MoE
 * block of rank 0 hands it every layer's top-k choices); these routes only
 * switch it and serialize it.  As SGLang, the answers are 200 with a line
 * of text, and the dump is written to a file in
 * $SGLANG_EXPERT_DISTRIBUTION_RECORDER_DIR (default /tmp) named
 * expert_distribution_recorder_<unix time>.json (SGLang writes a torch .pt
 * there; JSON is what a C server can write), whose path is logged and also
 * returned in the X-Sglc-Dump-Path header.  Without
 * --expert-distribution-recorder-mode the recorder is off and the routes
 * answer 400 saying so (SGLang's no-op recorder answers 200 and records
 * nothing). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include "api/api_impl.h"
#include "api/api_job.h"
#include "model/model_ep.h"
#include "util/log.h"

static const char OFF_MSG[] = "the expert distribution recorder is off: start the server with "
                              "--expert-distribution-recorder-mode stat|per_pass|per_token";

/* Write the dump; 0 and the path in `path`, or -1 with a message. */
static int dump_file(char *path, size_t plen, char *err, size_t errlen)
{
    char *txt = model_erec_dump_json();
    if (!txt) {
        snprintf(err, errlen, "%s", model_erec_mode_get() == MODEL_EREC_OFF ? OFF_MSG : "out of memory");
        return -1;
    }
    const char *dir = getenv("SGLANG_EXPERT_DISTRIBUTION_RECORDER_DIR");
    struct timeval tv;
    gettimeofday(&tv, NULL);
    snprintf(path, plen, "%s/expert_distribution_recorder_%lld.%06ld.json", dir && *dir ? dir : "/tmp",
             (long long)tv.tv_sec, (long)tv.tv_usec);
    FILE *f = fopen(path, "w");
    int rc = -1;
    if (!f) {
        snprintf(err, errlen, "cannot write %s", path);
    } else {
        size_t n = strlen(txt);
        rc = fwrite(txt, 1, n, f) == n && fputc('\n', f) != EOF ? 0 : -1;
        if (fclose(f)) rc = -1;
        if (rc) snprintf(err, errlen, "cannot write %s", path);
    }
    free(txt);
    return rc;
}

bool api_expert_route(http_req *r, const char *method, const char *path)
{
    int which = !strcmp(path, "/start_expert_distribution_record")  ? 1
                : !strcmp(path, "/stop_expert_distribution_record") ? 2
                : !strcmp(path, "/dump_expert_distribution_record") ? 3
                                                                    : 0;
    if (!which) return false;
    if (strcmp(method, "GET") && strcmp(method, "POST")) {
        api_native_error(r, 405, "Method Not Allowed");
        return true;
    }
    if (which == 1 || which == 2) {
        if ((which == 1 ? model_erec_start() : model_erec_stop())) {
            api_native_error(r, 400, OFF_MSG);
            return true;
        }
        const char *msg = which == 1 ? "Start recording the expert distribution.\n"
                                     : "Stop recording the expert distribution.\n";
        http_respond(r, 200, "text/plain", msg, strlen(msg), NULL);
        return true;
    }
    char file[4200], err[4400];
    if (dump_file(file, sizeof file, err, sizeof err)) {
        api_native_error(r, model_erec_mode_get() == MODEL_EREC_OFF ? 400 : 500, err);
        return true;
    }
    log_info("expert distribution record dumped to %s", file);
    static const char msg[] = "Dump expert distribution record.\n";
    const char *const hdr[] = {"X-Sglc-Dump-Path", file, NULL};
    http_respond(r, 200, "text/plain", msg, strlen(msg), hdr);
    return true;
}

char *api_expert_metrics_append(char *txt)
{
    char *more = txt ? model_erec_metrics_text() : NULL;
    if (!more || !*more) {
        free(more);
        return txt;
    }
    size_t a = strlen(txt), b = strlen(more);
    char *out = realloc(txt, a + b + 1);
    if (out) memcpy(out + a, more, b + 1);
    free(more);
    return out ? out : txt;
}
