/* mw.msgpack and mw.cbor: the decoders (bytes to Lua values) and the encoder
 * (Lua values to either format). The rules are stated in docs/formats.md. */
#include "CMoonPack.h"

#include <lauxlib.h>

#include <math.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { FMT_MSGPACK, FMT_CBOR };

static const char *const format_name[] = {"MessagePack", "CBOR"};
static const char *const module_name[] = {"mw.msgpack", "mw.cbor"};
static const char *const bytes_maker[] = {"mw.msgpack.bin(s)", "mw.cbor.bytes(s)"};

/* The registry table of the markers every closure and the host calls read. */
static char slots_key;
#define S_NULL 1
#define S_ARRAY_MT 2
#define S_OBJECT_MT 3
#define S_BYTES_MT 4 /* mw.msgpack.bin(s) / mw.cbor.bytes(s): { data = s } */
#define S_TAG_MT 5   /* mw.cbor.tagged(tag, value): { tag = n, value = v } */
#define S_EXT_MT 6   /* mw.msgpack.ext(type, data): { type = n, data = s } */
#define S_COUNT 6

/* ---------------------------------------------------------------- UTF-8 */

/* Well-formed UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing past
 * U+10FFFF), as Python's and Swift's decoders require. */
static int valid_utf8(const unsigned char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        /* Eight ASCII bytes at a time. */
        while (i + 8 <= n) {
            uint64_t w;
            memcpy(&w, s + i, 8);
            if (w & 0x8080808080808080ULL) break;
            i += 8;
        }
        if (i >= n) break;
        unsigned char c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        if (c >= 0xC2 && c <= 0xDF) {
            if (i + 1 >= n || (s[i + 1] & 0xC0) != 0x80) return 0;
            i += 2;
        } else if (c >= 0xE0 && c <= 0xEF) {
            if (i + 2 >= n) return 0;
            unsigned char c1 = s[i + 1];
            if ((c1 & 0xC0) != 0x80 || (s[i + 2] & 0xC0) != 0x80) return 0;
            if (c == 0xE0 && c1 < 0xA0) return 0; /* overlong */
            if (c == 0xED && c1 > 0x9F) return 0; /* surrogate */
            i += 3;
        } else if (c >= 0xF0 && c <= 0xF4) {
            if (i + 3 >= n) return 0;
            unsigned char c1 = s[i + 1];
            if ((c1 & 0xC0) != 0x80 || (s[i + 2] & 0xC0) != 0x80 || (s[i + 3] & 0xC0) != 0x80) return 0;
            if (c == 0xF0 && c1 < 0x90) return 0; /* overlong */
            if (c == 0xF4 && c1 > 0x8F) return 0; /* past U+10FFFF */
            i += 4;
        } else {
            return 0;
        }
    }
    return 1;
}

/* ---------------------------------------------------------------- decoding */

enum { STEP_INDEX, STEP_KEY, STEP_VALUE, STEP_TAG };

/* Where the decoder is, for error messages: in an array at `index`, reading a
 * map's key (number `index`), under the key in stack slot `key_slot`, or in a tag. */
typedef struct dstep {
    int kind;
    int key_slot;
    lua_Integer index;
} dstep;

typedef struct decoder {
    const uint8_t *start, *p, *end;
    int fmt;
    int bytes_as_string;
    int depth;
    int key_next;   /* the value being read is a map key */
    void *keys;     /* mw.json's key cache (its strings in stack slot D_KEYS), or NULL */
    dstep path[MWP_MAX_DEPTH + 2];
} decoder;

/* Stack slots of the decode run: 1 decoder, then the markers. */
#define D_NULL 2
#define D_ARRAY_MT 3
#define D_OBJECT_MT 4
#define D_BYTES_MT 5
#define D_TAG_MT 6
#define D_EXT_MT 7
#define D_KEYS 8

/* A path deeper than PATH_HEAD + PATH_TAIL steps is shown as its first and last steps. */
#define PATH_HEAD 6
#define PATH_TAIL 4

/* Pushes "value[2].name" for the decoder's position. */
static void push_decode_path(lua_State *L, const decoder *d) {
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    luaL_addstring(&b, "value");
    for (int i = 1; i <= d->depth; i++) {
        if (i == PATH_HEAD + 1 && d->depth > PATH_HEAD + PATH_TAIL) {
            lua_pushfstring(L, "...(%d levels)...", d->depth - PATH_HEAD - PATH_TAIL);
            luaL_addvalue(&b);
            i = d->depth - PATH_TAIL + 1;
        }
        const dstep *s = &d->path[i];
        switch (s->kind) {
        case STEP_INDEX:
            lua_pushfstring(L, "[%I]", s->index);
            luaL_addvalue(&b);
            break;
        case STEP_KEY:
            lua_pushfstring(L, "{key %I}", s->index);
            luaL_addvalue(&b);
            break;
        case STEP_TAG: luaL_addstring(&b, "<tag>"); break;
        default:
            if (lua_type(L, s->key_slot) == LUA_TSTRING) {
                luaL_addchar(&b, '.');
                lua_pushvalue(L, s->key_slot);
                luaL_addvalue(&b);
            } else {
                luaL_addchar(&b, '[');
                luaL_tolstring(L, s->key_slot, NULL);
                luaL_addvalue(&b);
                luaL_addchar(&b, ']');
            }
        }
    }
    luaL_pushresult(&b);
}

/* Raises "<path>: <what> (byte N)"; N is the offset of the byte being read. */
static int dfail(lua_State *L, decoder *d, const char *fmt, ...) {
    luaL_checkstack(L, 8, NULL);
    push_decode_path(L, d);
    lua_pushliteral(L, ": ");
    va_list ap;
    va_start(ap, fmt);
    lua_pushvfstring(L, fmt, ap);
    va_end(ap);
    lua_pushfstring(L, " (byte %I)", (lua_Integer)(d->p - d->start));
    lua_concat(L, 4);
    return lua_error(L);
}

static inline size_t left(const decoder *d) { return (size_t)(d->end - d->p); }

static inline void need(lua_State *L, decoder *d, size_t n, const char *what) {
    if (left(d) < n) {
        dfail(L, d, "truncated: %s needs %I bytes, %I left", what, (lua_Integer)n, (lua_Integer)left(d));
    }
}

static inline uint16_t be16(const uint8_t *p) { return (uint16_t)((p[0] << 8) | p[1]); }
static inline uint32_t be32(const uint8_t *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}
static inline uint64_t be64(const uint8_t *p) { return ((uint64_t)be32(p) << 32) | be32(p + 4); }

static inline double float_of_bits(uint64_t u) {
    double x;
    memcpy(&x, &u, 8);
    return x;
}

static inline double float32_of_bits(uint32_t u) {
    float x;
    memcpy(&x, &u, 4);
    return (double)x;
}

