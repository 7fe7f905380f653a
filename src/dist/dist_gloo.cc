/* dist_gloo — the multi-node backend without mpirun: Facebook gloo (the
 * Debian libgloo-dev package) over TCP, with sglc's own rendezvous store
 * (see dist.h).  The only C++ file of sglc and the only one that includes
 * gloo headers; it exports the C functions of dist.h (extern "C") and the
 * same dist_ops vtable dist_mpi.c fills.  Compiled (g++) only when the
 * gloo headers are there; dist_gloo_stub.c answers otherwise.
 *
 * DESIGN:
 *   - Store: rank 0 (node 0's command) listens at --dist-init-addr
 *     HOST:PORT (a thread per connection); every rank, rank 0 included,
 *     keeps one TCP connection to it.  Requests: HELLO (rank, pid, host,
 *     the launch configuration: a rank whose configuration differs from
 *     rank 0's, or a rank that joined already, is refused with a message
 *     that both sides print), SET / GET (gloo's rendezvous keys: the
 *     transport addresses; StoreClient is a gloo::rendezvous::Store), BEAT
 *     (every 50 ms from a heartbeat thread: the rank's op counter of each
 *     of its groups; the reply carries the abort record), STATUS (every
 *     rank: joined, connection open, left in order, age of its last beat,
 *     op counters; the abort record), ABORT (publish why this rank gave
 *     up), BYE (an orderly leave).  The server sees a rank's connection
 *     close when its process dies, so a dead rank on any machine is named.
 *   - Join: every rank connects (retrying until --dist-timeout: node 0
 *     may start later), says HELLO, then waits until all ranks joined;
 *     past the timeout the message names the node ranks that never came.
 *     Then gloo's full mesh is connected (connectFullMesh over the store),
 *     each rank's TCP device bound to the local address its store
 *     connection uses (the interface that reaches node 0).
 *   - Collectives: gloo::allreduce (ring, sum; bf16 is widened to f32
 *     around the call and rounded once: gloo has no bf16 sum), broadcast,
 *     gather, barrier, each with the call's timeout (gloo's end-to-end
 *     timeout; FOREVER = 1 year).  A gloo exception (a peer's connection
 *     closed, or the timeout) breaks the group; the message comes from
 *     STATUS: the abort record of a rank that gave up, else a member whose
 *     connection closed ("is gone"), else a member whose op counter is
 *     below this op ("did not reach all-reduce #N within T s"), else one
 *     whose heartbeat stopped, else gloo's own text.  The failure is
 *     published (ABORT) so the other ranks' diagnoses name the same rank.
 *   - A worker (rank > 0) whose heartbeat finds rank 0's store gone, or an
 *     abort published by another rank, exits 1 after 2 s if its own
 *     collective has not ended it first (a collective blocked on a hung
 *     peer cannot be interrupted from outside gloo): no rank outlives a
 *     broken job.  Rank 0 learns through its watcher (dist_check_peers =
 *     STATUS) or its collective.
 *   - dist_split: a new gloo context over a PrefixStore ("s<k>c<color>/")
 *     of the same store and the same device; its op counter is counter k
 *     of the rank's heartbeat.
 */
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

extern "C" {
#include "dist/dist.h"
}


#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/gather.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>

extern "C" int dist_gloo_available(void) { return 1; }

