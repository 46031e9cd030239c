/* mw.json's Lua side: the token tape to Lua values, Lua values to JSON text.
 * The rules are json.lua's (kept as the reference decoder, see CMoonJSON.h);
 * docs/scripting.md states them. */
#include "CMoonJSON.h"

#include <lauxlib.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The decode closure kept for mw_json_decode_bytes, and json.lua's module. */
static char decode_raw_key;

/* Upvalues of the native closures. */
#define UV_NULL 1
#define UV_ARRAY_MT 2
#define UV_OBJECT_MT 3
#define UV_REFERENCE 4 /* json.lua's decode */

/* What the build step and the calls from the host read: { null, array_mt,
 * object_mt, key strings, key cache } (the encoder reads the first three). */
static char slots_key;

/* ---------------------------------------------------------------- decoding */

/* Object keys seen lately, so that messages of one shape do not hash and
 * intern the same keys again each time: KEY_SLOTS keys of up to KEY_MAX bytes,
 * each slot's bytes here and its Lua string at the same index of a table
 * (created with room for all, so storing one never allocates). */
#define KEY_SLOTS 128
#define KEY_MAX 31

typedef struct key_cache {
    uint8_t len[KEY_SLOTS];
    char bytes[KEY_SLOTS][KEY_MAX];
} key_cache;

static inline unsigned key_slot(const char *s, size_t n) {
    unsigned h = (unsigned)n * 0x9E3779B1u;
    h ^= (unsigned char)s[0] * 31u + (unsigned char)s[n - 1] * 131u + (unsigned char)s[n / 2] * 7u;
    return (h ^ (h >> 15)) % KEY_SLOTS;
}

/* The key strings table is in stack slot `strings` (5 in the build step: 1 tape,
 * 2 null, 3 array_mt, 4 object_mt, 5 key strings, 6 key cache). */
static inline void push_key_at(lua_State *L, key_cache *cache, int strings, const char *s, size_t n) {
    if (n == 0 || n > KEY_MAX) {
        lua_pushlstring(L, s, n);
        return;
    }
    unsigned slot = key_slot(s, n);
    if (cache->len[slot] == n && memcmp(cache->bytes[slot], s, n) == 0) {
        lua_rawgeti(L, strings, (lua_Integer)slot + 1);
        return;
    }
    lua_pushlstring(L, s, n);
    lua_pushvalue(L, -1);
    lua_rawseti(L, strings, (lua_Integer)slot + 1);
    cache->len[slot] = (uint8_t)n;
    memcpy(cache->bytes[slot], s, n);
}

#define push_key(L, cache, s, n) push_key_at(L, cache, 5, s, n)

void *mwj_key_cache_push(lua_State *L) {
    if (lua_rawgetp(L, LUA_REGISTRYINDEX, &slots_key) != LUA_TTABLE) return NULL; /* nil pushed */
    lua_rawgeti(L, -1, 5);
    key_cache *cache = (key_cache *)lua_touserdata(L, -1);
    lua_pop(L, 1);
    lua_rawgeti(L, -1, 4);
    lua_replace(L, -2);
    return cache;
}

void mwj_push_key(lua_State *L, void *cache, int strings, const char *s, size_t n) {
    push_key_at(L, (key_cache *)cache, strings, s, n);
}

static size_t build_value(lua_State *L, const mwj_tape *tape, key_cache *keys, size_t at) {
    const mwj_token *t = &tape->tokens[at];
    switch (t->type) {
    case MWJ_NULL: lua_pushvalue(L, 2); return at + 1;
    case MWJ_FALSE: lua_pushboolean(L, 0); return at + 1;
    case MWJ_TRUE: lua_pushboolean(L, 1); return at + 1;
    case MWJ_INT: lua_pushinteger(L, (lua_Integer)t->v.i); return at + 1;
    case MWJ_FLOAT: lua_pushnumber(L, (lua_Number)t->v.d); return at + 1;
    case MWJ_STRING: lua_pushlstring(L, tape->strings + t->v.off, t->len); return at + 1;
    case MWJ_ARRAY: {
        uint32_t n = t->len;
        lua_createtable(L, (int)n, 0);
        lua_pushvalue(L, 3);
        lua_setmetatable(L, -2);
        at++;
        for (uint32_t i = 1; i <= n; i++) {
            at = build_value(L, tape, keys, at);
            lua_rawseti(L, -2, (lua_Integer)i);
        }
        return at;
    }
    default: { /* MWJ_OBJECT */
        uint32_t n = t->len;
        lua_createtable(L, 0, (int)n);
        lua_pushvalue(L, 4);
        lua_setmetatable(L, -2);
        at++;
        for (uint32_t i = 0; i < n; i++) {
            const mwj_token *key = &tape->tokens[at];
            push_key(L, keys, tape->strings + key->v.off, key->len);
            at = build_value(L, tape, keys, at + 1);
            lua_rawset(L, -3);
        }
        return at;
    }
    }
}

