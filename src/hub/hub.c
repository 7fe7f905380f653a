/* hub — Hugging Face hub downloads into the shared cache layout (see hub.h).
 *
 * DESIGN: one blocking libcurl easy handle per request; downloads are
 * sequential (a model is a handful of files, and the weights dominate).
 * Each file: HEAD {endpoint}/{repo}/resolve/{commit}/{file} without
 * following redirects to learn its etag and size (X-Linked-Etag /
 * X-Linked-Size for LFS files, which redirect to a CDN), then, unless
 * blobs/<etag> is already there, GET with redirects into
 * blobs/<etag>.incomplete, resuming with "Range: bytes=N-" after an
 * interruption (also within one run: a dropped connection is retried from
 * where it stopped), rename to blobs/<etag>, and symlink
 * snapshots/<commit>/<file> -> ../../blobs/<etag>.  A flock on
 * <cache>/.locks/models--org--name/<etag>.lock (huggingface_hub's place)
 * keeps two processes from writing one blob.
 *
 * Everything the server sends is untrusted: file names must be plain
 * top-level names, etags and commits must be hex/alnum tokens, bodies are
 * size-capped, only http/https are followed.  Every decision on what a
 * server sent (model info, file plan, index, HEAD verdict, status codes,
 * the Range-resume steps) is a pure function in hub_reply.c, which this
 * file calls; hub_reply.c calls nothing here. */
#include "hub/hub.h"

#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/log.h"
#include "util/timeutil.h"

#define HUB_API_MAX_BYTES (32u << 20)
#define HUB_MAX_ATTEMPTS 5

typedef struct hub_ctx {
    const char *repo;          /* borrowed: "org/name" */
    const char *revision;      /* borrowed */
    char endpoint[512];        /* no trailing slash */
    char auth[2048];           /* "Authorization: Bearer ..." or "" */
    bool have_token;
    char repo_dir[PATH_MAX];   /* <cache>/models--org--name */
    char lock_dir[PATH_MAX];   /* <cache>/.locks/models--org--name (as huggingface_hub) */
    char commit[64];
    int progress;              /* 1 bar, -1 log lines */
    char *err;
    size_t errlen;
} hub_ctx;

/* snprintf for paths and messages; callers check the result where a
 * truncated path would matter (the cache paths are bounded well below
 * PATH_MAX by the name checks). */
static int fmt_s(char *out, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fmt_s(char *out, size_t n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = vsnprintf(out, n, fmt, ap);
    va_end(ap);
    return r;
}

static int fail(hub_ctx *c, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(hub_ctx *c, int status, const char *fmt, ...)
{
    if (c->err && c->errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->err, c->errlen, fmt, ap);
        va_end(ap);
    }
    return status;
}

/* ---- names ---------------------------------------------------------- */

static bool seg_ok(const char *s, size_t n)
{
    if (n == 0 || n > 96 || s[0] == '.' || s[0] == '-' || s[n - 1] == '.') return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (!(isalnum(ch) || ch == '-' || ch == '_' || ch == '.')) return false;
        if (i && ((s[i] == '.' && s[i - 1] == '.') || (s[i] == '-' && s[i - 1] == '-'))) return false;
    }
    return true;
}

/* "org/name" or "name", hub rules (no "--" or ".." inside). */
static bool repo_id_ok(const char *id)
{
    const char *slash = strchr(id, '/');
    if (!slash) return seg_ok(id, strlen(id));
    if (strchr(slash + 1, '/')) return false;
    return seg_ok(id, (size_t)(slash - id)) && seg_ok(slash + 1, strlen(slash + 1));
}

/* Branch/tag names may hold '/', never "..", never start with '/' or '.'. */
static bool revision_ok(const char *r)
{
    size_t n = strlen(r);
    if (n == 0 || n > 200 || r[0] == '/' || r[0] == '.' || r[n - 1] == '/' || strstr(r, "..") ||
        strstr(r, "//"))
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)r[i];
        if (!(isalnum(ch) || ch == '-' || ch == '_' || ch == '.' || ch == '/')) return false;
    }
    return true;
}