namespace {

const int kMaxGroups = 8;
const int kBeatMs = 50;
const size_t kSmallBytes = 256u << 10; /* all-reduce by allgather up to this (f32 bytes) */

double now_ms()
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

std::string fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
std::string fmt(const char *f, ...)
{
    char b[1024];
    va_list ap;
    va_start(ap, f);
    vsnprintf(b, sizeof b, f, ap);
    va_end(ap);
    return b;
}

/* ---- framing: u8 op, u32 rank, u32 klen, key, u32 vlen, value; reply: u8 status, u32 len, value ---- */

int write_all(int fd, const void *p, size_t n)
{
    const char *c = (const char *)p;
    while (n) {
        ssize_t w = send(fd, c, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        c += w, n -= (size_t)w;
    }
    return 0;
}

/* Read n bytes; deadline_ms 0 = none.  -1 on EOF / error / deadline. */
int read_all(int fd, void *p, size_t n, double deadline_ms)
{
    char *c = (char *)p;
    while (n) {
        if (deadline_ms > 0) {
            int left = (int)(deadline_ms - now_ms());
            if (left <= 0) return -1;
            struct pollfd pf = {fd, POLLIN, 0};
            int pr = poll(&pf, 1, left);
            if (pr < 0 && errno == EINTR) continue;
            if (pr <= 0) return -1;
        }
        ssize_t r = recv(fd, c, n, 0);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        c += r, n -= (size_t)r;
    }
    return 0;
}

void put32(std::string &s, uint32_t v) { s.append((const char *)&v, 4); }

int send_req(int fd, char op, int rank, const std::string &k, const std::string &v)
{
    std::string m(1, op);
    put32(m, (uint32_t)rank);
    put32(m, (uint32_t)k.size());
    m += k;
    put32(m, (uint32_t)v.size());
    m += v;
    return write_all(fd, m.data(), m.size());
}

int read_blob(int fd, std::string &out, double deadline)
{
    uint32_t n;
    if (read_all(fd, &n, 4, deadline) || n > (64u << 20)) return -1;
    out.resize(n);
    return n ? read_all(fd, &out[0], n, deadline) : 0;
}

/* ---- the store server (rank 0) ---- */

struct RankInfo {
    bool joined = false, open = false, bye = false;
    int pid = 0;
    std::string host, config;
    double last_beat = 0;
    uint32_t ctr[kMaxGroups] = {0};
};

struct Server {
    std::mutex mu;
    int size = 0, lfd = -1;
    std::string config;                 /* rank 0's launch configuration */
    std::vector<RankInfo> ranks;
    std::map<std::string, std::string> kv;
    int abort_rank = -1;
    std::string abort_msg;
    std::string refused;                /* the first refused HELLO (rank 0 reports it) */
};

Server *g_server; /* one per process (rank 0), lives until exit */

void serve_conn(Server *S, int fd)
{
    int me = -1;
    for (;;) {
        char op;
        uint32_t rank;
        std::string k, v;
        if (read_all(fd, &op, 1, 0) || read_all(fd, &rank, 4, 0) || read_blob(fd, k, 0) || read_blob(fd, v, 0))
            break;
        char st = 0;
        std::string out;
        {
            std::lock_guard<std::mutex> l(S->mu);
            if (op == 'H') {
                /* v = "pid\nhost\nconfig" */
                size_t a = v.find('\n'), b = a == std::string::npos ? a : v.find('\n', a + 1);
                std::string pid = v.substr(0, a), host = a == std::string::npos ? "" : v.substr(a + 1, b - a - 1),
                            cfg = b == std::string::npos ? "" : v.substr(b + 1);
                if ((int)rank >= S->size) {
                    st = 1;
                    out = fmt("rank %u is not below the world size %d of node 0's command (node 0 runs '%s', "
                              "this node '%s')", rank, S->size, S->config.c_str(), cfg.c_str());
                } else if (rank != 0 && cfg != S->config) {
                    st = 1;
                    out = fmt("rank %u (%s) was started with '%s' but node 0 with '%s': every node must run "
                              "the same command (only --node-rank differs)", rank, host.c_str(), cfg.c_str(),
                              S->config.c_str());
                } else if (S->ranks[rank].joined) {
                    st = 1;
                    const RankInfo &r = S->ranks[rank];
                    out = fmt("rank %u joined already (pid %d on %s): two nodes were started with the same "
                              "--node-rank?", rank, r.pid, r.host.c_str());
                } else {
                    RankInfo &r = S->ranks[rank];
                    r.joined = r.open = true;
                    r.pid = atoi(pid.c_str());
                    r.host = host, r.config = cfg;
                    r.last_beat = now_ms();
                    me = (int)rank;
                }
                if (st && S->refused.empty()) S->refused = out;
            } else if (op == 'S') {
                S->kv[k] = v;
            } else if (op == 'G') {
                auto it = S->kv.find(k);
                if (it == S->kv.end()) st = 1;
                else out = it->second;
            } else if (op == 'B' || op == 'T') {
                if (op == 'B' && me >= 0) {
                    S->ranks[me].last_beat = now_ms();
                    memcpy(S->ranks[me].ctr, v.data(), std::min(v.size(), sizeof S->ranks[me].ctr));
                }
                /* abort record, then (T) every rank */
                put32(out, (uint32_t)S->abort_rank);
                put32(out, (uint32_t)S->abort_msg.size());
                out += S->abort_msg;
                if (op == 'T') {
                    put32(out, (uint32_t)S->size);
                    put32(out, (uint32_t)S->refused.size());
                    out += S->refused;
                    double t = now_ms();
                    for (const RankInfo &r : S->ranks) {
                        uint32_t f = (r.joined ? 1u : 0u) | (r.open ? 2u : 0u) | (r.bye ? 4u : 0u);
                        put32(out, f);
                        put32(out, (uint32_t)r.pid);
                        put32(out, (uint32_t)(r.joined ? std::min(t - r.last_beat, 4e9) : 0));
                        out.append((const char *)r.ctr, sizeof r.ctr);
                        put32(out, (uint32_t)r.host.size());
                        out += r.host;
                    }
                }
            } else if (op == 'A') {
                if (S->abort_rank < 0) S->abort_rank = (int)rank, S->abort_msg = v;
            } else if (op == 'Q') {
                if (me >= 0) S->ranks[me].bye = true;
            } else {
                st = 1;
                out = "unknown request";
            }
        }
        std::string rep(1, st);
        put32(rep, (uint32_t)out.size());
        rep += out;
        if (write_all(fd, rep.data(), rep.size())) break;
    }
    if (me >= 0) {
        std::lock_guard<std::mutex> l(S->mu);
        S->ranks[me].open = false;
    }
    close(fd);
}

void server_main(Server *S)
{
    for (;;) {
        int fd = accept(S->lfd, NULL, NULL);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED) continue;
            return;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        std::thread(serve_conn, S, fd).detach();
    }
}

int resolve(const std::string &host, const std::string &port, struct addrinfo **res, std::string &why)
{
    struct addrinfo hints;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, res);
    if (rc) why = gai_strerror(rc);
    return rc ? -1 : 0;
}