/* build(tape) -> value; run under lua_pcall. */
static int build(lua_State *L) {
    const mwj_tape *tape = (const mwj_tape *)lua_touserdata(L, 1);
    luaL_checkstack(L, 2 * tape->max_depth + 14, "JSON nested too deep");
    lua_rawgetp(L, LUA_REGISTRYINDEX, &slots_key);
    for (int i = 1; i <= 5; i++) lua_rawgeti(L, 2, i);
    lua_remove(L, 2); /* 2 null .. 6 key cache */
    build_value(L, tape, (key_cache *)lua_touserdata(L, 6), 0);
    return 1;
}

/* The parsed tape's value, built under lua_pcall; frees the tape. Returns the
 * status, with the value or the error on top. */
static int build_protected(lua_State *L, mwj_tape *tape) {
    lua_pushcfunction(L, build);
    lua_pushlightuserdata(L, tape);
    int status = lua_pcall(L, 1, 1, 0);
    mwj_tape_free(tape);
    return status;
}

/* Decodes text with the closure's upvalues: pushes the value, or nil and the
 * message (json.lua's, from the reference decoder). */
static int decode_text(lua_State *L, const char *text, size_t n, int text_index) {
    mwj_tape tape;
    mwj_tape_init(&tape);
    int parsed = mwj_parse(text, n, &tape);
    if (parsed == MWJ_OK) {
        if (build_protected(L, &tape) != LUA_OK) return lua_error(L);
        return 1;
    }
    mwj_tape_free(&tape);
    if (parsed == MWJ_NOMEM) return luaL_error(L, "mw.json.decode: not enough memory");
    lua_pushvalue(L, lua_upvalueindex(UV_REFERENCE));
    if (text_index) lua_pushvalue(L, text_index);
    else lua_pushlstring(L, text, n);
    lua_call(L, 1, 2);
    return 2;
}

/* mw.json.decode(text) -> value | nil, err */
static int json_decode(lua_State *L) {
    if (lua_type(L, 1) != LUA_TSTRING) {
        return luaL_error(L, "bad argument #1 to 'mw.json.decode' (string expected, got %s)", luaL_typename(L, 1));
    }
    size_t n;
    const char *text = lua_tolstring(L, 1, &n);
    return decode_text(L, text, n, 1);
}

/* decode_raw(pointer, length): the bytes of a received message. */
static int json_decode_raw(lua_State *L) {
    const char *text = (const char *)lua_touserdata(L, 1);
    size_t n = (size_t)lua_tointeger(L, 2);
    int results = decode_text(L, text, n, 0);
    if (results == 1) lua_pushnil(L);
    return 2;
}

int mw_json_decode_bytes(lua_State *L, const void *bytes, size_t n) {
    /* The common case in one protected call: parsed here (no Lua), built under
     * lua_pcall. Anything else goes through json_decode_raw. */
    if (lua_checkstack(L, 3)) {
        mwj_tape tape;
        mwj_tape_init(&tape);
        if (mwj_parse((const char *)bytes, n, &tape) == MWJ_OK) {
            int status = build_protected(L, &tape);
            if (status == LUA_OK) lua_pushnil(L);
            return status;
        }
        mwj_tape_free(&tape);
    }
    lua_rawgetp(L, LUA_REGISTRYINDEX, &decode_raw_key);
    lua_pushlightuserdata(L, (void *)bytes);
    lua_pushinteger(L, (lua_Integer)n);
    return lua_pcall(L, 2, 2, 0);
}

/* ---------------------------------------------------------------- encoding */

typedef mwj_buffer buffer;

/* One step of the path to the value being written, for error messages. */
typedef struct path_step {
    const void *table; /* the table at this level, while it is being written */
    int slot;          /* its stack slot */
    int iterating;     /* an object whose members are being written */
    int is_index;
    lua_Integer index;
    const char *name;
    size_t name_len;
} path_step;

typedef struct encoder {
    buffer *out;
    const char *indent;
    size_t indent_len;
    int pretty, sort_keys;
    int checking;
    path_step path[MWJ_MAX_DEPTH + 2];
    /* mw.json.null and the metatables of mw.json.array() and mw.json.object(),
     * compared by identity (lua_topointer): one API call, not lua_rawequal's two
     * lookups. They stay on the stack (slots 3-5 of encode_run) while it runs. */
    const void *null, *array_mt, *object_mt;
} encoder;