/* ---- files ---------------------------------------------------------- */

static int mkdir_p(const char *path)
{
    char tmp[PATH_MAX];
    if (fmt_s(tmp, sizeof tmp, "%s", path) >= (int)sizeof tmp) return -1;
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(tmp, 0755) && errno != EEXIST) return -1;
        *p = '/';
    }
    if (mkdir(tmp, 0755) && errno != EEXIST) return -1;
    return 0;
}

static bool is_file(const char *p)
{
    struct stat st;
    return !stat(p, &st) && S_ISREG(st.st_mode);
}

/* Read a small text file (a ref) into buf, trimmed. */
static bool read_small(const char *path, char *buf, size_t n)
{
    FILE *f = fopen(path, "r");
    if (!f) return false;
    size_t got = fread(buf, 1, n - 1, f);
    fclose(f);
    buf[got] = 0;
    while (got && isspace((unsigned char)buf[got - 1])) buf[--got] = 0;
    return got > 0;
}

static int write_ref(hub_ctx *c, const char *commit)
{
    char path[PATH_MAX], tmp[PATH_MAX + 16];
    fmt_s(path, sizeof path, "%s/refs/%s", c->repo_dir, c->revision);
    char dir[PATH_MAX];
    fmt_s(dir, sizeof dir, "%s", path);
    *strrchr(dir, '/') = 0;
    if (mkdir_p(dir)) return fail(c, HUB_EIO, "cannot create %s: %s", dir, strerror(errno));
    fmt_s(tmp, sizeof tmp, "%s.tmp%d", path, (int)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f || fputs(commit, f) < 0 || fclose(f)) {
        if (f) fclose(f);
        unlink(tmp);
        return fail(c, HUB_EIO, "cannot write %s: %s", path, strerror(errno));
    }
    if (rename(tmp, path)) {
        unlink(tmp);
        return fail(c, HUB_EIO, "cannot write %s: %s", path, strerror(errno));
    }
    return HUB_OK;
}

/* The commit the cache knows for c->revision, or false. */
static bool cached_commit(hub_ctx *c, char *out, size_t n)
{
    if (hub_is_commit(c->revision)) {
        fmt_s(out, n, "%s", c->revision);
        return true;
    }
    char path[PATH_MAX];
    fmt_s(path, sizeof path, "%s/refs/%s", c->repo_dir, c->revision);
    return read_small(path, out, n) && hub_is_commit(out);
}

/* A cached snapshot counts as usable when it holds config.json. */
static bool cached_snapshot(hub_ctx *c, char *dir_out, size_t n)
{
    char commit[64], cfg[PATH_MAX];
    if (!cached_commit(c, commit, sizeof commit)) return false;
    fmt_s(cfg, sizeof cfg, "%s/snapshots/%s/config.json", c->repo_dir, commit);
    if (!is_file(cfg)) return false;
    fmt_s(dir_out, n, "%s/snapshots/%s", c->repo_dir, commit);
    return true;
}

/* ---- HTTP ----------------------------------------------------------- */

/* Percent-encode everything but unreserved characters (and '/' if keep_slash). */
static void url_escape(const char *s, bool keep_slash, char *out, size_t n)
{
    size_t o = 0;
    for (; *s && o + 4 < n; s++) {
        unsigned char ch = (unsigned char)*s;
        if (isalnum(ch) || ch == '-' || ch == '_' || ch == '.' || ch == '~' || (keep_slash && ch == '/'))
            out[o++] = (char)ch;
        else
            o += (size_t)fmt_s(out + o, n - o, "%%%02X", ch);
    }
    out[o] = 0;
}

