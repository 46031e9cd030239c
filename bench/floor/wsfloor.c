/*
 * wsfloor: the physical floor of the benchmarks, a minimal WebSocket client in C.
 *
 * No framework, no event loop library, no allocation per message: frames are
 * built (and masked with a xorshift key, a word at a time) contiguously in one
 * send buffer and written with one send(); echoes are parsed in place out of
 * one large recv() buffer. rtt costs one send() and usually one recv() per
 * round trip; pipelined a send() and a recv() per batch. Whatever time is left
 * between this client and the others is client overhead; what remains between
 * this client and zero is the echo server's and the kernel's share.
 *
 * pipelined also runs as SCHED_BATCH (FLOOR_SCHED=normal keeps SCHED_OTHER):
 * with client and server pinned to one CPU, a client that needs almost no CPU
 * is woken by every few echoes the server writes and preempts it, ~0.4 context
 * switches per message (at 32 B as slow as the picows client); as SCHED_BATCH
 * its wake-up does not preempt, it runs when the server waits for input and
 * reads the whole batch at once (about 1 switch per window). rtt (the server
 * waits after every echo) and fanout (unpinned, and it measures latency) keep
 * the normal policy.
 *
 * rtt waits for each echo in a blocking recv(). FLOOR_WAIT=epoll waits in
 * epoll_wait() instead and then reads without blocking, as an event-loop client
 * does (moonwire's, picows's): the same work and one more system call per
 * round trip. Pinned beside the picows echo, the wait alone moves the rate by
 * about 4 % (docs/performance.md). FLOOR_IO=rw (with FLOOR_WAIT=epoll) makes
 * the calls SwiftNIO's stream channels make: the socket non-blocking, read()
 * and write() instead of recv() and send() (docs/performance.md: pinned on
 * the 6.18 VM, about 1 % of the rate, and the echo sleeps as often as beside
 * moonwire's client).
 *
 * A peer on this host gets the socket setting moonwire uses for one: a 1 MiB
 * send buffer instead of the kernel's autotuning (see loopback_send_buffer).
 *
 * Workloads, command line and JSON line are those of the peer clients
 * (bench/peers/peercli.py, bench/README.md): rtt, pipelined (no warmup, a
 * window of messages in flight, refilled when a quarter of it is free),
 * fanout (C connections, at most K handshakes in flight, 3 tries each, then T
 * ticks one second apart, each waiting at most 1 s for its echoes).
 *
 * Build:  cc -O2 -Wall -Wextra -o wsfloor wsfloor.c      (C11, libc/POSIX/Linux epoll only)
 * Usage:  wsfloor --url ws://HOST:PORT/PATH --workload rtt|pipelined|fanout --n N --size S
 *                 --type text|binary --window W --warmup W --conns C --duration T
 *                 --concurrency K --label NAME
 * Defaults as peercli.py: url ws://127.0.0.1:9101/, workload rtt, n 100000, size 32,
 * type binary for pipelined else text, window max(16, min(1024, 4 MiB / size)),
 * warmup min(1000, n / 10), conns 1000, duration 10, concurrency 200, label floor.
 * Prints one JSON line; {"ok":false,"error":...} and exit 1 on failure, exit 2 on a bad command line.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "floor_common.h"

/* ------------------------------------------------------------ options */

static struct {
    const char *url, *workload, *type, *label;
    long long n, size, window, warmup, conns, duration, concurrency;
} o = {"ws://127.0.0.1:9101/", "rtt", NULL, "floor", 100000, 32, 0, -1, 1000, 10, 200};

static const char USAGE[] =
    "usage: wsfloor --url ws://HOST:PORT/PATH --workload rtt|pipelined|fanout --n N --size S\n"
    "               --type text|binary --window W --warmup W --conns C --duration T\n"
    "               --concurrency K --label NAME\n";

static void usage_error(const char *fmt, const char *arg) {
    fputs(USAGE, stderr);
    fprintf(stderr, "wsfloor: ");
    fprintf(stderr, fmt, arg);
    fputc('\n', stderr);
    exit(2);
}