/* ---- the client side of every rank ---- */

struct Status {
    int abort_rank = -1;
    std::string abort_msg, refused;
    struct R {
        bool joined, open, bye;
        int pid;
        double beat_age;
        uint32_t ctr[kMaxGroups];
        std::string host;
    };
    std::vector<R> r;
};

struct Client : public gloo::rendezvous::Store {
    int fd = -1, rank = 0, size = 0, per_node = 1, timeout_ms = 0;
    std::string addr;
    std::mutex mu;
    std::atomic<uint32_t> ctr[kMaxGroups];
    std::atomic<bool> stop{false};
    int n_groups = 0;
    std::thread beat;

    Client() { for (auto &c : ctr) c = 0; }
    ~Client() override { if (fd >= 0) ::close(fd); }

    /* one request; -1 when the store does not answer */
    int call(char op, const std::string &k, const std::string &v, char *st, std::string *out, int wait_ms = 5000)
    {
        std::lock_guard<std::mutex> l(mu);
        if (fd < 0 || send_req(fd, op, rank, k, v)) return -1;
        double dl = now_ms() + wait_ms;
        char s;
        std::string o;
        if (read_all(fd, &s, 1, dl) || read_blob(fd, o, dl)) {
            ::close(fd);
            fd = -1;
            return -1;
        }
        if (st) *st = s;
        if (out) *out = o;
        return 0;
    }

    int status(Status &S)
    {
        std::string o;
        char st;
        if (call('T', "", "", &st, &o, 2000)) return -1;
        size_t p = 0;
        auto g32 = [&](uint32_t &v) { if (p + 4 <= o.size()) memcpy(&v, o.data() + p, 4); p += 4; };
        auto gs = [&](std::string &s) { uint32_t n = 0; g32(n); if (p + n <= o.size()) s = o.substr(p, n); p += n; };
        uint32_t ar = 0, n = 0;
        g32(ar);
        S.abort_rank = (int)ar;
        gs(S.abort_msg);
        g32(n);
        gs(S.refused);
        S.r.resize(n);
        for (auto &r : S.r) {
            uint32_t f = 0, pid = 0, age = 0;
            g32(f), g32(pid), g32(age);
            if (p + sizeof r.ctr <= o.size()) memcpy(r.ctr, o.data() + p, sizeof r.ctr);
            p += sizeof r.ctr;
            gs(r.host);
            r.joined = f & 1, r.open = f & 2, r.bye = f & 4, r.pid = (int)pid, r.beat_age = age;
        }
        return p <= o.size() ? 0 : -1;
    }