static CURL *http_handle(hub_ctx *c, const char *url, struct curl_slist **hdrs, bool follow)
{
    CURL *h = curl_easy_init();
    if (!h) return NULL;
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_USERAGENT, "sglc/0.1 (huggingface_hub compatible)");
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 30L);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L); /* stalled 60 s -> error, then resume */
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, 60L);
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, follow ? 1L : 0L);
    curl_easy_setopt(h, CURLOPT_MAXREDIRS, 10L);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    *hdrs = NULL;
    if (c->auth[0]) *hdrs = curl_slist_append(*hdrs, c->auth);
    if (*hdrs) curl_easy_setopt(h, CURLOPT_HTTPHEADER, *hdrs);
    return h;
}

/* Map a failed HTTP status to a message naming the repo and file. */
static int http_status_fail(hub_ctx *c, long code, const char *file)
{
    char what[600];
    if (file)
        fmt_s(what, sizeof what, "file '%s' of repo '%s' (revision %s)", file, c->repo, c->revision);
    else
        fmt_s(what, sizeof what, "repo '%s' revision '%s'", c->repo, c->revision);
    int status = hub_http_status(code);
    if (status == HUB_EAUTH)
        return fail(c, HUB_EAUTH, "access denied (HTTP %ld) to %s at %s: %s", code, what, c->endpoint,
                    c->have_token ? "the token in HF_TOKEN has no access to it"
                                  : "the repo may be private or gated; set HF_TOKEN");
    if (status == HUB_ENOTFOUND)
        return fail(c, HUB_ENOTFOUND, "%s not found (HTTP 404) at %s", what, c->endpoint);
    return fail(c, HUB_ENET, "HTTP %ld fetching %s from %s", code, what, c->endpoint);
}

typedef struct membuf {
    char *p;
    size_t n;
    bool overflow;
} membuf;

static size_t mem_write(char *ptr, size_t sz, size_t nm, void *u)
{
    membuf *m = u;
    size_t n = sz * nm;
    if (m->n + n > HUB_API_MAX_BYTES) {
        m->overflow = true;
        return 0;
    }
    char *q = realloc(m->p, m->n + n + 1);
    if (!q) return 0;
    memcpy(q + m->n, ptr, n);
    m->p = q;
    m->n += n;
    m->p[m->n] = 0;
    return n;
}

/* GET the model info; fills commit and returns the siblings (new ref). */
static int api_model_info(hub_ctx *c, json_t **siblings)
{
    char rev[600], url[2048];
    url_escape(c->revision, false, rev, sizeof rev);
    fmt_s(url, sizeof url, "%s/api/models/%s/revision/%s", c->endpoint, c->repo, rev);
    struct curl_slist *hdrs;
    CURL *h = http_handle(c, url, &hdrs, true);
    if (!h) return fail(c, HUB_ENET, "cannot create a curl handle");
    membuf m = {0};
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, mem_write);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &m);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 120L);
    CURLcode res = curl_easy_perform(h);
    long code = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    curl_easy_cleanup(h);
    curl_slist_free_all(hdrs);
    int rc = HUB_OK;
    if (res != CURLE_OK && !(m.overflow && code == 200)) {
        rc = fail(c, HUB_ENET, "cannot reach %s for repo '%s': %s", c->endpoint, c->repo,
                  curl_easy_strerror(res));
    } else if (m.overflow) {
        rc = fail(c, HUB_EPROTO, "model info of repo '%s' larger than %u bytes", c->repo, HUB_API_MAX_BYTES);
    } else if (code != 200) {
        rc = http_status_fail(c, code, NULL);
    } else if (hub_parse_model_info(m.p ? m.p : "", m.n, c->commit, sizeof c->commit, siblings)) {
        rc = fail(c, HUB_EPROTO, "unexpected model info for repo '%s' from %s (no sha/siblings)", c->repo,
                  url);
    }
    free(m.p);
    return rc;
}


static size_t head_header(char *line, size_t sz, size_t nm, void *u)
{
    hub_parse_header_line(u, line, sz * nm);
    return sz * nm;
}