static void parse_options(int argc, char **argv) {
    static const char *ints[] = {"n", "size", "window", "warmup", "conns", "duration", "concurrency"};
    long long *slots[] = {&o.n, &o.size, &o.window, &o.warmup, &o.conns, &o.duration, &o.concurrency};
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i], *value;
        if (!strcmp(arg, "-h") || !strcmp(arg, "--help")) {
            fputs(USAGE, stdout);
            exit(0);
        }
        if (strncmp(arg, "--", 2) != 0)
            usage_error("unexpected argument '%s'", arg);
        char key[32];
        const char *eq = strchr(arg, '=');
        size_t klen = eq ? (size_t)(eq - arg - 2) : strlen(arg + 2);
        if (klen >= sizeof key)
            usage_error("unknown option '%s'", arg);
        memcpy(key, arg + 2, klen);
        key[klen] = 0;
        if (eq)
            value = eq + 1;
        else if (i + 1 < argc)
            value = argv[++i];
        else
            usage_error("option '%s' needs a value", arg);
        if (!strcmp(key, "url")) o.url = value;
        else if (!strcmp(key, "workload")) o.workload = value;
        else if (!strcmp(key, "type")) o.type = value;
        else if (!strcmp(key, "label")) o.label = value;
        else {
            size_t k = 0;
            while (k < sizeof ints / sizeof *ints && strcmp(key, ints[k]) != 0)
                k++;
            if (k == sizeof ints / sizeof *ints)
                usage_error("unknown option '%s'", arg);
            char *end;
            errno = 0;
            *slots[k] = strtoll(value, &end, 10);
            if (errno || end == value || *end)
                usage_error("not an integer: '%s'", value);
        }
    }
    if (strcmp(o.workload, "rtt") && strcmp(o.workload, "pipelined") && strcmp(o.workload, "fanout"))
        usage_error("unknown workload '%s' (rtt, pipelined, fanout)", o.workload);
    if (!o.type)
        o.type = strcmp(o.workload, "pipelined") ? "text" : "binary";
    if (strcmp(o.type, "text") && strcmp(o.type, "binary"))
        usage_error("unknown type '%s' (text, binary)", o.type);
    if (o.size < 0)
        usage_error("bad size '%s'", "<0");
    if (o.window <= 0) {
        long long w = 4LL * 1048576 / (o.size > 1 ? o.size : 1);
        o.window = w > 1024 ? 1024 : w < 16 ? 16 : w;
    }
    if (o.warmup < 0)
        o.warmup = o.n / 10 < 1000 ? o.n / 10 : 1000;
}

/* ------------------------------------------------------------ JSON line */

static char line[16384];
static size_t line_len;

static void jraw(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int r = vsnprintf(line + line_len, sizeof line - line_len, fmt, ap);
    va_end(ap);
    if (r > 0)
        line_len += (size_t)r < sizeof line - line_len ? (size_t)r : sizeof line - line_len - 1;
}

static void jkey(const char *key) { jraw("%s\"%s\": ", line_len > 1 ? ", " : "", key); }
static void jint(const char *key, long long v) { jkey(key); jraw("%lld", v); }
static void jbool(const char *key, int v) { jkey(key); jraw(v ? "true" : "false"); }

/* A double, shortest form that reads back the same; NaN stands for None (null). */
static void jnum(const char *key, double v) {
    jkey(key);
    if (isnan(v)) { jraw("null"); return; }
    if (isinf(v)) { jraw(v > 0 ? "Infinity" : "-Infinity"); return; }  /* as Python's json.dumps */
    char b[40];
    snprintf(b, sizeof b, "%.15g", v);
    if (strtod(b, NULL) != v)
        snprintf(b, sizeof b, "%.17g", v);
    jraw(strpbrk(b, ".e") ? "%s" : "%s.0", b);  /* a float stays a float, as in Python */
}

static void jstr(const char *key, const char *s) {
    jkey(key);
    jraw("\"");
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') jraw("\\%c", c);
        else if (c < 0x20) jraw("\\u%04x", c);
        else jraw("%c", c);
    }
    jraw("\"");
}

static long long vmhwm_kb(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char buf[256];
    long long kb = -1;
    if (!f)
        return -1;
    while (fgets(buf, sizeof buf, f))
        if (sscanf(buf, "VmHWM: %lld", &kb) == 1)
            break;
    fclose(f);
    return kb;
}

static void begin_report(void) {
    line_len = 0;
    jraw("{");
    jstr("peer", o.label);
    jstr("workload", o.workload);
    jint("n", o.n);
    jint("size", o.size);
    jstr("type", o.type);
}

static void end_report(void) {
    long long kb = vmhwm_kb();
    jkey("vmhwm_kb");
    if (kb < 0) jraw("null"); else jraw("%lld", kb);
    jraw("}\n");
    fwrite(line, 1, line_len, stdout);
    fflush(stdout);
}

static void fail(const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    begin_report();
    jbool("ok", 0);
    jstr("error", msg);
    end_report();
    exit(1);
}

/* ------------------------------------------------------------ small tools */

static inline int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* sorted[min(n-1, floor(p/100*n))], NaN (None) when empty */
static double pct(const double *sorted, size_t n, double p) {
    if (!n)
        return NAN;
    size_t i = (size_t)(p / 100 * (double)n);
    return sorted[i < n - 1 ? i : n - 1];
}

static uint32_t rng = 0x9e3779b9u;
static inline uint32_t xorshift32(void) {
    uint32_t x = rng;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return rng = x;
}

/* ------------------------------------------------------------ URL, sockets, handshake */

static struct sockaddr_storage peer_addr;
static socklen_t peer_addr_len;
static char request[1024];
static size_t request_len;
static const char ACCEPT[] = "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="; /* RFC 6455's sample key's accept value */

