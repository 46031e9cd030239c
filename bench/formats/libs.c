/* bench/formats/libs.c: Debian's msgpack-c (libmsgpack-dev) and libcbor (libcbor-dev) on
 * the messages of bench/formats/codec.lua: decode into the library's own tree and encode
 * that tree again, µs per message. This is a lower bound of what mw.msgpack and mw.cbor
 * would cost on these libraries: making Lua values from the tree (and a tree from Lua
 * values) would come on top. bench/formats/run.sh builds and runs it.
 *   libs DIR [SECONDS]     (DIR/N.msgpack and DIR/N.cbor, N = 1..3) */
#include <cbor.h>
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) { perror(path); exit(1); }
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    char *data = malloc(*n);
    if (fread(data, 1, *n, f) != *n) exit(1);
    fclose(f);
    return data;
}

static void msgpack_round(const char *data, size_t n) {
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    size_t off = 0;
    if (msgpack_unpack_next(&u, data, n, &off) != MSGPACK_UNPACK_SUCCESS) { fprintf(stderr, "msgpack-c: cannot decode\n"); exit(1); }
    msgpack_sbuffer sbuf;
    msgpack_sbuffer_init(&sbuf);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sbuf, msgpack_sbuffer_write);
    msgpack_pack_object(&pk, u.data);
    msgpack_sbuffer_destroy(&sbuf);
    msgpack_unpacked_destroy(&u);
}

static void cbor_round(const char *data, size_t n) {
    struct cbor_load_result r;
    cbor_item_t *item = cbor_load((cbor_data)data, n, &r);
    if (item == NULL) { fprintf(stderr, "libcbor: cannot decode\n"); exit(1); }
    unsigned char *out;
    size_t room;
    cbor_serialize_alloc(item, &out, &room);
    free(out);
    cbor_decref(&item);
}

static double measure(void (*round)(const char *, size_t), const char *data, size_t n, double seconds) {
    long iterations = 16;
    for (;;) {
        double t0 = now();
        for (long i = 0; i < iterations; i++) round(data, n);
        double elapsed = now() - t0;
        if (elapsed >= seconds) return elapsed / iterations * 1e6;
        iterations *= elapsed > 0 && seconds / elapsed * 1.1 > 2 ? (long)(seconds / elapsed * 1.1) + 1 : 2;
    }
}

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: libs DIR [SECONDS]\n"); return 2; }
    double seconds = argc > 2 ? atof(argv[2]) : 1.0;
    static const char *names[] = {"small", "medium", "large"};
    printf("| message | msgpack-c %s | libcbor %d.%d.%d |\n|---|---|---|\n", MSGPACK_VERSION, CBOR_MAJOR_VERSION,
           CBOR_MINOR_VERSION, CBOR_PATCH_VERSION);
    for (int i = 1; i <= 3; i++) {
        char path[4096];
        size_t nm, nc;
        snprintf(path, sizeof path, "%s/%d.msgpack", argv[1], i);
        char *mp = slurp(path, &nm);
        snprintf(path, sizeof path, "%s/%d.cbor", argv[1], i);
        char *cb = slurp(path, &nc);
        printf("| %s (%zu / %zu bytes) | %.2f | %.2f |\n", names[i - 1], nm, nc, measure(msgpack_round, mp, nm, seconds),
               measure(cbor_round, cb, nc, seconds));
        free(mp);
        free(cb);
    }
    return 0;
}