/* HEAD the file: etag (file name of its blob) and expected size (-1 unknown). */
static int head_file(hub_ctx *c, const char *url, const char *file, char *etag, size_t etagn,
                     long long *size)
{
    for (int follow = 0; follow < 2; follow++) {
        struct curl_slist *hdrs;
        CURL *h = http_handle(c, url, &hdrs, follow);
        if (!h) return fail(c, HUB_ENET, "cannot create a curl handle");
        hub_head_info hi;
        hub_head_info_reset(&hi);
        curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
        curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, head_header);
        curl_easy_setopt(h, CURLOPT_HEADERDATA, &hi);
        curl_easy_setopt(h, CURLOPT_TIMEOUT, 60L);
        CURLcode res = curl_easy_perform(h);
        long code = 0;
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
        curl_easy_cleanup(h);
        curl_slist_free_all(hdrs);
        if (res != CURLE_OK)
            return fail(c, HUB_ENET, "cannot reach %s for file '%s' of repo '%s': %s", c->endpoint, file,
                        c->repo, curl_easy_strerror(res));
        switch (hub_head_decide(&hi, code, follow, etag, etagn, size)) {
        case HUB_HEAD_USE: return HUB_OK;
        case HUB_HEAD_FOLLOW: continue; /* a plain redirect (renamed repo): follow it */
        case HUB_HEAD_FAIL: return http_status_fail(c, code, file);
        case HUB_HEAD_NO_ETAG: break;
        }
        return fail(c, HUB_EPROTO, "no usable ETag for file '%s' of repo '%s' from %s", file, c->repo,
                    c->endpoint);
    }
    return fail(c, HUB_EPROTO, "redirect loop for file '%s' of repo '%s'", file, c->repo);
}

typedef struct dl_state {
    CURL *h;
    int fd;
    long long off;   /* bytes in the .incomplete file */
    long long base;  /* offset this attempt started from */
    long long total; /* expected size, -1 unknown */
    bool started;
    enum hub_body_action action; /* from the first bytes (hub_body_start) */
    int werr;
    const char *file;
    int progress;
    double t_start, t_last;
} dl_state;

static size_t dl_write(char *p, size_t sz, size_t nm, void *u)
{
    dl_state *d = u;
    size_t n = sz * nm;
    if (!d->started) {
        d->started = true;
        long code = 0;
        curl_easy_getinfo(d->h, CURLINFO_RESPONSE_CODE, &code);
        d->action = hub_body_start(code, d->off);
        if (d->action == HUB_BODY_RESTART) { /* server ignored Range: start over */
            if (ftruncate(d->fd, 0)) {
                d->werr = errno;
                return 0;
            }
            d->off = d->base = 0;
        }
    }
    if (d->action == HUB_BODY_DISCARD) return n; /* error body */
    size_t done = 0;
    while (done < n) {
        ssize_t w = pwrite(d->fd, p + done, n - done, (off_t)d->off);
        if (w < 0) {
            if (errno == EINTR) continue;
            d->werr = errno;
            return 0;
        }
        done += (size_t)w;
        d->off += w;
    }
    return n;
}

static void human(double b, char *out, size_t n)
{
    const char *u[] = {"B", "kB", "MB", "GB", "TB"};
    int i = 0;
    while (b >= 1000 && i < 4) b /= 1000, i++;
    fmt_s(out, n, i ? "%.1f %s" : "%.0f %s", b, u[i]);
}