    /* gloo::rendezvous::Store */
    void set(const std::string &key, const std::vector<char> &data) override
    {
        if (call('S', key, std::string(data.begin(), data.end()), NULL, NULL))
            GLOO_THROW_IO_EXCEPTION("the rendezvous store at ", addr, " does not answer");
    }
    std::vector<char> get(const std::string &key) override
    {
        wait({key}, std::chrono::milliseconds(timeout_ms > 0 ? timeout_ms : 300000));
        std::string o;
        char st = 1;
        if (call('G', key, "", &st, &o) || st)
            GLOO_THROW_IO_EXCEPTION("the rendezvous store at ", addr, " lost key ", key);
        return std::vector<char>(o.begin(), o.end());
    }
    void wait(const std::vector<std::string> &keys) override
    {
        wait(keys, std::chrono::milliseconds(timeout_ms > 0 ? timeout_ms : 300000));
    }
    void wait(const std::vector<std::string> &keys, const std::chrono::milliseconds &timeout) override
    {
        double t0 = now_ms();
        for (const std::string &k : keys) {
            for (int i = 0;; i++) {
                char st = 1;
                if (call('G', k, "", &st, NULL))
                    GLOO_THROW_IO_EXCEPTION("the rendezvous store at ", addr, " does not answer");
                if (!st) break;
                if (now_ms() - t0 > timeout.count())
                    GLOO_THROW_IO_EXCEPTION("no key ", k, " in the rendezvous store within ", timeout.count(), " ms");
                usleep(i < 100 ? 1000 : 10000);
            }
        }
    }
};

void beat_main(Client *C)
{
    double lost = 0, seen_abort = 0;
    while (!C->stop.load()) {
        usleep(kBeatMs * 1000);
        uint32_t v[kMaxGroups];
        for (int i = 0; i < kMaxGroups; i++) v[i] = C->ctr[i].load();
        std::string o;
        char st;
        int rc = C->call('B', "", std::string((const char *)v, sizeof v), &st, &o, 2000);
        if (C->stop.load() || C->rank == 0) continue; /* rank 0: its watcher decides */
        double t = now_ms();
        if (rc) {
            if (lost == 0) lost = t;
        } else if (o.size() >= 8) {
            int32_t ar;
            memcpy(&ar, o.data(), 4);
            if (ar >= 0 && ar != C->rank && seen_abort == 0) seen_abort = t;
        }
        /* a worker outliving a broken job: give its own collective 2 s to end it first */
        if ((lost > 0 && t - lost > 2000) || (seen_abort > 0 && t - seen_abort > 2000)) {
            fprintf(stderr, "rank %d: %s; exiting\n", C->rank,
                    lost > 0 ? fmt("the rendezvous store at %s (rank 0) is gone", C->addr.c_str()).c_str()
                             : "another rank gave up (the job is broken)");
            fflush(stderr);
            _exit(1);
        }
    }
}

struct Impl {
    std::shared_ptr<Client> client;
    std::shared_ptr<gloo::transport::Device> dev;
    std::shared_ptr<gloo::rendezvous::Context> ctx;
    std::unique_ptr<gloo::rendezvous::PrefixStore> pstore;
    int idx = 0;          /* counter index (0: the world group) */
    uint32_t op = 0;
    std::vector<float> scratch, gathered;
};

Impl *impl(dist_group *g) { return (Impl *)g->impl; }

std::chrono::milliseconds tmo(int ms)
{
    return std::chrono::milliseconds(ms > 0 ? (int64_t)ms : (int64_t)365 * 24 * 3600 * 1000);
}

