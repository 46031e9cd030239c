/* bench/formats/libs.c: Debian's msgpack-c (libmsgpack-dev) and libcbor (libcbor-dev) on
 * the messages of bench/formats/codec.lua, µs per message:
 *  - "tree": decode into the library's own tree and encode that tree again (no Lua);
 *  - "+ Lua": what a codec on the library would do: decode into its tree, make the Lua
 *    values from it (tables with metatables, strings, integers; no UTF-8 check, no
 *    sorted keys: less work than mw.msgpack / mw.cbor do), then encode those Lua values
 *    through the library (msgpack-c's packer; libcbor builds a tree and serializes it).
 * bench/formats/run.sh builds and runs it.
 *   libs DIR [SECONDS]     (DIR/N.msgpack and DIR/N.cbor, N = 1..3) */
#include <cbor.h>
#include <lauxlib.h>
#include <lua.h>
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

/* ------------------------------------------------ the library codecs with Lua values */

static lua_State *L;
static int null_ref, array_mt_ref, object_mt_ref, bytes_mt_ref;

static void set_mt(int ref) {
    lua_rawgeti(L, LUA_REGISTRYINDEX, ref);
    lua_setmetatable(L, -2);
}

static void mp_push(const msgpack_object *o) {
    switch (o->type) {
    case MSGPACK_OBJECT_NIL: lua_rawgeti(L, LUA_REGISTRYINDEX, null_ref); break;
    case MSGPACK_OBJECT_BOOLEAN: lua_pushboolean(L, o->via.boolean); break;
    case MSGPACK_OBJECT_POSITIVE_INTEGER: lua_pushinteger(L, (lua_Integer)o->via.u64); break;
    case MSGPACK_OBJECT_NEGATIVE_INTEGER: lua_pushinteger(L, (lua_Integer)o->via.i64); break;
    case MSGPACK_OBJECT_FLOAT32:
    case MSGPACK_OBJECT_FLOAT64: lua_pushnumber(L, o->via.f64); break;
    case MSGPACK_OBJECT_STR: lua_pushlstring(L, o->via.str.ptr, o->via.str.size); break;
    case MSGPACK_OBJECT_BIN:
        lua_createtable(L, 0, 1);
        lua_pushlstring(L, o->via.bin.ptr, o->via.bin.size);
        lua_setfield(L, -2, "data");
        set_mt(bytes_mt_ref);
        break;
    case MSGPACK_OBJECT_ARRAY:
        lua_createtable(L, (int)o->via.array.size, 0);
        set_mt(array_mt_ref);
        for (uint32_t i = 0; i < o->via.array.size; i++) {
            mp_push(&o->via.array.ptr[i]);
            lua_rawseti(L, -2, i + 1);
        }
        break;
    case MSGPACK_OBJECT_MAP:
        lua_createtable(L, 0, (int)o->via.map.size);
        set_mt(object_mt_ref);
        for (uint32_t i = 0; i < o->via.map.size; i++) {
            mp_push(&o->via.map.ptr[i].key);
            mp_push(&o->via.map.ptr[i].val);
            lua_rawset(L, -3);
        }
        break;
    default: lua_pushnil(L);
    }
}