static void buffer_grow(lua_State *L, buffer *b, size_t more) {
    size_t room = b->room * 2;
    while (room - b->size < more) room *= 2;
    char *grown = b->data == b->inline_data ? malloc(room) : realloc(b->data, room);
    if (grown == NULL) luaL_error(L, "not enough memory");
    if (b->data == b->inline_data) memcpy(grown, b->inline_data, b->size);
    b->data = grown;
    b->room = room;
}

static inline char *reserve(lua_State *L, buffer *b, size_t more) {
    if (b->room - b->size < more) buffer_grow(L, b, more);
    return b->data + b->size;
}

static inline void put(lua_State *L, buffer *b, const char *s, size_t n) {
    memcpy(reserve(L, b, n), s, n);
    b->size += n;
}

static inline void put_char(lua_State *L, buffer *b, char c) {
    *reserve(L, b, 1) = c;
    b->size++;
}

/* Pushes the path of step `depth` ("value", "value[2]", "value.name"). */
static void push_path(lua_State *L, const encoder *e, int depth) {
    luaL_Buffer p;
    luaL_buffinit(L, &p);
    luaL_addstring(&p, "value");
    for (int i = 1; i <= depth; i++) {
        const path_step *s = &e->path[i];
        if (s->is_index) {
            char index[32];
            snprintf(index, sizeof index, "[%lld]", (long long)s->index);
            luaL_addstring(&p, index);
        } else {
            luaL_addchar(&p, '.');
            luaL_addlstring(&p, s->name, s->name_len);
        }
    }
    luaL_pushresult(&p);
}

static void check_keys(lua_State *L, encoder *e, int depth, int table);

/* Raises "<path>: <what>" (json.encode adds "mw.json.encode: "). json.lua checks
 * every key of an object before it writes any of its values: a bad key of an
 * object being written (outermost first) is the error instead. */
static int fail_at(lua_State *L, encoder *e, int depth, const char *what) {
    if (!e->checking) {
        e->checking = 1;
        /* The levels above this one are tables whose entries are current. */
        for (int i = 0; i < depth; i++) {
            if (e->path[i].iterating) check_keys(L, e, i, e->path[i].slot);
        }
        e->checking = 0;
    }
    push_path(L, e, depth); /* keys may hold NUL bytes: no %s */
    lua_pushfstring(L, ": %s", what);
    lua_concat(L, 2);
    return lua_error(L);
}

static const char hex_digits[] = "0123456789abcdef";

/* A JSON string: '"', '\\' and control characters (0-31 and DEL) escaped, every
 * other byte as it is (invalid UTF-8 too). */
static void put_string(lua_State *L, buffer *b, const char *s, size_t n) {
    char *o = reserve(L, b, n * 6 + 2);
    *o++ = '"';
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\' && c != 0x7F) {
            *o++ = (char)c;
            continue;
        }
        *o++ = '\\';
        switch (c) {
        case '"': *o++ = '"'; break;
        case '\\': *o++ = '\\'; break;
        case '\b': *o++ = 'b'; break;
        case '\f': *o++ = 'f'; break;
        case '\n': *o++ = 'n'; break;
        case '\r': *o++ = 'r'; break;
        case '\t': *o++ = 't'; break;
        default:
            *o++ = 'u';
            *o++ = '0';
            *o++ = '0';
            *o++ = hex_digits[c >> 4];
            *o++ = hex_digits[c & 15];
        }
    }
    *o++ = '"';
    b->size = (size_t)(o - b->data);
}

