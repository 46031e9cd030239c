/* The echo bot benchmark's load generator (bench/echo_bot/run.sh): a one-connection
   WebSocket server in C (libc only) that the bot under test dials. It sends one
   pre-encoded message over and over, with a sequence number patched in, keeps WINDOW
   messages in flight (--window 1: strict ping-pong), and checks every reply byte for
   byte against the expected reply (the same message with the bot's one change) carrying
   the same sequence number, in order (with --expect TEXT, for a bot that orders a JSON
   object's keys its own way: the same length, the sequence number and TEXT). It does no
   decoding and allocates nothing per message, so the bot is what limits the rate.

   Prints `READY <port>` once listening, serves one connection, then one JSON line:
   msgs/s and per-message latency (send of a message to the receipt of its reply) over
   the timed messages (after --warmup untimed ones), and the CPU (user + system) of the
   bot's process (--client-pid-file: read from /proc/PID/stat at the start and end of the
   timed part, every thread included) and of this process (getrusage), per message.

   cc -O2 -Wall -Wextra -o loadgen bench/echo_bot/loadgen.c -lm */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static int port;
static long long n = 100000, window = 256, warmup = -1;
static const char *msg_path, *reply_path, *pid_path, *label = "bot", *expect;
static long seq_at = -1;
static int seq_decimal;      /* 0: a 5-byte varint, 1: 10 ASCII digits */
static int opcode = 2;       /* 1 text, 2 binary */
static const uint64_t SEQ_BASE = 1000000000ULL;
enum { SEQ_WIDTH_VARINT = 5, SEQ_WIDTH_DECIMAL = 10 };

static void fail(const char *fmt, ...) {
    char why[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    printf("{\"ok\": false, \"label\": \"%s\", \"error\": \"%s\"}\n", label, why);
    fflush(stdout);
    exit(1);
}

static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f)
        fail("cannot open %s", path);
    char *b = malloc(1 << 20);
    *len = fread(b, 1, 1 << 20, f);
    fclose(f);
    return b;
}

static inline int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---- SHA-1 and base64, for Sec-WebSocket-Accept only ---- */
static uint32_t rol(uint32_t x, int k) { return (x << k) | (x >> (32 - k)); }

static void sha1(const uint8_t *data, size_t len, uint8_t out[20]) {
    uint32_t h[5] = {0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476, 0xC3D2E1F0};
    size_t total = ((len + 8) / 64 + 1) * 64;
    uint8_t *m = calloc(total, 1);
    memcpy(m, data, len);
    m[len] = 0x80;
    uint64_t bits = (uint64_t)len * 8;
    for (int i = 0; i < 8; i++)
        m[total - 1 - i] = (uint8_t)(bits >> (8 * i));
    for (size_t off = 0; off < total; off += 64) {
        uint32_t w[80];
        for (int i = 0; i < 16; i++)
            w[i] = (uint32_t)m[off + 4 * i] << 24 | (uint32_t)m[off + 4 * i + 1] << 16 |
                   (uint32_t)m[off + 4 * i + 2] << 8 | m[off + 4 * i + 3];
        for (int i = 16; i < 80; i++)
            w[i] = rol(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
        uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4];
        for (int i = 0; i < 80; i++) {
            uint32_t f, k;
            if (i < 20) f = (b & c) | (~b & d), k = 0x5A827999;
            else if (i < 40) f = b ^ c ^ d, k = 0x6ED9EBA1;
            else if (i < 60) f = (b & c) | (b & d) | (c & d), k = 0x8F1BBCDC;
            else f = b ^ c ^ d, k = 0xCA62C1D6;
            uint32_t t = rol(a, 5) + f + e + k + w[i];
            e = d, d = c, c = rol(b, 30), b = a, a = t;
        }
        h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e;
    }
    free(m);
    for (int i = 0; i < 5; i++)
        for (int j = 0; j < 4; j++)
            out[4 * i + j] = (uint8_t)(h[i] >> (24 - 8 * j));
}