static void resolve(void) {
    char host[256], port[16] = "80";
    const char *p = o.url, *path;
    if (strncmp(p, "ws://", 5) != 0)
        fail("only ws:// URLs: %s", o.url);
    p += 5;
    path = strchr(p, '/');
    if (!path)
        path = p + strlen(p);
    size_t hlen = (size_t)(path - p);
    if (hlen == 0 || hlen >= sizeof host)
        fail("bad URL %s", o.url);
    memcpy(host, p, hlen);
    host[hlen] = 0;
    char *colon = strrchr(host, ':');
    if (colon && !strchr(colon, ']')) {
        snprintf(port, sizeof port, "%s", colon + 1);
        *colon = 0;
    }
    char bare[256];
    snprintf(bare, sizeof bare, "%s", host);
    if (bare[0] == '[') {  /* [::1] */
        memmove(bare, bare + 1, strlen(bare));
        bare[strcspn(bare, "]")] = 0;
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res;
    int rc = getaddrinfo(bare, port, &hints, &res);
    if (rc)
        fail("resolve %s: %s", bare, gai_strerror(rc));
    memcpy(&peer_addr, res->ai_addr, res->ai_addrlen);
    peer_addr_len = res->ai_addrlen;
    freeaddrinfo(res);
    int n = snprintf(request, sizeof request,
                     "GET %s HTTP/1.1\r\nHost: %.*s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                     "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
                     *path ? path : "/", (int)hlen, p);
    request_len = (size_t)n;
}

/* moonwire's socket setting for a peer on this host (floor_common.h); 0 for another host. */
static int loopback_send_buffer(void) {
    int loopback = 0;
    if (peer_addr.ss_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)&peer_addr;
        loopback = (ntohl(a->sin_addr.s_addr) >> 24) == 127;
    } else if (peer_addr.ss_family == AF_INET6) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)&peer_addr)->sin6_addr;
        loopback = IN6_IS_ADDR_LOOPBACK(a) || (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
    }
    return loopback ? loopback_sndbuf_size() : 0;
}

static int new_socket(int nonblocking) {
    int fd = socket(peer_addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC | (nonblocking ? SOCK_NONBLOCK : 0), 0);
    if (fd < 0)
        return -1;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    static int sndbuf = -1;
    if (sndbuf < 0)
        sndbuf = loopback_send_buffer();
    if (sndbuf > 0)
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
    return fd;
}

/* The response header in buf[0..len): NULL if fine, else why not. *hdr_end: bytes of the header. */
static const char *check_response(const char *buf, size_t len, size_t *hdr_end) {
    const char *end = memmem(buf, len, "\r\n\r\n", 4);
    if (!end)
        return "";  /* not complete yet */
    *hdr_end = (size_t)(end - buf) + 4;
    if (len < 12 || memcmp(buf, "HTTP/1.1 101", 12) != 0)
        return "handshake: status is not 101";
    if (!memmem(buf, *hdr_end, ACCEPT, sizeof ACCEPT - 1))
        return "handshake: wrong Sec-WebSocket-Accept";
    return NULL;
}

/* ------------------------------------------------------------ frames */

/* A FIN frame with a fresh mask key; returns its length (at most len + 14). */
static size_t put_frame(uint8_t *dst, int opcode, const uint8_t *payload, size_t len) {
    size_t h;
    dst[0] = (uint8_t)(0x80 | opcode);
    if (len < 126) {
        dst[1] = (uint8_t)(0x80 | len);
        h = 2;
    } else if (len < 65536) {
        dst[1] = 0x80 | 126;
        dst[2] = (uint8_t)(len >> 8);
        dst[3] = (uint8_t)len;
        h = 4;
    } else {
        dst[1] = 0x80 | 127;
        for (int i = 0; i < 8; i++)
            dst[2 + i] = (uint8_t)((uint64_t)len >> (56 - 8 * i));
        h = 10;
    }
    uint32_t key = xorshift32();
    memcpy(dst + h, &key, 4);
    uint8_t *out = dst + h + 4;
    uint64_t k64 = (uint64_t)key << 32 | key, w;
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        memcpy(&w, payload + i, 8);
        w ^= k64;
        memcpy(out + i, &w, 8);
    }
    const uint8_t *kb = dst + h;
    for (; i < len; i++)
        out[i] = payload[i] ^ kb[i & 3];
    return h + 4 + len;
}

/* Incremental parser of unmasked server frames; keeps the first 16 payload bytes. */
typedef struct {
    uint8_t hdr[14], hlen, need, in_payload, opcode, npre;
    uint8_t pre[16];
    uint64_t len, remain;
} parser;

/* Called per complete frame; nonzero stops the feed (returned). */
typedef int (*frame_fn)(void *ctx, int opcode, uint64_t len, const uint8_t *pre);

static int header_size(const uint8_t *h) {
    int l7 = h[1] & 0x7f;
    return 2 + (l7 == 126 ? 2 : l7 == 127 ? 8 : 0) + (h[1] & 0x80 ? 4 : 0);
}

static const char *parse_error;