/* IEEE 754 half precision, exactly (every half is a double). */
static double half_value(uint16_t h) {
    int exp = (h >> 10) & 0x1F;
    int mant = h & 0x3FF;
    double v;
    if (exp == 0) v = ldexp(mant, -24);
    else if (exp != 31) v = ldexp(mant + 1024, exp - 25);
    else if (mant == 0) v = INFINITY;
    else {
        /* NaN: the payload moved to the top of a double's mantissa, bits kept. */
        uint64_t bits = 0x7FF0000000000000ULL | ((uint64_t)mant << 42);
        v = float_of_bits(bits);
        if (h & 0x8000) return -v;
        return v;
    }
    return (h & 0x8000) ? -v : v;
}

static void decode_value(lua_State *L, decoder *d);

/* A declared count or length for a message: at most INT64_MAX. */
static inline lua_Integer clamp(uint64_t u) { return u > (uint64_t)INT64_MAX ? INT64_MAX : (lua_Integer)u; }

/* A size hint for lua_createtable. */
static inline int hint(int64_t n) { return n <= 0 ? 0 : n > INT_MAX ? INT_MAX : (int)n; }

static void enter(lua_State *L, decoder *d, int kind) {
    if (d->depth >= MWP_MAX_DEPTH) dfail(L, d, "nested more than %d levels deep", MWP_MAX_DEPTH);
    luaL_checkstack(L, 6, "nested too deep");
    d->depth++;
    d->path[d->depth].kind = kind;
    d->path[d->depth].index = 0;
}

/* A text or byte string of `n` bytes at d->p (checked), pushed. */
static void push_string(lua_State *L, decoder *d, size_t n, int text) {
    need(L, d, n, text ? (d->fmt == FMT_CBOR ? "a text string" : "a str") : (d->fmt == FMT_CBOR ? "a byte string" : "a bin"));
    const char *s = (const char *)d->p;
    if (text && !valid_utf8(d->p, n)) {
        dfail(L, d, "%s is not valid UTF-8", d->fmt == FMT_CBOR ? "a text string" : "a str");
    }
    d->p += n;
    if (text && d->key_next && d->keys) {
        mwj_push_key(L, d->keys, D_KEYS, s, n);
        return;
    }
    if (text || d->bytes_as_string) {
        lua_pushlstring(L, s, n);
        return;
    }
    lua_createtable(L, 0, 1);
    lua_pushlstring(L, s, n);
    lua_setfield(L, -2, "data");
    lua_pushvalue(L, D_BYTES_MT);
    lua_setmetatable(L, -2);
}

/* An array of `n` items (n < 0: CBOR's indefinite length, up to a break). */
static void decode_array(lua_State *L, decoder *d, int64_t n) {
    /* Every item takes a byte at least: a longer count cannot be in the message. */
    if (n > 0 && (uint64_t)n > left(d)) {
        dfail(L, d, "an array of %I items with %I bytes left", (lua_Integer)n, (lua_Integer)left(d));
    }
    enter(L, d, STEP_INDEX);
    d->key_next = 0;
    lua_createtable(L, hint(n), 0);
    lua_pushvalue(L, D_ARRAY_MT);
    lua_setmetatable(L, -2);
    dstep *step = &d->path[d->depth];
    if (n >= 0) {
        for (int64_t i = 1; i <= n; i++) {
            step->index = i;
            decode_value(L, d);
            lua_rawseti(L, -2, i);
        }
    } else {
        for (int64_t i = 1;; i++) {
            step->index = i;
            need(L, d, 1, "an indefinite-length array");
            if (*d->p == 0xFF) {
                d->p++;
                break;
            }
            decode_value(L, d);
            lua_rawseti(L, -2, i);
        }
    }
    d->depth--;
}

/* The key on top, checked: a Lua table can hold it, and finds it again. */
static void check_key(lua_State *L, decoder *d) {
    int t = lua_type(L, -1);
    if (t == LUA_TSTRING || t == LUA_TBOOLEAN) return;
    if (t == LUA_TNUMBER) {
        if (!lua_isinteger(L, -1) && isnan(lua_tonumber(L, -1))) dfail(L, d, "a NaN map key has no Lua form");
        return;
    }
    const char *what = "a table";
    if (lua_rawequal(L, -1, D_NULL)) what = "a nil";
    else if (lua_getmetatable(L, -1)) {
        if (lua_rawequal(L, -1, D_ARRAY_MT)) what = "an array";
        else if (lua_rawequal(L, -1, D_OBJECT_MT)) what = "a map";
        else if (lua_rawequal(L, -1, D_BYTES_MT)) what = d->fmt == FMT_CBOR ? "a byte string" : "a bin";
        else if (lua_rawequal(L, -1, D_TAG_MT)) what = "a tagged";
        else if (lua_rawequal(L, -1, D_EXT_MT)) what = "an ext";
        lua_pop(L, 1);
    }
    if (strcmp(what, "a byte string") == 0 || strcmp(what, "a bin") == 0) {
        dfail(L, d, "%s map key needs the decode option { bytes = \"string\" }", what);
    }
    dfail(L, d, "%s map key has no Lua form", what);
}

/* A map of `n` pairs (n < 0: indefinite). */
static void decode_map(lua_State *L, decoder *d, int64_t n) {
    if (n > 0 && (uint64_t)n > left(d) / 2) {
        dfail(L, d, "a map of %I pairs with %I bytes left", (lua_Integer)n, (lua_Integer)left(d));
    }
    enter(L, d, STEP_KEY);
    lua_createtable(L, 0, hint(n));
    lua_pushvalue(L, D_OBJECT_MT);
    lua_setmetatable(L, -2);
    dstep *step = &d->path[d->depth];
    for (int64_t i = 1; n < 0 || i <= n; i++) {
        if (n < 0) {
            need(L, d, 1, "an indefinite-length map");
            if (*d->p == 0xFF) {
                d->p++;
                break;
            }
        }
        step->kind = STEP_KEY;
        step->index = i;
        d->key_next = 1;
        decode_value(L, d);
        d->key_next = 0;
        check_key(L, d);
        step->kind = STEP_VALUE;
        step->key_slot = lua_gettop(L);
        decode_value(L, d);
        lua_rawset(L, -3);
    }
    d->depth--;
}

/* { tag = tag, value = <next value> } (CBOR) or { type = type, data = s } (msgpack ext). */
static void decode_tag(lua_State *L, decoder *d, int64_t tag) {
    enter(L, d, STEP_TAG);
    d->key_next = 0;
    lua_createtable(L, 0, 2);
    lua_pushinteger(L, tag);
    lua_setfield(L, -2, "tag");
    decode_value(L, d);
    lua_setfield(L, -2, "value");
    lua_pushvalue(L, D_TAG_MT);
    lua_setmetatable(L, -2);
    d->depth--;
}

static void decode_ext(lua_State *L, decoder *d, size_t n) {
    need(L, d, 1 + n, "an ext");
    int type = (int8_t)*d->p++;
    lua_createtable(L, 0, 2);
    lua_pushinteger(L, type);
    lua_setfield(L, -2, "type");
    lua_pushlstring(L, (const char *)d->p, n);
    lua_setfield(L, -2, "data");
    lua_pushvalue(L, D_EXT_MT);
    lua_setmetatable(L, -2);
    d->p += n;
}