static void base64(const uint8_t *in, size_t len, char *out) {
    static const char t[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t o = 0;
    for (size_t i = 0; i < len; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16 | (i + 1 < len ? in[i + 1] << 8 : 0) | (i + 2 < len ? in[i + 2] : 0);
        out[o++] = t[v >> 18 & 63];
        out[o++] = t[v >> 12 & 63];
        out[o++] = i + 1 < len ? t[v >> 6 & 63] : '=';
        out[o++] = i + 2 < len ? t[v & 63] : '=';
    }
    out[o] = 0;
}

/* ---- the connection ---- */
static int fd;
static uint8_t *msg, *reply;
static size_t msg_len, reply_len;
static int seq_width;

static void put_seq(uint8_t *p, uint64_t v) {
    if (seq_decimal) {
        for (int i = SEQ_WIDTH_DECIMAL - 1; i >= 0; i--, v /= 10)
            p[i] = (uint8_t)('0' + v % 10);
    } else {
        for (int i = 0; i < SEQ_WIDTH_VARINT; i++, v >>= 7)
            p[i] = (uint8_t)((v & 0x7f) | (i < SEQ_WIDTH_VARINT - 1 ? 0x80 : 0));
    }
}

static void send_all(const uint8_t *b, size_t len) {
    while (len) {
        ssize_t k = send(fd, b, len, MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            fail("send: %s", k < 0 ? strerror(errno) : "closed");
        b += k, len -= (size_t)k;
    }
}

static void handshake(void) {
    char req[8192];
    size_t got = 0;
    for (;;) {
        ssize_t k = recv(fd, req + got, sizeof req - 1 - got, 0);
        if (k <= 0)
            fail("handshake: connection closed");
        got += (size_t)k;
        req[got] = 0;
        if (strstr(req, "\r\n\r\n"))
            break;
        if (got == sizeof req - 1)
            fail("handshake: request too long");
    }
    char *key = strcasestr(req, "\r\nSec-WebSocket-Key:");
    if (!key)
        fail("handshake: no Sec-WebSocket-Key");
    key += 20;
    while (*key == ' ')
        key++;
    size_t klen = strcspn(key, " \r\n");
    char buf[128];
    if (klen > 64)
        fail("handshake: key too long");
    memcpy(buf, key, klen);
    memcpy(buf + klen, "258EAFA5-E914-47DA-95CA-C5AB0DC85B11", 36);
    uint8_t digest[20];
    sha1((uint8_t *)buf, klen + 36, digest);
    char accept[32], resp[256];
    base64(digest, 20, accept);
    int len = snprintf(resp, sizeof resp,
                       "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                       "Sec-WebSocket-Accept: %s\r\n\r\n", accept);
    send_all((uint8_t *)resp, (size_t)len);
}

static size_t frame_header(uint8_t *h, int op, size_t len) {
    h[0] = (uint8_t)(0x80 | op);
    if (len < 126) {
        h[1] = (uint8_t)len;
        return 2;
    }
    if (len < 65536) {
        h[1] = 126, h[2] = (uint8_t)(len >> 8), h[3] = (uint8_t)len;
        return 4;
    }
    h[1] = 127;
    for (int i = 0; i < 8; i++)
        h[2 + i] = (uint8_t)((uint64_t)len >> (56 - 8 * i));
    return 10;
}

static long clk_tck;

static double bot_cpu_s(pid_t pid) {
    char path[64], st[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t k = fread(st, 1, sizeof st - 1, f);
    fclose(f);
    st[k] = 0;
    char *p = strrchr(st, ')');
    unsigned long ut = 0, stt = 0;
    /* after ") ": state(3) ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime(14) stime(15) */
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &stt) != 2)
        return -1;
    return (double)(ut + stt) / (double)clk_tck;
}

static pid_t read_pid(void) {
    if (!pid_path)
        return 0;
    for (int tries = 0; tries < 1000; tries++) {
        FILE *f = fopen(pid_path, "r");
        if (f) {
            int pid = 0;
            int ok = fscanf(f, "%d", &pid) == 1;
            fclose(f);
            if (ok && pid > 0)
                return pid;
        }
        usleep(1000);
    }
    return 0;
}

static double self_cpu_s(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

static int cmp_ll(const void *a, const void *b) {
    long long x = *(const long long *)a, y = *(const long long *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v)
            fail("option %s needs a value", o);
        if (!strcmp(o, "--port")) port = atoi(v);
        else if (!strcmp(o, "--n")) n = atoll(v);
        else if (!strcmp(o, "--window")) window = atoll(v);
        else if (!strcmp(o, "--warmup")) warmup = atoll(v);
        else if (!strcmp(o, "--msg")) msg_path = v;
        else if (!strcmp(o, "--reply")) reply_path = v;
        else if (!strcmp(o, "--seq-at")) seq_at = atol(v);
        else if (!strcmp(o, "--seq-format")) seq_decimal = !strcmp(v, "decimal");
        else if (!strcmp(o, "--kind")) opcode = !strcmp(v, "text") ? 1 : 2;
        else if (!strcmp(o, "--client-pid-file")) pid_path = v;
        else if (!strcmp(o, "--label")) label = v;
        else if (!strcmp(o, "--expect")) expect = v;
        else fail("unknown option %s", o);
        i++;
    }
    if (!msg_path || !reply_path || seq_at < 0 || n < 1 || window < 1)
        fail("usage: loadgen --msg FILE --reply FILE --seq-at K [--seq-format varint|decimal] [--kind binary|text] "
             "[--n N] [--window W] [--warmup K] [--client-pid-file F] [--port P] [--label L]");
    if (warmup < 0)
        warmup = n / 10 < 2000 ? n / 10 : 2000;
    clk_tck = sysconf(_SC_CLK_TCK);
    seq_width = seq_decimal ? SEQ_WIDTH_DECIMAL : SEQ_WIDTH_VARINT;
    msg = (uint8_t *)slurp(msg_path, &msg_len);
    reply = (uint8_t *)slurp(reply_path, &reply_len);
    if (expect && seq_at < 6)
        fail("--expect needs 6 bytes before the sequence number");
    if ((size_t)seq_at + (size_t)seq_width + 1 > msg_len || (size_t)seq_at + (size_t)seq_width > reply_len)
        fail("--seq-at %ld is past the message", seq_at);

    int ls = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(ls, (struct sockaddr *)&a, sizeof a) || listen(ls, 4))
        fail("listen: %s", strerror(errno));
    socklen_t alen = sizeof a;
    getsockname(ls, (struct sockaddr *)&a, &alen);
    printf("READY %d\n", ntohs(a.sin_port));
    fflush(stdout);
    struct pollfd lp = {.fd = ls, .events = POLLIN};
    if (poll(&lp, 1, 60000) != 1)
        fail("no bot connected within 60 s");
    fd = accept(ls, NULL, NULL);
    close(ls);
    if (fd < 0)
        fail("accept: %s", strerror(errno));
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct timeval stall = {.tv_sec = 30}; /* a bot that stops answering ends the run */
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &stall, sizeof stall);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &stall, sizeof stall);
    handshake();

    long long total = warmup + n;
    int64_t *sent_at = malloc(sizeof(int64_t) * (size_t)total);
    long long *lat_ns = malloc(sizeof(long long) * (size_t)n);
    /* one refill: up to `window` frames built in one buffer, written with one send() */
    size_t frame_max = msg_len + 10;
    uint8_t *out = malloc(frame_max * (size_t)window);
    size_t hdr = frame_header(out, opcode, msg_len);
    size_t in_cap = 1 << 20, in_len = 0;
    uint8_t *in = malloc(in_cap);
    uint8_t expect_seq[SEQ_WIDTH_DECIMAL], seq_pat[SEQ_WIDTH_DECIMAL + 7];
    long long sent = 0, got = 0;
    int64_t t0 = now_ns();
    double cpu0 = 0, self0 = 0;
    pid_t bot = 0;
    if (warmup == 0) {
        bot = read_pid();
        cpu0 = bot ? bot_cpu_s(bot) : -1;
        self0 = self_cpu_s();
        t0 = now_ns();
    }
    while (got < total) {
        if (sent < total && sent - got < window) {
            size_t len = 0;
            int64_t t = now_ns();
            while (sent < total && sent - got < window) {
                memcpy(out + len, out, hdr); /* the header is the same for every frame */
                memcpy(out + len + hdr, msg, msg_len);
                put_seq(out + len + hdr + seq_at, SEQ_BASE + (uint64_t)sent);
                sent_at[sent++] = t;
                len += hdr + msg_len;
            }
            send_all(out, len);
        }
        ssize_t k = recv(fd, in + in_len, in_cap - in_len, 0);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            fail("no reply for 30 s after %lld replies", got);
        if (k <= 0)
            fail("the bot closed the connection after %lld replies", got);
        in_len += (size_t)k;
        int64_t t = now_ns();
        size_t off = 0;
        while (in_len - off >= 2) {
            uint8_t *h = in + off;
            int op = h[0] & 0x0f;
            uint64_t len = h[1] & 0x7f;
            size_t hl = 2;
            if (!(h[1] & 0x80))
                fail("unmasked frame from the bot");
            if (len == 126) {
                if (in_len - off < 4) break;
                len = (uint64_t)h[2] << 8 | h[3], hl = 4;
            } else if (len == 127) {
                if (in_len - off < 10) break;
                len = 0;
                for (int i = 0; i < 8; i++)
                    len = len << 8 | h[2 + i];
                hl = 10;
            }
            if (len > in_cap - 14)
                fail("frame of %llu bytes", (unsigned long long)len);
            if (in_len - off < hl + 4 + len)
                break;
            uint8_t *mask = h + hl, *p = h + hl + 4;
            for (uint64_t i = 0; i < len; i++)
                p[i] ^= mask[i & 3];
            off += hl + 4 + len;
            if (op == 9) { /* ping: pong */
                uint8_t pong[2 + 125];
                size_t pl = frame_header(pong, 10, len);
                memcpy(pong + pl, p, len);
                send_all(pong, pl + len);
                continue;
            }
            if (op == 10)
                continue;
            if (op == 8)
                fail("the bot sent a close frame after %lld replies", got);
            if (op != opcode || !(h[0] & 0x80))
                fail("reply %lld: opcode %d (fin %d), expected %d", got, op, h[0] >> 7, opcode);
            put_seq(expect_seq, SEQ_BASE + (uint64_t)got);
            if (expect) {
                /* --expect: a bot free to order keys (JSON from a Lua table): the reply
                   has the message's length, the sequence number with the 6 bytes before
                   it and the one after (`seq":"1000000123"`), and the changed field */
                memcpy(seq_pat, msg + seq_at - 6, 6);
                memcpy(seq_pat + 6, expect_seq, (size_t)seq_width);
                seq_pat[6 + seq_width] = msg[seq_at + seq_width];
                if (len != reply_len || !memmem(p, len, seq_pat, (size_t)seq_width + 7) ||
                    !memmem(p, len, expect, strlen(expect)))
                    fail("reply %lld: %llu bytes (expected %zu), sequence number or %s missing", got,
                         (unsigned long long)len, reply_len, expect);
            } else if (len != reply_len || memcmp(p, reply, (size_t)seq_at) ||
                memcmp(p + seq_at, expect_seq, (size_t)seq_width) ||
                memcmp(p + seq_at + seq_width, reply + seq_at + seq_width, reply_len - (size_t)seq_at - (size_t)seq_width)) {
                size_t d = 0;
                while (d < len && d < reply_len && p[d] == (d >= (size_t)seq_at && d < (size_t)(seq_at + seq_width)
                                                                ? expect_seq[d - (size_t)seq_at] : reply[d]))
                    d++;
                fail("reply %lld differs from the expected reply at byte %zu (%llu bytes, expected %zu)", got, d,
                     (unsigned long long)len, reply_len);
            }
            if (got >= warmup)
                lat_ns[got - warmup] = t - sent_at[got];
            got++;
            if (got == warmup) {
                bot = read_pid();
                cpu0 = bot ? bot_cpu_s(bot) : -1;
                self0 = self_cpu_s();
                t0 = now_ns();
            }
        }
        memmove(in, in + off, in_len - off);
        in_len -= off;
    }
    int64_t t1 = now_ns();
    double cpu1 = bot ? bot_cpu_s(bot) : -1, self1 = self_cpu_s();
    uint8_t close_frame[4] = {0x88, 2, 0x03, 0xe8};
    send_all(close_frame, sizeof close_frame);
    shutdown(fd, SHUT_WR);
    struct pollfd cp = {.fd = fd, .events = POLLIN};
    while (poll(&cp, 1, 2000) == 1 && recv(fd, in, in_cap, 0) > 0) {
    }
    close(fd);

    qsort(lat_ns, (size_t)n, sizeof *lat_ns, cmp_ll);
    double el = (double)(t1 - t0) / 1e9;
    double bot_cpu = cpu0 >= 0 && cpu1 >= 0 ? cpu1 - cpu0 : -1;
    printf("{\"ok\": true, \"label\": \"%s\", \"n\": %lld, \"warmup\": %lld, \"window\": %lld, \"bytes\": %zu, "
           "\"reply_bytes\": %zu, \"elapsed_s\": %.4f, \"msgs_per_s\": %.1f, \"p50_us\": %.1f, \"p99_us\": %.1f, "
           "\"max_us\": %.1f, \"bot_pid\": %d, \"bot_cpu_s\": %.3f, \"bot_cpu_us_per_msg\": %.3f, "
           "\"server_cpu_s\": %.3f, \"server_cpu_us_per_msg\": %.3f}\n",
           label, n, warmup, window, msg_len, reply_len, el, (double)n / el, lat_ns[n / 2] / 1e3,
           lat_ns[(size_t)((double)n * 0.99)] / 1e3, lat_ns[n - 1] / 1e3, (int)bot, bot_cpu,
           bot_cpu >= 0 ? bot_cpu * 1e6 / (double)n : -1, self1 - self0, (self1 - self0) * 1e6 / (double)n);
    return 0;
}