static int take_header(parser *p, const uint8_t *h) {
    int l7 = h[1] & 0x7f;
    if (h[1] & 0x80) { parse_error = "server sent a masked frame"; return -1; }
    p->opcode = h[0] & 0x0f;
    if (p->opcode == 8) { parse_error = "server sent close"; return -1; }
    if (l7 == 126)
        p->len = (uint64_t)h[2] << 8 | h[3];
    else if (l7 == 127) {
        p->len = 0;
        for (int i = 0; i < 8; i++)
            p->len = p->len << 8 | h[2 + i];
    } else
        p->len = (uint64_t)l7;
    p->remain = p->len;
    p->npre = 0;
    p->in_payload = 1;
    return 0;
}

static int feed(parser *p, const uint8_t *d, size_t n, frame_fn fn, void *ctx) {
    size_t i = 0;
    while (i < n || (p->in_payload && p->remain == 0)) {
        if (!p->in_payload) {
            if (p->hlen == 0 && n - i >= 2 && n - i >= (size_t)header_size(d + i)) {
                int hs = header_size(d + i);
                if (take_header(p, d + i)) return -1;
                i += (size_t)hs;
            } else {
                p->hdr[p->hlen++] = d[i++];
                if (p->hlen == 2)
                    p->need = (uint8_t)header_size(p->hdr);
                if (p->hlen < 2 || p->hlen < p->need)
                    continue;
                p->hlen = 0;
                if (take_header(p, p->hdr)) return -1;
            }
        }
        size_t take = n - i < p->remain ? n - i : (size_t)p->remain;
        if (p->npre < 16 && take) {
            size_t room = 16u - p->npre, c = room < take ? room : take;
            memcpy(p->pre + p->npre, d + i, c);
            p->npre = (uint8_t)(p->npre + c);
        }
        i += take;
        p->remain -= take;
        if (p->remain == 0) {
            p->in_payload = 0;
            int r = fn(ctx, p->opcode, p->len, p->pre);
            if (r) return r;
        }
    }
    return 0;
}

/* ------------------------------------------------------------ rtt and pipelined: one blocking connection */

#define RBUF (256 * 1024)
static uint8_t rbuf[RBUF];
static uint8_t *payload;
static int kind;

/* Writes all of b with send(), or with write() as SwiftNIO does (FLOOR_IO=rw); a
 * non-blocking socket that is full is waited for in poll(). */
static int send_all(int fd, const uint8_t *b, size_t len, int use_write) {
    while (len) {
        ssize_t r = use_write ? write(fd, b, len) : send(fd, b, len, MSG_NOSIGNAL);
        if (r < 0) {
            if (errno == EINTR) continue;
            if (errno != EAGAIN) return -1;
            struct pollfd w = {.fd = fd, .events = POLLOUT};
            if (poll(&w, 1, -1) < 0 && errno != EINTR) return -1;
            continue;
        }
        b += r;
        len -= (size_t)r;
    }
    return 0;
}

/* Connects, upgrades; leftover bytes after the response header go to the parser. */
static int open_blocking(parser *p, frame_fn fn, void *ctx) {
    int fd = new_socket(0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&peer_addr, peer_addr_len) < 0)
        fail("connect failed: %s", strerror(errno));
    if (send_all(fd, (const uint8_t *)request, request_len, 0))
        fail("handshake write: %s", strerror(errno));
    char buf[8192];
    size_t len = 0, hdr;
    const char *why;
    for (;;) {
        ssize_t r = recv(fd, buf + len, sizeof buf - len, 0);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0)
            fail("handshake: %s", r ? strerror(errno) : "connection closed");
        len += (size_t)r;
        why = check_response(buf, len, &hdr);
        if (!why) break;
        if (*why) fail("%s", why);
        if (len == sizeof buf) fail("handshake: response header too long");
    }
    if (len > hdr && feed(p, (uint8_t *)buf + hdr, len - hdr, fn, ctx) < 0)
        fail("%s", parse_error);
    return fd;
}

static void bad_length(uint64_t len) { fail("bad echo length %llu", (unsigned long long)len); }

typedef struct { long long echoes; } rtt_state;

static int rtt_frame(void *ctx, int opcode, uint64_t len, const uint8_t *pre) {
    (void)pre;
    if (opcode != kind) return 0;
    if (len != (uint64_t)o.size) bad_length(len);
    ((rtt_state *)ctx)->echoes++;
    return 0;
}