static void progress_show(dl_state *d, bool final)
{
    double now = time_now_sec();
    if (!final && now - d->t_last < (d->progress > 0 ? 0.1 : 5.0)) return;
    d->t_last = now;
    double el = now - d->t_start;
    double rate = el > 0 ? (double)(d->off - d->base) / el : 0;
    char have[32], tot[32], r[32];
    human((double)d->off, have, sizeof have);
    human(d->total >= 0 ? (double)d->total : 0, tot, sizeof tot);
    human(rate, r, sizeof r);
    int pct = d->total > 0 ? (int)(100.0 * (double)d->off / (double)d->total) : (final ? 100 : 0);
    if (d->progress > 0) {
        int w = 30, fill = pct * w / 100;
        fprintf(stderr, "\r%-32.32s [%.*s%*s] %3d%% %s/%s %s/s%s", d->file, fill,
                "##############################", w - fill, "", pct, have, tot, r, final ? "\n" : "");
        fflush(stderr);
    } else {
        log_info("%s: %d%% (%s of %s, %s/s)", d->file, pct, have, d->total >= 0 ? tot : "?", r);
    }
}

static int dl_progress(void *u, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow)
{
    (void)dltotal, (void)dlnow, (void)ultotal, (void)ulnow;
    dl_state *d = u;
    if (d->started && d->action != HUB_BODY_DISCARD) progress_show(d, false);
    return 0;
}