/* Break g after a gloo failure of op #op (`what`): name the rank from the store's view. */
int diagnose(dist_group *g, const char *what, int timeout_ms, double t0, const char *gloo_msg)
{
    Impl *I = impl(g);
    Client *C = I->client.get();
    const int me = dist_rank_name(g, g->rank);
    Status S;
    double took = (now_ms() - t0) / 1e3;
    const double d0 = now_ms();
    const int n = g->size, node_of = C->per_node > 0 ? C->per_node : 1;
    std::string msg;
    int who = -1;
    /* A killed peer's data connection can reset before the store sees its
     * store connection close: look again for up to 1 s before falling back
     * to gloo's own text, so that the failure names the rank. */
    for (;;) {
        if (C->status(S)) {
            dist_fail(g, 0, "rank %d: %s #%u failed and the rendezvous store at %s does not answer: rank 0 is gone "
                      "(%s)", me, what, I->op, C->addr.c_str(), gloo_msg);
            return -1;
        }
        if (S.abort_rank >= 0 && S.abort_rank != me) {
            dist_fail(g, S.abort_rank, "rank %d failed: %s", S.abort_rank, S.abort_msg.c_str());
            return -1;
        }
        for (int pass = 0; pass < 3 && who < 0; pass++)
            for (int r = 0; r < n && who < 0; r++) {
                int w = dist_rank_name(g, r);
                if (r == g->rank || w < 0 || w >= (int)S.r.size()) continue;
                const Status::R &R = S.r[w];
                if (pass == 0 && !R.open && !R.bye) {
                    who = w;
                    msg = fmt("rank %d (pid %d on node %d, %s) is gone (its connection closed); rank %d was in %s #%u",
                              w, R.pid, w / node_of, R.host.c_str(), me, what, I->op);
                } else if (pass == 1 && R.ctr[I->idx] < I->op && timeout_ms > 0 && took * 1e3 >= timeout_ms * 0.9) {
                    who = w;
                    msg = fmt("rank %d (pid %d on node %d) did not reach %s #%u within %.1f s%s", w, R.pid, w / node_of,
                              what, I->op, timeout_ms / 1e3,
                              R.beat_age > 1000 ? fmt(" (no heartbeat for %.1f s: hung)", R.beat_age / 1e3).c_str() : "");
                } else if (pass == 2 && R.beat_age > 1000) {
                    who = w;
                    msg = fmt("rank %d (pid %d on node %d) hung in %s #%u (no heartbeat for %.1f s)", w, R.pid,
                              w / node_of, what, I->op, R.beat_age / 1e3);
                }
            }
        if (who >= 0 || now_ms() - d0 >= 1000) break;
        usleep(50 * 1000);
    }
    if (who < 0)
        msg = fmt("rank %d: %s #%u failed after %.1f s: %s", me, what, I->op, took, gloo_msg);
    dist_fail(g, who, "%s", msg.c_str());
    C->call('A', "", msg, NULL, NULL, 1000); /* the others name the same rank */
    return -1;
}

template <typename F> int run(dist_group *g, const char *what, int timeout_ms, F f)
{
    Impl *I = impl(g);
    I->op++;
    I->client->ctr[I->idx].store(I->op);
    double t0 = now_ms();
    try {
        f();
        return 0;
    } catch (const std::exception &e) {
        return diagnose(g, what, timeout_ms, t0, e.what());
    }
}

inline float bf16_f32(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

inline uint16_t f32_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* NaN stays NaN */
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);                /* round to nearest even */
}

int g_allreduce(dist_group *g, void *buf, size_t n, dist_dtype dt, int timeout_ms)
{
    Impl *I = impl(g);
    float *p = (float *)buf;
    if (dt == DIST_BF16) {
        I->scratch.resize(n);
        const uint16_t *h = (const uint16_t *)buf;
        for (size_t i = 0; i < n; i++) I->scratch[i] = bf16_f32(h[i]);
        p = I->scratch.data();
    }
    const size_t N = (size_t)g->size;
    if (n * 4 <= kSmallBytes) {
        /* small: every rank's rows to every rank (gloo::allgather), summed
         * here in rank order: one exchange round instead of the ring's
         * 2 (N - 1) steps, the shm backend's summation order (same bits) */
        I->gathered.resize(n * N);
        int rc = run(g, "all-reduce", timeout_ms, [&] {
            gloo::AllgatherOptions o(I->ctx);
            o.setInput(p, n);
            o.setOutput(I->gathered.data(), n * N);
            o.setTimeout(tmo(timeout_ms));
            gloo::allgather(o);
        });
        if (rc) return rc;
        const float *a = I->gathered.data();
        for (size_t i = 0; i < n; i++) {
            float acc = a[i];
            for (size_t r = 1; r < N; r++) acc += a[r * n + i];
            p[i] = acc;
        }
        if (dt == DIST_BF16) {
            uint16_t *h = (uint16_t *)buf;
            for (size_t i = 0; i < n; i++) h[i] = f32_bf16(p[i]);
        }
        return 0;
    }
    int rc = run(g, "all-reduce", timeout_ms, [&] {
        gloo::AllreduceOptions o(I->ctx);
        o.setOutput(p, n);
        o.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
        o.setReduceFunction(static_cast<void (*)(void *, const void *, const void *, size_t)>(&gloo::sum<float>));
        o.setTimeout(tmo(timeout_ms));
        gloo::allreduce(o);
    });
    if (!rc && dt == DIST_BF16) {
        uint16_t *h = (uint16_t *)buf;
        for (size_t i = 0; i < n; i++) h[i] = f32_bf16(p[i]);
    }
    return rc;
}