static void rtt(void) {
    rtt_state st = {0};
    parser p = {0};
    const char *wait = getenv("FLOOR_WAIT");
    if (wait && strcmp(wait, "epoll") != 0 && strcmp(wait, "recv") != 0)
        fail("FLOOR_WAIT: recv or epoll, not '%s'", wait);
    const char *io = getenv("FLOOR_IO");
    if (io && strcmp(io, "rw") != 0 && strcmp(io, "sendrecv") != 0)
        fail("FLOOR_IO: sendrecv or rw, not '%s'", io);
    int use_epoll = wait && strcmp(wait, "epoll") == 0, use_rw = io && strcmp(io, "rw") == 0;
    if (use_rw && !use_epoll) fail("FLOOR_IO=rw needs FLOOR_WAIT=epoll (its socket does not block)");
    int fd = open_blocking(&p, rtt_frame, &st);
    if (use_rw && fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) < 0) fail("fcntl: %s", strerror(errno));
    int ep = -1;
    if (use_epoll) {
        struct epoll_event ev = {.events = EPOLLIN, .data.u64 = 0};
        ep = epoll_create1(EPOLL_CLOEXEC);
        if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0) fail("epoll: %s", strerror(errno));
    }
    long long total = o.warmup + o.n;
    double *lat = malloc(sizeof(double) * (size_t)o.n);
    uint8_t *frame = malloc((size_t)o.size + 14);
    if (!lat || !frame) fail("out of memory");
    int64_t timed_from = now_ns();
    for (long long i = 0; i < total; i++) {
        int64_t sent = now_ns();
        size_t flen = put_frame(frame, kind, payload, (size_t)o.size);
        if (send_all(fd, frame, flen, use_rw)) fail("%s: %s", use_rw ? "write" : "send", strerror(errno));
        while (st.echoes <= i) {
            if (ep >= 0) {
                struct epoll_event ready;
                if (epoll_wait(ep, &ready, 1, -1) < 0 && errno != EINTR) fail("epoll_wait: %s", strerror(errno));
            }
            ssize_t r = use_rw ? read(fd, rbuf, RBUF) : recv(fd, rbuf, RBUF, ep >= 0 ? MSG_DONTWAIT : 0);
            if (r < 0 && (errno == EINTR || (ep >= 0 && errno == EAGAIN))) continue;
            if (r <= 0) fail("disconnected early%s%s", r ? ": " : "", r ? strerror(errno) : "");
            if (feed(&p, rbuf, (size_t)r, rtt_frame, &st) < 0) fail("%s", parse_error);
        }
        int64_t now = now_ns();
        if (i >= o.warmup) lat[i - o.warmup] = (double)(now - sent) / 1000;
        if (i + 1 == o.warmup) timed_from = now_ns();
    }
    double elapsed = (double)(now_ns() - timed_from) / 1e9;
    close(fd);
    if (ep >= 0) close(ep);
    qsort(lat, (size_t)o.n, sizeof *lat, cmp_double);
    double sum = 0;
    for (long long i = 0; i < o.n; i++) sum += lat[i];
    begin_report();
    jbool("ok", 1);
    jnum("elapsed_s", elapsed);
    jnum("msgs_per_s", (double)o.n / elapsed);
    jnum("p50_us", pct(lat, (size_t)o.n, 50));
    jnum("p99_us", pct(lat, (size_t)o.n, 99));
    jnum("max_us", lat[o.n - 1]);
    jnum("mean_us", sum / (double)o.n);
    end_report();
}

static struct {
    long long sent, received, refill;
    uint8_t *buf;
    size_t cap, off, len;  /* pending bytes: buf[off..len) */
} pipe_st;

static void pipe_fill(void) {
    size_t fmax = (size_t)o.size + 14;
    while (pipe_st.sent < o.n && pipe_st.sent - pipe_st.received < o.window) {
        if (pipe_st.len + fmax > pipe_st.cap) {
            memmove(pipe_st.buf, pipe_st.buf + pipe_st.off, pipe_st.len - pipe_st.off);
            pipe_st.len -= pipe_st.off;
            pipe_st.off = 0;
        }
        pipe_st.len += put_frame(pipe_st.buf + pipe_st.len, kind, payload, (size_t)o.size);
        pipe_st.sent++;
    }
}

static int pipe_frame(void *ctx, int opcode, uint64_t len, const uint8_t *pre) {
    (void)ctx, (void)pre;
    if (opcode != kind) return 0;
    if (len != (uint64_t)o.size) bad_length(len);
    if (++pipe_st.received == o.n) return 1;
    if (o.window - (pipe_st.sent - pipe_st.received) >= pipe_st.refill) pipe_fill();
    return 0;
}