/* 'a' array, 'o' map, 'b' bytes, 'n' null: by metatable (or identity for null). */
static int lua_kind(void) {
    lua_rawgeti(L, LUA_REGISTRYINDEX, null_ref);
    int is_null = lua_rawequal(L, -1, -2);
    lua_pop(L, 1);
    if (is_null) return 'n';
    if (!lua_getmetatable(L, -1)) return 'o';
    lua_rawgeti(L, LUA_REGISTRYINDEX, array_mt_ref);
    int kind = lua_rawequal(L, -1, -2) ? 'a' : 0;
    lua_pop(L, 1);
    if (!kind) {
        lua_rawgeti(L, LUA_REGISTRYINDEX, bytes_mt_ref);
        kind = lua_rawequal(L, -1, -2) ? 'b' : 'o';
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    return kind;
}

static void mp_pack_lua(msgpack_packer *pk) {
    switch (lua_type(L, -1)) {
    case LUA_TSTRING: {
        size_t n;
        const char *s = lua_tolstring(L, -1, &n);
        msgpack_pack_str(pk, n);
        msgpack_pack_str_body(pk, s, n);
        break;
    }
    case LUA_TNUMBER:
        if (lua_isinteger(L, -1)) msgpack_pack_int64(pk, lua_tointeger(L, -1));
        else msgpack_pack_double(pk, lua_tonumber(L, -1));
        break;
    case LUA_TBOOLEAN:
        if (lua_toboolean(L, -1)) msgpack_pack_true(pk);
        else msgpack_pack_false(pk);
        break;
    case LUA_TTABLE: {
        int kind = lua_kind();
        if (kind == 'n') {
            msgpack_pack_nil(pk);
        } else if (kind == 'b') {
            lua_getfield(L, -1, "data");
            size_t n;
            const char *s = lua_tolstring(L, -1, &n);
            msgpack_pack_bin(pk, n);
            msgpack_pack_bin_body(pk, s, n);
            lua_pop(L, 1);
        } else if (kind == 'a') {
            size_t n = lua_rawlen(L, -1);
            msgpack_pack_array(pk, n);
            for (size_t i = 1; i <= n; i++) {
                lua_rawgeti(L, -1, (lua_Integer)i);
                mp_pack_lua(pk);
                lua_pop(L, 1);
            }
        } else {
            size_t n = 0;
            lua_pushnil(L);
            while (lua_next(L, -2)) { n++; lua_pop(L, 1); }
            msgpack_pack_map(pk, n);
            lua_pushnil(L);
            while (lua_next(L, -2)) {
                lua_pushvalue(L, -2);
                mp_pack_lua(pk);
                lua_pop(L, 1);
                mp_pack_lua(pk);
                lua_pop(L, 1);
            }
        }
        break;
    }
    default: msgpack_pack_nil(pk);
    }
}

static void msgpack_lua_round(const char *data, size_t n) {
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    size_t off = 0;
    if (msgpack_unpack_next(&u, data, n, &off) != MSGPACK_UNPACK_SUCCESS) exit(1);
    mp_push(&u.data);
    msgpack_unpacked_destroy(&u);
    msgpack_sbuffer sbuf;
    msgpack_sbuffer_init(&sbuf);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sbuf, msgpack_sbuffer_write);
    mp_pack_lua(&pk);
    msgpack_sbuffer_destroy(&sbuf);
    lua_pop(L, 1);
}

static void cbor_push(cbor_item_t *item) {
    switch (cbor_typeof(item)) {
    case CBOR_TYPE_UINT: lua_pushinteger(L, (lua_Integer)cbor_get_int(item)); break;
    case CBOR_TYPE_NEGINT: lua_pushinteger(L, -1 - (lua_Integer)cbor_get_int(item)); break;
    case CBOR_TYPE_STRING:
        lua_pushlstring(L, (const char *)cbor_string_handle(item), cbor_string_length(item));
        break;
    case CBOR_TYPE_BYTESTRING:
        lua_createtable(L, 0, 1);
        lua_pushlstring(L, (const char *)cbor_bytestring_handle(item), cbor_bytestring_length(item));
        lua_setfield(L, -2, "data");
        set_mt(bytes_mt_ref);
        break;
    case CBOR_TYPE_ARRAY: {
        size_t n = cbor_array_size(item);
        cbor_item_t **items = cbor_array_handle(item);
        lua_createtable(L, (int)n, 0);
        set_mt(array_mt_ref);
        for (size_t i = 0; i < n; i++) {
            cbor_push(items[i]);
            lua_rawseti(L, -2, (lua_Integer)i + 1);
        }
        break;
    }
    case CBOR_TYPE_MAP: {
        size_t n = cbor_map_size(item);
        struct cbor_pair *pairs = cbor_map_handle(item);
        lua_createtable(L, 0, (int)n);
        set_mt(object_mt_ref);
        for (size_t i = 0; i < n; i++) {
            cbor_push(pairs[i].key);
            cbor_push(pairs[i].value);
            lua_rawset(L, -3);
        }
        break;
    }
    case CBOR_TYPE_FLOAT_CTRL:
        if (cbor_float_ctrl_is_ctrl(item)) {
            if (cbor_is_bool(item)) lua_pushboolean(L, cbor_get_bool(item));
            else lua_rawgeti(L, LUA_REGISTRYINDEX, null_ref);
        } else {
            lua_pushnumber(L, cbor_float_get_float(item));
        }
        break;
    default: lua_pushnil(L);
    }
}

