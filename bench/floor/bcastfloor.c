/*
 * bcastfloor: the physical floor of the broadcast test (bench/spread.sh), in C.
 *
 * The same system calls as moonwire's server broadcasting to moonwire clients in
 * another process, and nothing else: one command forks a client process that opens
 * CLIENTS TCP connections to the server process on 127.0.0.1 (blocking connect()s,
 * one after the other, each socket made O_NONBLOCK once connected; the server accepts
 * them as they come). Then ROUNDS rounds INTERVAL seconds apart: the server formats
 * "ROUND STAMP" ("%d %.9f", STAMP = CLOCK_MONOTONIC seconds, as bench/spread_server.lua)
 * once, frames it as one unmasked WebSocket text frame (2-byte header) and write()s it
 * to every connection, one write() each, in accept order. The client runs one epoll
 * loop: epoll_wait with a 128-event array, one read() of up to 4 KiB per ready socket,
 * the frame(s) parsed in place, and per round the first and last receipt and the count,
 * plus a histogram of the latency from the stamp in 0.1 ms buckets.
 *
 * No WebSocket handshake (it is not part of the rounds). Sockets get moonwire's settings
 * for a loopback peer (Sources/MoonwireCore/TCP/ChannelTuning.swift, MessageServer.swift,
 * ClientDialer.swift): TCP_NODELAY on both sides, a 512 KiB SO_SNDBUF (1 MiB as the
 * kernel counts) on both sides when net.core.wmem_max allows it, the listen backlog 256.
 *
 * Variants, to find what moves the floor:
 *   --client-sched batch   the client process runs as SCHED_BATCH (its wake-ups do not preempt)
 *   --client-sched spin    the client never sleeps: epoll_wait with timeout 0 in a loop, so the
 *                          server's writes find no waiter to wake (it burns its CPU doing so)
 *   --write dontwait       send(fd, ..., MSG_DONTWAIT) instead of write()
 *   --server-threads N     the write loop split over N threads (connections in N slices,
 *                          each thread writing its slice at the same instants)
 *   --cpus S,C             the server process pinned to CPU S, the client process to CPU C
 *
 * Prints one JSON line with bench/spread.sh's fields (clients, rounds, processes,
 * complete_rounds, spread_p50_ms, spread_p99_ms, latency_p50_ms, latency_p99_ms), the
 * server's write-loop time per round (server_write_ms_p50/p99: first write of the round
 * to the end of its last), and each process's CPU per round (getrusage over the rounds
 * only: server from before round 1 to after the last write loop, client from its last
 * connect to the last frame it needed). Exit 1 with {"ok":false,"error":...} on failure,
 * 2 on a bad command line.
 *
 * Build:  cc -O2 -Wall -Wextra -pthread -o bcastfloor bcastfloor.c -lm  (C11, libc/POSIX/Linux epoll)
 * Usage:  bcastfloor [--interval S] [--client-sched normal|batch|spin] [--write write|dontwait]
 *                    [--server-threads N] [--cpus SERVER,CLIENT] CLIENTS ROUNDS
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "floor_common.h"

#define HIST_BUCKETS 600000 /* 0.1 ms each: 60 s; later receipts count in the last */
#define READ_SIZE 4096
#define EVENTS 128
#define BACKLOG 256
#define MAX_FRAME 127 /* 2-byte header + at most 125 bytes of payload */

static long n_clients, n_rounds, n_threads = 1;
static double interval = 0.05;
static int client_batch, client_spin, use_dontwait, server_cpu = -1, client_cpu = -1;

static const char USAGE[] =
    "usage: bcastfloor [--interval S] [--client-sched normal|batch|spin] [--write write|dontwait]\n"
    "                  [--server-threads N] [--cpus SERVER,CLIENT] CLIENTS ROUNDS\n";

static void usage_error(const char *what, const char *arg) {
    fprintf(stderr, "%sbcastfloor: %s '%s'\n", USAGE, what, arg);
    exit(2);
}

