/* What the floor programs (wsfloor.c, bcastfloor.c) share, included from the same folder. */
#ifndef FLOOR_COMMON_H
#define FLOOR_COMMON_H
#include <stdio.h>

/* moonwire's send buffer for a peer on this host (ChannelTuning.loopbackSendBuffer in
   Sources/MoonwireCore/TCP/ChannelTuning.swift): 512 KiB (1 MiB as the kernel counts)
   instead of the kernel's autotuning, when net.core.wmem_max allows it; 0 = leave the
   kernel's sizing. */
static int loopback_sndbuf_size(void) {
    long max = 0;
    FILE *f = fopen("/proc/sys/net/core/wmem_max", "r");
    if (f) {
        if (fscanf(f, "%ld", &max) != 1)
            max = 0;
        fclose(f);
    }
    return max >= 512 * 1024 ? 512 * 1024 : 0;
}

/* qsort's comparison of doubles, ascending */
static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
#endif