static cbor_item_t *cbor_from_lua(void) {
    switch (lua_type(L, -1)) {
    case LUA_TSTRING: {
        size_t n;
        const char *s = lua_tolstring(L, -1, &n);
        return cbor_build_stringn(s, n);
    }
    case LUA_TNUMBER:
        if (lua_isinteger(L, -1)) {
            lua_Integer i = lua_tointeger(L, -1);
            cbor_item_t *v = i >= 0 ? cbor_build_uint64((uint64_t)i) : cbor_build_negint64((uint64_t)(-1 - i));
            return v;
        }
        return cbor_build_float8(lua_tonumber(L, -1));
    case LUA_TBOOLEAN: return cbor_build_bool(lua_toboolean(L, -1));
    case LUA_TTABLE: {
        int kind = lua_kind();
        if (kind == 'n') return cbor_new_null();
        if (kind == 'b') {
            lua_getfield(L, -1, "data");
            size_t n;
            const char *s = lua_tolstring(L, -1, &n);
            cbor_item_t *v = cbor_build_bytestring((cbor_data)s, n);
            lua_pop(L, 1);
            return v;
        }
        if (kind == 'a') {
            size_t n = lua_rawlen(L, -1);
            cbor_item_t *a = cbor_new_definite_array(n);
            for (size_t i = 1; i <= n; i++) {
                lua_rawgeti(L, -1, (lua_Integer)i);
                cbor_item_t *v = cbor_from_lua();
                cbor_array_push(a, v);
                cbor_decref(&v);
                lua_pop(L, 1);
            }
            return a;
        }
        size_t n = 0;
        lua_pushnil(L);
        while (lua_next(L, -2)) { n++; lua_pop(L, 1); }
        cbor_item_t *m = cbor_new_definite_map(n);
        lua_pushnil(L);
        while (lua_next(L, -2)) {
            cbor_item_t *v = cbor_from_lua();
            lua_pop(L, 1);
            cbor_item_t *k = cbor_from_lua();
            cbor_map_add(m, (struct cbor_pair){.key = cbor_move(k), .value = cbor_move(v)});
        }
        return m;
    }
    default: return cbor_new_null();
    }
}

static void cbor_lua_round(const char *data, size_t n) {
    struct cbor_load_result r;
    cbor_item_t *item = cbor_load((cbor_data)data, n, &r);
    if (item == NULL) exit(1);
    cbor_push(item);
    cbor_decref(&item);
    cbor_item_t *back = cbor_from_lua();
    unsigned char *out;
    size_t room;
    cbor_serialize_alloc(back, &out, &room);
    free(out);
    cbor_decref(&back);
    lua_pop(L, 1);
}

static void lua_setup(void) {
    L = luaL_newstate();
    lua_newtable(L);
    null_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    lua_newtable(L);
    array_mt_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    lua_newtable(L);
    object_mt_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    lua_newtable(L);
    bytes_mt_ref = luaL_ref(L, LUA_REGISTRYINDEX);
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
    lua_setup();
    printf("| message (bytes: msgpack / cbor) | msgpack-c %s tree | msgpack-c + Lua | libcbor %d.%d.%d tree | libcbor + Lua |\n"
           "|---|---|---|---|---|\n", MSGPACK_VERSION, CBOR_MAJOR_VERSION, CBOR_MINOR_VERSION, CBOR_PATCH_VERSION);
    for (int i = 1; i <= 3; i++) {
        char path[4096];
        size_t nm, nc;
        snprintf(path, sizeof path, "%s/%d.msgpack", argv[1], i);
        char *mp = slurp(path, &nm);
        snprintf(path, sizeof path, "%s/%d.cbor", argv[1], i);
        char *cb = slurp(path, &nc);
        double mt = measure(msgpack_round, mp, nm, seconds), ml = measure(msgpack_lua_round, mp, nm, seconds);
        double ct = measure(cbor_round, cb, nc, seconds), cl = measure(cbor_lua_round, cb, nc, seconds);
        printf("| %s (%zu / %zu) | %.2f | %.2f | %.2f | %.2f |\n", names[i - 1], nm, nc, mt, ml, ct, cl);
        free(mp);
        free(cb);
    }
    return 0;
}