/* Download one file into the cache and link it into the snapshot. */
static int fetch_file(hub_ctx *c, const char *file)
{
    char snap_dir[PATH_MAX], snap_path[PATH_MAX], blobs[PATH_MAX];
    fmt_s(snap_dir, sizeof snap_dir, "%s/snapshots/%s", c->repo_dir, c->commit);
    fmt_s(snap_path, sizeof snap_path, "%s/%s", snap_dir, file);
    if (is_file(snap_path)) return HUB_OK; /* already linked to a complete blob */
    fmt_s(blobs, sizeof blobs, "%s/blobs", c->repo_dir);
    if (mkdir_p(blobs) || mkdir_p(snap_dir))
        return fail(c, HUB_EIO, "cannot create folders under %s: %s", c->repo_dir, strerror(errno));

    char efile[800], url[2048];
    url_escape(file, false, efile, sizeof efile);
    fmt_s(url, sizeof url, "%s/%s/resolve/%s/%s", c->endpoint, c->repo, c->commit, efile);
    char etag[160];
    long long size = -1;
    int rc = head_file(c, url, file, etag, sizeof etag, &size);
    if (rc) return rc;

    char blob[PATH_MAX], part[PATH_MAX + 16], lockp[PATH_MAX + 16];
    fmt_s(blob, sizeof blob, "%s/%s", blobs, etag);
    fmt_s(part, sizeof part, "%s.incomplete", blob);
    /* Lock files live outside blobs/ and are never removed: unlinking a
     * lock another process waits on would let a third one in. */
    if (mkdir_p(c->lock_dir)) return fail(c, HUB_EIO, "cannot create %s: %s", c->lock_dir, strerror(errno));
    fmt_s(lockp, sizeof lockp, "%s/%s.lock", c->lock_dir, etag);
    int lock = open(lockp, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (lock < 0 || flock(lock, LOCK_EX)) {
        if (lock >= 0) close(lock);
        return fail(c, HUB_EIO, "cannot lock %s: %s", lockp, strerror(errno));
    }
    struct stat st;
    if (!(stat(blob, &st) == 0 && S_ISREG(st.st_mode) && (size < 0 || st.st_size == size))) {
        int fd = open(part, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0 || fstat(fd, &st)) {
            rc = fail(c, HUB_EIO, "cannot open %s: %s", part, strerror(errno));
            goto out_fd;
        }
        long long off = st.st_size;
        if (size >= 0 && off > size) {
            if (ftruncate(fd, 0)) {
                rc = fail(c, HUB_EIO, "cannot truncate %s: %s", part, strerror(errno));
                goto out_fd;
            }
            off = 0;
        }
        if (off > 0) log_info("%s: resuming at byte %lld", file, off);
        for (int attempt = 1; size < 0 || off < size; attempt++) {
            struct curl_slist *hdrs;
            CURL *h = http_handle(c, url, &hdrs, true);
            if (!h) {
                rc = fail(c, HUB_ENET, "cannot create a curl handle");
                goto out_fd;
            }
            dl_state d = {.h = h, .fd = fd, .off = off, .base = off, .total = size, .file = file,
                          .progress = c->progress, .t_start = time_now_sec()};
            d.t_last = d.t_start;
            char range[64];
            if (off > 0) {
                fmt_s(range, sizeof range, "%lld-", off);
                curl_easy_setopt(h, CURLOPT_RANGE, range);
            }
            curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, dl_write);
            curl_easy_setopt(h, CURLOPT_WRITEDATA, &d);
            curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, dl_progress);
            curl_easy_setopt(h, CURLOPT_XFERINFODATA, &d);
            curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
            CURLcode res = curl_easy_perform(h);
            long code = 0;
            curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
            curl_easy_cleanup(h);
            curl_slist_free_all(hdrs);
            if (d.werr) {
                rc = fail(c, HUB_EIO, "cannot write %s: %s", part, strerror(d.werr));
                goto out_fd;
            }
            off = d.off;
            bool trunc;
            enum hub_xfer_next next = hub_transfer_next(res == CURLE_OK, code, d.started, &off, size, attempt,
                                                        HUB_MAX_ATTEMPTS, &trunc);
            if (next == HUB_XFER_TOO_LONG) {
                rc = fail(c, HUB_EPROTO, "file '%s' of repo '%s': got %lld bytes, expected %lld", file,
                          c->repo, off, size);
                if (ftruncate(fd, 0)) log_warn("cannot truncate %s", part);
                goto out_fd;
            }
            if (trunc && ftruncate(fd, 0)) {
                rc = fail(c, HUB_EIO, "cannot truncate %s: %s", part, strerror(errno));
                goto out_fd;
            }
            if (next == HUB_XFER_RESTART) continue; /* our partial file does not fit the server's */
            if (next == HUB_XFER_FAIL) {
                rc = http_status_fail(c, code, file);
                goto out_fd;
            }
            if (next == HUB_XFER_DONE) {
                d.off = off;
                progress_show(&d, true);
                break;
            }
            if (next == HUB_XFER_GIVE_UP) {
                rc = fail(c, HUB_ENET, "downloading file '%s' of repo '%s' from %s failed after %d attempts: %s "
                          "(%lld bytes kept in %s; run again to resume)", file, c->repo, c->endpoint,
                          attempt, res == CURLE_OK ? "short transfer" : curl_easy_strerror(res), off, part);
                goto out_fd;
            }
            if (c->progress > 0) fputc('\n', stderr);
            usleep(200000u * (unsigned)attempt); /* brief back-off before resuming */
            log_warn("%s: transfer interrupted at byte %lld (%s); resuming", file, off,
                     res == CURLE_OK ? "short transfer" : curl_easy_strerror(res));
        }
        if (fsync(fd) || rename(part, blob)) {
            rc = fail(c, HUB_EIO, "cannot finish %s: %s", blob, strerror(errno));
            goto out_fd;
        }
    out_fd:
        if (fd >= 0) close(fd);
    }
    flock(lock, LOCK_UN);
    close(lock);
    if (rc) return rc;

    char target[256];
    fmt_s(target, sizeof target, "../../blobs/%s", etag);
    for (int tries = 0; tries < 3; tries++) {
        unlink(snap_path); /* a stale or broken link */
        if (!symlink(target, snap_path)) return HUB_OK;
        if (errno != EEXIST) break;
        /* another process linked it between our unlink and symlink */
        char have[256];
        ssize_t hl = readlink(snap_path, have, sizeof have - 1);
        if (hl > 0) {
            have[hl] = 0;
            if (!strcmp(have, target)) return HUB_OK;
        }
    }
    return fail(c, HUB_EIO, "cannot link %s -> %s: %s", snap_path, target, strerror(errno));
}

/* Names of the shards listed in the safetensors index file at path (new
 * ref, object used as a set), or NULL when it cannot be read or parsed. */