/* Raises the error for an integer past Lua's: `u` itself, or -1 - u when `negative`. */
static void integer_fail(lua_State *L, decoder *d, const uint8_t *head, uint64_t u, int negative) {
    char digits[32];
    if (negative) snprintf(digits, sizeof digits, "-%llu", (unsigned long long)u + 1ULL);
    else snprintf(digits, sizeof digits, "%llu", (unsigned long long)u);
    if (negative && u == UINT64_MAX) snprintf(digits, sizeof digits, "-18446744073709551616");
    d->p = head;
    dfail(L, d, "the integer %s is past Lua's integers (-2^63 to 2^63-1)", digits);
}

static void decode_msgpack(lua_State *L, decoder *d) {
    need(L, d, 1, "a value");
    uint8_t b = *d->p++;
    if (b <= 0x7F) {
        lua_pushinteger(L, b);
        return;
    }
    if (b >= 0xE0) {
        lua_pushinteger(L, (int8_t)b);
        return;
    }
    if (b <= 0x8F) return decode_map(L, d, b & 0x0F);
    if (b <= 0x9F) return decode_array(L, d, b & 0x0F);
    if (b <= 0xBF) return push_string(L, d, b & 0x1F, 1);
    const uint8_t *p;
    switch (b) {
    case 0xC0: lua_pushvalue(L, D_NULL); return;
    case 0xC2: lua_pushboolean(L, 0); return;
    case 0xC3: lua_pushboolean(L, 1); return;
    case 0xC4: need(L, d, 1, "a bin 8's length"); return push_string(L, d, *d->p++, 0);
    case 0xC5: need(L, d, 2, "a bin 16's length"); d->p += 2; return push_string(L, d, be16(d->p - 2), 0);
    case 0xC6: need(L, d, 4, "a bin 32's length"); d->p += 4; return push_string(L, d, be32(d->p - 4), 0);
    case 0xC7: need(L, d, 1, "an ext 8's length"); return decode_ext(L, d, *d->p++);
    case 0xC8: need(L, d, 2, "an ext 16's length"); d->p += 2; return decode_ext(L, d, be16(d->p - 2));
    case 0xC9: need(L, d, 4, "an ext 32's length"); d->p += 4; return decode_ext(L, d, be32(d->p - 4));
    case 0xCA: need(L, d, 4, "a float 32"); p = d->p; d->p += 4; lua_pushnumber(L, float32_of_bits(be32(p))); return;
    case 0xCB: need(L, d, 8, "a float 64"); p = d->p; d->p += 8; lua_pushnumber(L, float_of_bits(be64(p))); return;
    case 0xCC: need(L, d, 1, "a uint 8"); lua_pushinteger(L, *d->p++); return;
    case 0xCD: need(L, d, 2, "a uint 16"); d->p += 2; lua_pushinteger(L, be16(d->p - 2)); return;
    case 0xCE: need(L, d, 4, "a uint 32"); d->p += 4; lua_pushinteger(L, be32(d->p - 4)); return;
    case 0xCF:
        need(L, d, 8, "a uint 64");
        d->p += 8;
        if (be64(d->p - 8) > (uint64_t)INT64_MAX) integer_fail(L, d, d->p - 9, be64(d->p - 8), 0);
        lua_pushinteger(L, (lua_Integer)be64(d->p - 8));
        return;
    case 0xD0: need(L, d, 1, "an int 8"); lua_pushinteger(L, (int8_t)*d->p++); return;
    case 0xD1: need(L, d, 2, "an int 16"); d->p += 2; lua_pushinteger(L, (int16_t)be16(d->p - 2)); return;
    case 0xD2: need(L, d, 4, "an int 32"); d->p += 4; lua_pushinteger(L, (int32_t)be32(d->p - 4)); return;
    case 0xD3: need(L, d, 8, "an int 64"); d->p += 8; lua_pushinteger(L, (lua_Integer)(int64_t)be64(d->p - 8)); return;
    case 0xD4: return decode_ext(L, d, 1);
    case 0xD5: return decode_ext(L, d, 2);
    case 0xD6: return decode_ext(L, d, 4);
    case 0xD7: return decode_ext(L, d, 8);
    case 0xD8: return decode_ext(L, d, 16);
    case 0xD9: need(L, d, 1, "a str 8's length"); return push_string(L, d, *d->p++, 1);
    case 0xDA: need(L, d, 2, "a str 16's length"); d->p += 2; return push_string(L, d, be16(d->p - 2), 1);
    case 0xDB: need(L, d, 4, "a str 32's length"); d->p += 4; return push_string(L, d, be32(d->p - 4), 1);
    case 0xDC: need(L, d, 2, "an array 16's length"); d->p += 2; return decode_array(L, d, be16(d->p - 2));
    case 0xDD: need(L, d, 4, "an array 32's length"); d->p += 4; return decode_array(L, d, be32(d->p - 4));
    case 0xDE: need(L, d, 2, "a map 16's length"); d->p += 2; return decode_map(L, d, be16(d->p - 2));
    case 0xDF: need(L, d, 4, "a map 32's length"); d->p += 4; return decode_map(L, d, be32(d->p - 4));
    default: /* 0xC1 */
        d->p--;
        dfail(L, d, "0xc1 is not a MessagePack type");
    }
}

/* A CBOR head's argument (additional information `ai`); 31 (indefinite) is the caller's. */
static uint64_t cbor_argument(lua_State *L, decoder *d, int ai) {
    if (ai < 24) return (uint64_t)ai;
    switch (ai) {
    case 24: need(L, d, 1, "a head's argument"); return *d->p++;
    case 25: need(L, d, 2, "a head's argument"); d->p += 2; return be16(d->p - 2);
    case 26: need(L, d, 4, "a head's argument"); d->p += 4; return be32(d->p - 4);
    case 27: need(L, d, 8, "a head's argument"); d->p += 8; return be64(d->p - 8);
    default: d->p--; dfail(L, d, "additional information %d is reserved", ai); return 0;
    }
}

/* An indefinite-length string: definite chunks of the same major type up to a break. */
static void cbor_chunks(lua_State *L, decoder *d, int major) {
    const char *what = major == 3 ? "a text string" : "a byte string";
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    size_t total = 0;
    for (;;) {
        need(L, d, 1, "an indefinite-length string");
        uint8_t ib = *d->p++;
        if (ib == 0xFF) break;
        if ((ib >> 5) != major || (ib & 31) == 31) {
            d->p--;
            dfail(L, d, "a chunk of an indefinite-length %s is not a definite %s", what + 2, what + 2);
        }
        uint64_t n = cbor_argument(L, d, ib & 31);
        if (n > left(d)) dfail(L, d, "truncated: a chunk of %I bytes with %I left", clamp(n), (lua_Integer)left(d));
        luaL_addlstring(&b, (const char *)d->p, (size_t)n);
        d->p += n;
        total += (size_t)n;
    }
    luaL_pushresult(&b);
    if (major == 3 && !valid_utf8((const unsigned char *)lua_tostring(L, -1), total)) {
        dfail(L, d, "a text string is not valid UTF-8");
    }
    if (major == 2 && !d->bytes_as_string) {
        lua_createtable(L, 0, 1);
        lua_insert(L, -2);
        lua_setfield(L, -2, "data");
        lua_pushvalue(L, D_BYTES_MT);
        lua_setmetatable(L, -2);
    }
}

