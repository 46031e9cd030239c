/*
 * stormfloor: the client side of the reconnect storm (bench/storm/run.sh) at the
 * floor of this machine, a minimal WebSocket client in C.
 *
 * N connections on one thread (epoll, non-blocking sockets). Each sends the upgrade
 * request and waits for the end of the response head, taking "HTTP/1.1 101" as open
 * (it does not check Sec-WebSocket-Accept, nor read frames: the storm's server sends
 * none). When an open connection is dropped (EOF, RST) it dials again after moonwire's
 * own reconnect schedule for the storm: min(max, initial * factor^(n-1)) spread by
 * +-jitter, attempt n counted from 1 since the last open (defaults 0.05 s, 2, 1 s, 0.2,
 * the options bench/storm/clients.lua gives mw.connect). A failed dial (refused, reset,
 * no 101) counts as a failed attempt and waits for the next delay. It runs until it is
 * killed; the server times the storm. With it in place of moonwire's clients, what is
 * left of the storm's time is the server's and the kernel's.
 *
 * Build:  cc -O2 -Wall -Wextra -o stormfloor stormfloor.c      (C11, libc/POSIX/Linux epoll)
 * Usage:  stormfloor HOST PORT N
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum state { IDLE, DIALING, UPGRADING, OPEN };

struct conn {
    int fd;
    enum state state;
    int attempt;      /* failed dials since the last open, the drop included */
    size_t have;      /* bytes of the response head read so far */
    char head[512];
};

static const double initial = 0.05, factor = 2, longest = 1, jitter = 0.2;

static struct conn *conns;
static int nconns;
static struct sockaddr_in target;
static char request[256];
static int request_len;
static int ep;

/* a min-heap of (when, index): connections waiting to dial again */
static struct wait { double at; int i; } *heap;
static int nheap;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static uint64_t rng = 88172645463325252ull;
static double uniform(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (rng >> 11) * (1.0 / 9007199254740992.0);
}

static void push(double at, int i) {
    int k = nheap++;
    while (k > 0 && heap[(k - 1) / 2].at > at) {
        heap[k] = heap[(k - 1) / 2];
        k = (k - 1) / 2;
    }
    heap[k] = (struct wait){at, i};
}

static struct wait pop(void) {
    struct wait top = heap[0], last = heap[--nheap];
    int k = 0;
    for (;;) {
        int c = 2 * k + 1;
        if (c >= nheap)
            break;
        if (c + 1 < nheap && heap[c + 1].at < heap[c].at)
            c++;
        if (heap[c].at >= last.at)
            break;
        heap[k] = heap[c];
        k = c;
    }
    heap[k] = last;
    return top;
}

static void dial(int i) {
    struct conn *c = &conns[i];
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->fd < 0) {
        perror("stormfloor: socket");
        exit(1);
    }
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    c->have = 0;
    c->state = DIALING;
    if (connect(c->fd, (struct sockaddr *)&target, sizeof target) < 0 && errno != EINPROGRESS) {
        c->state = UPGRADING; /* fails below at once */
    }
    struct epoll_event ev = {.events = EPOLLOUT | EPOLLIN | EPOLLRDHUP, .data.u32 = (uint32_t)i};
    epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev);
}

/* The connection is gone (dropped when open, or a dial that failed): wait, then dial again. */
static void lost(int i) {
    struct conn *c = &conns[i];
    close(c->fd);
    c->fd = -1;
    c->state = IDLE;
    c->attempt++;
    double delay = fmin(longest, initial * pow(factor, c->attempt - 1));
    delay *= 1 + jitter * (2 * uniform() - 1);
    push(now() + delay, i);
}

static void event(int i, uint32_t events) {
    struct conn *c = &conns[i];
    if (c->state == DIALING) {
        int err = 0;
        socklen_t len = sizeof err;
        getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len);
        if (err || (events & (EPOLLERR | EPOLLHUP)))
            return lost(i);
        if (write(c->fd, request, request_len) != request_len)
            return lost(i);
        struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP, .data.u32 = (uint32_t)i};
        epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
        c->state = UPGRADING;
        return;
    }
    if (c->state == UPGRADING) {
        ssize_t n = read(c->fd, c->head + c->have, sizeof c->head - 1 - c->have);
        if (n <= 0) {
            if (n < 0 && errno == EAGAIN)
                return;
            return lost(i);
        }
        c->have += (size_t)n;
        c->head[c->have] = 0;
        if (!strstr(c->head, "\r\n\r\n")) {
            if (c->have == sizeof c->head - 1)
                return lost(i);
            return;
        }
        if (strncmp(c->head, "HTTP/1.1 101", 12) != 0)
            return lost(i);
        c->state = OPEN;
        c->attempt = 0;
        return;
    }
    /* OPEN: anything readable is the drop (the storm's server sends no frames) */
    char sink[256];
    ssize_t n = read(c->fd, sink, sizeof sink);
    if (n > 0 || (n < 0 && errno == EAGAIN))
        return;
    lost(i);
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: stormfloor HOST PORT N\n");
        return 2;
    }
    nconns = atoi(argv[3]);
    memset(&target, 0, sizeof target);
    target.sin_family = AF_INET;
    target.sin_port = htons((uint16_t)atoi(argv[2]));
    if (nconns <= 0 || inet_pton(AF_INET, argv[1], &target.sin_addr) != 1) {
        fprintf(stderr, "stormfloor: want an IPv4 address, a port and a count\n");
        return 2;
    }
    request_len = snprintf(request, sizeof request,
                           "GET / HTTP/1.1\r\nHost: %s:%s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                           "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
                           argv[1], argv[2]);
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < (rlim_t)nconns + 64) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    conns = calloc((size_t)nconns, sizeof *conns);
    heap = calloc((size_t)nconns, sizeof *heap);
    ep = epoll_create1(EPOLL_CLOEXEC);
    for (int i = 0; i < nconns; i++)
        dial(i);
    struct epoll_event events[256];
    for (;;) {
        int timeout = -1;
        if (nheap) {
            double wait = heap[0].at - now();
            timeout = wait <= 0 ? 0 : (int)ceil(wait * 1000);
        }
        int n = epoll_wait(ep, events, 256, timeout);
        for (int k = 0; k < n; k++)
            event((int)events[k].data.u32, events[k].events);
        double t = now();
        while (nheap && heap[0].at <= t)
            dial(pop().i);
    }
}