int g_bcast(dist_group *g, void *buf, size_t bytes, int root, int timeout_ms)
{
    Impl *I = impl(g);
    return run(g, "broadcast", timeout_ms, [&] {
        gloo::BroadcastOptions o(I->ctx);
        o.setOutput((uint8_t *)buf, bytes);
        o.setRoot(root);
        o.setTimeout(tmo(timeout_ms));
        gloo::broadcast(o);
    });
}

int g_gather(dist_group *g, const void *send, size_t bytes, void *recv, int root, int timeout_ms)
{
    Impl *I = impl(g);
    return run(g, "gather", timeout_ms, [&] {
        gloo::GatherOptions o(I->ctx);
        o.setInput((uint8_t *)const_cast<void *>(send), bytes);
        if (g->rank == root) o.setOutput((uint8_t *)recv, bytes * (size_t)g->size);
        o.setRoot(root);
        o.setTimeout(tmo(timeout_ms));
        gloo::gather(o);
    });
}

int g_barrier(dist_group *g, int timeout_ms)
{
    Impl *I = impl(g);
    return run(g, "barrier", timeout_ms, [&] {
        gloo::BarrierOptions o(I->ctx);
        o.setTimeout(tmo(timeout_ms));
        gloo::barrier(o);
    });
}

/* Any thread (rank 0's watcher): a member whose connection to the store
 * closed, or an abort another rank published, breaks g. */
int g_check_peers(dist_group *g)
{
    Impl *I = impl(g);
    Status S;
    if (I->client->status(S)) {
        dist_fail(g, 0, "the rendezvous store at %s does not answer (rank 0 is gone)", I->client->addr.c_str());
        return -1;
    }
    const int me = dist_rank_name(g, g->rank);
    if (S.abort_rank >= 0 && S.abort_rank != me) {
        dist_fail(g, S.abort_rank, "rank %d failed: %s", S.abort_rank, S.abort_msg.c_str());
        return -1;
    }
    for (int r = 0; r < g->size; r++) {
        int w = dist_rank_name(g, r);
        if (w == me || w < 0 || w >= (int)S.r.size()) continue;
        const Status::R &R = S.r[w];
        if (R.joined && !R.open && !R.bye) {
            dist_fail(g, w, "rank %d (pid %d on node %d, %s) is gone (its connection closed); rank %d was idle after "
                      "op #%u", w, R.pid, w / (I->client->per_node > 0 ? I->client->per_node : 1), R.host.c_str(),
                      me, I->op);
            return -1;
        }
    }
    return 0;
}

void g_publish(dist_group *g, const char *msg)
{
    impl(g)->client->call('A', "", msg, NULL, NULL, 1000);
}

void g_abort(dist_group *g, const char *msg)
{
    g_publish(g, fmt("rank %d gave up: %s", dist_rank_name(g, g->rank), msg).c_str());
}

void g_free(dist_group *g)
{
    Impl *I = impl(g);
    if (I) {
        if (I->idx == 0 && I->client) { /* the world group owns the client */
            Client *C = I->client.get();
            if (!dist_broken(g)) C->call('Q', "", "", NULL, NULL, 1000);
            C->stop = true;
            if (C->beat.joinable()) C->beat.join();
            std::lock_guard<std::mutex> l(C->mu);
            if (C->fd >= 0) ::close(C->fd), C->fd = -1;
        }
        delete I;
    }
    free(g);
}

dist_group *g_split(dist_group *g, int color, int key, int size, int rank, char *err, size_t errlen);

const dist_ops gloo_ops = {
    "gloo", g_allreduce, g_bcast, g_gather, g_barrier, g_check_peers, g_abort, g_free, g_split, g_publish,
};