static void decode_cbor(lua_State *L, decoder *d) {
    need(L, d, 1, "a value");
    uint8_t ib = *d->p++;
    int major = ib >> 5, ai = ib & 31;
    if (major == 7) {
        const uint8_t *p;
        switch (ai) {
        case 20: lua_pushboolean(L, 0); return;
        case 21: lua_pushboolean(L, 1); return;
        case 22: /* null */
        case 23: /* undefined */ lua_pushvalue(L, D_NULL); return;
        case 25: need(L, d, 2, "a half float"); p = d->p; d->p += 2; lua_pushnumber(L, half_value(be16(p))); return;
        case 26: need(L, d, 4, "a float 32"); p = d->p; d->p += 4; lua_pushnumber(L, float32_of_bits(be32(p))); return;
        case 27: need(L, d, 8, "a float 64"); p = d->p; d->p += 8; lua_pushnumber(L, float_of_bits(be64(p))); return;
        case 31: d->p--; dfail(L, d, "a break outside an indefinite-length item"); return;
        case 24: need(L, d, 1, "a simple value"); d->p--; dfail(L, d, "the simple value %d has no Lua form", (int)d->p[1]); return;
        default:
            d->p--;
            if (ai < 24) dfail(L, d, "the simple value %d has no Lua form", ai);
            dfail(L, d, "additional information %d is reserved", ai);
            return;
        }
    }
    if (ai == 31) {
        switch (major) {
        case 2:
        case 3: return cbor_chunks(L, d, major);
        case 4: return decode_array(L, d, -1);
        case 5: return decode_map(L, d, -1);
        default: d->p--; dfail(L, d, "major type %d has no indefinite length", major); return;
        }
    }
    const uint8_t *head = d->p - 1;
    uint64_t u = cbor_argument(L, d, ai);
    switch (major) {
    case 0:
        if (u > (uint64_t)INT64_MAX) integer_fail(L, d, head, u, 0);
        lua_pushinteger(L, (lua_Integer)u);
        return;
    case 1:
        if (u > (uint64_t)INT64_MAX) integer_fail(L, d, head, u, 1);
        lua_pushinteger(L, -1 - (lua_Integer)u);
        return;
    case 2:
    case 3:
        if (u > left(d)) {
            dfail(L, d, "truncated: %s of %I bytes with %I left", major == 3 ? "a text string" : "a byte string",
                  clamp(u), (lua_Integer)left(d));
        }
        return push_string(L, d, (size_t)u, major == 3);
    case 4:
        if (u > left(d)) dfail(L, d, "an array of %I items with %I bytes left", clamp(u), (lua_Integer)left(d));
        return decode_array(L, d, (int64_t)u);
    case 5:
        if (u > left(d) / 2) dfail(L, d, "a map of %I pairs with %I bytes left", clamp(u), (lua_Integer)left(d));
        return decode_map(L, d, (int64_t)u);
    default: /* 6 */
        if (u > (uint64_t)INT64_MAX) {
            d->p = head;
            dfail(L, d, "a tag past 2^63-1");
        }
        return decode_tag(L, d, (int64_t)u);
    }
}

static void decode_value(lua_State *L, decoder *d) {
    if (d->fmt == FMT_CBOR) decode_cbor(L, d);
    else decode_msgpack(L, d);
}

/* run(decoder) -> value; under lua_pcall. */
static int decode_run(lua_State *L) {
    decoder *d = (decoder *)lua_touserdata(L, 1);
    lua_rawgetp(L, LUA_REGISTRYINDEX, &slots_key);
    for (int i = 1; i <= S_COUNT; i++) lua_rawgeti(L, 2, i);
    lua_remove(L, 2); /* 2 null .. 7 ext_mt */
    d->keys = mwj_key_cache_push(L); /* 8 */
    if (d->p == d->end) dfail(L, d, "an empty message");
    decode_value(L, d);
    if (d->p != d->end) {
        dfail(L, d, "%I bytes after the %s value", (lua_Integer)left(d), format_name[d->fmt]);
    }
    return 1;
}

/* Pushes value, nil or nil, message. Returns the status of the protected call. */
static int decode_protected(lua_State *L, int fmt, const void *bytes, size_t n, int bytes_as_string) {
    decoder state; /* on this frame: no allocation per message */
    decoder *d = &state;
    d->start = d->p = (const uint8_t *)bytes;
    d->end = d->start + n;
    d->fmt = fmt;
    d->bytes_as_string = bytes_as_string;
    d->depth = 0;
    d->key_next = 0;
    d->keys = NULL;
    lua_pushcfunction(L, decode_run);
    lua_pushlightuserdata(L, d);
    int status = lua_pcall(L, 1, 1, 0);
    if (status == LUA_OK) {
        lua_pushnil(L);
    } else if (status == LUA_ERRRUN) {
        lua_pushnil(L);
        lua_insert(L, -2);
        status = LUA_OK;
    }
    return status;
}

int mw_msgpack_decode_bytes(lua_State *L, const void *bytes, size_t n) {
    if (!lua_checkstack(L, 4)) return LUA_ERRMEM;
    return decode_protected(L, FMT_MSGPACK, bytes, n, 0);
}

int mw_cbor_decode_bytes(lua_State *L, const void *bytes, size_t n) {
    if (!lua_checkstack(L, 4)) return LUA_ERRMEM;
    return decode_protected(L, FMT_CBOR, bytes, n, 0);
}

/* mw.msgpack.decode(s [, opts]) / mw.cbor.decode: upvalue 1 is the format. */
static int lua_decode(lua_State *L) {
    int fmt = (int)lua_tointeger(L, lua_upvalueindex(1));
    if (lua_type(L, 1) != LUA_TSTRING) {
        return luaL_error(L, "bad argument #1 to '%s.decode' (string expected, got %s)", module_name[fmt], luaL_typename(L, 1));
    }
    int bytes_as_string = 0;
    if (!lua_isnoneornil(L, 2)) {
        if (lua_type(L, 2) != LUA_TTABLE) {
            return luaL_error(L, "bad argument #2 to '%s.decode' (table expected, got %s)", module_name[fmt], luaL_typename(L, 2));
        }
        lua_pushnil(L);
        while (lua_next(L, 2)) {
            if (lua_type(L, -2) != LUA_TSTRING || strcmp(lua_tostring(L, -2), "bytes") != 0) {
                lua_pushvalue(L, -2);
                return luaL_error(L, "bad argument #2 to '%s.decode' (unknown option 'opts.%s')", module_name[fmt],
                                  luaL_tolstring(L, -1, NULL));
            }
            const char *v = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
            if (v == NULL || (strcmp(v, "string") != 0 && strcmp(v, "marker") != 0)) {
                return luaL_error(L, "bad argument #2 to '%s.decode' (opts.bytes: \"string\" or \"marker\" expected)", module_name[fmt]);
            }
            bytes_as_string = strcmp(v, "string") == 0;
            lua_pop(L, 1);
        }
    }
    size_t n;
    const char *s = lua_tolstring(L, 1, &n);
    lua_settop(L, 1);
    int status = decode_protected(L, fmt, s, n, bytes_as_string);
    if (status != LUA_OK) return lua_error(L);
    if (lua_isnil(L, -1)) {
        lua_pop(L, 1);
        return 1;
    }
    return 2;
}