static size_t put_decimal(char *o, unsigned long long u) {
    char digits[24];
    size_t n = 0;
    do {
        digits[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    for (size_t i = 0; i < n; i++) o[i] = digits[n - 1 - i];
    return n;
}

static size_t integer_text(char *o, lua_Integer i) {
    if (i < 0) {
        *o = '-';
        return 1 + put_decimal(o + 1, 0ULL - (unsigned long long)i);
    }
    return put_decimal(o, (unsigned long long)i);
}

/* The digits of `a` (positive, normal, not an integer below 1e16) when a decimal
 * m * 10^-k with m < 10^15 and k <= 22 reads back to it, found as Grisu2 would
 * but without its 64-bit arithmetic: prices and quantities (91234.5, 0.0125)
 * take one to a few steps. For each k, m = rint(a * 10^k); m and 10^k are exact
 * doubles, so m / 10^k is one correctly rounded division: it equals `a` exactly
 * when strtod of the decimal m * 10^-k gives `a`. Such a decimal has at most 15
 * significant digits, so it is the one fast_float_text's argument below is about
 * (and when one exists, a * 10^k lies within 0.5 of m, so rint finds it by the
 * smallest k at the latest). Returns the digit count with *k set as mwj_grisu2
 * does, or 0 (then Grisu2 decides). */
static int short_decimal(double a, char *digits, int *k) {
    static const double powers[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                    1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
    for (int i = 1; i <= 22; i++) {
        double scaled = a * powers[i];
        if (scaled >= 1e15) return 0;
        double m = rint(scaled);
        if (m >= 1 && m / powers[i] == a) {
            int n = (int)put_decimal(digits, (unsigned long long)m);
            *k = -i;
            return n;
        }
    }
    return 0;
}

/* %.15g from Grisu2's digits when they are 15 or fewer: a normal double has only
 * one decimal of at most 15 significant digits that reads back to it (such
 * decimals are more than an ulp apart), so these are %.15g's digits, and the
 * layout below is %g's. Returns 0 when the slow way must decide. */
static size_t fast_float_text(char *o, double x) {
    double a = fabs(x);
    if (!(a >= 2.2250738585072014e-308)) return 0; /* subnormal */
    char digits[32];
    int k;
    int n = short_decimal(a, digits, &k);
    if (n == 0) n = mwj_grisu2(a, digits, &k);
    while (n > 1 && digits[n - 1] == '0') {
        n--;
        k++;
    }
    if (n > 15) return 0;
    char *start = o;
    if (x < 0) *o++ = '-';
    int exp10 = n + k - 1;
    if (exp10 < -4 || exp10 >= 15) {
        *o++ = digits[0];
        if (n > 1) {
            *o++ = '.';
            memcpy(o, digits + 1, (size_t)(n - 1));
            o += n - 1;
        }
        *o++ = 'e';
        int e = exp10;
        if (e < 0) {
            *o++ = '-';
            e = -e;
        } else {
            *o++ = '+';
        }
        if (e >= 100) *o++ = (char)('0' + e / 100);
        *o++ = (char)('0' + e / 10 % 10);
        *o++ = (char)('0' + e % 10);
    } else if (exp10 >= 0) {
        /* Integral values never get here (written with ".0" before), so there is a fraction. */
        if (n <= exp10 + 1) return 0;
        memcpy(o, digits, (size_t)(exp10 + 1));
        o += exp10 + 1;
        *o++ = '.';
        memcpy(o, digits + exp10 + 1, (size_t)(n - exp10 - 1));
        o += n - exp10 - 1;
    } else {
        *o++ = '0';
        *o++ = '.';
        for (int z = 0; z < -exp10 - 1; z++) *o++ = '0';
        memcpy(o, digits, (size_t)n);
        o += n;
    }
    return (size_t)(o - start);
}

/* A float as json.lua writes it: an integer value below 1e16 with ".0"; else the
 * first of %.15g, %.16g, %.17g that reads back to the same float (with ".0" when
 * %.17g wrote only digits). `o` has room for 32 bytes. */
static size_t float_text(char *o, double x) {
    if (x == floor(x) && x > -1e16 && x < 1e16) {
        size_t n;
        if (x == 0) {
            n = 0;
            if (signbit(x)) o[n++] = '-';
            o[n++] = '0';
        } else {
            n = integer_text(o, (lua_Integer)x);
        }
        o[n++] = '.';
        o[n++] = '0';
        return n;
    }
    size_t n = fast_float_text(o, x);
    if (n) return n;
    char s[40];
    for (int digits = 15; digits <= 16; digits++) {
        snprintf(s, sizeof s, "%.*g", digits, x);
        if (strtod(s, NULL) == x) {
            n = strlen(s);
            memcpy(o, s, n);
            return n;
        }
    }
    snprintf(s, sizeof s, "%.17g", x);
    n = strlen(s);
    memcpy(o, s, n);
    if (strspn(s + (s[0] == '-'), "0123456789") == n - (s[0] == '-')) {
        o[n++] = '.';
        o[n++] = '0';
    }
    return n;
}

/* A number, or the error for NaN and the infinities. */
static size_t number_text(lua_State *L, encoder *e, int depth, int idx, char *o) {
    if (lua_isinteger(L, idx)) return integer_text(o, lua_tointeger(L, idx));
    double x = (double)lua_tonumber(L, idx);
    if (isnan(x) || isinf(x)) {
        fail_at(L, e, depth, isnan(x) ? "NaN cannot be written as JSON" : x > 0 ? "inf cannot be written as JSON"
                                                                                 : "-inf cannot be written as JSON");
    }
    return float_text(o, x);
}

static void encode_value(lua_State *L, encoder *e, int depth);

static void newline(lua_State *L, encoder *e, int level) {
    char *o = reserve(L, e->out, 1 + e->indent_len * (size_t)level);
    *o++ = '\n';
    for (int i = 0; i < level; i++) {
        memcpy(o, e->indent, e->indent_len);
        o += e->indent_len;
    }
    e->out->size = (size_t)(o - e->out->data);
}

/* The table's declared kind: 'a' (array), 'o' (object) or 0 (none), read as
 * json.lua does: getmetatable(t).__jsontype. The table is on top. */
static int declared_kind(lua_State *L, const encoder *e, int *plain) {
    if (!lua_getmetatable(L, -1)) return 0;
    const void *mt = lua_topointer(L, -1);
    lua_pop(L, 1);
    if (mt == e->array_mt) return 'a';
    if (mt == e->object_mt) return 'o';
    *plain = 0;
    if (luaL_getmetafield(L, -1, "__metatable") == LUA_TNIL) lua_getmetatable(L, -1);
    int kind = 0;
    if (lua_type(L, -1) == LUA_TTABLE) {
        lua_getfield(L, -1, "__jsontype");
        if (lua_toboolean(L, -1)) {
            const char *declared = lua_tostring(L, -1);
            kind = declared != NULL && strcmp(declared, "array") == 0 ? 'a' : 'o';
        }
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    return kind;
}

/* A table without a declared kind is an array when its keys are exactly 1..n,
 * an object when any key is something else; a sparse list is an error. */
static int inferred_kind(lua_State *L, encoder *e, int depth) {
    lua_Integer n = 0, max = 0;
    lua_pushnil(L);
    if (!lua_next(L, -2)) return 'o';
    do {
        lua_pop(L, 1);
        if (!lua_isinteger(L, -1)) {
            lua_pop(L, 1);
            return 'o';
        }
        lua_Integer key = lua_tointeger(L, -1);
        if (key < 1) {
            lua_pop(L, 1);
            return 'o';
        }
        n++;
        if (key > max) max = key;
    } while (lua_next(L, -2));
    if (n == max) return 'a';
    push_path(L, e, depth);
    lua_pushfstring(L, ": a sparse list (%I items up to index %I) cannot be written as JSON; use mw.json.null for missing items",
                    n, max);
    lua_concat(L, 2);
    return lua_error(L);
}

/* Raises json.lua's error for the key at `idx` unless it is a string or a finite number. */
static void check_key(lua_State *L, encoder *e, int depth, int idx) {
    int type = lua_type(L, idx);
    if (type == LUA_TNUMBER) {
        char text[40];
        number_text(L, e, depth, idx, text);
    } else if (type != LUA_TSTRING) {
        char what[64];
        snprintf(what, sizeof what, "a %s key cannot be written as JSON", lua_typename(L, type));
        fail_at(L, e, depth, what);
    }
}

/* Raises the error of the first key (in pairs order) json.lua would refuse, or returns. */
static void check_keys(lua_State *L, encoder *e, int depth, int table) {
    lua_pushnil(L);
    while (lua_next(L, table)) {
        lua_pop(L, 1);
        check_key(L, e, depth, -1);
    }
}

/* `plain`: no metatable, or mw.json's own (no __index, no __len): raw reads
 * give what json.lua's t[i] and #t give. */
static void encode_array(lua_State *L, encoder *e, int depth, int plain) {
    lua_Integer n = plain ? (lua_Integer)lua_rawlen(L, -1) : luaL_len(L, -1);
    if (n == 0) {
        put(L, e->out, "[]", 2);
        return;
    }
    put_char(L, e->out, '[');
    path_step *step = &e->path[depth + 1];
    step->is_index = 1;
    for (lua_Integer i = 1; i <= n; i++) {
        if (i > 1) put_char(L, e->out, ',');
        if (e->pretty) newline(L, e, depth + 1);
        step->index = i;
        if (plain) lua_rawgeti(L, -1, i);
        else lua_geti(L, -1, i);
        encode_value(L, e, depth + 1);
        lua_pop(L, 1);
    }
    if (e->pretty) newline(L, e, depth);
    put_char(L, e->out, ']');
}

/* Lua's `<` on two strings (l_strcmp: strcoll piece by piece around NULs). */
static int string_less(const char *a, size_t la, const char *b, size_t lb) {
    for (;;) {
        int c = strcoll(a, b);
        if (c != 0) return c < 0;
        size_t len = strlen(a);
        if (len == lb) return 0;
        if (len == la) return 1;
        len++;
        a += len;
        la -= len;
        b += len;
        lb -= len;
    }
}

typedef struct sort_key {
    const char *name;
    size_t len;
    int slot; /* stack slot of the key itself */
} sort_key;

static void key_name(lua_State *L, encoder *e, int depth, int slot, char *scratch, const char **name, size_t *len) {
    int type = lua_type(L, slot);
    if (type == LUA_TSTRING) {
        *name = lua_tolstring(L, slot, len);
    } else {
        if (type != LUA_TNUMBER) check_key(L, e, depth, slot);
        *len = number_text(L, e, depth, slot, scratch);
        *name = scratch;
    }
}

static void put_member(lua_State *L, encoder *e, int depth, const char *name, size_t len, int first) {
    if (!first) put_char(L, e->out, ',');
    if (e->pretty) newline(L, e, depth + 1);
    put_string(L, e->out, name, len);
    if (e->pretty) put(L, e->out, ": ", 2);
    else put_char(L, e->out, ':');
    path_step *step = &e->path[depth + 1];
    step->is_index = 0;
    step->name = name;
    step->name_len = len;
}

static void encode_object(lua_State *L, encoder *e, int depth, int plain) {
    int table = lua_gettop(L);
    e->path[depth].iterating = 1;
    if (!e->sort_keys) {
        int first = 1;
        lua_pushnil(L);
        while (lua_next(L, table)) {
            const char *name;
            size_t len;
            char scratch[40];
            key_name(L, e, depth, -2, scratch, &name, &len);
            if (first) put_char(L, e->out, '{');
            put_member(L, e, depth, name, len, first);
            first = 0;
            if (!plain) {
                /* json.lua reads t[key], through __index. */
                lua_pop(L, 1);
                lua_pushvalue(L, -1);
                lua_gettable(L, table);
            }
            encode_value(L, e, depth + 1);
            lua_pop(L, 1);
        }
        if (first) {
            put(L, e->out, "{}", 2);
            e->path[depth].iterating = 0;
            return;
        }
    } else {
        /* Keys (and the text of number keys, as strings) on the stack, sorted by name. */
        int count = 0;
        lua_pushnil(L);
        while (lua_next(L, table)) {
            lua_pop(L, 1);
            luaL_checkstack(L, 4, "JSON object too large to sort");
            if (lua_type(L, -1) != LUA_TSTRING) check_key(L, e, depth, -1);
            lua_pushvalue(L, -1);
            if (lua_type(L, -1) == LUA_TNUMBER) {
                char scratch[40];
                size_t len = number_text(L, e, depth, -1, scratch);
                lua_pushlstring(L, scratch, len);
            } else {
                lua_pushvalue(L, -1);
            }
            lua_insert(L, -3); /* ... name, key, key (the last one for lua_next) */
            count++;
        }
        if (count == 0) {
            put(L, e->out, "{}", 2);
            e->path[depth].iterating = 0;
            return;
        }
        sort_key *keys = (sort_key *)lua_newuserdatauv(L, sizeof(sort_key) * (size_t)count, 0);
        for (int i = 0; i < count; i++) {
            int slot = table + 1 + 2 * i;
            keys[i].slot = slot + 1;
            keys[i].name = lua_tolstring(L, slot, &keys[i].len);
        }
        /* Insertion sort, stable like the names' order is total anyway. */
        for (int i = 1; i < count; i++) {
            sort_key k = keys[i];
            int j = i - 1;
            while (j >= 0 && string_less(k.name, k.len, keys[j].name, keys[j].len)) {
                keys[j + 1] = keys[j];
                j--;
            }
            keys[j + 1] = k;
        }
        put_char(L, e->out, '{');
        for (int i = 0; i < count; i++) {
            put_member(L, e, depth, keys[i].name, keys[i].len, i == 0);
            lua_pushvalue(L, keys[i].slot);
            lua_gettable(L, table);
            encode_value(L, e, depth + 1);
            lua_pop(L, 1);
        }
        lua_settop(L, table);
    }
    if (e->pretty) newline(L, e, depth);
    put_char(L, e->out, '}');
    e->path[depth].iterating = 0;
}

static void encode_table(lua_State *L, encoder *e, int depth, const void *self) {
    for (int i = 0; i < depth; i++) {
        if (e->path[i].table == self) fail_at(L, e, depth, "a table that contains itself cannot be written as JSON");
    }
    if (depth > MWJ_MAX_DEPTH) fail_at(L, e, depth, "nested more than 500 levels deep");
    e->path[depth].table = self;
    e->path[depth].slot = lua_gettop(L);
    e->path[depth].iterating = 0;
    luaL_checkstack(L, 8, "JSON nested too deep");
    int plain = 1;
    int kind = declared_kind(L, e, &plain);
    if (kind == 0) kind = inferred_kind(L, e, depth);
    if (kind == 'a') encode_array(L, e, depth, plain);
    else encode_object(L, e, depth, plain);
    e->path[depth].table = NULL;
}

/* The value on top of the stack. */
static void encode_value(lua_State *L, encoder *e, int depth) {
    switch (lua_type(L, -1)) {
    case LUA_TSTRING: {
        size_t n;
        const char *s = lua_tolstring(L, -1, &n);
        put_string(L, e->out, s, n);
        return;
    }
    case LUA_TNUMBER: {
        char *o = reserve(L, e->out, 40);
        e->out->size += number_text(L, e, depth, -1, o);
        return;
    }
    case LUA_TBOOLEAN:
        if (lua_toboolean(L, -1)) put(L, e->out, "true", 4);
        else put(L, e->out, "false", 5);
        return;
    case LUA_TNIL: put(L, e->out, "null", 4); return;
    case LUA_TTABLE: {
        const void *self = lua_topointer(L, -1);
        if (self == e->null) {
            put(L, e->out, "null", 4);
            return;
        }
        encode_table(L, e, depth, self);
        return;
    }
    default: {
        char what[64];
        snprintf(what, sizeof what, "a %s cannot be written as JSON", luaL_typename(L, -1));
        fail_at(L, e, depth, what);
    }
    }
}

/* run(encoder, value, null, array_mt, object_mt); under lua_pcall. */
static int encode_run(lua_State *L) {
    encoder *e = (encoder *)lua_touserdata(L, 1);
    e->null = lua_topointer(L, 3);
    e->array_mt = lua_topointer(L, 4);
    e->object_mt = lua_topointer(L, 5);
    lua_pushvalue(L, 2);
    encode_value(L, e, 0);
    return 0;
}

void mwj_buffer_init(mwj_buffer *b) {
    b->data = b->inline_data;
    b->size = 0;
    b->room = sizeof(b->inline_data);
}

void mwj_encode_error(lua_State *L, const char *module) {
    luaL_tolstring(L, -1, NULL);
    lua_pushfstring(L, "%s.encode: ", module);
    lua_insert(L, -2);
    lua_concat(L, 2);
    lua_replace(L, -2);
}

void mwj_buffer_free(mwj_buffer *b) {
    if (b->data != b->inline_data) free(b->data);
    b->data = b->inline_data;
    b->size = 0;
    b->room = sizeof(b->inline_data);
}

static void encoder_init(encoder *e, buffer *out) {
    mwj_buffer_init(out);
    e->out = out;
    e->indent = NULL;
    e->indent_len = 0;
    e->pretty = 0;
    e->sort_keys = 0;
    e->checking = 0;
    e->path[0].table = NULL;
    e->path[0].iterating = 0;
}

/* Encodes the value at `idx` with the upvalues found at `upvalues` (a closure's
 * upvalue index base, or stack slots). Returns the pcall status; on an error the
 * message ("mw.json.encode: <path>: ...") is on top. */
static int encode_with(lua_State *L, encoder *e, int idx, int null_idx, int array_idx, int object_idx) {
    idx = lua_absindex(L, idx);
    lua_pushcfunction(L, encode_run);
    lua_pushlightuserdata(L, e);
    lua_pushvalue(L, idx);
    lua_pushvalue(L, null_idx);
    lua_pushvalue(L, array_idx);
    lua_pushvalue(L, object_idx);
    int status = lua_pcall(L, 5, 0, 0);
    if (status != LUA_OK) mwj_encode_error(L, "mw.json");
    return status;
}

/* The options of encode(value, opts), checked as json.lua checks them. */
static void encode_options(lua_State *L, encoder *e) {
    if (lua_isnoneornil(L, 2)) return;
    if (lua_type(L, 2) != LUA_TTABLE) {
        luaL_error(L, "bad argument #2 to 'mw.json.encode' (table expected, got %s)", luaL_typename(L, 2));
    }
    lua_pushnil(L);
    while (lua_next(L, 2)) {
        const char *key = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : NULL;
        if (key && (strcmp(key, "pretty") == 0 || strcmp(key, "sort_keys") == 0)) {
            if (lua_type(L, -1) != LUA_TBOOLEAN) {
                luaL_error(L, "bad argument #2 to 'mw.json.encode' (opts.%s: boolean expected, got %s)", key,
                           luaL_typename(L, -1));
            }
        } else if (key && strcmp(key, "indent") == 0) {
            const char *indent = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
            if (indent == NULL || strspn(indent, " \t") != lua_rawlen(L, -1)) {
                luaL_error(L, "bad argument #2 to 'mw.json.encode' (opts.indent: spaces or tabs expected, got %s)",
                           luaL_typename(L, -1));
            }
        } else {
            lua_pushvalue(L, -2);
            luaL_error(L, "bad argument #2 to 'mw.json.encode' (unknown option 'opts.%s')", luaL_tolstring(L, -1, NULL));
        }
        lua_pop(L, 1);
    }
    lua_getfield(L, 2, "pretty");
    int pretty = lua_toboolean(L, -1);
    lua_getfield(L, 2, "indent");
    lua_getfield(L, 2, "sort_keys");
    if (pretty || lua_toboolean(L, -2)) {
        e->pretty = 1;
        if (lua_isstring(L, -2)) {
            e->indent = lua_tolstring(L, -2, &e->indent_len); /* anchored by opts */
        } else {
            e->indent = "  ";
            e->indent_len = 2;
        }
        e->sort_keys = !(lua_type(L, -1) == LUA_TBOOLEAN && !lua_toboolean(L, -1));
    } else {
        e->sort_keys = lua_toboolean(L, -1);
    }
    lua_pop(L, 3);
}

/* mw.json.encode(value [, opts]) -> text */
static int json_encode(lua_State *L) {
    lua_settop(L, 2);
    encoder e;
    buffer out;
    encoder_init(&e, &out);
    encode_options(L, &e);
    int status = encode_with(L, &e, 1, lua_upvalueindex(UV_NULL), lua_upvalueindex(UV_ARRAY_MT),
                             lua_upvalueindex(UV_OBJECT_MT));
    if (status != LUA_OK) {
        mwj_buffer_free(&out);
        luaL_where(L, 1);
        lua_insert(L, -2);
        lua_concat(L, 2);
        return lua_error(L);
    }
    lua_pushlstring(L, out.data, out.size);
    mwj_buffer_free(&out);
    return 1;
}

int mw_json_encode_into(lua_State *L, int idx, mwj_buffer *out) {
    idx = lua_absindex(L, idx);
    encoder e;
    encoder_init(&e, out);
    lua_rawgetp(L, LUA_REGISTRYINDEX, &slots_key); /* { null, array_mt, object_mt, ... } */
    int slots = lua_gettop(L);
    lua_rawgeti(L, slots, 1);
    lua_rawgeti(L, slots, 2);
    lua_rawgeti(L, slots, 3);
    int status = encode_with(L, &e, idx, slots + 1, slots + 2, slots + 3);
    if (status == LUA_OK) {
        lua_settop(L, slots - 1);
    } else {
        mwj_buffer_free(out);
        lua_replace(L, slots);
        lua_settop(L, slots);
    }
    return status;
}

/* ----------------------------------------------------------------- install */

int mw_json_install(lua_State *L) {
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_settop(L, 1);
    lua_getfield(L, 1, "null");         /* 2 */
    lua_getfield(L, 1, "array");
    lua_call(L, 0, 1);
    lua_getmetatable(L, -1);
    lua_replace(L, -2);                 /* 3 array_mt */
    lua_getfield(L, 1, "object");
    lua_call(L, 0, 1);
    lua_getmetatable(L, -1);
    lua_replace(L, -2);                 /* 4 object_mt */
    lua_getfield(L, 1, "decode");       /* 5 json.lua's decode */

    lua_createtable(L, 5, 0);
    for (int i = 2; i <= 4; i++) {
        lua_pushvalue(L, i);
        lua_rawseti(L, -2, i - 1);
    }
    lua_createtable(L, KEY_SLOTS, 0); /* key strings */
    for (int i = 1; i <= KEY_SLOTS; i++) {
        lua_pushboolean(L, 0);
        lua_rawseti(L, -2, i);
    }
    lua_rawseti(L, -2, 4);
    key_cache *keys = (key_cache *)lua_newuserdatauv(L, sizeof(key_cache), 0);
    memset(keys, 0, sizeof *keys);
    lua_rawseti(L, -2, 5);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &slots_key);

    for (int i = 2; i <= 5; i++) lua_pushvalue(L, i);
    lua_pushcclosure(L, json_decode, 4);
    lua_setfield(L, 1, "decode");
    for (int i = 2; i <= 5; i++) lua_pushvalue(L, i);
    lua_pushcclosure(L, json_decode_raw, 4);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &decode_raw_key);
    for (int i = 2; i <= 5; i++) lua_pushvalue(L, i);
    lua_pushcclosure(L, json_encode, 4);
    lua_setfield(L, 1, "encode");
    lua_settop(L, 1);
    return 1;
}