static long positive(const char *s, long max) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < 1 || v > max)
        usage_error("not a count", s);
    return v;
}

static void parse_options(int argc, char **argv) {
    const char *pos[2];
    int npos = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(USAGE, stdout);
            exit(0);
        }
        if (strncmp(a, "--", 2) != 0) {
            if (npos == 2)
                usage_error("unexpected argument", a);
            pos[npos++] = a;
            continue;
        }
        if (i + 1 >= argc)
            usage_error("needs a value", a);
        const char *v = argv[++i];
        if (!strcmp(a, "--interval")) {
            char *end;
            interval = strtod(v, &end);
            if (end == v || *end || !(interval >= 0) || interval > 3600)
                usage_error("bad interval", v);
        } else if (!strcmp(a, "--client-sched")) {
            if (strcmp(v, "normal") && strcmp(v, "batch") && strcmp(v, "spin"))
                usage_error("unknown policy (normal, batch, spin)", v);
            client_batch = !strcmp(v, "batch");
            client_spin = !strcmp(v, "spin");
        } else if (!strcmp(a, "--write")) {
            if (strcmp(v, "write") && strcmp(v, "dontwait"))
                usage_error("unknown write call (write, dontwait)", v);
            use_dontwait = !strcmp(v, "dontwait");
        } else if (!strcmp(a, "--cpus")) {
            if (sscanf(v, "%d,%d", &server_cpu, &client_cpu) != 2 || server_cpu < 0 || client_cpu < 0)
                usage_error("not SERVER,CLIENT CPU numbers", v);
        } else if (!strcmp(a, "--server-threads")) {
            n_threads = positive(v, 64);
        } else {
            usage_error("unknown option", a);
        }
    }
    if (npos != 2) {
        fputs(USAGE, stderr);
        exit(2);
    }
    n_clients = positive(pos[0], 1000000);
    n_rounds = positive(pos[1], 1000000);
    if (n_threads > n_clients)
        n_threads = n_clients;
}

static void fail(const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    printf("{\"ok\": false, \"error\": \"%s\"}\n", msg); /* messages hold no quotes */
    fflush(stdout);
    exit(1);
}

static inline double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void sleep_until(double t) {
    struct timespec ts = {.tv_sec = (time_t)t, .tv_nsec = (long)((t - floor(t)) * 1e9)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}

static void pin(int cpu, const char *who) {
    if (cpu < 0)
        return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof set, &set)) {
        fprintf(stderr, "bcastfloor: cannot pin the %s to CPU %d: %s\n", who, cpu, strerror(errno));
        exit(2);
    }
}

static void cpu_ms(double *user, double *sys) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    *user = (double)ru.ru_utime.tv_sec * 1e3 + (double)ru.ru_utime.tv_usec * 1e-3;
    *sys = (double)ru.ru_stime.tv_sec * 1e3 + (double)ru.ru_stime.tv_usec * 1e-3;
}

static void tune(int fd) {
    static int sndbuf = -1;
    int one = 1;
    if (sndbuf < 0)
        sndbuf = loopback_sndbuf_size();
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (sndbuf > 0)
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
}

/* ------------------------------------------------------------ what the client hands back */

typedef struct {
    double first, last; /* CLOCK_MONOTONIC seconds; 0 = none */
    long count;
} round_stat;

typedef struct {
    int done;
    double user_ms, sys_ms;
    long frames, closed;
    char error[200];
    round_stat *rounds;    /* n_rounds, index 0 = round 1 */
    uint32_t *hist;        /* HIST_BUCKETS */
} client_report;

static client_report *report; /* shared (MAP_SHARED) between the two processes */

static void client_fail(const char *msg) {
    snprintf(report->error, sizeof report->error, "client: %s (%s)", msg, strerror(errno));
    _exit(1);
}

/* ------------------------------------------------------------ client process */

typedef struct {
    int fd;
    uint8_t carry_len;
    uint8_t carry[MAX_FRAME];
} conn;