/* ---------------------------------------------------------------- encoding */

typedef mwj_buffer buffer;

typedef struct estep {
    const void *table;
    int is_index;
    lua_Integer index;
    int key_slot;
} estep;

/* A map's entry while its keys are sorted: its key's encoding in the scratch
 * buffer and the stack slots of the key and the value. */
typedef struct entry {
    size_t off, len;
    int key_slot, value_slot;
} entry;

typedef struct encoder {
    buffer *out;
    int fmt;
    const void *null, *array_mt, *object_mt, *bytes_mt, *tag_mt, *ext_mt;
    buffer keys;    /* the encoded keys of the maps being written, innermost last */
    buffer entries; /* their entries */
    estep path[MWP_MAX_DEPTH + 2];
} encoder;

static void grow(lua_State *L, buffer *b, size_t more) {
    size_t room = b->room * 2;
    while (room - b->size < more) {
        if (room > ((size_t)1 << 40)) luaL_error(L, "not enough memory");
        room *= 2;
    }
    char *grown = b->data == b->inline_data ? malloc(room) : realloc(b->data, room);
    if (grown == NULL) luaL_error(L, "not enough memory");
    if (b->data == b->inline_data) memcpy(grown, b->inline_data, b->size);
    b->data = grown;
    b->room = room;
}

static inline uint8_t *reserve(lua_State *L, buffer *b, size_t more) {
    if (b->room - b->size < more) grow(L, b, more);
    return (uint8_t *)b->data + b->size;
}

static inline void put(lua_State *L, buffer *b, const void *s, size_t n) {
    memcpy(reserve(L, b, n), s, n);
    b->size += n;
}

static inline void put_be(uint8_t *o, uint64_t v, int n) {
    for (int i = n - 1; i >= 0; i--) {
        o[i] = (uint8_t)v;
        v >>= 8;
    }
}

/* A head: one type byte then `n` big-endian bytes of `v`. */
static inline void put_head(lua_State *L, buffer *b, uint8_t type, uint64_t v, int n) {
    uint8_t *o = reserve(L, b, 9);
    o[0] = type;
    put_be(o + 1, v, n);
    b->size += 1 + (size_t)n;
}

/* CBOR's head for major type `major` and argument `u`, in its shortest form. */
static inline void cbor_head(lua_State *L, buffer *b, int major, uint64_t u) {
    uint8_t m = (uint8_t)(major << 5);
    if (u < 24) put_head(L, b, m | (uint8_t)u, 0, 0);
    else if (u <= 0xFF) put_head(L, b, m | 24, u, 1);
    else if (u <= 0xFFFF) put_head(L, b, m | 25, u, 2);
    else if (u <= 0xFFFFFFFFu) put_head(L, b, m | 26, u, 4);
    else put_head(L, b, m | 27, u, 8);
}

static void push_encode_path(lua_State *L, const encoder *e, int depth) {
    luaL_Buffer p;
    luaL_buffinit(L, &p);
    luaL_addstring(&p, "value");
    for (int i = 1; i <= depth; i++) {
        if (i == PATH_HEAD + 1 && depth > PATH_HEAD + PATH_TAIL) {
            lua_pushfstring(L, "...(%d levels)...", depth - PATH_HEAD - PATH_TAIL);
            luaL_addvalue(&p);
            i = depth - PATH_TAIL + 1;
        }
        const estep *s = &e->path[i];
        if (s->is_index) {
            lua_pushfstring(L, "[%I]", s->index);
            luaL_addvalue(&p);
        } else if (lua_type(L, s->key_slot) == LUA_TSTRING) {
            luaL_addchar(&p, '.');
            lua_pushvalue(L, s->key_slot);
            luaL_addvalue(&p);
        } else {
            luaL_addchar(&p, '[');
            luaL_tolstring(L, s->key_slot, NULL);
            luaL_addvalue(&p);
            luaL_addchar(&p, ']');
        }
    }
    luaL_pushresult(&p);
}

static int efail(lua_State *L, encoder *e, int depth, const char *what) {
    luaL_checkstack(L, 6, NULL);
    push_encode_path(L, e, depth);
    lua_pushfstring(L, ": %s", what);
    lua_concat(L, 2);
    return lua_error(L);
}

static void put_integer(lua_State *L, buffer *b, int fmt, lua_Integer i) {
    if (fmt == FMT_CBOR) {
        if (i >= 0) cbor_head(L, b, 0, (uint64_t)i);
        else cbor_head(L, b, 1, ~(uint64_t)i);
        return;
    }
    /* msgpack-python's choice: fixint, else the smallest uint for >= 0, int for < 0. */
    if (i >= 0) {
        if (i <= 0x7F) put_head(L, b, (uint8_t)i, 0, 0);
        else if (i <= 0xFF) put_head(L, b, 0xCC, (uint64_t)i, 1);
        else if (i <= 0xFFFF) put_head(L, b, 0xCD, (uint64_t)i, 2);
        else if (i <= 0xFFFFFFFFLL) put_head(L, b, 0xCE, (uint64_t)i, 4);
        else put_head(L, b, 0xCF, (uint64_t)i, 8);
    } else {
        if (i >= -32) put_head(L, b, (uint8_t)(int8_t)i, 0, 0);
        else if (i >= -128) put_head(L, b, 0xD0, (uint64_t)i, 1);
        else if (i >= -32768) put_head(L, b, 0xD1, (uint64_t)i, 2);
        else if (i >= -2147483648LL) put_head(L, b, 0xD2, (uint64_t)i, 4);
        else put_head(L, b, 0xD3, (uint64_t)i, 8);
    }
}

/* Every float as a float 64 (msgpack-python's and cbor2's choice for a float;
 * NaN keeps its bits). */
static void put_float(lua_State *L, buffer *b, int fmt, double x) {
    uint64_t u;
    memcpy(&u, &x, 8);
    put_head(L, b, fmt == FMT_CBOR ? 0xFB : 0xCB, u, 8);
}

static void put_string(lua_State *L, buffer *b, int fmt, const char *s, size_t n, int text) {
    if (fmt == FMT_CBOR) {
        cbor_head(L, b, text ? 3 : 2, n);
    } else if (text) {
        if (n < 32) put_head(L, b, (uint8_t)(0xA0 | n), 0, 0);
        else if (n <= 0xFF) put_head(L, b, 0xD9, n, 1);
        else if (n <= 0xFFFF) put_head(L, b, 0xDA, n, 2);
        else if (n <= 0xFFFFFFFFu) put_head(L, b, 0xDB, n, 4);
        else luaL_error(L, "a string of more than 4 GiB");
    } else {
        if (n <= 0xFF) put_head(L, b, 0xC4, n, 1);
        else if (n <= 0xFFFF) put_head(L, b, 0xC5, n, 2);
        else if (n <= 0xFFFFFFFFu) put_head(L, b, 0xC6, n, 4);
        else luaL_error(L, "a string of more than 4 GiB");
    }
    put(L, b, s, n);
}