static json_t *index_shards(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = NULL;
    size_t n = 0, cap = 0;
    bool ok = true;
    for (;;) {
        if (n == cap) {
            if (cap >= HUB_API_MAX_BYTES) {
                ok = false;
                break;
            }
            cap = cap ? 2 * cap : 65536;
            char *g = realloc(buf, cap);
            if (!g) {
                ok = false;
                break;
            }
            buf = g;
        }
        size_t r = fread(buf + n, 1, cap - n, f);
        n += r;
        if (r == 0) {
            ok = !ferror(f);
            break;
        }
    }
    fclose(f);
    json_t *set = ok ? hub_parse_index_shards(buf ? buf : "", n) : NULL;
    free(buf);
    return set;
}

static int download_snapshot(hub_ctx *c, json_t *siblings, bool skip_weights)
{
    /* pass 0: small files (incl. the index), pass 1: weights */
    const char *index_name = hub_pick_index(siblings, skip_weights);
    size_t i;
    json_t *s;
    int n_files = 0;
    for (int pass = 0; pass < 2; pass++) {
        json_t *shards = NULL;
        if (pass == 1 && index_name) {
            char p[PATH_MAX];
            fmt_s(p, sizeof p, "%s/snapshots/%s/%s", c->repo_dir, c->commit, index_name);
            shards = index_shards(p);
            if (!shards)
                return fail(c, HUB_EPROTO, "cannot read weight_map from %s of repo '%s'", index_name, c->repo);
        }
        json_array_foreach(siblings, i, s) {
            const char *f = json_string_value(json_object_get(s, "rfilename"));
            if (!hub_file_in_pass(f, pass, skip_weights, shards)) continue;
            int rc = fetch_file(c, f);
            if (rc) {
                json_decref(shards);
                return rc;
            }
            n_files++;
        }
        json_decref(shards);
    }
    if (n_files == 0)
        return fail(c, HUB_EPROTO, "repo '%s' revision '%s' has no files sglc can use (config.json, "
                    "*.safetensors, tokenizer files)", c->repo, c->revision);
    return HUB_OK;
}

static void cache_root(const hub_opts *o, char *out, size_t n)
{
    const char *e;
    if (o->cache_dir && *o->cache_dir) fmt_s(out, n, "%s", o->cache_dir);
    else if ((e = getenv("HF_HUB_CACHE")) && *e) fmt_s(out, n, "%s", e);
    else if ((e = getenv("HF_HOME")) && *e) fmt_s(out, n, "%s/hub", e);
    else if ((e = getenv("XDG_CACHE_HOME")) && *e) fmt_s(out, n, "%s/huggingface/hub", e);
    else fmt_s(out, n, "%s/.cache/huggingface/hub", (e = getenv("HOME")) && *e ? e : "/tmp");
}

static bool env_true(const char *name)
{
    const char *v = getenv(name);
    return v && (!strcmp(v, "1") || !strcasecmp(v, "true") || !strcasecmp(v, "yes") || !strcasecmp(v, "on"));
}