dist_group *new_group(std::shared_ptr<Client> C, std::shared_ptr<gloo::transport::Device> dev, int idx,
                      const std::string &prefix, int size, int rank, int timeout_ms, char *err, size_t errlen)
{
    Impl *I = new Impl;
    I->client = C, I->dev = dev, I->idx = idx;
    try {
        I->ctx = std::make_shared<gloo::rendezvous::Context>(rank, size);
        I->ctx->setTimeout(tmo(timeout_ms));
        I->pstore.reset(new gloo::rendezvous::PrefixStore(prefix, *C));
        I->ctx->connectFullMesh(*I->pstore, dev);
    } catch (const std::exception &e) {
        snprintf(err, errlen, "rank %d: connecting gloo's TCP mesh of %d ranks failed: %s", C->rank, size, e.what());
        delete I;
        return NULL;
    }
    dist_group *s = (dist_group *)calloc(1, sizeof *s);
    if (!s) {
        delete I;
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    s->ops = &gloo_ops, s->impl = I, s->rank = rank, s->size = size, s->failed_rank = -1;
    s->timeout_ms = timeout_ms > 0 ? timeout_ms : 0;
    return s;
}

dist_group *g_split(dist_group *g, int color, int key, int size, int rank, char *err, size_t errlen)
{
    (void)key;
    Impl *I = impl(g);
    Client *C = I->client.get();
    int idx = ++C->n_groups;
    if (idx >= kMaxGroups) {
        snprintf(err, errlen, "the gloo backend makes at most %d groups per rank", kMaxGroups - 1);
        return NULL;
    }
    return new_group(I->client, I->dev, idx, fmt("s%dc%d/", idx, color), size, rank, g->timeout_ms, err, errlen);
}

/* "node 1 (ranks 2-3)" for the ranks not joined */
std::string missing_nodes(const Status &S, int per_node)
{
    std::string m;
    int nn = 0;
    for (int node = 0; node * per_node < (int)S.r.size(); node++) {
        int lo = -1, hi = -1;
        for (int r = node * per_node; r < (node + 1) * per_node && r < (int)S.r.size(); r++)
            if (!S.r[r].joined) hi = r, lo = lo < 0 ? r : lo;
        if (lo < 0) continue;
        m += fmt("%snode %d (rank%s %d%s)", nn++ ? ", " : "", node, lo == hi ? "" : "s", lo,
                 lo == hi ? "" : fmt("-%d", hi).c_str());
    }
    return m;
}

} // namespace