static void put_container(lua_State *L, buffer *b, int fmt, int map, size_t n) {
    if (fmt == FMT_CBOR) {
        cbor_head(L, b, map ? 5 : 4, n);
        return;
    }
    if (n < 16) put_head(L, b, (uint8_t)((map ? 0x80 : 0x90) | n), 0, 0);
    else if (n <= 0xFFFF) put_head(L, b, map ? 0xDE : 0xDC, n, 2);
    else put_head(L, b, map ? 0xDF : 0xDD, n, 4);
}

static void encode_value(lua_State *L, encoder *e, buffer *b, int depth);

/* The kind of the table on top by its metatable: 'a', 'o', 'b' (bytes), 't'
 * (CBOR tag), 'x' (msgpack ext), or 0 (inferred). */
static int declared_kind(lua_State *L, const encoder *e) {
    if (!lua_getmetatable(L, -1)) return 0;
    const void *mt = lua_topointer(L, -1);
    lua_pop(L, 1);
    if (mt == e->array_mt) return 'a';
    if (mt == e->object_mt) return 'o';
    if (mt == e->bytes_mt) return 'b';
    if (mt == e->tag_mt) return 't';
    if (mt == e->ext_mt) return 'x';
    return 0;
}

/* Keys exactly 1..n: an array of n items; anything else (an empty table too,
 * as in mw.json): a map. */
static int inferred_kind(lua_State *L, lua_Integer *count) {
    lua_Integer n = 0, max = 0;
    lua_pushnil(L);
    while (lua_next(L, -2)) {
        lua_pop(L, 1);
        if (!lua_isinteger(L, -1) || lua_tointeger(L, -1) < 1) {
            lua_pop(L, 1);
            return 'o';
        }
        lua_Integer key = lua_tointeger(L, -1);
        n++;
        if (key > max) max = key;
    }
    *count = n;
    return n > 0 && n == max ? 'a' : 'o';
}

static void encode_array(lua_State *L, encoder *e, buffer *b, int depth, lua_Integer n) {
    put_container(L, b, e->fmt, 0, (size_t)n);
    estep *step = &e->path[depth + 1];
    step->is_index = 1;
    for (lua_Integer i = 1; i <= n; i++) {
        step->index = i;
        lua_rawgeti(L, -1, i);
        encode_value(L, e, b, depth + 1);
        lua_pop(L, 1);
    }
}

static int entry_less(const encoder *e, const entry *a, const entry *b) {
    size_t n = a->len < b->len ? a->len : b->len;
    int c = memcmp(e->keys.data + a->off, e->keys.data + b->off, n);
    return c < 0 || (c == 0 && a->len < b->len);
}

/* Stable merge sort, insertion sort for short runs (`tmp` holds n entries). */
static void sort_entries(const encoder *e, entry *a, entry *tmp, size_t n) {
    if (n <= 16) {
        for (size_t i = 1; i < n; i++) {
            entry k = a[i];
            size_t j = i;
            while (j > 0 && entry_less(e, &k, &a[j - 1])) {
                a[j] = a[j - 1];
                j--;
            }
            a[j] = k;
        }
        return;
    }
    size_t h = n / 2;
    sort_entries(e, a, tmp, h);
    sort_entries(e, a + h, tmp, n - h);
    size_t i = 0, j = h, k = 0;
    while (i < h && j < n) tmp[k++] = entry_less(e, &a[j], &a[i]) ? a[j++] : a[i++];
    while (i < h) tmp[k++] = a[i++];
    while (j < n) tmp[k++] = a[j++];
    memcpy(a, tmp, n * sizeof(entry));
}

/* A map, its pairs sorted by their keys' encoded bytes (RFC 8949's deterministic
 * order, used for both formats): the same table gives the same bytes every time. */
static void encode_map(lua_State *L, encoder *e, buffer *b, int depth) {
    int table = lua_gettop(L);
    size_t keys_base = e->keys.size, entries_base = e->entries.size;
    estep *step = &e->path[depth + 1];
    step->is_index = 0;
    size_t count = 0;
    lua_pushnil(L);
    while (lua_next(L, table)) {
        /* ... key value: both stay; a copy of the key goes on for lua_next. */
        luaL_checkstack(L, 8, "a map too large to encode");
        int key_slot = lua_gettop(L) - 1;
        step->key_slot = key_slot;
        int type = lua_type(L, key_slot);
        if (type != LUA_TSTRING && type != LUA_TNUMBER && type != LUA_TBOOLEAN) {
            lua_pushfstring(L, "a %s key cannot be written as %s", luaL_typename(L, key_slot), format_name[e->fmt]);
            efail(L, e, depth + 1, lua_tostring(L, -1));
        }
        entry en;
        en.off = e->keys.size;
        lua_pushvalue(L, key_slot);
        encode_value(L, e, &e->keys, depth + 1);
        lua_pop(L, 1);
        en.len = e->keys.size - en.off;
        en.key_slot = key_slot;
        en.value_slot = key_slot + 1;
        put(L, &e->entries, &en, sizeof en);
        count++;
        lua_pushvalue(L, key_slot);
    }
    entry *tmp = count > 16 ? (entry *)lua_newuserdatauv(L, count * sizeof(entry), 0) : NULL;
    sort_entries(e, (entry *)(e->entries.data + entries_base), tmp, count);
    put_container(L, b, e->fmt, 1, count);
    for (size_t i = 0; i < count; i++) {
        entry *en = (entry *)(e->entries.data + entries_base) + i;
        put(L, b, e->keys.data + en->off, en->len);
        step->key_slot = en->key_slot;
        lua_pushvalue(L, en->value_slot);
        encode_value(L, e, b, depth + 1);
        lua_pop(L, 1);
    }
    e->keys.size = keys_base;
    e->entries.size = entries_base;
    lua_settop(L, table);
}

/* A string field of a marker table, checked. */
static const char *marker_string(lua_State *L, encoder *e, int depth, const char *field, size_t *n, const char *what) {
    lua_getfield(L, -1, field);
    if (lua_type(L, -1) != LUA_TSTRING) {
        lua_pushfstring(L, "%s without a string .%s", what, field);
        efail(L, e, depth, lua_tostring(L, -1));
    }
    const char *s = lua_tolstring(L, -1, n);
    lua_pop(L, 1); /* the table holds it */
    return s;
}

