/* lora_registry — the named, loaded adapters (see lora.h).
 *
 * DESIGN: a small array under one mutex (tens of adapters, looked up once
 * per request).  Loading reads the files outside the lock (a slow disk
 * does not stall request resolution), then inserts under it, re-checking
 * the name.  A logical clock orders uses (lru) and loads (fifo). */
#include <jansson.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "lora/lora.h"
#include "util/errmsg.h"
#include "util/log.h"

struct lora_registry {
    lora_registry_opts o;
    pthread_mutex_t mu;
    lora_adapter **v;           /* (n) each holds the registry's reference */
    int n, cap;
    uint64_t clock;
};

lora_registry *lora_registry_create(const lora_registry_opts *o)
{
    lora_registry *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    r->o = *o;
    pthread_mutex_init(&r->mu, NULL);
    return r;
}

void lora_registry_destroy(lora_registry *r)
{
    if (!r) return;
    for (int i = 0; i < r->n; i++) lora_adapter_unref(r->v[i]);
    free(r->v);
    pthread_mutex_destroy(&r->mu);
    free(r);
}

static int find(const lora_registry *r, const char *name)
{
    for (int i = 0; i < r->n; i++)
        if (!strcmp(r->v[i]->name, name)) return i;
    return -1;
}

/* Index of the adapter to evict by policy, or -1 when all are pinned. */
static int victim(const lora_registry *r)
{
    int best = -1;
    for (int i = 0; i < r->n; i++) {
        const lora_adapter *a = r->v[i];
        if (a->pinned) continue;
        uint64_t key = r->o.policy == LORA_EVICT_FIFO ? a->loaded_seq : a->last_use;
        uint64_t bk = best < 0 ? 0
                               : (r->o.policy == LORA_EVICT_FIFO ? r->v[best]->loaded_seq
                                                                 : r->v[best]->last_use);
        if (best < 0 || key < bk) best = i;
    }
    return best;
}

static void remove_at(lora_registry *r, int i)
{
    lora_adapter *a = r->v[i];
    a->listed = false;
    memmove(r->v + i, r->v + i + 1, sizeof *r->v * (size_t)(r->n - i - 1));
    r->n--;
    lora_adapter_unref(a);
}

int lora_registry_load(lora_registry *r, const char *name, const char *path, bool pinned,
                       char *err, size_t errlen)
{
    if (!name || !*name || !path || !*path) {
        errmsg_set(err, errlen, "LoRA adapter needs a name and a path");
        return -1;
    }
    pthread_mutex_lock(&r->mu);
    int dup = find(r, name) >= 0;
    pthread_mutex_unlock(&r->mu);
    if (dup) {
        errmsg_set(err, errlen,
                   "The LoRA adapter with name %s has already been loaded. Please use a different "
                   "name.",
                   name);
        return -1;
    }
    lora_adapter *a = lora_adapter_load(name, path, r->o.m, &r->o.lim, err, errlen);
    if (!a) return -1;
    a->pinned = pinned;
    pthread_mutex_lock(&r->mu);
    int rc = -1;
    if (find(r, name) >= 0) {
        errmsg_set(err, errlen,
                   "The LoRA adapter with name %s has already been loaded. Please use a different "
                   "name.",
                   name);
        goto out;
    }
    if (r->o.max_loaded > 0 && r->n >= r->o.max_loaded) {
        int vi = victim(r);
        if (vi < 0) {
            errmsg_set(err, errlen,
                       "Failed to load LoRA adapter %s: %d adapters are loaded (--max-loaded-loras "
                       "%d) and all are pinned",
                       name, r->n, r->o.max_loaded);
            goto out;
        }
        log_info("LoRA: evicting adapter %s (%s) to load %s", r->v[vi]->name,
                 r->o.policy == LORA_EVICT_FIFO ? "fifo" : "lru", name);
        remove_at(r, vi);
    }
    if (r->n == r->cap) {
        int nc = r->cap ? r->cap * 2 : 8;
        lora_adapter **g = realloc(r->v, sizeof *g * (size_t)nc);
        if (!g) {
            errmsg_set(err, errlen, "out of memory");
            goto out;
        }
        r->v = g, r->cap = nc;
    }
    a->loaded_seq = a->last_use = ++r->clock;
    a->listed = true;
    r->v[r->n++] = a;
    a = NULL;
    rc = 0;
out:
    pthread_mutex_unlock(&r->mu);
    if (a) lora_adapter_unref(a);
    return rc;
}

int lora_registry_unload(lora_registry *r, const char *name, char *err, size_t errlen)
{
    pthread_mutex_lock(&r->mu);
    int i = name ? find(r, name) : -1;
    if (i >= 0) remove_at(r, i);
    pthread_mutex_unlock(&r->mu);
    if (i < 0) {
        errmsg_set(err, errlen, "LoRA adapter %s is not loaded", name ? name : "(null)");
        return -1;
    }
    return 0;
}