static void pipelined(void) {
    parser p = {0};
    pipe_st.refill = o.window >> 2 > 1 ? o.window >> 2 : 1;
    pipe_st.cap = (size_t)o.window * ((size_t)o.size + 14);
    pipe_st.buf = malloc(pipe_st.cap);
    if (!pipe_st.buf) fail("out of memory");
    const char *sched = getenv("FLOOR_SCHED");
    if (!sched || strcmp(sched, "normal") != 0) {  /* see the header: woken, do not preempt the server */
        struct sched_param sp = {0};
        if (sched_setscheduler(0, SCHED_BATCH, &sp))
            fprintf(stderr, "wsfloor: SCHED_BATCH: %s\n", strerror(errno));
    }
    int fd = open_blocking(&p, pipe_frame, NULL);
    int64_t start = now_ns();
    if (pipe_st.received < o.n) pipe_fill();
    while (pipe_st.received < o.n) {
        if (pipe_st.off < pipe_st.len) {
            ssize_t w = send(fd, pipe_st.buf + pipe_st.off, pipe_st.len - pipe_st.off, MSG_DONTWAIT | MSG_NOSIGNAL);
            if (w > 0) pipe_st.off += (size_t)w;
            else if (errno != EAGAIN && errno != EINTR) fail("send: %s", strerror(errno));
            if (pipe_st.off == pipe_st.len) pipe_st.off = pipe_st.len = 0;
        }
        int flags = 0;
        if (pipe_st.off < pipe_st.len) {  /* still output: wait for either direction */
            struct pollfd pfd = {fd, POLLIN | POLLOUT, 0};
            if (poll(&pfd, 1, -1) < 0 && errno != EINTR) fail("poll: %s", strerror(errno));
            if (!(pfd.revents & (POLLIN | POLLHUP | POLLERR))) continue;
            flags = MSG_DONTWAIT;
        }
        ssize_t r = recv(fd, rbuf, RBUF, flags);  /* nothing to send: block in recv */
        if (r < 0 && (errno == EAGAIN || errno == EINTR)) continue;
        if (r <= 0) fail("disconnected early%s%s", r ? ": " : "", r ? strerror(errno) : "");
        int f = feed(&p, rbuf, (size_t)r, pipe_frame, NULL);
        if (f < 0) fail("%s", parse_error);
    }
    double elapsed = (double)(now_ns() - start) / 1e9;
    close(fd);
    begin_report();
    jbool("ok", 1);
    jnum("elapsed_s", elapsed);
    jint("window", o.window);
    jnum("msgs_per_s", (double)o.n / elapsed);
    jnum("mib_per_s", (double)o.n * (double)o.size / elapsed / 1048576);
    end_report();
}

/* ------------------------------------------------------------ fanout: epoll, nonblocking */

enum { IDLE, CONNECTING, HANDSHAKE, OPEN, DEAD, FAILED };

typedef struct {
    int fd;
    uint8_t state, tries;
    uint16_t hslen;
    char *hs;                 /* handshake response so far */
    uint8_t *out;             /* unsent rest of a frame */
    uint32_t outoff, outlen;
    int64_t started;          /* this dial attempt */
    parser p;
} conn;

static conn *cs;
static int ep;
static long long next_dial, inflight, live, failures;

static struct {
    long long current, got, late;
    int64_t started;
    double *arrived;          /* ms after the tick began, NaN: not yet */
    int64_t now;              /* time of the recv being parsed */
} tk = {-1, 0, 0, 0, NULL, 0};

typedef struct { long long recv, within; double p50, p99, lmax, sp99, spmax, send_ms; } tick;

static void dial(long long i);

static void attempt_failed(long long i, const char *why) {
    conn *c = &cs[i];
    if (c->fd >= 0) close(c->fd);
    c->fd = -1;
    free(c->hs);
    c->hs = NULL;
    if (++c->tries < 3) {
        dial(i);
        return;
    }
    c->state = FAILED;
    failures++;
    inflight--;
    fprintf(stderr, "connect failed: %s\n", why);
}

static void dial(long long i) {
    conn *c = &cs[i];
    c->started = now_ns();
    c->hslen = 0;
    c->fd = new_socket(1);
    if (c->fd < 0) { attempt_failed(i, strerror(errno)); return; }
    if (connect(c->fd, (struct sockaddr *)&peer_addr, peer_addr_len) < 0 && errno != EINPROGRESS) {
        attempt_failed(i, strerror(errno));
        return;
    }
    struct epoll_event ev = {.events = EPOLLOUT, .data.u64 = (uint64_t)i};
    if (epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev) < 0) { attempt_failed(i, strerror(errno)); return; }
    c->state = CONNECTING;
}

static int fan_frame(void *ctx, int opcode, uint64_t len, const uint8_t *pre) {
    long long idx = (long long)(intptr_t)ctx, id = 0;
    if (opcode != 1) return 0;
    if (len < 15) { tk.late++; return 0; }
    for (int k = 0; k < 15; k++) {
        if (pre[k] < '0' || pre[k] > '9') { tk.late++; return 0; }
        id = id * 10 + (pre[k] - '0');
    }
    if (id == tk.current && isnan(tk.arrived[idx])) {
        tk.arrived[idx] = (double)(tk.now - tk.started) / 1e6;
        tk.got++;
    } else
        tk.late++;
    return 0;
}

static void drop(long long i, const char *why) {
    conn *c = &cs[i];
    fprintf(stderr, "connection %lld: %s\n", i, why);
    close(c->fd);
    c->fd = -1;
    c->state = DEAD;
    free(c->out);
    c->out = NULL;
}