static void encode_table(lua_State *L, encoder *e, buffer *b, int depth, const void *self) {
    int kind = declared_kind(L, e);
    if (kind == 'b') {
        size_t n;
        const char *s = marker_string(L, e, depth, "data", &n, "a bytes marker");
        put_string(L, b, e->fmt, s, n, 0);
        return;
    }
    if (kind == 'x') {
        if (e->fmt != FMT_MSGPACK) efail(L, e, depth, "a MessagePack ext cannot be written as CBOR");
        size_t n;
        const char *s = marker_string(L, e, depth, "data", &n, "an ext");
        lua_getfield(L, -1, "type");
        int isnum;
        lua_Integer type = lua_tointegerx(L, -1, &isnum);
        lua_pop(L, 1);
        if (!isnum || type < -128 || type > 127) efail(L, e, depth, "an ext's type must be an integer from -128 to 127");
        if (n == 1 || n == 2 || n == 4 || n == 8 || n == 16) {
            static const uint8_t fixext[17] = {[1] = 0xD4, [2] = 0xD5, [4] = 0xD6, [8] = 0xD7, [16] = 0xD8};
            put_head(L, b, fixext[n], (uint64_t)type, 1);
        } else {
            if (n <= 0xFF) put_head(L, b, 0xC7, n, 1);
            else if (n <= 0xFFFF) put_head(L, b, 0xC8, n, 2);
            else if (n <= 0xFFFFFFFFu) put_head(L, b, 0xC9, n, 4);
            else efail(L, e, depth, "an ext of more than 4 GiB");
            put_head(L, b, (uint8_t)(int8_t)type, 0, 0);
        }
        put(L, b, s, n);
        return;
    }
    for (int i = 0; i < depth; i++) {
        if (e->path[i].table == self) {
            lua_pushfstring(L, "a table that contains itself cannot be written as %s", format_name[e->fmt]);
            efail(L, e, depth, lua_tostring(L, -1));
        }
    }
    if (depth >= MWP_MAX_DEPTH) {
        lua_pushfstring(L, "nested more than %d levels deep", MWP_MAX_DEPTH);
        efail(L, e, depth, lua_tostring(L, -1));
    }
    luaL_checkstack(L, 10, "nested too deep");
    e->path[depth].table = self;
    if (kind == 't') {
        if (e->fmt != FMT_CBOR) efail(L, e, depth, "a CBOR tag cannot be written as MessagePack");
        lua_getfield(L, -1, "tag");
        int isnum;
        lua_Integer tag = lua_tointegerx(L, -1, &isnum);
        lua_pop(L, 1);
        if (!isnum || tag < 0) efail(L, e, depth, "a tag must be an integer from 0");
        cbor_head(L, b, 6, (uint64_t)tag);
        lua_pushliteral(L, "value");
        lua_getfield(L, -2, "value");
        e->path[depth + 1].is_index = 0;
        e->path[depth + 1].key_slot = lua_gettop(L) - 1;
        encode_value(L, e, b, depth + 1);
        lua_pop(L, 2);
    } else if (kind == 'a') {
        encode_array(L, e, b, depth, (lua_Integer)lua_rawlen(L, -1));
    } else if (kind == 'o') {
        encode_map(L, e, b, depth);
    } else {
        lua_Integer n = 0;
        if (inferred_kind(L, &n) == 'a') encode_array(L, e, b, depth, n);
        else encode_map(L, e, b, depth);
    }
    e->path[depth].table = NULL;
}

/* The value on top, into `b` (the output, or the scratch buffer for a map key). */
static void encode_value(lua_State *L, encoder *e, buffer *b, int depth) {
    switch (lua_type(L, -1)) {
    case LUA_TSTRING: {
        size_t n;
        const char *s = lua_tolstring(L, -1, &n);
        if (!valid_utf8((const unsigned char *)s, n)) {
            lua_pushfstring(L, "a string that is not valid UTF-8 cannot be a %s; send bytes as %s",
                            e->fmt == FMT_CBOR ? "text string" : "str", bytes_maker[e->fmt]);
            efail(L, e, depth, lua_tostring(L, -1));
        }
        put_string(L, b, e->fmt, s, n, 1);
        return;
    }
    case LUA_TNUMBER:
        if (lua_isinteger(L, -1)) put_integer(L, b, e->fmt, lua_tointeger(L, -1));
        else put_float(L, b, e->fmt, (double)lua_tonumber(L, -1));
        return;
    case LUA_TBOOLEAN: {
        int t = lua_toboolean(L, -1);
        put_head(L, b, e->fmt == FMT_CBOR ? (t ? 0xF5 : 0xF4) : (t ? 0xC3 : 0xC2), 0, 0);
        return;
    }
    case LUA_TNIL: put_head(L, b, e->fmt == FMT_CBOR ? 0xF6 : 0xC0, 0, 0); return;
    case LUA_TTABLE: {
        const void *self = lua_topointer(L, -1);
        if (self == e->null) {
            put_head(L, b, e->fmt == FMT_CBOR ? 0xF6 : 0xC0, 0, 0);
            return;
        }
        encode_table(L, e, b, depth, self);
        return;
    }
    default: {
        lua_pushfstring(L, "a %s cannot be written as %s", luaL_typename(L, -1), format_name[e->fmt]);
        efail(L, e, depth, lua_tostring(L, -1));
    }
    }
}

/* run(encoder, value); under lua_pcall. */
static int encode_run(lua_State *L) {
    encoder *e = (encoder *)lua_touserdata(L, 1);
    lua_rawgetp(L, LUA_REGISTRYINDEX, &slots_key);
    lua_rawgeti(L, 3, S_NULL);
    e->null = lua_topointer(L, -1);
    lua_rawgeti(L, 3, S_ARRAY_MT);
    e->array_mt = lua_topointer(L, -1);
    lua_rawgeti(L, 3, S_OBJECT_MT);
    e->object_mt = lua_topointer(L, -1);
    lua_rawgeti(L, 3, S_BYTES_MT);
    e->bytes_mt = lua_topointer(L, -1);
    lua_rawgeti(L, 3, S_TAG_MT);
    e->tag_mt = lua_topointer(L, -1);
    lua_rawgeti(L, 3, S_EXT_MT);
    e->ext_mt = lua_topointer(L, -1);
    /* The markers stay on the stack while the encoder compares pointers to them. */
    lua_pushvalue(L, 2);
    e->path[0].table = NULL;
    encode_value(L, e, e->out, 0);
    return 0;
}

/* The value at `idx` into `out`; on an error, "<module>.encode: <message>" on top. */
static int encode_protected(lua_State *L, int fmt, int idx, buffer *out) {
    idx = lua_absindex(L, idx);
    mwj_buffer_init(out);
    encoder state; /* on this frame: no allocation per message */
    encoder *e = &state;
    e->out = out;
    e->fmt = fmt;
    mwj_buffer_init(&e->keys);
    mwj_buffer_init(&e->entries);
    lua_pushcfunction(L, encode_run);
    lua_pushlightuserdata(L, e);
    lua_pushvalue(L, idx);
    int status = lua_pcall(L, 2, 0, 0);
    mwj_buffer_free(&e->keys);
    mwj_buffer_free(&e->entries);
    if (status != LUA_OK) {
        mwj_buffer_free(out);
        mwj_encode_error(L, module_name[fmt]);
    }
    return status;
}

int mw_msgpack_encode_into(lua_State *L, int idx, mwj_buffer *out) { return encode_protected(L, FMT_MSGPACK, idx, out); }

int mw_cbor_encode_into(lua_State *L, int idx, mwj_buffer *out) { return encode_protected(L, FMT_CBOR, idx, out); }