lora_adapter *lora_registry_get(lora_registry *r, const char *name)
{
    pthread_mutex_lock(&r->mu);
    int i = find(r, name);
    lora_adapter *a = NULL;
    if (i >= 0) {
        a = r->v[i];
        a->last_use = ++r->clock;
        lora_adapter_ref(a);
    }
    pthread_mutex_unlock(&r->mu);
    return a;
}

int lora_registry_list(lora_registry *r, lora_adapter ***out)
{
    pthread_mutex_lock(&r->mu);
    int n = r->n;
    lora_adapter **v = malloc(sizeof *v * (size_t)(n + 1));
    if (v)
        for (int i = 0; i < n; i++) {
            v[i] = r->v[i];
            lora_adapter_ref(v[i]);
        }
    pthread_mutex_unlock(&r->mu);
    *out = v;
    return v ? n : -1;
}

void lora_registry_list_free(lora_adapter **v, int n)
{
    for (int i = 0; i < n; i++) lora_adapter_unref(v[i]);
    free(v);
}

int lora_registry_count(lora_registry *r)
{
    pthread_mutex_lock(&r->mu);
    int n = r->n;
    pthread_mutex_unlock(&r->mu);
    return n;
}

static lora_registry *g_reg;

void lora_set_global(lora_registry *r) { __atomic_store_n(&g_reg, r, __ATOMIC_RELEASE); }

lora_registry *lora_global(void) { return __atomic_load_n(&g_reg, __ATOMIC_ACQUIRE); }

int lora_resolve(const char *name, lora_adapter **out, char *err, size_t errlen)
{
    *out = NULL;
    lora_registry *r = lora_global();
    if (!r) {
        errmsg_set(err, errlen, "LoRA is not enabled. Please set `--enable-lora` to enable LoRA.");
        return -1;
    }
    if ((*out = lora_registry_get(r, name))) return 0;
    /* SGLang prints the registry's keys as Python does */
    char keys[1024];
    size_t o = 0;
    pthread_mutex_lock(&r->mu);
    for (int i = 0; i < r->n && o + 8 < sizeof keys; i++) {
        int w = snprintf(keys + o, sizeof keys - o, "%s'%s'", i ? ", " : "", r->v[i]->name);
        if (w > 0) o += (size_t)w;
    }
    pthread_mutex_unlock(&r->mu);
    if (o >= sizeof keys) o = sizeof keys - 1;
    keys[o] = 0;
    errmsg_set(err, errlen,
               "The following requested LoRA adapters are not loaded: %s\nLoaded adapters: "
               "odict_keys([%s]).",
               name, keys);
    return -1;
}

int lora_parse_path_arg(const char *s, char **name, char **path, bool *pinned, char *err,
                        size_t errlen)
{
    *name = *path = NULL;
    *pinned = false;
    const char *p = s;
    while (*p == ' ') p++;
    if (*p == '{') {
        json_error_t je;
        json_t *o = json_loads(p, 0, &je);
        if (!o || !json_is_object(o)) {
            errmsg_set(err, errlen, "--lora-paths: invalid JSON object %.80s", s);
            json_decref(o);
            return -1;
        }
        json_t *n = json_object_get(o, "lora_name"), *pa = json_object_get(o, "lora_path");
        json_t *pi = json_object_get(o, "pinned");
        int rc = -1;
        if (!json_is_string(n) || !json_is_string(pa) || !json_string_length(n) || !json_string_length(pa)) {
            errmsg_set(err, errlen, "--lora-paths: a JSON entry needs non-empty string lora_name and lora_path");
        } else if (pi && !json_is_boolean(pi)) {
            errmsg_set(err, errlen, "--lora-paths: pinned must be true or false");
        } else {
            *name = strdup(json_string_value(n));
            *path = strdup(json_string_value(pa));
            *pinned = pi && json_is_true(pi);
            rc = *name && *path ? 0 : -1;
        }
        json_decref(o);
        if (rc) free(*name), free(*path), *name = *path = NULL;
        return rc;
    }
    const char *eq = strchr(p, '=');
    if (eq) {
        *name = strndup(p, (size_t)(eq - p));
        *path = strdup(eq + 1);
    } else {
        *name = strdup(p);
        *path = strdup(p);
    }
    if (!*name || !*path || !**name || !**path) {
        errmsg_set(err, errlen, "--lora-paths: empty name or path in '%.80s'", s);
        free(*name), free(*path), *name = *path = NULL;
        return -1;
    }
    return 0;
}