static void flush_out(long long i) {
    conn *c = &cs[i];
    ssize_t w = send(c->fd, c->out + c->outoff, c->outlen - c->outoff, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (w < 0 && errno != EAGAIN && errno != EINTR) { drop(i, strerror(errno)); return; }
    if (w > 0) c->outoff += (uint32_t)w;
    if (c->outoff == c->outlen) {
        free(c->out);
        c->out = NULL;
        struct epoll_event ev = {.events = EPOLLIN, .data.u64 = (uint64_t)i};
        epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
    }
}

static void on_event(long long i, uint32_t events) {
    conn *c = &cs[i];
    if (c->state == CONNECTING) {
        int err = 0;
        socklen_t el = sizeof err;
        getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &el);
        if (err) { attempt_failed(i, strerror(err)); return; }
        if (send(c->fd, request, request_len, MSG_NOSIGNAL) != (ssize_t)request_len) {
            attempt_failed(i, "handshake write");
            return;
        }
        struct epoll_event ev = {.events = EPOLLIN, .data.u64 = (uint64_t)i};
        epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
        c->hs = malloc(4096);
        if (!c->hs) fail("out of memory");
        c->state = HANDSHAKE;
        return;
    }
    if (c->state == HANDSHAKE) {
        ssize_t r = recv(c->fd, c->hs + c->hslen, 4096 - c->hslen, 0);
        if (r < 0 && (errno == EAGAIN || errno == EINTR)) return;
        if (r <= 0) { attempt_failed(i, r ? strerror(errno) : "closed during handshake"); return; }
        c->hslen = (uint16_t)(c->hslen + r);
        size_t hdr;
        const char *why = check_response(c->hs, c->hslen, &hdr);
        if (why && (*why || c->hslen == 4096)) { attempt_failed(i, *why ? why : "response header too long"); return; }
        if (why) return;
        c->state = OPEN;
        inflight--;
        live++;
        tk.now = now_ns();
        if (c->hslen > hdr && feed(&c->p, (uint8_t *)c->hs + hdr, c->hslen - hdr, fan_frame, (void *)(intptr_t)i) < 0)
            fail("%s", parse_error);
        free(c->hs);
        c->hs = NULL;
        return;
    }
    if (c->state != OPEN) return;
    if (events & EPOLLOUT && c->out) flush_out(i);
    if (c->state == OPEN && events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
        ssize_t r = recv(c->fd, rbuf, RBUF, 0);
        if (r < 0 && (errno == EAGAIN || errno == EINTR)) return;
        if (r <= 0) { drop(i, r ? strerror(errno) : "closed by the server"); return; }
        tk.now = now_ns();
        if (feed(&c->p, rbuf, (size_t)r, fan_frame, (void *)(intptr_t)i) < 0) drop(i, parse_error);
    }
}

static struct epoll_event evs[1024];

/* Handles events until `deadline` (or until every echo of the tick is in, if `all`). */
static void pump(int64_t deadline, int all) {
    for (;;) {
        if (all && tk.got >= live) return;
        int64_t left = deadline - now_ns();
        if (left <= 0) return;
        int n = epoll_wait(ep, evs, 1024, (int)((left + 999999) / 1000000));
        if (n < 0 && errno != EINTR) fail("epoll_wait: %s", strerror(errno));
        for (int k = 0; k < n; k++) on_event((long long)evs[k].data.u64, evs[k].events);
    }
}

static void open_all(void) {
    int64_t scanned = now_ns();
    while (next_dial < o.conns || inflight > 0) {
        while (inflight < o.concurrency && next_dial < o.conns) {
            inflight++;
            dial(next_dial++);
        }
        int n = epoll_wait(ep, evs, 1024, 1000);
        if (n < 0 && errno != EINTR) fail("epoll_wait: %s", strerror(errno));
        for (int k = 0; k < n; k++) on_event((long long)evs[k].data.u64, evs[k].events);
        int64_t now = now_ns();
        if (now - scanned > 1000000000LL) {  /* once a second: give up on attempts older than 120 s */
            scanned = now;
            for (long long i = 0; i < next_dial; i++)
                if ((cs[i].state == CONNECTING || cs[i].state == HANDSHAKE) && now - cs[i].started > 120000000000LL)
                    attempt_failed(i, "handshake timed out");
        }
    }
}

static double worst(const tick *t, long long n, size_t off) {
    if (!n) return NAN;
    double m = -INFINITY;
    for (long long k = 0; k < n; k++) {
        double v = *(const double *)((const char *)&t[k] + off);
        if (isnan(v)) v = INFINITY;
        if (v > m) m = v;
    }
    return m;
}