static void record(const uint8_t *payload, size_t len, double now) {
    char text[MAX_FRAME + 1];
    memcpy(text, payload, len);
    text[len] = 0;
    char *end;
    long r = strtol(text, &end, 10);
    double stamp = strtod(end, NULL);
    if (r < 1 || r > n_rounds)
        return;
    round_stat *s = &report->rounds[r - 1];
    if (!s->count)
        s->first = now;
    s->last = now;
    s->count++;
    double b = (now - stamp) * 1e4;
    long bucket = b < 0 ? 0 : b >= HIST_BUCKETS ? HIST_BUCKETS - 1 : (long)b;
    report->hist[bucket]++;
    report->frames++;
}

static void client_main(const struct sockaddr_in *addr) {
    pin(client_cpu, "client");
    if (client_batch) {
        struct sched_param sp = {0};
        if (sched_setscheduler(0, SCHED_BATCH, &sp))
            client_fail("sched_setscheduler SCHED_BATCH");
    }
    int ep = epoll_create1(EPOLL_CLOEXEC);
    conn *cs = calloc((size_t)n_clients, sizeof *cs);
    if (ep < 0 || !cs)
        client_fail("epoll_create1 / calloc");
    for (long i = 0; i < n_clients; i++) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
            client_fail("socket");
        tune(fd);
        while (connect(fd, (const struct sockaddr *)addr, sizeof *addr) < 0)
            if (errno != EINTR)
                client_fail("connect");
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
        cs[i].fd = fd;
        struct epoll_event ev = {.events = EPOLLIN, .data.u64 = (uint64_t)i};
        if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev))
            client_fail("epoll_ctl");
    }
    double u0, s0, u1, s1;
    cpu_ms(&u0, &s0);
    double started = now_s(), last_input = 0, stop_at = 0;
    /* Waits for the rounds: the server starts 0.5 s after its last accept. */
    double give_up = started + 30 + (double)n_rounds * interval * 2;
    round_stat *final_round = &report->rounds[n_rounds - 1];
    struct epoll_event evs[EVENTS];
    uint8_t buf[MAX_FRAME + READ_SIZE];
    int measured = 0;
    for (;;) {
        double now = now_s();
        if (stop_at && now >= stop_at)
            break;
        if (now >= give_up || (last_input && now - last_input > 10))
            break;
        double until = stop_at ? stop_at : fmin(give_up, last_input ? last_input + 10 : give_up);
        int timeout = (int)ceil((until - now) * 1e3);
        int n = epoll_wait(ep, evs, EVENTS, timeout > 0 && !client_spin ? timeout : 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            client_fail("epoll_wait");
        }
        for (int k = 0; k < n; k++) {
            conn *c = &cs[evs[k].data.u64];
            memcpy(buf, c->carry, c->carry_len);
            ssize_t got = read(c->fd, buf + c->carry_len, READ_SIZE);
            if (got <= 0) {
                if (got < 0 && (errno == EAGAIN || errno == EINTR))
                    continue;
                epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
                close(c->fd);
                report->closed++;
                continue;
            }
            double at = now_s();
            last_input = at;
            size_t len = c->carry_len + (size_t)got, off = 0;
            while (len - off >= 2) {
                size_t flen = 2 + (buf[off + 1] & 0x7f);
                if (len - off < flen)
                    break;
                record(buf + off + 2, flen - 2, at);
                off += flen;
            }
            c->carry_len = (uint8_t)(len - off);
            memmove(c->carry, buf + off, c->carry_len);
            if (final_round->count == 1 && !stop_at)
                stop_at = at + 1; /* a connection that missed it gets one second more */
        }
        if (final_round->count == n_clients) {
            cpu_ms(&u1, &s1);
            measured = 1;
            break;
        }
    }
    if (!measured)
        cpu_ms(&u1, &s1);
    report->user_ms = u1 - u0;
    report->sys_ms = s1 - s0;
    report->done = 1;
    _exit(0);
}

/* ------------------------------------------------------------ server */

