/* hub — fetch a model from the Hugging Face hub into the standard cache.
 *
 * DESIGN: `--model-path org/name` that is not a local folder is resolved
 * the way huggingface_hub's snapshot_download does it, into the same cache
 * layout, so caches are shared with Python tools:
 *
 *   <cache>/models--org--name/
 *       refs/<revision>             text file: the commit sha
 *       blobs/<etag>                file contents (etag = sha256 for LFS
 *                                   files, git blob sha otherwise)
 *       blobs/<etag>.incomplete     partial download, resumed with Range
 *       snapshots/<commit>/<file>   symlink -> ../../blobs/<etag>
 *
 * <cache> is --download-dir, else $HF_HUB_CACHE, else $HF_HOME/hub, else
 * $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub.  The
 * endpoint is $HF_ENDPOINT (default https://huggingface.co), the token
 * $HF_TOKEN (sent as Authorization: Bearer to the endpoint only; curl drops
 * it on redirects to another host).  With HF_HUB_OFFLINE=1 the cache alone
 * is used.  A snapshot already complete in the cache is used without
 * network when offline, or when the hub cannot be reached.
 *
 * Only what a model needs is fetched: config.json, generation_config.json,
 * tokenizer files, chat templates, *.safetensors (only the shards named by
 * model.safetensors.index.json when there is one) and the index.  Never
 * *.bin, *.pth, *.pt, *.gguf, *.onnx, *.h5, *.msgpack, nor sub-folders.
 *
 * Progress goes to stderr: a redrawn bar when stderr is a terminal,
 * otherwise a log line every few seconds per file. */
#ifndef SGLC_HUB_H
#define SGLC_HUB_H

#include <stdbool.h>
#include <stddef.h>

enum hub_status {
    HUB_OK = 0,
    HUB_EINVAL = -1,    /* bad model id / revision, or a local path that is not a folder */
    HUB_ENOTFOUND = -2, /* HTTP 404: repo, revision or file */
    HUB_EAUTH = -3,     /* HTTP 401/403: gated or private, token missing or wrong */
    HUB_ENET = -4,      /* connection failure, timeout, other HTTP error */
    HUB_EIO = -5,       /* local file system */
    HUB_EOFFLINE = -6,  /* offline and the cache lacks the snapshot */
    HUB_EPROTO = -7,    /* unexpected reply from the server */
};

/* Zero-initialise for the defaults (environment, then built-ins). */
typedef struct hub_opts {
    const char *revision;  /* branch, tag or 40-hex commit; NULL = "main" */
    const char *cache_dir; /* --download-dir; NULL = from the environment */
    const char *endpoint;  /* NULL = $HF_ENDPOINT or https://huggingface.co */
    const char *token;     /* NULL = $HF_TOKEN */
    bool offline;          /* true = never use the network ($HF_HUB_OFFLINE=1 also) */
    int progress;          /* 0 = bar if stderr is a tty else log lines, 1 = bar, -1 = log lines */
    bool skip_weights;     /* --load-format dummy: fetch no *.safetensors */
} hub_opts;

/* Resolve `model_id` to a local folder.  A path to an existing folder is
 * returned as is (made absolute); anything else must be a hub repo id
 * ("org/name" or "name") and is downloaded (or found in the cache).
 * Writes the snapshot folder to dir_out (size n).  Returns HUB_OK or a
 * hub_status with a one-line message naming the repo (and file) in err.
 * Blocking; the first call initialises libcurl globally, so make it from
 * one thread (start-up), not concurrently. */
int hub_resolve(const char *model_id, const hub_opts *o, char *dir_out, size_t n, char *err,
                size_t errlen);

/* The parsing of the server's replies (model info, file plan, index,
 * HEAD headers, Range replies): pure functions, for tests and fuzzing. */
#include "hub/hub_reply.h"

#endif