int hub_resolve(const char *model_id, const hub_opts *o, char *dir_out, size_t n, char *err,
                size_t errlen)
{
    static const hub_opts defaults = {0};
    if (!o) o = &defaults;
    hub_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    hub_ctx *c = &ctx;
    c->err = err;
    c->errlen = errlen;
    if (err && errlen) err[0] = 0;
    if (!model_id || !*model_id) return fail(c, HUB_EINVAL, "empty model path");

    struct stat st;
    if (stat(model_id, &st) == 0) {
        if (!S_ISDIR(st.st_mode)) return fail(c, HUB_EINVAL, "model path '%s' is not a folder", model_id);
        char abs[PATH_MAX];
        if (!realpath(model_id, abs)) return fail(c, HUB_EIO, "cannot resolve '%s': %s", model_id, strerror(errno));
        if (fmt_s(dir_out, n, "%s", abs) >= (int)n) return fail(c, HUB_EINVAL, "path too long");
        return HUB_OK;
    }
    if (model_id[0] == '/' || model_id[0] == '.' || model_id[0] == '~')
        return fail(c, HUB_EINVAL, "model folder '%s' does not exist", model_id);
    if (!repo_id_ok(model_id))
        return fail(c, HUB_EINVAL, "'%s' is neither a local folder nor a Hugging Face repo id (org/name)", model_id);
    c->repo = model_id;
    c->revision = o->revision && *o->revision ? o->revision : "main";
    if (!revision_ok(c->revision)) return fail(c, HUB_EINVAL, "invalid revision '%s'", c->revision);

    char root[PATH_MAX];
    cache_root(o, root, sizeof root);
    char flat[256];
    fmt_s(flat, sizeof flat, "%s", model_id);
    char dashed[300] = "models--";
    for (const char *p = flat; *p; p++) {
        size_t l = strlen(dashed);
        if (*p == '/') fmt_s(dashed + l, sizeof dashed - l, "--");
        else dashed[l] = *p, dashed[l + 1] = 0;
    }
    fmt_s(c->lock_dir, sizeof c->lock_dir, "%s/.locks/%s", root, dashed);
    if (fmt_s(c->repo_dir, sizeof c->repo_dir, "%s/%s", root, dashed) >= (int)sizeof c->repo_dir)
        return fail(c, HUB_EINVAL, "cache path too long");

    bool offline = o->offline || env_true("HF_HUB_OFFLINE");
    if (offline) {
        if (cached_snapshot(c, dir_out, n)) return HUB_OK;
        return fail(c, HUB_EOFFLINE, "repo '%s' revision '%s' is not in the cache %s and HF_HUB_OFFLINE is set",
                    c->repo, c->revision, root);
    }

    const char *ep = o->endpoint && *o->endpoint ? o->endpoint : getenv("HF_ENDPOINT");
    if (!ep || !*ep) ep = "https://huggingface.co";
    fmt_s(c->endpoint, sizeof c->endpoint, "%s", ep);
    size_t el = strlen(c->endpoint);
    while (el && c->endpoint[el - 1] == '/') c->endpoint[--el] = 0;
    const char *tok = o->token && *o->token ? o->token : getenv("HF_TOKEN");
    if (tok && *tok) {
        if (strpbrk(tok, "\r\n")) return fail(c, HUB_EINVAL, "HF_TOKEN contains a line break");
        fmt_s(c->auth, sizeof c->auth, "Authorization: Bearer %s", tok);
        c->have_token = true;
    }
    c->progress = o->progress ? o->progress : (isatty(STDERR_FILENO) ? 1 : -1);

    static int curl_ready;
    if (!curl_ready) {
        if (curl_global_init(CURL_GLOBAL_DEFAULT)) return fail(c, HUB_ENET, "curl_global_init failed");
        curl_ready = 1;
    }

    json_t *siblings = NULL;
    int rc = api_model_info(c, &siblings);
    if (rc == HUB_ENET) {
        char saved[512];
        fmt_s(saved, sizeof saved, "%s", err ? err : "");
        if (cached_snapshot(c, dir_out, n)) {
            log_warn("%s; using the cached snapshot %s", saved, dir_out);
            if (err && errlen) err[0] = 0;
            return HUB_OK;
        }
        return rc;
    }
    if (rc) return rc;
    log_info("%s@%s -> commit %s", c->repo, c->revision, c->commit);
    rc = download_snapshot(c, siblings, o->skip_weights);
    json_decref(siblings);
    if (rc) return rc;
    if (!hub_is_commit(c->revision) || strcmp(c->revision, c->commit)) {
        rc = write_ref(c, c->commit);
        if (rc) return rc;
    }
    if (fmt_s(dir_out, n, "%s/snapshots/%s", c->repo_dir, c->commit) >= (int)n)
        return fail(c, HUB_EINVAL, "path too long");
    return HUB_OK;
}