typedef struct {
    long from, to;            /* connections [from, to) */
    double start;             /* round 1's instant */
    double *begin, *end;      /* per round: this thread's write loop */
    long errors;
} writer;

static int *fds;

static void *write_rounds(void *arg) {
    writer *w = arg;
    uint8_t frame[MAX_FRAME];
    for (long r = 0; r < n_rounds; r++) {
        sleep_until(w->start + (double)r * interval);
        int len = snprintf((char *)frame + 2, sizeof frame - 2, "%ld %.9f", r + 1, now_s());
        frame[0] = 0x81; /* FIN, text */
        frame[1] = (uint8_t)len;
        size_t flen = (size_t)len + 2;
        double t0 = now_s();
        if (use_dontwait) {
            for (long i = w->from; i < w->to; i++)
                if (send(fds[i], frame, flen, MSG_DONTWAIT) != (ssize_t)flen)
                    w->errors++;
        } else {
            for (long i = w->from; i < w->to; i++)
                if (write(fds[i], frame, flen) != (ssize_t)flen)
                    w->errors++;
        }
        w->begin[r] = t0;
        w->end[r] = now_s();
    }
    return NULL;
}

/* bench/spread.sh's percentile: sorted[ceil(n * p) - 1], NaN when empty */
static double pct(const double *sorted, long n, double p) {
    if (!n)
        return NAN;
    long i = (long)ceil((double)n * p) - 1;
    return sorted[i < 0 ? 0 : i];
}

/* bench/spread.sh's histogram percentile: the middle of the first bucket whose
   cumulative count reaches total * p, in ms */
static double hist_pct(const uint32_t *hist, double p) {
    double total = 0, seen = 0;
    for (long b = 0; b < HIST_BUCKETS; b++)
        total += hist[b];
    if (!total)
        return NAN;
    for (long b = 0; b < HIST_BUCKETS; b++) {
        seen += hist[b];
        if (hist[b] && seen >= total * p)
            return ((double)b + 0.5) / 10;
    }
    return NAN;
}

static void jnum(const char *key, double v, int digits) {
    if (isnan(v))
        printf(", \"%s\": null", key);
    else
        printf(", \"%s\": %.*f", key, digits, v);
}

