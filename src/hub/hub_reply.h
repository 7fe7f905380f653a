/* hub_reply — everything src/hub reads from a hub server, as pure
 * functions over bytes: no connection, no file system, no libcurl.
 *
 * DESIGN: hub.c does the transfers and the cache; each decision it takes
 * on what a server sent goes through one function here, so the decisions
 * can be unit-tested and fuzzed (tests/fuzz/fuzz_hub_reply.c) at
 * in-memory speed.  What a server sends, and where it is read:
 *
 *   GET /api/models/{repo}/revision/{rev}   hub_parse_model_info (sha,
 *                                           siblings), then the file plan:
 *                                           hub_file_wanted, hub_pick_index,
 *                                           hub_file_in_pass
 *   *.safetensors.index.json (a file        hub_parse_index_shards
 *   the server sent)
 *   HEAD .../resolve/{commit}/{file}        hub_parse_header_line (status
 *                                           line, ETag, X-Linked-Etag,
 *                                           Content-Length, X-Linked-Size),
 *                                           then hub_head_decide
 *   GET (with Range: bytes=N- to resume)    hub_body_start (first bytes of
 *                                           the body), hub_transfer_next
 *                                           (after each attempt)
 *   any failed status                       hub_http_status
 *
 * Everything the server sends is untrusted: names must be plain top-level
 * names, etags and commits hex/alnum tokens.  hub.h includes this header
 * (the unit tests use these through it). */
#ifndef SGLC_HUB_REPLY_H
#define SGLC_HUB_REPLY_H

#include <stdbool.h>
#include <stddef.h>

struct json_t;

/* A commit id as the hub writes it: 40 lower-case hex digits. */
bool hub_is_commit(const char *s);

/* Would the downloader fetch this repo file?  Top-level plain names only. */
bool hub_file_wanted(const char *rfilename, bool skip_weights);

/* Parse the body of GET /api/models/{repo}/revision/{rev}: the 40-hex
 * "sha" into commit (commit_n > 40) and a new reference to the
 * "siblings" array.  HUB_OK or HUB_EPROTO. */
int hub_parse_model_info(const char *body, size_t len, char *commit, size_t commit_n,
                         struct json_t **siblings);

/* The file plan over the siblings array ({"rfilename": ...} objects).
 * hub_pick_index: the safetensors index to read, or NULL: among the wanted
 * names ending ".safetensors.index.json", "model.safetensors.index.json"
 * if there, else the first one (borrowed from siblings).
 * hub_file_in_pass: is f fetched in pass `pass` (0: everything but the
 * weights, the index included; 1: *.safetensors, only those in shards
 * when shards (from the index) is not NULL)? */
const char *hub_pick_index(const struct json_t *siblings, bool skip_weights);
bool hub_file_in_pass(const char *f, int pass, bool skip_weights, const struct json_t *shards);

/* The shard names a safetensors index lists under "weight_map" (values),
 * as a new JSON object used as a set; NULL when the bytes are not a JSON
 * object with an object "weight_map". */
struct json_t *hub_parse_index_shards(const char *body, size_t len);

/* What a HEAD on a resolve URL tells: etags unquoted (W/ dropped), sizes
 * -1 when absent.  Header lines are fed one at a time, as curl does; a
 * status line ("HTTP/...") starts a new response (redirects). */
typedef struct hub_head_info {
    char etag[160];
    char linked_etag[160];
    long long size;        /* Content-Length */
    long long linked_size; /* X-Linked-Size */
} hub_head_info;
void hub_head_info_reset(hub_head_info *hi);
void hub_parse_header_line(hub_head_info *hi, const char *line, size_t n);

/* After a HEAD (status code, headers hi; followed: redirects were
 * followed this time).  HUB_HEAD_USE: etag (blob file name: [A-Za-z0-9_-],
 * 1..128 chars) and *size (-1 unknown) are set.  HUB_HEAD_FOLLOW: a plain
 * redirect without an etag (a renamed repo): HEAD again following
 * redirects.  HUB_HEAD_FAIL: an HTTP error (see hub_http_status).
 * HUB_HEAD_NO_ETAG: no usable etag. */
enum hub_head_verdict { HUB_HEAD_USE, HUB_HEAD_FOLLOW, HUB_HEAD_FAIL, HUB_HEAD_NO_ETAG };
enum hub_head_verdict hub_head_decide(const hub_head_info *hi, long code, bool followed, char *etag,
                                      size_t etagn, long long *size);

/* The hub_status of a failed HTTP status: 401/403 HUB_EAUTH, 404
 * HUB_ENOTFOUND, anything else HUB_ENET. */
int hub_http_status(long code);

/* The first bytes of a GET body arrive with status code; off bytes are in
 * the .incomplete file.  HUB_BODY_APPEND: write at off.  HUB_BODY_RESTART:
 * a 200 to a Range request (the server ignored it): truncate, write from
 * 0.  HUB_BODY_DISCARD: an error body (not 200/206): write nothing. */
enum hub_body_action { HUB_BODY_APPEND, HUB_BODY_RESTART, HUB_BODY_DISCARD };
enum hub_body_action hub_body_start(long code, long long off);

/* After one GET attempt: ok (the transfer ended cleanly), code, started
 * (body bytes arrived), *off (bytes now in the .incomplete file), size
 * (expected, -1 unknown), attempt (1-based) of max_attempts.  *truncate
 * is set when the partial file must be emptied first (*off is then 0 on
 * return, except for HUB_XFER_TOO_LONG, which reports the length).
 * HUB_XFER_DONE: complete.  HUB_XFER_RESTART: again from byte 0 now (416:
 * our partial file does not fit the server's).  HUB_XFER_RETRY: resume at
 * *off after a back-off.  HUB_XFER_FAIL: HTTP error status.
 * HUB_XFER_TOO_LONG: more bytes than size.  HUB_XFER_GIVE_UP: attempts
 * spent. */
enum hub_xfer_next {
    HUB_XFER_DONE,
    HUB_XFER_RESTART,
    HUB_XFER_RETRY,
    HUB_XFER_FAIL,
    HUB_XFER_TOO_LONG,
    HUB_XFER_GIVE_UP,
};
enum hub_xfer_next hub_transfer_next(bool ok, long code, bool started, long long *off, long long size,
                                     int attempt, int max_attempts, bool *truncate);

#endif
