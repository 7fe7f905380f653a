/* api_impl — internal seams between api.c (generation routes, dispatcher)
 * and api_admin.c (scheduler control routes).  Not for other modules.
 *
 * api_admin owns what the control routes change at run time (the weight
 * version and model path shown by /get_model_info, the pause state seen
 * by /ready and /health_generate) and the short-lived threads that wait
 * for the scheduler on their behalf, so the HTTP polling thread never
 * blocks on a control message. */
#ifndef SGLC_API_IMPL_H
#define SGLC_API_IMPL_H

#include <stdbool.h>
#include <stddef.h>

#include "api/api.h"

typedef struct api_admin api_admin;

/* Shared answer helpers (api.c).  api_respond_json takes j (NULL = out of
 * memory -> 500) and makes the terminal call on r. */
void api_respond_json(http_req *r, int status, json_t *j);
/* malloc'd copy of s; NULL for NULL (or out of memory). */
char *api_strdup(const char *s);

/* cfg is borrowed (must outlive the admin); its strings are copied. */
api_admin *api_admin_create(const api_config *cfg);
/* Waits for the admin threads still running (their requests are answered
 * first), then frees. */
void api_admin_destroy(api_admin *ad);

/* Route a request.  Returns true when the path is an admin route (then it
 * was answered or will be from an admin thread), false otherwise.  Runs on
 * the polling thread, or a tokenizer worker when the request has a body
 * (api_tokq.h); never blocks on the scheduler.  starting: the server
 * is not up yet (control routes and /ready answer 503). */
bool api_admin_handle(api_admin *ad, http_req *r, const char *method, const char *path, const char *body,
                      size_t body_len, bool starting);

/* Shutdown: control routes answer 503 from now on. */
void api_admin_set_draining(api_admin *ad, bool on);

#endif