static void fanout(void) {
    struct rlimit rl;
    if (!getrlimit(RLIMIT_NOFILE, &rl)) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    size_t C = o.conns > 0 ? (size_t)o.conns : 0;
    cs = calloc(C ? C : 1, sizeof *cs);
    tk.arrived = malloc(sizeof(double) * (C ? C : 1));
    double *lat = malloc(sizeof(double) * (C ? C : 1));
    tick *ticks = calloc(o.duration > 0 ? (size_t)o.duration : 1, sizeof *ticks);
    size_t msglen = o.size > 16 ? (size_t)o.size : 16;
    uint8_t *msg = malloc(msglen), *frame = malloc(msglen + 14);
    if (!cs || !tk.arrived || !lat || !ticks || !msg || !frame) fail("out of memory");
    for (size_t i = 0; i < C; i++) cs[i].fd = -1;
    ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0) fail("epoll_create1: %s", strerror(errno));

    int64_t t0 = now_ns();
    open_all();
    double connect_s = (double)(now_ns() - t0) / 1e9;

    memset(msg, 'x', msglen);
    int64_t base = now_ns();
    long long nt = 0;
    for (long long t = 0; t < o.duration; t++) {
        int64_t due = base + t * 1000000000LL;
        pump(due, 0);
        tk.current = t;
        tk.got = 0;
        for (size_t i = 0; i < C; i++) tk.arrived[i] = NAN;
        tk.started = now_ns();
        char id[17];
        snprintf(id, sizeof id, "%015lld:", t);
        memcpy(msg, id, 16);
        for (size_t i = 0; i < C; i++) {
            conn *c = &cs[i];
            if (c->state != OPEN || c->out) continue;
            size_t flen = put_frame(frame, 1, msg, msglen);
            ssize_t w = send(c->fd, frame, flen, MSG_DONTWAIT | MSG_NOSIGNAL);
            if (w < 0 && errno != EAGAIN && errno != EINTR) { drop((long long)i, strerror(errno)); continue; }
            if (w < (ssize_t)flen) {  /* the rest goes out on EPOLLOUT */
                size_t done = w > 0 ? (size_t)w : 0;
                c->out = malloc(flen - done);
                if (!c->out) fail("out of memory");
                memcpy(c->out, frame + done, flen - done);
                c->outoff = 0;
                c->outlen = (uint32_t)(flen - done);
                struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT, .data.u64 = (uint64_t)i};
                epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
            }
        }
        double send_ms = (double)(now_ns() - tk.started) / 1e6;
        pump(due + 1000000000LL, 1);
        /* the tick's figures, as peercli.Ticks.end */
        size_t m = 0;
        for (size_t i = 0; i < C; i++)
            if (!isnan(tk.arrived[i])) lat[m++] = tk.arrived[i];
        qsort(lat, m, sizeof *lat, cmp_double);
        tick *k = &ticks[nt++];
        k->recv = (long long)m;
        k->p50 = pct(lat, m, 50);
        k->p99 = pct(lat, m, 99);
        k->lmax = m ? lat[m - 1] : NAN;
        double first = m ? lat[0] : 0;
        k->within = 0;
        for (size_t i = 0; i < m; i++) {
            lat[i] -= first;  /* now the spread, still sorted */
            if (lat[i] <= 200) k->within++;
        }
        k->sp99 = pct(lat, m, 99);
        k->spmax = m ? lat[m - 1] : NAN;
        k->send_ms = send_ms;
        tk.current = -2 - tk.current;
    }

    long long expected = nt * live, received = 0, within = 0, np50 = 0;
    int pass = live > 0;
    double *p50s = malloc(sizeof(double) * (size_t)(nt ? nt : 1));
    if (!p50s) fail("out of memory");
    for (long long k = 0; k < nt; k++) {
        received += ticks[k].recv;
        within += ticks[k].within;
        if (!isnan(ticks[k].p50)) p50s[np50++] = ticks[k].p50;
        if ((double)ticks[k].within < 0.99 * (double)live) pass = 0;
    }
    qsort(p50s, (size_t)np50, sizeof *p50s, cmp_double);
    begin_report();
    jbool("ok", failures == 0 && received == expected);
    jint("conns", o.conns);
    jint("connected", live);
    jint("connect_failures", failures);
    jint("duration", o.duration);
    jnum("connect_s", connect_s);
    jint("ticks", nt);
    jint("expected", expected);
    jint("received", received);
    jint("late", tk.late);
    jnum("lat_p50_ms_med", pct(p50s, (size_t)np50, 50));
    jnum("lat_p99_ms_max", worst(ticks, nt, offsetof(tick, p99)));
    jnum("lat_max_ms", worst(ticks, nt, offsetof(tick, lmax)));
    jnum("spread_p99_ms_max", worst(ticks, nt, offsetof(tick, sp99)));
    jnum("spread_max_ms", worst(ticks, nt, offsetof(tick, spmax)));
    jnum("send_ms_max", worst(ticks, nt, offsetof(tick, send_ms)));
    if (expected) jnum("within200_frac", (double)within / (double)expected);
    else jint("within200_frac", 0);
    jbool("pass_spread200_p99", pass);
    end_report();
    _exit(0);  /* closing thousands of sockets one by one would only add to wall time */
}

/* ------------------------------------------------------------ main */

int main(int argc, char **argv) {
    parse_options(argc, argv);
    signal(SIGPIPE, SIG_IGN);
    rng ^= (uint32_t)now_ns() ^ (uint32_t)getpid() << 16;
    if (!rng) rng = 1;
    resolve();
    kind = strcmp(o.type, "text") ? 2 : 1;
    if (strcmp(o.workload, "fanout") == 0) {
        fanout();
        return 0;
    }
    if (o.n <= 0) fail("--n must be positive");
    payload = malloc((size_t)o.size + 1);
    if (!payload) fail("out of memory");
    memset(payload, 'a', (size_t)o.size);
    if (strcmp(o.workload, "rtt") == 0) rtt();
    else pipelined();
    return 0;
}