int main(int argc, char **argv) {
    parse_options(argc, argv);
    struct rlimit rl;
    if (!getrlimit(RLIMIT_NOFILE, &rl)) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    if ((rlim_t)n_clients + 64 > rl.rlim_cur)
        fail("%ld connections need more descriptors than this process may have (%lu)", n_clients,
             (unsigned long)rl.rlim_cur);

    size_t bytes = sizeof(client_report) + sizeof(round_stat) * (size_t)n_rounds + sizeof(uint32_t) * HIST_BUCKETS;
    void *shared = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (shared == MAP_FAILED)
        fail("mmap: %s", strerror(errno));
    report = shared;
    report->rounds = (round_stat *)(report + 1);
    report->hist = (uint32_t *)(report->rounds + n_rounds);

    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof addr;
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&addr, sizeof addr) || listen(lfd, BACKLOG) ||
        getsockname(lfd, (struct sockaddr *)&addr, &alen))
        fail("listen on 127.0.0.1: %s", strerror(errno));

    fflush(stdout);
    pid_t child = fork();
    if (child < 0)
        fail("fork: %s", strerror(errno));
    if (child == 0) {
        close(lfd);
        client_main(&addr);
    }

    pin(server_cpu, "server");
    fds = calloc((size_t)n_clients, sizeof *fds);
    for (long i = 0; i < n_clients; i++) {
        struct pollfd p = {.fd = lfd, .events = POLLIN};
        int ready = poll(&p, 1, 60000);
        if (ready <= 0) {
            kill(child, SIGKILL);
            waitpid(child, NULL, 0);
            fail("%ld of %ld connections in 60 s%s%s", i, n_clients, report->error[0] ? "; " : "", report->error);
        }
        int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) {
            if (errno == EINTR || errno == EAGAIN || errno == ECONNABORTED) {
                i--;
                continue;
            }
            kill(child, SIGKILL);
            fail("accept: %s", strerror(errno));
        }
        tune(fd);
        fds[i] = fd;
    }

    pthread_t *tids = calloc((size_t)n_threads, sizeof *tids);
    writer *ws = calloc((size_t)n_threads, sizeof *ws);
    double start = now_s() + 0.5, u0, s0, u1, s1;
    cpu_ms(&u0, &s0);
    for (long t = 0; t < n_threads; t++) {
        ws[t] = (writer){.from = n_clients * t / n_threads, .to = n_clients * (t + 1) / n_threads, .start = start,
                         .begin = calloc((size_t)n_rounds, sizeof(double)),
                         .end = calloc((size_t)n_rounds, sizeof(double))};
        if (t > 0 && pthread_create(&tids[t], NULL, write_rounds, &ws[t]))
            fail("pthread_create");
    }
    write_rounds(&ws[0]);
    for (long t = 1; t < n_threads; t++)
        pthread_join(tids[t], NULL);
    cpu_ms(&u1, &s1);

    int status = 0;
    waitpid(child, &status, 0);
    if (!report->done)
        fail("the client process ended without a result%s%s", report->error[0] ? ": " : "", report->error);

    double *spreads = malloc(sizeof(double) * (size_t)n_rounds), *writes = malloc(sizeof(double) * (size_t)n_rounds);
    long n_spreads = 0, complete = 0, errors = 0;
    for (long r = 0; r < n_rounds; r++) {
        const round_stat *s = &report->rounds[r];
        if (s->count)
            spreads[n_spreads++] = s->last - s->first;
        complete += s->count == n_clients;
        double b = ws[0].begin[r], e = ws[0].end[r];
        for (long t = 1; t < n_threads; t++) {
            b = fmin(b, ws[t].begin[r]);
            e = fmax(e, ws[t].end[r]);
        }
        writes[r] = e - b;
    }
    for (long t = 0; t < n_threads; t++)
        errors += ws[t].errors;
    qsort(spreads, (size_t)n_spreads, sizeof *spreads, cmp_double);
    qsort(writes, (size_t)n_rounds, sizeof *writes, cmp_double);

    printf("{\"clients\": %ld, \"rounds\": %ld, \"processes\": 1, \"complete_rounds\": %ld", n_clients, n_rounds,
           complete);
    jnum("spread_p50_ms", pct(spreads, n_spreads, 0.5) * 1e3, 3);
    jnum("spread_p99_ms", pct(spreads, n_spreads, 0.99) * 1e3, 3);
    jnum("spread_max_ms", n_spreads ? spreads[n_spreads - 1] * 1e3 : NAN, 3);
    jnum("latency_p50_ms", hist_pct(report->hist, 0.5), 2);
    jnum("latency_p99_ms", hist_pct(report->hist, 0.99), 2);
    jnum("server_write_ms_p50", pct(writes, n_rounds, 0.5) * 1e3, 3);
    jnum("server_write_ms_p99", pct(writes, n_rounds, 0.99) * 1e3, 3);
    jnum("server_user_ms", (u1 - u0) / (double)n_rounds, 2);
    jnum("server_sys_ms", (s1 - s0) / (double)n_rounds, 2);
    jnum("client_user_ms", report->user_ms / (double)n_rounds, 2);
    jnum("client_sys_ms", report->sys_ms / (double)n_rounds, 2);
    printf(", \"interval_s\": %g, \"client_sched\": \"%s\", \"server_write\": \"%s\", \"server_threads\": %ld",
           interval, client_batch ? "batch" : client_spin ? "spin" : "normal", use_dontwait ? "send MSG_DONTWAIT" : "write", n_threads);
    if (server_cpu >= 0)
        printf(", \"cpus\": \"%d,%d\"", server_cpu, client_cpu);
    printf(", \"write_errors\": %ld, \"frames\": %ld, \"closed\": %ld}\n", errors, report->frames, report->closed);
    return 0;
}