/* mw.msgpack.encode(value) / mw.cbor.encode(value) -> string */
static int lua_encode(lua_State *L) {
    int fmt = (int)lua_tointeger(L, lua_upvalueindex(1));
    lua_settop(L, 1);
    buffer out;
    int status = encode_protected(L, fmt, 1, &out);
    if (status != LUA_OK) {
        luaL_where(L, 1);
        lua_insert(L, -2);
        lua_concat(L, 2);
        return lua_error(L);
    }
    lua_pushlstring(L, out.data, out.size);
    mwj_buffer_free(&out);
    return 1;
}

/* ---------------------------------------------------------------- markers */

/* mw.msgpack.bin(s) / mw.cbor.bytes(s) -> { data = s } (upvalue 1: the metatable, 2: the name) */
static int lua_bytes(lua_State *L) {
    if (lua_type(L, 1) != LUA_TSTRING) {
        return luaL_error(L, "bad argument #1 to '%s' (string expected, got %s)", lua_tostring(L, lua_upvalueindex(2)),
                          luaL_typename(L, 1));
    }
    lua_createtable(L, 0, 1);
    lua_pushvalue(L, 1);
    lua_setfield(L, -2, "data");
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_setmetatable(L, -2);
    return 1;
}

/* mw.cbor.tagged(tag, value) -> { tag = tag, value = value } */
static int lua_tagged(lua_State *L) {
    lua_Integer tag = luaL_checkinteger(L, 1);
    luaL_argcheck(L, tag >= 0, 1, "a tag is an integer from 0");
    lua_settop(L, 2);
    lua_createtable(L, 0, 2);
    lua_pushinteger(L, tag);
    lua_setfield(L, -2, "tag");
    lua_pushvalue(L, 2);
    lua_setfield(L, -2, "value");
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_setmetatable(L, -2);
    return 1;
}

/* mw.msgpack.ext(type, data) -> { type = type, data = data } */
static int lua_ext(lua_State *L) {
    lua_Integer type = luaL_checkinteger(L, 1);
    luaL_argcheck(L, type >= -128 && type <= 127, 1, "an ext type is an integer from -128 to 127");
    luaL_checktype(L, 2, LUA_TSTRING);
    lua_createtable(L, 0, 2);
    lua_pushinteger(L, type);
    lua_setfield(L, -2, "type");
    lua_pushvalue(L, 2);
    lua_setfield(L, -2, "data");
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_setmetatable(L, -2);
    return 1;
}

/* Markers compare by content: two decodes of the same bytes are equal. */
static int marker_eq(lua_State *L) {
    static const char *const fields[] = {"data", "tag", "value", "type"};
    for (int i = 0; i < 4; i++) {
        lua_getfield(L, 1, fields[i]);
        lua_getfield(L, 2, fields[i]);
        int same = lua_compare(L, -2, -1, LUA_OPEQ);
        lua_pop(L, 2);
        if (!same) {
            lua_pushboolean(L, 0);
            return 1;
        }
    }
    lua_pushboolean(L, 1);
    return 1;
}

static int bytes_tostring(lua_State *L) {
    lua_getfield(L, 1, "data");
    if (lua_type(L, -1) != LUA_TSTRING) lua_pushliteral(L, "");
    return 1;
}

static int bytes_len(lua_State *L) {
    lua_getfield(L, 1, "data");
    lua_pushinteger(L, (lua_Integer)lua_rawlen(L, -1));
    return 1;
}

static int tag_tostring(lua_State *L) {
    lua_getfield(L, 1, "tag");
    const char *tag = luaL_tolstring(L, -1, NULL);
    lua_getfield(L, 1, "value");
    const char *value = luaL_tolstring(L, -1, NULL);
    lua_pushfstring(L, "tagged(%s, %s)", tag, value);
    return 1;
}

static int ext_tostring(lua_State *L) {
    lua_getfield(L, 1, "data");
    lua_Integer n = (lua_Integer)lua_rawlen(L, -1);
    lua_getfield(L, 1, "type");
    const char *type = luaL_tolstring(L, -1, NULL);
    lua_pushfstring(L, "ext(%s, %I bytes)", type, n);
    return 1;
}

static void new_marker_mt(lua_State *L, const char *name, lua_CFunction tostring, lua_CFunction len) {
    lua_createtable(L, 0, 5);
    lua_pushstring(L, name);
    lua_setfield(L, -2, "__name");
    lua_pushcfunction(L, marker_eq);
    lua_setfield(L, -2, "__eq");
    lua_pushcfunction(L, tostring);
    lua_setfield(L, -2, "__tostring");
    if (len) {
        lua_pushcfunction(L, len);
        lua_setfield(L, -2, "__len");
    }
}

/* The module of one format, on top. */
static void new_module(lua_State *L, int fmt, int json) {
    lua_createtable(L, 0, 10);
    lua_pushinteger(L, fmt);
    lua_pushcclosure(L, lua_encode, 1);
    lua_setfield(L, -2, "encode");
    lua_pushinteger(L, fmt);
    lua_pushcclosure(L, lua_decode, 1);
    lua_setfield(L, -2, "decode");
    /* mw.json's null and shape markers, under the same names. */
    static const char *const shared[] = {"null", "array", "object"};
    for (int i = 0; i < 3; i++) {
        lua_getfield(L, json, shared[i]);
        lua_setfield(L, -2, shared[i]);
    }
    lua_rawgetp(L, LUA_REGISTRYINDEX, &slots_key);
    lua_rawgeti(L, -1, S_BYTES_MT);
    lua_pushstring(L, fmt == FMT_CBOR ? "mw.cbor.bytes" : "mw.msgpack.bin");
    lua_pushcclosure(L, lua_bytes, 2);
    lua_setfield(L, -3, fmt == FMT_CBOR ? "bytes" : "bin");
    if (fmt == FMT_CBOR) {
        lua_rawgeti(L, -1, S_TAG_MT);
        lua_pushcclosure(L, lua_tagged, 1);
        lua_setfield(L, -3, "tagged");
    } else {
        lua_rawgeti(L, -1, S_EXT_MT);
        lua_pushcclosure(L, lua_ext, 1);
        lua_setfield(L, -3, "ext");
    }
    lua_pop(L, 1);
}

int mw_pack_install(lua_State *L) {
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_settop(L, 1);
    lua_createtable(L, S_COUNT, 0);
    lua_getfield(L, 1, "null");
    lua_rawseti(L, -2, S_NULL);
    static const char *const shapes[] = {"array", "object"};
    for (int i = 0; i < 2; i++) {
        lua_getfield(L, 1, shapes[i]);
        lua_call(L, 0, 1);
        lua_getmetatable(L, -1);
        lua_rawseti(L, -3, S_ARRAY_MT + i);
        lua_pop(L, 1);
    }
    new_marker_mt(L, "bytes", bytes_tostring, bytes_len);
    lua_rawseti(L, -2, S_BYTES_MT);
    new_marker_mt(L, "cbor.tagged", tag_tostring, NULL);
    lua_rawseti(L, -2, S_TAG_MT);
    new_marker_mt(L, "msgpack.ext", ext_tostring, NULL);
    lua_rawseti(L, -2, S_EXT_MT);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &slots_key);
    new_module(L, FMT_MSGPACK, 1);
    new_module(L, FMT_CBOR, 1);
    return 2;
}