extern "C" dist_group *dist_gloo_create(const dist_gloo_opts *o, char *err, size_t errlen)
{
    const int rank = o->rank, size = o->size, per = o->per_node > 0 ? o->per_node : 1;
    const int timeout_ms = o->timeout_ms > 0 ? o->timeout_ms : 300000;
    std::string addr = o->init_addr ? o->init_addr : "";
    size_t colon = addr.rfind(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == addr.size()) {
        snprintf(err, errlen, "--dist-init-addr '%s': expected HOST:PORT", addr.c_str());
        return NULL;
    }
    std::string host = addr.substr(0, colon), port = addr.substr(colon + 1);
    if (host.size() > 2 && host[0] == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
    if (rank < 0 || rank >= size || size < 1) {
        snprintf(err, errlen, "gloo group: rank %d of %d", rank, size);
        return NULL;
    }
    struct sigaction sa;
    if (!sigaction(SIGPIPE, NULL, &sa) && sa.sa_handler == SIG_DFL) signal(SIGPIPE, SIG_IGN); /* a peer's socket closing */
    struct addrinfo *ai = NULL;
    std::string why;
    if (resolve(host, port, &ai, why)) {
        snprintf(err, errlen, "--dist-init-addr %s: cannot resolve %s: %s", addr.c_str(), host.c_str(), why.c_str());
        return NULL;
    }
    if (rank == 0) { /* the store: listen on HOST:PORT */
        Server *S = new Server;
        S->size = size, S->config = o->config ? o->config : "";
        S->ranks.resize(size);
        int e = 0;
        for (struct addrinfo *a = ai; a && S->lfd < 0; a = a->ai_next) {
            int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
            int one = 1;
            if (fd < 0) continue;
            setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
            if (!bind(fd, a->ai_addr, a->ai_addrlen) && !listen(fd, 128)) S->lfd = fd;
            else e = errno, ::close(fd);
        }
        if (S->lfd < 0) {
            freeaddrinfo(ai);
            delete S;
            snprintf(err, errlen, "node 0 (--node-rank 0) cannot listen at --dist-init-addr %s: %s%s", addr.c_str(),
                     strerror(e),
                     e == EADDRINUSE ? " (another job there, or a second node started with --node-rank 0?)"
                     : e == EADDRNOTAVAIL ? " (not an address of this machine: start --node-rank 0 on the host of "
                                            "--dist-init-addr)" : "");
            return NULL;
        }
        g_server = S;
        std::thread(server_main, S).detach();
    }
    auto C = std::make_shared<Client>();
    C->rank = rank, C->size = size, C->per_node = per, C->timeout_ms = timeout_ms, C->addr = addr;
    /* connect, retrying: node 0 may start later */
    double t0 = now_ms();
    int last_e = 0;
    while (C->fd < 0) {
        for (struct addrinfo *a = ai; a && C->fd < 0; a = a->ai_next) {
            int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
            if (fd < 0) continue;
            if (!connect(fd, a->ai_addr, a->ai_addrlen)) C->fd = fd;
            else last_e = errno, ::close(fd);
        }
        if (C->fd >= 0) break;
        if (now_ms() - t0 > timeout_ms) {
            freeaddrinfo(ai);
            snprintf(err, errlen, "node %d (rank %d): nobody listens at --dist-init-addr %s after %.1f s (%s): node 0 "
                     "(--node-rank 0) did not start", rank / per, rank, addr.c_str(), timeout_ms / 1e3,
                     strerror(last_e));
            return NULL;
        }
        usleep(100000);
    }
    freeaddrinfo(ai);
    int one = 1;
    setsockopt(C->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    /* the local address that reaches node 0: gloo's device binds there */
    struct sockaddr_storage la;
    socklen_t ll = sizeof la;
    char lhost[INET6_ADDRSTRLEN] = "127.0.0.1", hn[256] = "?";
    if (!getsockname(C->fd, (struct sockaddr *)&la, &ll))
        getnameinfo((struct sockaddr *)&la, ll, lhost, sizeof lhost, NULL, 0, NI_NUMERICHOST);
    gethostname(hn, sizeof hn - 1);
    char st = 1;
    std::string rep;
    if (C->call('H', "", fmt("%d\n%s (%s)\n%s", (int)getpid(), hn, lhost, o->config ? o->config : ""), &st, &rep,
                timeout_ms)) {
        snprintf(err, errlen, "node %d (rank %d): the store at %s closed during the join", rank / per, rank,
                 addr.c_str());
        return NULL;
    }
    if (st) {
        snprintf(err, errlen, "node %d (rank %d) refused by node 0 at %s: %s", rank / per, rank, addr.c_str(),
                 rep.c_str());
        return NULL;
    }
    C->beat = std::thread(beat_main, C.get());
    /* every rank joined, or the missing node ranks named */
    auto fail = [&](const std::string &m) -> dist_group * {
        snprintf(err, errlen, "%s", m.c_str());
        C->stop = true;
        if (C->beat.joinable()) C->beat.join();
        return NULL;
    };
    for (;;) {
        Status S;
        if (C->status(S)) return fail(fmt("node %d (rank %d): the store at %s (rank 0) closed during the join",
                                          rank / per, rank, addr.c_str()));
        if (!S.refused.empty() && rank == 0) return fail("a node was refused: " + S.refused);
        if (S.abort_rank >= 0) return fail(fmt("rank %d failed: %s", S.abort_rank, S.abort_msg.c_str()));
        std::string miss = missing_nodes(S, per);
        if (miss.empty()) break;
        if (now_ms() - t0 > timeout_ms)
            return fail(fmt("%s did not join at --dist-init-addr %s within %.1f s (--dist-timeout)", miss.c_str(),
                            addr.c_str(), timeout_ms / 1e3));
        usleep(20000);
    }
    std::shared_ptr<gloo::transport::Device> dev;
    try {
        gloo::transport::tcp::attr at(lhost);
        dev = gloo::transport::tcp::CreateDevice(at);
    } catch (const std::exception &e) {
        return fail(fmt("rank %d: gloo TCP device on %s: %s", rank, lhost, e.what()));
    }
    dist_group *g = new_group(C, dev, 0, "w/", size, rank, timeout_ms, err, errlen);
    if (!g) {
        std::string m = err;
        return fail(m);
    }
    return g;
}
