/* mw.protobuf's Lua side: the wire bytes to Lua tables and back, walking the
 * flattened schema of CMoonProto.h. All of it runs under lua_pcall from plain
 * C frames (no C++ here), so a Lua error never unwinds through C++.
 *
 * Values: a message is a table keyed by field name; 64-bit integers are Lua
 * integers (uint64 and fixed64 at or above 2^63 as the negative integer of the
 * same 64 bits, and encoded back from it); strings and bytes are Lua strings;
 * enums are their value's name (a number no value has stays an integer);
 * repeated fields are sequences and maps tables, both present (empty) when
 * absent on the wire; proto3 fields without presence read as their zero value.
 * Fields this schema does not know are kept, as their wire bytes, in a weak
 * table beside the message's table and written again by encode. */
#include "CMoonProto.h"

#include <lauxlib.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 100

/* Upvalues of encode, decode and their protected halves. */
#define UV_SIDE 1   /* message table -> its unknown fields' bytes (weak keys) */
#define UV_ARRAY 2  /* metatable of decoded repeated fields (mw.json.array's) */
#define UV_OBJECT 3 /* metatable of decoded maps (mw.json.object's) */
#define UV_INNER 4  /* the protected half */

static const char *const SCHEMA = "moonwire.protobuf.schema";

/* The schema userdata: the C schema and, as user values, the names table
 * (name id -> Lua string), the enums table (enum index + 1 -> { name -> number }) and
 * the marks (see mark_newindex): message index i has 2i + 1 (a decoded table of that
 * type) and 2i + 2 (the same, with unknown fields in the side table). */
typedef struct schema_box {
    mwp_schema *s;
} schema_box;

static int schema_gc(lua_State *L) {
    schema_box *box = (schema_box *)luaL_checkudata(L, 1, SCHEMA);
    mwp_schema_free(box->s);
    box->s = NULL;
    return 0;
}

static const char *type_name(int t) {
    switch (t) {
    case MWP_DOUBLE: return "double";
    case MWP_FLOAT: return "float";
    case MWP_INT64: return "int64";
    case MWP_UINT64: return "uint64";
    case MWP_INT32: return "int32";
    case MWP_FIXED64: return "fixed64";
    case MWP_FIXED32: return "fixed32";
    case MWP_BOOL: return "bool";
    case MWP_STRING: return "string";
    case MWP_GROUP: return "group";
    case MWP_MESSAGE: return "message";
    case MWP_BYTES: return "bytes";
    case MWP_UINT32: return "uint32";
    case MWP_ENUM: return "enum";
    case MWP_SFIXED32: return "sfixed32";
    case MWP_SFIXED64: return "sfixed64";
    case MWP_SINT32: return "sint32";
    default: return "sint64";
    }
}

/* The wire type a field's values have (packed repeated fields aside). */
static int wire_type(int t) {
    switch (t) {
    case MWP_DOUBLE: case MWP_FIXED64: case MWP_SFIXED64: return 1;
    case MWP_FLOAT: case MWP_FIXED32: case MWP_SFIXED32: return 5;
    case MWP_STRING: case MWP_BYTES: case MWP_MESSAGE: return 2;
    case MWP_GROUP: return 3;
    default: return 0;
    }
}

static const char *wire_name(int wt) {
    switch (wt) {
    case 0: return "varint";
    case 1: return "64-bit";
    case 2: return "length-delimited";
    case 3: return "start-group";
    case 4: return "end-group";
    case 5: return "32-bit";
    default: return "invalid";
    }
}

static int packable(int t) { return t != MWP_STRING && t != MWP_BYTES && t != MWP_MESSAGE && t != MWP_GROUP; }

static const mwp_field *field_by_number(const mwp_message *m, uint32_t number) {
    if (number < m->dense) {
        uint16_t i = m->by_number[number];
        return i ? &m->fields[i - 1] : NULL;
    }
    uint32_t lo = 0, hi = m->nfields;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (m->fields[mid].number < number) lo = mid + 1;
        else hi = mid;
    }
    return lo < m->nfields && m->fields[lo].number == number ? &m->fields[lo] : NULL;
}

static const mwp_enum_value *enum_by_number(const mwp_enum *e, int32_t number) {
    uint32_t lo = 0, hi = e->nvalues;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (e->values[mid].number < number) lo = mid + 1;
        else hi = mid;
    }
    return lo < e->nvalues && e->values[lo].number == number ? &e->values[lo] : NULL;
}

/* Little-endian fixed-width values (the wire's order) */
static inline uint64_t load_le64(const uint8_t *p) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    uint64_t u;
    memcpy(&u, p, 8);
    return u;
#else
    uint64_t u = 0;
    for (int i = 7; i >= 0; i--) u = (u << 8) | p[i];
    return u;
#endif
}
static inline uint32_t load_le32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* UTF-8 as Unicode defines it: no overlong forms, no surrogates, nothing past U+10FFFF. */
static size_t utf8_invalid_at(const unsigned char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        /* ASCII eight bytes at a time */
        uint64_t word;
        if (n - i >= 8 && (memcpy(&word, s + i, 8), (word & 0x8080808080808080ull) == 0)) {
            i += 8;
            continue;
        }
        unsigned char c = s[i];
        if (c < 0x80) { i++; continue; }
        size_t len;
        unsigned lo = 0x80, hi = 0xBF;
        if (c >= 0xC2 && c <= 0xDF) len = 2;
        else if (c == 0xE0) { len = 3; lo = 0xA0; }
        else if (c >= 0xE1 && c <= 0xEC) len = 3;
        else if (c == 0xED) { len = 3; hi = 0x9F; }
        else if (c >= 0xEE && c <= 0xEF) len = 3;
        else if (c == 0xF0) { len = 4; lo = 0x90; }
        else if (c >= 0xF1 && c <= 0xF3) len = 4;
        else if (c == 0xF4) { len = 4; hi = 0x8F; }
        else return i;
        if (i + len > n) return i;
        if (s[i + 1] < lo || s[i + 1] > hi) return i;
        for (size_t k = 2; k < len; k++)
            if (s[i + k] < 0x80 || s[i + k] > 0xBF) return i;
        i += len;
    }
    return (size_t)-1;
}

/* ================================================================ decoding */

typedef struct decoder {
    const mwp_schema *s;
    const uint8_t *begin;
    int names, enums, side, array_mt, object_mt, marks; /* stack slots */
    const mwp_message *root;
    const mwp_field *path[MAX_DEPTH + 4];
} decoder;

/* Raises "<type>.<field>...: <what> at byte N". */
static int dfail(lua_State *L, decoder *d, int depth, const uint8_t *at, const char *fmt, ...) {
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    luaL_addstring(&b, d->root->full_name);
    for (int i = 0; i < depth && i <= MAX_DEPTH; i++) {
        if (!d->path[i]) break;
        luaL_addchar(&b, '.');
        luaL_addstring(&b, d->path[i]->name);
    }
    luaL_addstring(&b, ": ");
    char text[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    luaL_addstring(&b, text);
    if (at) {
        snprintf(text, sizeof text, " (at byte %lu)", (unsigned long)(at - d->begin));
        luaL_addstring(&b, text);
    }
    luaL_pushresult(&b);
    return lua_error(L);
}

static inline const uint8_t *read_varint(const uint8_t *p, const uint8_t *end, uint64_t *out) {
    if (p < end && *p < 0x80) {
        *out = *p;
        return p + 1;
    }
    uint64_t v = 0;
    for (int shift = 0; shift < 70; shift += 7) {
        if (p >= end) return NULL;
        uint8_t byte = *p++;
        if (shift < 64) v |= (uint64_t)(byte & 0x7F) << shift;
        if (byte < 0x80) {
            *out = v;
            return p;
        }
    }
    return NULL; /* more than 10 bytes */
}

static __attribute__((noinline)) const uint8_t *dvarint_slow(lua_State *L, decoder *d, int depth, const uint8_t *p,
                                                            const uint8_t *end, uint64_t *out) {
    const uint8_t *q = read_varint(p, end, out);
    if (!q) {
        if (end - p >= 10) dfail(L, d, depth, p, "varint longer than 10 bytes");
        dfail(L, d, depth, p, "truncated varint");
    }
    return q;
}

/* A one-byte varint (most tags, lengths and small numbers) without a call. */
static inline const uint8_t *dvarint(lua_State *L, decoder *d, int depth, const uint8_t *p, const uint8_t *end,
                                     uint64_t *out) {
    if (__builtin_expect(p < end && *p < 0x80, 1)) {
        *out = *p;
        return p + 1;
    }
    return dvarint_slow(L, d, depth, p, end, out);
}

/* The length of a length-delimited value, checked against what is left. */
static const uint8_t *dlength(lua_State *L, decoder *d, int depth, const uint8_t *p, const uint8_t *end, size_t *len) {
    uint64_t n;
    const uint8_t *q = dvarint(L, d, depth, p, end, &n);
    if (n > (uint64_t)(end - q))
        dfail(L, d, depth, p, "length %llu past the end of the message (%lu bytes left)", (unsigned long long)n,
              (unsigned long)(end - q));
    *len = (size_t)n;
    return q;
}

/* Skips a field this message does not know; returns where it ends. */
static const uint8_t *skip_field(lua_State *L, decoder *d, int depth, const uint8_t *p, const uint8_t *end, int wt,
                                 uint32_t number, int group_depth) {
    uint64_t v;
    size_t len;
    switch (wt) {
    case 0: return dvarint(L, d, depth, p, end, &v);
    case 1:
        if (end - p < 8) dfail(L, d, depth, p, "truncated 64-bit value of field %u", number);
        return p + 8;
    case 5:
        if (end - p < 4) dfail(L, d, depth, p, "truncated 32-bit value of field %u", number);
        return p + 4;
    case 2:
        p = dlength(L, d, depth, p, end, &len);
        return p + len;
    case 3:
        if (group_depth >= MAX_DEPTH) dfail(L, d, depth, p, "groups nested deeper than %d levels", MAX_DEPTH);
        for (;;) {
            uint64_t tag;
            const uint8_t *at = p;
            if (p >= end) dfail(L, d, depth, p, "group %u not closed", number);
            p = dvarint(L, d, depth, p, end, &tag);
            int w = (int)(tag & 7);
            uint32_t n = (uint32_t)(tag >> 3);
            if (tag >> 32 || n == 0) dfail(L, d, depth, at, "invalid tag %llu", (unsigned long long)tag);
            if (w == 4) {
                if (n != number) dfail(L, d, depth, at, "end of group %u inside group %u", n, number);
                return p;
            }
            p = skip_field(L, d, depth, p, end, w, n, group_depth + 1);
        }
    default: return (const uint8_t *)(intptr_t)dfail(L, d, depth, p, "invalid wire type %d of field %u", wt, number);
    }
}

#define SEEN_WORDS 16 /* fields beyond 1024 are looked up instead */

typedef struct seen_set {
    uint64_t bits[SEEN_WORDS];
} seen_set;

static inline int seen_get(const seen_set *s, uint32_t i) {
    return i < 64 * SEEN_WORDS ? (int)((s->bits[i / 64] >> (i % 64)) & 1) : -1;
}
static inline void seen_put(seen_set *s, uint32_t i, int on) {
    if (i >= 64 * SEEN_WORDS) return;
    if (on) s->bits[i / 64] |= (uint64_t)1 << (i % 64);
    else s->bits[i / 64] &= ~((uint64_t)1 << (i % 64));
}

static void decode_message(lua_State *L, decoder *d, const mwp_message *m, const uint8_t *p, const uint8_t *end,
                           int depth, uint32_t group, const uint8_t **group_end);

/* A message's table, sized for its fields (most are there once decoded: the
 * zero values fill in), so that filling it does not rehash it again and again. */
static inline void new_message_table(lua_State *L, const mwp_message *m) {
    lua_createtable(L, 0, (int)(m->nfields < 64 ? m->nfields : 64));
}

static void push_enum(lua_State *L, decoder *d, const mwp_field *f, int32_t number) {
    const mwp_enum_value *v = enum_by_number(&d->s->enums[f->sub], number);
    if (v) lua_rawgeti(L, d->names, v->name_id);
    else lua_pushinteger(L, number);
}

/* A field's zero value (proto3 fields without presence, map entries without key or value). */
static void push_default(lua_State *L, decoder *d, const mwp_field *f, int depth) {
    switch (f->type) {
    case MWP_DOUBLE: case MWP_FLOAT: lua_pushnumber(L, 0.0); break;
    case MWP_BOOL: lua_pushboolean(L, 0); break;
    case MWP_STRING: case MWP_BYTES: lua_pushliteral(L, ""); break;
    case MWP_ENUM: {
        const mwp_enum *e = &d->s->enums[f->sub];
        if (enum_by_number(e, 0) || e->ndeclared == 0) push_enum(L, d, f, 0);
        else lua_rawgeti(L, d->names, e->declared[0].name_id);
        break;
    }
    case MWP_MESSAGE: case MWP_GROUP:
        new_message_table(L, &d->s->messages[f->sub]);
        decode_message(L, d, &d->s->messages[f->sub], NULL, NULL, depth, 0, NULL);
        break;
    default: lua_pushinteger(L, 0);
    }
}

/* Reads one value of `f` (wire type already checked) and pushes it. */
static const uint8_t *push_value(lua_State *L, decoder *d, const mwp_field *f, const uint8_t *p, const uint8_t *end,
                                 int depth) {
    uint64_t v;
    size_t len;
    switch (f->type) {
    case MWP_INT64: case MWP_UINT64:
        p = dvarint(L, d, depth, p, end, &v);
        lua_pushinteger(L, (lua_Integer)v);
        return p;
    case MWP_INT32:
        p = dvarint(L, d, depth, p, end, &v);
        lua_pushinteger(L, (int32_t)(uint32_t)v);
        return p;
    case MWP_UINT32:
        p = dvarint(L, d, depth, p, end, &v);
        lua_pushinteger(L, (uint32_t)v);
        return p;
    case MWP_SINT32: {
        p = dvarint(L, d, depth, p, end, &v);
        uint32_t u = (uint32_t)v;
        lua_pushinteger(L, (int32_t)((u >> 1) ^ (0u - (u & 1))));
        return p;
    }
    case MWP_SINT64:
        p = dvarint(L, d, depth, p, end, &v);
        lua_pushinteger(L, (lua_Integer)((v >> 1) ^ (0 - (v & 1))));
        return p;
    case MWP_BOOL:
        p = dvarint(L, d, depth, p, end, &v);
        lua_pushboolean(L, v != 0);
        return p;
    case MWP_ENUM:
        p = dvarint(L, d, depth, p, end, &v);
        push_enum(L, d, f, (int32_t)(uint32_t)v);
        return p;
    case MWP_FIXED64: case MWP_SFIXED64: case MWP_DOUBLE: {
        if (end - p < 8) dfail(L, d, depth, p, "truncated 64-bit value");
        uint64_t u = load_le64(p);
        if (f->type == MWP_DOUBLE) {
            double x;
            memcpy(&x, &u, 8);
            lua_pushnumber(L, x);
        } else {
            lua_pushinteger(L, (lua_Integer)u);
        }
        return p + 8;
    }
    case MWP_FIXED32: case MWP_SFIXED32: case MWP_FLOAT: {
        if (end - p < 4) dfail(L, d, depth, p, "truncated 32-bit value");
        uint32_t u = load_le32(p);
        if (f->type == MWP_FLOAT) {
            float x;
            memcpy(&x, &u, 4);
            lua_pushnumber(L, (double)x);
        } else if (f->type == MWP_FIXED32) {
            lua_pushinteger(L, u);
        } else {
            lua_pushinteger(L, (int32_t)u);
        }
        return p + 4;
    }
    case MWP_STRING: case MWP_BYTES: {
        const uint8_t *at = p;
        p = dlength(L, d, depth, p, end, &len);
        if (f->utf8) {
            size_t bad = utf8_invalid_at(p, len);
            if (bad != (size_t)-1) dfail(L, d, depth, at, "invalid UTF-8 in a string (byte %lu of %lu)", (unsigned long)bad + 1, (unsigned long)len);
        }
        lua_pushlstring(L, (const char *)p, len);
        return p + len;
    }
    case MWP_MESSAGE: {
        p = dlength(L, d, depth, p, end, &len);
        if (depth > MAX_DEPTH) dfail(L, d, depth, p, "messages nested deeper than %d levels", MAX_DEPTH);
        new_message_table(L, &d->s->messages[f->sub]);
        decode_message(L, d, &d->s->messages[f->sub], p, p + len, depth, 0, NULL);
        return p + len;
    }
    default: { /* MWP_GROUP */
        const uint8_t *after;
        if (depth > MAX_DEPTH) dfail(L, d, depth, p, "messages nested deeper than %d levels", MAX_DEPTH);
        new_message_table(L, &d->s->messages[f->sub]);
        decode_message(L, d, &d->s->messages[f->sub], p, end, depth, f->number, &after);
        return after;
    }
    }
}

/* One map entry into the map table at `map`. */
static void decode_entry(lua_State *L, decoder *d, const mwp_field *f, int map, const uint8_t *p, const uint8_t *end,
                         int depth) {
    const mwp_message *entry = &d->s->messages[f->sub];
    const mwp_field *key = field_by_number(entry, 1), *value = field_by_number(entry, 2);
    if (!key || !value) dfail(L, d, depth, p, "map entry without key or value field");
    lua_pushnil(L);
    lua_pushnil(L);
    int k = lua_gettop(L) - 1;
    while (p < end) {
        uint64_t tag;
        const uint8_t *at = p;
        p = dvarint(L, d, depth, p, end, &tag);
        int wt = (int)(tag & 7);
        uint32_t number = (uint32_t)(tag >> 3);
        if (tag >> 32 || number == 0) dfail(L, d, depth, at, "invalid tag %llu in a map entry", (unsigned long long)tag);
        const mwp_field *g = number == 1 ? key : number == 2 ? value : NULL;
        if (!g || wt != wire_type(g->type)) {
            p = skip_field(L, d, depth, p, end, wt, number, 0);
            continue;
        }
        if (g->type == MWP_MESSAGE && !lua_isnil(L, k + 1)) {
            /* a repeated value message merges */
            size_t len;
            p = dlength(L, d, depth, p, end, &len);
            if (depth > MAX_DEPTH) dfail(L, d, depth, p, "messages nested deeper than %d levels", MAX_DEPTH);
            lua_pushvalue(L, k + 1);
            decode_message(L, d, &d->s->messages[g->sub], p, p + len, depth, 0, NULL);
            lua_pop(L, 1);
            p += len;
            continue;
        }
        p = push_value(L, d, g, p, end, depth);
        lua_replace(L, number == 1 ? k : k + 1);
    }
    if (lua_isnil(L, k)) {
        push_default(L, d, key, depth);
        lua_replace(L, k);
    }
    if (lua_isnil(L, k + 1)) {
        push_default(L, d, value, depth);
        lua_replace(L, k + 1);
    }
    lua_rawset(L, map);
}

/* How many elements of repeated field `f` start at p, where its tag `tag` is: the
 * elements right after it with the same tag, or the values of a packed run; at most
 * 1024. Only a size hint for the field's table (4 elements added one by one resize it
 * three times): bytes that do not parse end the count, and decode reports them. */
static int count_elements(const mwp_field *f, const uint8_t *p, const uint8_t *end, uint64_t tag) {
    int wt = (int)(tag & 7), n = 0;
    uint64_t t, len;
    if (wt == 2 && packable(f->type)) {
        const uint8_t *q = read_varint(p, end, &t);
        if (q) q = read_varint(q, end, &len);
        if (!q || len > (uint64_t)(end - q)) return 0;
        int fixed = wire_type(f->type);
        if (fixed == 1) return len / 8 < 1024 ? (int)(len / 8) : 1024;
        if (fixed == 5) return len / 4 < 1024 ? (int)(len / 4) : 1024;
        for (const uint8_t *stop = q + len; q < stop && n < 1024; q++) n += *q < 0x80;
        return n;
    }
    while (p < end && n < 1024) {
        const uint8_t *q = read_varint(p, end, &t);
        if (!q || t != tag) break;
        switch (wt) {
        case 0: q = read_varint(q, end, &len); break;
        case 1: q = end - q >= 8 ? q + 8 : NULL; break;
        case 5: q = end - q >= 4 ? q + 4 : NULL; break;
        case 2:
            q = read_varint(q, end, &len);
            q = q && len <= (uint64_t)(end - q) ? q + len : NULL;
            break;
        default: q = NULL;
        }
        if (!q) break;
        n++;
        p = q;
    }
    return n;
}

/* The table of repeated field or map `f` of the message at `t`, made the first time
 * (with room for `narr` elements). Returns 1 when it was already there, 0 when made. */
static int push_container(lua_State *L, decoder *d, const mwp_field *f, int t, seen_set *seen, uint32_t i, int narr) {
    if (seen_get(seen, i) != 0) {
        lua_rawgeti(L, d->names, f->name_id);
        if (lua_rawget(L, t) == LUA_TTABLE) return 1;
        lua_pop(L, 1);
    }
    lua_createtable(L, narr, 0);
    lua_pushvalue(L, f->map ? d->object_mt : d->array_mt);
    lua_setmetatable(L, -2);
    lua_rawgeti(L, d->names, f->name_id);
    lua_pushvalue(L, -2);
    lua_rawset(L, t);
    seen_put(seen, i, 1);
    return 0;
}

/* Decodes the fields in p ..< end into the table on top of the stack (left there).
 * For a group, reads up to its end tag and sets *group_end after it. */
static void decode_message(lua_State *L, decoder *d, const mwp_message *m, const uint8_t *p, const uint8_t *end,
                           int depth, uint32_t group, const uint8_t **group_end) {
    if (!lua_checkstack(L, 40)) dfail(L, d, depth, p, "out of Lua stack");
    int t = lua_gettop(L);
    seen_set seen;
    memset(&seen, 0, sizeof seen);
    /* Unknown fields: the pending run of contiguous bytes, and the runs pushed so far. */
    const uint8_t *run = NULL, *run_end = NULL;
    int pieces = 0;
    d->path[depth] = NULL;
    for (;;) {
        if (p >= end) {
            if (group) dfail(L, d, depth, p, "group not closed");
            break;
        }
        const uint8_t *start = p;
        uint64_t tag;
        p = dvarint(L, d, depth, p, end, &tag);
        int wt = (int)(tag & 7);
        uint32_t number = (uint32_t)(tag >> 3);
        if (tag >> 32 || number == 0) dfail(L, d, depth, start, "invalid tag %llu", (unsigned long long)tag);
        if (wt == 4) {
            if (group != number) dfail(L, d, depth, start, "unexpected end-group tag of field %u", number);
            *group_end = p;
            break;
        }
        const mwp_field *f = field_by_number(m, number);
        if (!f) {
            p = skip_field(L, d, depth, p, end, wt, number, 0);
            if (run_end == start) {
                run_end = p;
            } else {
                if (run) {
                    lua_pushlstring(L, (const char *)run, (size_t)(run_end - run));
                    if (++pieces == 32) {
                        lua_concat(L, pieces);
                        pieces = 1;
                    }
                }
                run = start;
                run_end = p;
            }
            continue;
        }
        uint32_t i = (uint32_t)(f - m->fields);
        d->path[depth] = f;
        int want = wire_type(f->type);
        if (f->map) {
            size_t len;
            if (wt != 2) dfail(L, d, depth + 1, start, "wire type %d (%s) for a map", wt, wire_name(wt));
            p = dlength(L, d, depth + 1, p, end, &len);
            push_container(L, d, f, t, &seen, i, 0);
            decode_entry(L, d, f, lua_gettop(L), p, p + len, depth + 1);
            lua_pop(L, 1);
            p += len;
        } else if (f->repeated) {
            int had = push_container(L, d, f, t, &seen, i, seen_get(&seen, i) ? 0 : count_elements(f, start, end, tag));
            int a = lua_gettop(L);
            lua_Integer n = had ? (lua_Integer)lua_rawlen(L, a) : 0;
            if (wt == 2 && packable(f->type)) {
                size_t len;
                p = dlength(L, d, depth + 1, p, end, &len);
                const uint8_t *stop = p + len;
                while (p < stop) {
                    p = push_value(L, d, f, p, stop, depth + 1);
                    lua_rawseti(L, a, ++n);
                }
            } else {
                if (wt != want)
                    dfail(L, d, depth + 1, start, "wire type %d (%s) where %s expects %d (%s)", wt, wire_name(wt),
                          type_name(f->type), want, wire_name(want));
                for (;;) {
                    p = push_value(L, d, f, p, end, depth + 1);
                    lua_rawseti(L, a, ++n);
                    /* The elements that follow with the same tag go into the same list
                     * without looking it up again; anything else goes round the loop. */
                    uint64_t next;
                    const uint8_t *q = p < end ? read_varint(p, end, &next) : NULL;
                    if (!q || next != tag) break;
                    p = q;
                }
            }
            lua_pop(L, 1);
        } else {
            if (wt != want)
                dfail(L, d, depth + 1, start, "wire type %d (%s) where %s expects %d (%s)", wt, wire_name(wt),
                      type_name(f->type), want, wire_name(want));
            if (f->oneof >= 0) {
                /* the last member of a oneof on the wire wins */
                const mwp_oneof *o = &m->oneofs[f->oneof];
                for (uint32_t k = 0; k < o->count; k++) {
                    uint32_t j = o->fields[k];
                    if (j != i && seen_get(&seen, j) != 0) {
                        lua_rawgeti(L, d->names, m->fields[j].name_id);
                        lua_pushnil(L);
                        lua_rawset(L, t);
                        seen_put(&seen, j, 0);
                    }
                }
            }
            int was = seen_get(&seen, i);
            if ((f->type == MWP_MESSAGE || f->type == MWP_GROUP) && was != 0
                && (lua_rawgeti(L, d->names, f->name_id), lua_rawget(L, t)) == LUA_TTABLE) {
                /* a message field seen twice: the second merges into the first */
                const mwp_message *sub = &d->s->messages[f->sub];
                if (depth + 1 > MAX_DEPTH) dfail(L, d, depth + 1, p, "messages nested deeper than %d levels", MAX_DEPTH);
                if (f->type == MWP_MESSAGE) {
                    size_t len;
                    p = dlength(L, d, depth + 1, p, end, &len);
                    decode_message(L, d, sub, p, p + len, depth + 1, 0, NULL);
                    p += len;
                } else {
                    decode_message(L, d, sub, p, end, depth + 1, f->number, &p);
                }
                lua_pop(L, 1);
            } else {
                if ((f->type == MWP_MESSAGE || f->type == MWP_GROUP) && was != 0) lua_pop(L, 1);
                lua_rawgeti(L, d->names, f->name_id);
                p = push_value(L, d, f, p, end, depth + 1);
                lua_rawset(L, t);
                seen_put(&seen, i, 1);
            }
        }
        d->path[depth] = NULL;
    }
    d->path[depth] = NULL;
    /* Zero values and empty containers for what the wire did not have. */
    for (uint32_t i = 0; i < m->nfields; i++) {
        const mwp_field *f = &m->fields[i];
        int was = seen_get(&seen, i);
        if (f->required && was != 1) {
            /* (a message merged into may have it from its first part) */
            lua_rawgeti(L, d->names, f->name_id);
            int present = lua_rawget(L, t) != LUA_TNIL;
            lua_pop(L, 1);
            if (!present) {
                d->path[depth] = f;
                dfail(L, d, depth + 1, NULL, "required field missing");
            }
        }
        if (f->presence && !f->repeated) continue;
        if (was == 1) continue;
        if (was == -1) {
            lua_rawgeti(L, d->names, f->name_id);
            int present = lua_rawget(L, t) != LUA_TNIL;
            lua_pop(L, 1);
            if (present) continue;
        }
        if (f->repeated) {
            push_container(L, d, f, t, &seen, i, 0);
            lua_pop(L, 1);
        } else {
            lua_rawgeti(L, d->names, f->name_id);
            push_default(L, d, f, depth + 1);
            lua_rawset(L, t);
        }
    }
    if (run) {
        lua_pushlstring(L, (const char *)run, (size_t)(run_end - run));
        pieces++;
    }
    if (pieces) {
        if (pieces > 1) lua_concat(L, pieces);
        lua_pushvalue(L, t);
        if (lua_rawget(L, d->side) == LUA_TSTRING) {
            /* a message merged into: its earlier unknown fields first */
            lua_insert(L, -2);
            lua_concat(L, 2);
        } else {
            lua_pop(L, 1);
        }
        lua_pushvalue(L, t);
        lua_insert(L, -2);
        lua_rawset(L, d->side);
    }
    /* Marked as decoded: encode need not count its keys (see mark_newindex). A
     * message merged into keeps the mark its first part gave it. */
    if (pieces || !lua_getmetatable(L, t)) {
        lua_rawgeti(L, d->marks, 2 * (lua_Integer)(m - d->s->messages) + (pieces ? 2 : 1));
        lua_setmetatable(L, t);
    }
    lua_settop(L, t);
}

/* The decode's protected half: (schema, index, pointer, length) -> value. */
static int decode_run(lua_State *L) {
    schema_box *box = (schema_box *)lua_touserdata(L, 1);
    lua_Integer index = lua_tointeger(L, 2);
    const uint8_t *bytes = (const uint8_t *)lua_touserdata(L, 3);
    size_t n = (size_t)lua_tointeger(L, 4);
    decoder d;
    d.path[0] = NULL; /* (each level sets its own entry, as for the encoder) */
    d.s = box->s;
    d.begin = bytes;
    d.root = &d.s->messages[index];
    lua_settop(L, 1);
    lua_getiuservalue(L, 1, 1);
    d.names = 2;
    lua_getiuservalue(L, 1, 2);
    d.enums = 3;
    lua_pushvalue(L, lua_upvalueindex(UV_SIDE));
    d.side = 4;
    lua_pushvalue(L, lua_upvalueindex(UV_ARRAY));
    d.array_mt = 5;
    lua_pushvalue(L, lua_upvalueindex(UV_OBJECT));
    d.object_mt = 6;
    lua_getiuservalue(L, 1, 3);
    d.marks = 7;
    new_message_table(L, d.root);
    decode_message(L, &d, d.root, bytes, bytes + n, 0, 0, NULL);
    return 1;
}

/* Checks (schema, index) at 1 and 2 and returns the schema. */
static mwp_schema *check_type(lua_State *L, const char *fname) {
    schema_box *box = (schema_box *)luaL_checkudata(L, 1, SCHEMA);
    lua_Integer index = luaL_checkinteger(L, 2);
    if (!box->s || index < 0 || (lua_Unsigned)index >= box->s->nmessages)
        luaL_error(L, "%s: no such message type", fname);
    return box->s;
}

/* decode(schema, index, bytes) -> table | nil, err */
static int proto_decode(lua_State *L) {
    check_type(L, "mw.protobuf.decode");
    if (lua_type(L, 3) != LUA_TSTRING) {
        lua_pushnil(L);
        lua_pushfstring(L, "bytes expected, got %s", luaL_typename(L, 3));
        return 2;
    }
    size_t n;
    const char *bytes = lua_tolstring(L, 3, &n);
    lua_pushvalue(L, lua_upvalueindex(UV_INNER));
    lua_pushvalue(L, 1);
    lua_pushvalue(L, 2);
    lua_pushlightuserdata(L, (void *)bytes);
    lua_pushinteger(L, (lua_Integer)n);
    if (lua_pcall(L, 4, 1, 0) != LUA_OK) {
        lua_pushnil(L);
        lua_insert(L, -2);
        return 2;
    }
    return 1;
}

static char decode_key;

int mw_protobuf_decode_bytes(lua_State *L, int schema_idx, int index, const void *bytes, size_t n) {
    schema_idx = lua_absindex(L, schema_idx);
    lua_rawgetp(L, LUA_REGISTRYINDEX, &decode_key);
    lua_pushvalue(L, schema_idx);
    lua_pushinteger(L, index);
    lua_pushlstring(L, (const char *)bytes, n);
    return lua_pcall(L, 3, 2, 0);
}

/* ================================================================ encoding */

typedef struct buffer {
    uint8_t *data;
    size_t size, room;
} buffer;

/* One step of the path to the value being written. */
typedef struct step {
    const mwp_field *field;
    int kind; /* 0 the field, 1 an element (index), 2 a map key (key) */
    lua_Integer index;
    int key_type;
    const char *key;
    size_t key_len;
    int key_bool;
} step;

typedef struct encoder {
    const mwp_schema *s;
    buffer *b;
    int names, enums, side, marks;
    const mwp_message *root;
    step path[MAX_DEPTH + 4];
} encoder;

static void describe_value(lua_State *L, luaL_Buffer *b, int idx) {
    char text[64];
    switch (lua_type(L, idx)) {
    case LUA_TNIL: luaL_addstring(b, "nil"); break;
    case LUA_TBOOLEAN: luaL_addstring(b, lua_toboolean(L, idx) ? "boolean true" : "boolean false"); break;
    case LUA_TNUMBER:
        if (lua_isinteger(L, idx)) snprintf(text, sizeof text, "integer %lld", (long long)lua_tointeger(L, idx));
        else snprintf(text, sizeof text, "number %.17g", (double)lua_tonumber(L, idx));
        luaL_addstring(b, text);
        break;
    case LUA_TSTRING: {
        size_t n;
        const char *s = lua_tolstring(L, idx, &n);
        luaL_addstring(b, "string \"");
        for (size_t i = 0; i < n && i < 40; i++) {
            unsigned char c = (unsigned char)s[i];
            if (c == '"' || c == '\\') {
                luaL_addchar(b, '\\');
                luaL_addchar(b, (char)c);
            } else if (c < 0x20 || c == 0x7F) {
                snprintf(text, sizeof text, "\\%d", c);
                luaL_addstring(b, text);
            } else {
                luaL_addchar(b, (char)c);
            }
        }
        luaL_addstring(b, n > 40 ? "\"..." : "\"");
        break;
    }
    default: luaL_addstring(b, luaL_typename(L, idx));
    }
}

/* Raises "<type>.<path>: <what>[, got <the value at idx>]". */
static int efail(lua_State *L, encoder *e, int depth, int idx, const char *fmt, ...) {
    if (idx) idx = lua_absindex(L, idx);
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    luaL_addstring(&b, e->root->full_name);
    char text[256];
    for (int i = 0; i < depth; i++) {
        const step *st = &e->path[i];
        if (!st->field) break;
        luaL_addchar(&b, '.');
        luaL_addstring(&b, st->field->name);
        if (st->kind == 1) {
            snprintf(text, sizeof text, "[%lld]", (long long)st->index);
            luaL_addstring(&b, text);
        } else if (st->kind == 2) {
            if (st->key_type == LUA_TSTRING) {
                luaL_addstring(&b, "[\"");
                luaL_addlstring(&b, st->key, st->key_len > 40 ? 40 : st->key_len);
                luaL_addstring(&b, "\"]");
            } else if (st->key_type == LUA_TBOOLEAN) {
                luaL_addstring(&b, st->key_bool ? "[true]" : "[false]");
            } else {
                snprintf(text, sizeof text, "[%lld]", (long long)st->index);
                luaL_addstring(&b, text);
            }
        }
    }
    luaL_addstring(&b, ": ");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    luaL_addstring(&b, text);
    if (idx) {
        luaL_addstring(&b, ", got ");
        describe_value(L, &b, idx);
    }
    luaL_pushresult(&b);
    return lua_error(L);
}

static void grow_slow(lua_State *L, encoder *e, size_t more);

/* Room for `more` bytes: checked inline, on every write; made rarely. */
static inline void grow(lua_State *L, encoder *e, size_t more) {
    if (e->b->room - e->b->size < more) grow_slow(L, e, more);
}

static __attribute__((noinline)) void grow_slow(lua_State *L, encoder *e, size_t more) {
    buffer *b = e->b;
    size_t room = b->room ? b->room : 1024;
    while (room - b->size < more) {
        if (room > ((size_t)1 << 40)) luaL_error(L, "message too large");
        room *= 2;
    }
    uint8_t *data = (uint8_t *)realloc(b->data, room);
    if (!data) luaL_error(L, "not enough memory");
    b->data = data;
    b->room = room;
}

static inline int varint_size(uint64_t v) {
    int n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static inline void put_varint(lua_State *L, encoder *e, uint64_t v) {
    grow(L, e, 10);
    uint8_t *p = e->b->data + e->b->size;
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    e->b->size = (size_t)(p - e->b->data);
}

static inline void put_tag(lua_State *L, encoder *e, uint32_t number, int wt) {
    put_varint(L, e, ((uint64_t)number << 3) | (uint64_t)wt);
}

static inline void put_fixed(lua_State *L, encoder *e, uint64_t v, int bytes) {
    grow(L, e, 8);
    uint8_t *p = e->b->data + e->b->size;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    if (bytes == 8) memcpy(p, &v, 8);
    else { uint32_t w = (uint32_t)v; memcpy(p, &w, 4); }
#else
    for (int i = 0; i < bytes; i++) p[i] = (uint8_t)(v >> (8 * i));
#endif
    e->b->size += (size_t)bytes;
}

static inline void put_bytes(lua_State *L, encoder *e, const void *s, size_t n) {
    grow(L, e, n);
    memcpy(e->b->data + e->b->size, s, n);
    e->b->size += n;
}

/* A length-delimited value: a byte reserved for its length, filled (and the
 * value moved when the length needs more bytes) by end_length. */
static inline size_t begin_length(lua_State *L, encoder *e) {
    grow(L, e, 1);
    return e->b->size++;
}

static void end_length(lua_State *L, encoder *e, size_t at) {
    size_t len = e->b->size - at - 1;
    int k = varint_size(len);
    if (k > 1) {
        grow(L, e, (size_t)k - 1);
        memmove(e->b->data + at + k, e->b->data + at + 1, len);
        e->b->size += (size_t)k - 1;
    }
    uint8_t *p = e->b->data + at;
    uint64_t v = len;
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p = (uint8_t)v;
}

static void encode_message(lua_State *L, encoder *e, const mwp_message *m, int t, int depth);

/* The integer at idx for field f (exact floats too), range-checked. */
static lua_Integer check_integer(lua_State *L, encoder *e, const mwp_field *f, int idx, int depth) {
    int exact;
    lua_Integer v;
    if (lua_type(L, idx) != LUA_TNUMBER) efail(L, e, depth, idx, "expected integer");
    v = lua_tointegerx(L, idx, &exact);
    if (!exact) efail(L, e, depth, idx, "expected integer");
    switch (f->type) {
    case MWP_INT32: case MWP_SINT32: case MWP_SFIXED32:
        if (v < INT32_MIN || v > INT32_MAX) efail(L, e, depth, idx, "%s out of range", type_name(f->type));
        break;
    case MWP_UINT32: case MWP_FIXED32:
        if (v < 0 || v > (lua_Integer)UINT32_MAX) efail(L, e, depth, idx, "%s out of range", type_name(f->type));
        break;
    default: break;
    }
    return v;
}

/* The number of enum f's value at idx: a name of the enum, or an int32. */
static int32_t check_enum(lua_State *L, encoder *e, const mwp_field *f, int idx, int depth) {
    const mwp_enum *en = &e->s->enums[f->sub];
    if (lua_type(L, idx) == LUA_TSTRING) {
        lua_rawgeti(L, e->enums, f->sub + 1);
        lua_pushvalue(L, idx);
        if (lua_rawget(L, -2) != LUA_TNUMBER) efail(L, e, depth, idx, "not a value of enum %s", en->full_name);
        int32_t v = (int32_t)lua_tointeger(L, -1);
        lua_pop(L, 2);
        return v;
    }
    if (lua_type(L, idx) == LUA_TNUMBER) {
        int exact;
        lua_Integer v = lua_tointegerx(L, idx, &exact);
        if (!exact || v < INT32_MIN || v > INT32_MAX) efail(L, e, depth, idx, "expected a name of enum %s or an int32", en->full_name);
        return (int32_t)v;
    }
    return (int32_t)efail(L, e, depth, idx, "expected a name of enum %s", en->full_name);
}

/* Is the value at idx its field's zero value (not written without presence)? */
static int is_zero(lua_State *L, encoder *e, const mwp_field *f, int idx, int depth) {
    switch (f->type) {
    case MWP_DOUBLE: case MWP_FLOAT: {
        if (lua_type(L, idx) != LUA_TNUMBER) return 0;
        double x = (double)lua_tonumber(L, idx);
        uint64_t bits;
        if (f->type == MWP_FLOAT) {
            float y = (float)x;
            uint32_t b32;
            memcpy(&b32, &y, 4);
            return b32 == 0;
        }
        memcpy(&bits, &x, 8);
        return bits == 0;
    }
    case MWP_BOOL: return lua_type(L, idx) == LUA_TBOOLEAN && !lua_toboolean(L, idx);
    case MWP_STRING: case MWP_BYTES: return lua_type(L, idx) == LUA_TSTRING && lua_rawlen(L, idx) == 0;
    case MWP_ENUM: return check_enum(L, e, f, idx, depth) == 0;
    case MWP_MESSAGE: case MWP_GROUP: return 0;
    default: return lua_type(L, idx) == LUA_TNUMBER && lua_tonumber(L, idx) == 0;
    }
}

/* Writes one value of f (no tag). */
static void put_value(lua_State *L, encoder *e, const mwp_field *f, int idx, int depth) {
    switch (f->type) {
    case MWP_INT64: case MWP_UINT64: case MWP_INT32: case MWP_UINT32:
        put_varint(L, e, (uint64_t)check_integer(L, e, f, idx, depth));
        return;
    case MWP_SINT32: {
        int32_t v = (int32_t)check_integer(L, e, f, idx, depth);
        put_varint(L, e, (uint32_t)(((uint32_t)v << 1) ^ (uint32_t)(v >> 31)));
        return;
    }
    case MWP_SINT64: {
        int64_t v = (int64_t)check_integer(L, e, f, idx, depth);
        put_varint(L, e, ((uint64_t)v << 1) ^ (uint64_t)(v >> 63));
        return;
    }
    case MWP_BOOL:
        if (lua_type(L, idx) != LUA_TBOOLEAN) efail(L, e, depth, idx, "expected boolean");
        put_varint(L, e, lua_toboolean(L, idx) ? 1 : 0);
        return;
    case MWP_ENUM:
        put_varint(L, e, (uint64_t)(int64_t)check_enum(L, e, f, idx, depth));
        return;
    case MWP_FIXED64: case MWP_SFIXED64:
        put_fixed(L, e, (uint64_t)check_integer(L, e, f, idx, depth), 8);
        return;
    case MWP_FIXED32: case MWP_SFIXED32:
        put_fixed(L, e, (uint32_t)check_integer(L, e, f, idx, depth), 4);
        return;
    case MWP_DOUBLE: {
        if (lua_type(L, idx) != LUA_TNUMBER) efail(L, e, depth, idx, "expected number");
        double x = (double)lua_tonumber(L, idx);
        uint64_t bits;
        memcpy(&bits, &x, 8);
        put_fixed(L, e, bits, 8);
        return;
    }
    case MWP_FLOAT: {
        if (lua_type(L, idx) != LUA_TNUMBER) efail(L, e, depth, idx, "expected number");
        float x = (float)lua_tonumber(L, idx);
        uint32_t bits;
        memcpy(&bits, &x, 4);
        put_fixed(L, e, bits, 4);
        return;
    }
    case MWP_STRING: case MWP_BYTES: {
        if (lua_type(L, idx) != LUA_TSTRING) efail(L, e, depth, idx, f->type == MWP_STRING ? "expected string" : "expected bytes (a string)");
        size_t n;
        const char *s = lua_tolstring(L, idx, &n);
        if (f->utf8) {
            size_t bad = utf8_invalid_at((const unsigned char *)s, n);
            if (bad != (size_t)-1) efail(L, e, depth, 0, "invalid UTF-8 in a string (byte %lu of %lu)", (unsigned long)bad + 1, (unsigned long)n);
        }
        put_varint(L, e, n);
        put_bytes(L, e, s, n);
        return;
    }
    case MWP_MESSAGE: {
        if (lua_type(L, idx) != LUA_TTABLE) efail(L, e, depth, idx, "expected table (message %s)", e->s->messages[f->sub].full_name);
        size_t at = begin_length(L, e);
        encode_message(L, e, &e->s->messages[f->sub], lua_absindex(L, idx), depth);
        end_length(L, e, at);
        return;
    }
    default: /* MWP_GROUP: the start tag is written by the caller */
        if (lua_type(L, idx) != LUA_TTABLE) efail(L, e, depth, idx, "expected table (group %s)", e->s->messages[f->sub].full_name);
        encode_message(L, e, &e->s->messages[f->sub], lua_absindex(L, idx), depth);
        put_tag(L, e, f->number, 4);
        return;
    }
}

/* The common singular scalars in one go: the value read once, the zero value of
 * a field without presence skipped. Returns 0 when put_value's path must take it
 * (another type, or a value it must refuse in words). */
static int put_scalar_field(lua_State *L, encoder *e, const mwp_field *f, int v, int vt) {
    switch (f->type) {
    case MWP_INT64: case MWP_UINT64: case MWP_INT32: case MWP_UINT32: {
        if (vt != LUA_TNUMBER || !lua_isinteger(L, v)) return 0;
        lua_Integer x = lua_tointeger(L, v);
        if (f->type == MWP_INT32 && (x < INT32_MIN || x > INT32_MAX)) return 0;
        if (f->type == MWP_UINT32 && (x < 0 || x > (lua_Integer)UINT32_MAX)) return 0;
        if (x == 0 && !f->presence) return 1;
        put_tag(L, e, f->number, 0);
        put_varint(L, e, (uint64_t)x);
        return 1;
    }
    case MWP_DOUBLE: {
        if (vt != LUA_TNUMBER) return 0;
        double x = (double)lua_tonumber(L, v);
        uint64_t bits;
        memcpy(&bits, &x, 8);
        if (bits == 0 && !f->presence) return 1;
        put_tag(L, e, f->number, 1);
        put_fixed(L, e, bits, 8);
        return 1;
    }
    case MWP_BOOL: {
        if (vt != LUA_TBOOLEAN) return 0;
        int b = lua_toboolean(L, v);
        if (!b && !f->presence) return 1;
        put_tag(L, e, f->number, 0);
        put_varint(L, e, b ? 1 : 0);
        return 1;
    }
    case MWP_STRING: case MWP_BYTES: {
        if (vt != LUA_TSTRING) return 0;
        size_t n;
        const char *s = lua_tolstring(L, v, &n);
        if (n == 0 && !f->presence) return 1;
        if (f->utf8 && utf8_invalid_at((const unsigned char *)s, n) != (size_t)-1) return 0;
        put_tag(L, e, f->number, 2);
        put_varint(L, e, n);
        put_bytes(L, e, s, n);
        return 1;
    }
    default: return 0;
    }
}

typedef struct map_key {
    int type;
    lua_Integer i;
    const char *s;
    size_t n;
} map_key;

static int key_type_of(int t) {
    if (t == MWP_STRING) return LUA_TSTRING;
    if (t == MWP_BOOL) return LUA_TBOOLEAN;
    return LUA_TNUMBER;
}

/* Map entries go in the order Python's protobuf (upb) writes them with
 * deterministic=True, so that the bytes are equal: string keys bytewise
 * ascending with a longer key before its own prefix, integer and bool keys by
 * descending unsigned 64-bit value (so true before false, and negative keys,
 * sign-extended, first). (C++ libprotobuf orders integer keys ascending; both
 * read either order.) */
static int compare_keys(const void *pa, const void *pb) {
    const map_key *a = (const map_key *)pa, *b = (const map_key *)pb;
    if (a->type == LUA_TSTRING) {
        size_t n = a->n < b->n ? a->n : b->n;
        int c = memcmp(a->s, b->s, n);
        if (c) return c;
        return a->n > b->n ? -1 : a->n < b->n;
    }
    lua_Unsigned x = (lua_Unsigned)a->i, y = (lua_Unsigned)b->i;
    return x > y ? -1 : x < y;
}

/* A map field: its entries in key order (as the reference implementations
 * write them deterministically), key and value always written. */
static void put_map(lua_State *L, encoder *e, const mwp_field *f, int v, int depth) {
    const mwp_message *entry = &e->s->messages[f->sub];
    const mwp_field *key = field_by_number(entry, 1), *value = field_by_number(entry, 2);
    int want = key_type_of(key->type);
    size_t count = 0;
    lua_pushnil(L);
    while (lua_next(L, v)) {
        count++;
        lua_pop(L, 1);
    }
    if (count == 0) return;
    /* Small maps sort on the C stack; larger ones in a userdata the GC frees. */
    map_key small[16];
    map_key *keys = small;
    if (count > 16) keys = (map_key *)lua_newuserdatauv(L, count * sizeof(map_key), 0);
    else lua_pushnil(L);
    size_t k = 0;
    lua_pushnil(L);
    while (lua_next(L, v)) {
        lua_pop(L, 1);
        int kt = lua_type(L, -1);
        map_key *mk = &keys[k++];
        mk->type = kt;
        if (kt != want || (kt == LUA_TNUMBER && !lua_isinteger(L, -1)))
            efail(L, e, depth, -1, "map key: expected %s", want == LUA_TSTRING ? "string" : want == LUA_TBOOLEAN ? "boolean" : "integer");
        if (kt == LUA_TSTRING) mk->s = lua_tolstring(L, -1, &mk->n);
        else if (kt == LUA_TBOOLEAN) mk->i = lua_toboolean(L, -1);
        else mk->i = lua_tointeger(L, -1);
    }
    qsort(keys, count, sizeof(map_key), compare_keys);
    step *st = &e->path[depth - 1];
    st->kind = 2;
    st->key_type = want;
    for (size_t i = 0; i < count; i++) {
        map_key *mk = &keys[i];
        if (want == LUA_TSTRING) lua_pushlstring(L, mk->s, mk->n);
        else if (want == LUA_TBOOLEAN) lua_pushboolean(L, (int)mk->i);
        else lua_pushinteger(L, mk->i);
        st->key = mk->s;
        st->key_len = mk->n;
        st->key_bool = (int)mk->i;
        st->index = mk->i;
        int kidx = lua_gettop(L);
        lua_pushvalue(L, kidx);
        lua_rawget(L, v);
        put_tag(L, e, f->number, 2);
        size_t at = begin_length(L, e);
        put_tag(L, e, 1, wire_type(key->type));
        put_value(L, e, key, kidx, depth);
        put_tag(L, e, 2, wire_type(value->type));
        put_value(L, e, value, kidx + 1, depth);
        end_length(L, e, at);
        lua_settop(L, kidx - 1);
    }
    st->kind = 0;
    lua_pop(L, 1);
}

/* A repeated field: a sequence 1..n. */
static void put_repeated(lua_State *L, encoder *e, const mwp_field *f, int v, int depth) {
    lua_Integer n = (lua_Integer)lua_rawlen(L, v);
    if (n == 0) {
        lua_pushnil(L);
        if (lua_next(L, v)) efail(L, e, depth, -2, "expected a list (a sequence from 1), found key");
        return;
    }
    step *st = &e->path[depth - 1];
    st->kind = 1;
    if (f->packed) {
        put_tag(L, e, f->number, 2);
        size_t at = begin_length(L, e);
        for (lua_Integer i = 1; i <= n; i++) {
            st->index = i;
            lua_rawgeti(L, v, i);
            put_value(L, e, f, lua_gettop(L), depth);
            lua_pop(L, 1);
        }
        end_length(L, e, at);
    } else {
        int wt = wire_type(f->type);
        for (lua_Integer i = 1; i <= n; i++) {
            st->index = i;
            lua_rawgeti(L, v, i);
            if (lua_isnil(L, -1)) efail(L, e, depth, 0, "a hole in the list");
            put_tag(L, e, f->number, wt);
            put_value(L, e, f, lua_gettop(L), depth);
            lua_pop(L, 1);
        }
    }
    st->kind = 0;
}

/* Raises the error for the key of the table at `t` that names no field of `m`
 * (the count of keys said there is one; which one, only a second look says). */
static void unknown_key(lua_State *L, encoder *e, const mwp_message *m, int t, int depth) {
    lua_pushnil(L);
    while (lua_next(L, t)) {
        lua_pop(L, 1);
        if (lua_type(L, -1) != LUA_TSTRING) efail(L, e, depth, -1, "a key that is not a field name");
        const char *name = lua_tostring(L, -1);
        uint32_t i = 0;
        while (i < m->nfields && strcmp(m->fields[i].name, name) != 0) i++;
        if (i == m->nfields) efail(L, e, depth, 0, "no field named \"%s\" in %s", name, m->full_name);
    }
    efail(L, e, depth, 0, "a key that is not a field name");
}

static void encode_message(lua_State *L, encoder *e, const mwp_message *m, int t, int depth) {
    if (depth >= MAX_DEPTH) efail(L, e, depth, 0, "messages nested deeper than %d levels (a table that contains itself?)", MAX_DEPTH);
    if (!lua_checkstack(L, 20)) efail(L, e, depth, 0, "out of Lua stack");
    int oneof_set[32];
    for (uint32_t o = 0; o < m->noneofs && o < 32; o++) oneof_set[o] = -1;
    int found = 0;
    step *st = &e->path[depth];
    st->kind = 0;
    for (uint32_t i = 0; i < m->nfields; i++) {
        const mwp_field *f = &m->fields[i];
        st->field = f;
        lua_rawgeti(L, e->names, f->name_id);
        int vt = lua_rawget(L, t);
        if (vt == LUA_TNIL) {
            lua_pop(L, 1);
            if (f->required) efail(L, e, depth + 1, 0, "required field missing");
            continue;
        }
        found++;
        int v = lua_gettop(L);
        if (f->oneof >= 0 && f->oneof < 32) {
            int *set = &oneof_set[f->oneof];
            if (*set >= 0)
                efail(L, e, depth, 0, "oneof %s: both %s and %s are set", m->oneofs[f->oneof].name, m->fields[*set].name, f->name);
            *set = (int)i;
        }
        if (f->map || f->repeated) {
            if (lua_type(L, v) != LUA_TTABLE) efail(L, e, depth + 1, v, f->map ? "expected table (a map)" : "expected table (a list)");
            if (f->map) put_map(L, e, f, v, depth + 1);
            else put_repeated(L, e, f, v, depth + 1);
        } else if (put_scalar_field(L, e, f, v, vt)) {
            /* written, or a zero value left out */
        } else if (f->presence || !is_zero(L, e, f, v, depth + 1)) {
            put_tag(L, e, f->number, wire_type(f->type));
            put_value(L, e, f, v, depth + 1);
        }
        lua_settop(L, v - 1);
    }
    st->field = NULL;
    /* 1: a table decoded as this type that no key was added to since, 2: the same
     * with unknown fields. (Decoded as another type, its keys are checked here.) */
    int decoded = 0;
    if (lua_getmetatable(L, t)) {
        lua_Integer mark = 2 * (lua_Integer)(m - e->s->messages);
        lua_rawgeti(L, e->marks, mark + 1);
        lua_rawgeti(L, e->marks, mark + 2);
        decoded = lua_rawequal(L, -3, -2) ? 1 : lua_rawequal(L, -3, -1) ? 2 : 0;
        lua_pop(L, 3);
    }
    /* Every key must name a field: a misspelt one is an error, not dropped. (A
     * decoded table's keys are all fields until one is added, which unmarks it.) */
    if (!decoded) {
        int keys = 0;
        lua_pushnil(L);
        while (lua_next(L, t)) {
            lua_pop(L, 1);
            if (++keys > found) {
                lua_pop(L, 1);
                unknown_key(L, e, m, t, depth);
            }
        }
    }
    /* Fields this schema does not know, as they were read. */
    if (decoded != 1) {
        lua_pushvalue(L, t);
        if (lua_rawget(L, e->side) == LUA_TSTRING) {
            size_t n;
            const char *s = lua_tolstring(L, -1, &n);
            put_bytes(L, e, s, n);
        }
        lua_pop(L, 1);
    }
}

/* The encode's protected half: (schema, index, value, buffer) */
static int encode_run(lua_State *L) {
    schema_box *box = (schema_box *)lua_touserdata(L, 1);
    lua_Integer index = lua_tointeger(L, 2);
    encoder e;
    /* (Each level sets its own step before anything below it can fail: no need to
     * clear the whole path, 5 KiB, for every message.) */
    e.path[0].field = NULL;
    e.s = box->s;
    e.b = (buffer *)lua_touserdata(L, 4);
    e.root = &e.s->messages[index];
    lua_settop(L, 3);
    lua_getiuservalue(L, 1, 1);
    e.names = 4;
    lua_getiuservalue(L, 1, 2);
    e.enums = 5;
    lua_pushvalue(L, lua_upvalueindex(UV_SIDE));
    e.side = 6;
    lua_getiuservalue(L, 1, 3);
    e.marks = 7;
    if (lua_type(L, 3) != LUA_TTABLE) efail(L, &e, 0, 3, "expected table");
    encode_message(L, &e, e.root, 3, 0);
    return 0;
}

/* encode(schema, index, table) -> bytes | nil, err */
static int proto_encode(lua_State *L) {
    check_type(L, "mw.protobuf.encode");
    buffer b = { NULL, 0, 0 };
    lua_pushvalue(L, lua_upvalueindex(UV_INNER));
    lua_pushvalue(L, 1);
    lua_pushvalue(L, 2);
    lua_pushvalue(L, 3);
    lua_pushlightuserdata(L, &b);
    int status = lua_pcall(L, 4, 0, 0);
    if (status != LUA_OK) {
        free(b.data);
        lua_pushnil(L);
        lua_insert(L, -2);
        return 2;
    }
    lua_pushlstring(L, b.data ? (const char *)b.data : "", b.size);
    free(b.data);
    return 1;
}

/* unknown(table) -> the bytes of the fields decode did not know, or nil */
static int proto_unknown(lua_State *L) {
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_pushvalue(L, 1);
    lua_rawget(L, lua_upvalueindex(UV_SIDE));
    return 1;
}

/* ================================================================ loading */

/* The strings of a list argument (a string or a table of them) for the C++ side. */
static const char **string_list(lua_State *L, int idx, size_t *count, const char *what) {
    if (lua_isnoneornil(L, idx)) {
        *count = 0;
        return NULL;
    }
    if (lua_type(L, idx) == LUA_TSTRING) {
        const char **list = (const char **)lua_newuserdatauv(L, sizeof(char *), 0);
        list[0] = lua_tostring(L, idx);
        *count = 1;
        return list;
    }
    if (lua_type(L, idx) != LUA_TTABLE) luaL_error(L, "%s: a string or a list of strings expected, got %s", what, luaL_typename(L, idx));
    size_t n = (size_t)lua_rawlen(L, idx);
    const char **list = (const char **)lua_newuserdatauv(L, (n + 1) * sizeof(char *), 0);
    for (size_t i = 0; i < n; i++) {
        lua_rawgeti(L, idx, (lua_Integer)i + 1);
        if (lua_type(L, -1) != LUA_TSTRING) luaL_error(L, "%s[%d]: a string expected, got %s", what, (int)i + 1, luaL_typename(L, -1));
        list[i] = lua_tostring(L, -1); /* kept alive by the table */
        lua_pop(L, 1);
    }
    *count = n;
    return list;
}

static void push_marks(lua_State *L, uint32_t n);

/* load(files, import_paths) -> schema, { full name -> message index }, { full name -> enum index } | nil, err */
static int proto_load(lua_State *L) {
    size_t nfiles, npaths;
    const char **files = string_list(L, 1, &nfiles, "files");
    const char **paths = string_list(L, 2, &npaths, "import_paths");
    if (nfiles == 0) luaL_error(L, "no .proto file given");
    schema_box *box = (schema_box *)lua_newuserdatauv(L, sizeof(schema_box), 3);
    box->s = NULL;
    luaL_setmetatable(L, SCHEMA);
    int ud = lua_gettop(L);
    char *error = NULL;
    /* The C++ work, all of it, before anything here can raise. */
    mwp_schema *s = mwp_load(files, nfiles, paths, npaths, &error);
    if (!s) {
        lua_pushnil(L);
        lua_pushstring(L, error ? error : "loading failed");
        free(error);
        return 2;
    }
    box->s = s; /* freed by __gc from here on */
    lua_createtable(L, (int)s->nnames, 0);
    for (uint32_t i = 0; i < s->nnames; i++) {
        lua_pushstring(L, s->names[i]);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    lua_setiuservalue(L, ud, 1);
    lua_createtable(L, (int)s->nenums, 0);
    for (uint32_t e = 0; e < s->nenums; e++) {
        const mwp_enum *en = &s->enums[e];
        lua_createtable(L, 0, (int)en->ndeclared);
        for (uint32_t i = 0; i < en->ndeclared; i++) {
            lua_pushinteger(L, en->declared[i].number);
            lua_setfield(L, -2, en->declared[i].name);
        }
        lua_rawseti(L, -2, (lua_Integer)e + 1);
    }
    lua_setiuservalue(L, ud, 2);
    push_marks(L, s->nmessages);
    lua_setiuservalue(L, ud, 3);
    lua_pushvalue(L, ud);
    lua_createtable(L, 0, (int)s->nmessages);
    for (uint32_t m = 0; m < s->nmessages; m++) {
        lua_pushinteger(L, m);
        lua_setfield(L, -2, s->messages[m].full_name);
    }
    lua_createtable(L, 0, (int)s->nenums);
    for (uint32_t m = 0; m < s->nenums; m++) {
        lua_pushinteger(L, m);
        lua_setfield(L, -2, s->enums[m].full_name);
    }
    return 3;
}

/* fields(schema, index) -> list of { name, number, type, repeated, map, oneof } (for tools and docs) */
static int proto_fields(lua_State *L) {
    mwp_schema *s = check_type(L, "mw.protobuf.fields");
    const mwp_message *m = &s->messages[lua_tointeger(L, 2)];
    lua_createtable(L, (int)m->nfields, 0);
    for (uint32_t i = 0; i < m->nfields; i++) {
        const mwp_field *f = &m->fields[i];
        lua_createtable(L, 0, 6);
        lua_pushstring(L, f->name);
        lua_setfield(L, -2, "name");
        lua_pushinteger(L, f->number);
        lua_setfield(L, -2, "number");
        if (f->sub >= 0 && (f->type == MWP_MESSAGE || f->type == MWP_GROUP)) lua_pushstring(L, s->messages[f->sub].full_name);
        else if (f->sub >= 0) lua_pushstring(L, s->enums[f->sub].full_name);
        else lua_pushstring(L, type_name(f->type));
        lua_setfield(L, -2, "type");
        lua_pushboolean(L, f->repeated && !f->map);
        lua_setfield(L, -2, "repeated");
        lua_pushboolean(L, f->map);
        lua_setfield(L, -2, "map");
        if (f->oneof >= 0) {
            lua_pushstring(L, m->oneofs[f->oneof].name);
            lua_setfield(L, -2, "oneof");
        }
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    return 1;
}

/* enum_values(schema, enum index) -> { name -> number } (a copy) */
static int proto_enum_values(lua_State *L) {
    schema_box *box = (schema_box *)luaL_checkudata(L, 1, SCHEMA);
    lua_Integer index = luaL_checkinteger(L, 2);
    if (!box->s || index < 0 || (lua_Unsigned)index >= box->s->nenums) return luaL_error(L, "no such enum");
    const mwp_enum *en = &box->s->enums[index];
    lua_createtable(L, 0, (int)en->ndeclared);
    for (uint32_t i = 0; i < en->ndeclared; i++) {
        lua_pushinteger(L, en->declared[i].number);
        lua_setfield(L, -2, en->declared[i].name);
    }
    return 1;
}

/* The closures share upvalues: side table, array metatable, object metatable. */
static void push_closure(lua_State *L, int base, lua_CFunction outer, lua_CFunction inner) {
    for (int i = 0; i < 3; i++) lua_pushvalue(L, base + i);
    if (inner) {
        for (int i = 0; i < 3; i++) lua_pushvalue(L, base + i);
        lua_pushcclosure(L, inner, 3);
        lua_pushcclosure(L, outer, 4);
    } else {
        lua_pushcclosure(L, outer, 3);
    }
}

/* __newindex of the marks (a decoded table's metatable, one per message type: its
 * keys are all fields of that type): a key added to it (a field it did not have, or
 * a misspelt one) takes the mark away, so that encode counts the table's keys again
 * and names a key that is no field. (rawset adds one unseen.) */
static int mark_newindex(lua_State *L) {
    lua_settop(L, 3);
    int t = lua_type(L, 2);
    if (t == LUA_TNIL || (t == LUA_TNUMBER && lua_tonumber(L, 2) != lua_tonumber(L, 2))) {
        luaL_where(L, 1); /* where the assignment is, as Lua says it for any table */
        lua_pushstring(L, t == LUA_TNIL ? "table index is nil" : "table index is NaN");
        lua_concat(L, 2);
        return lua_error(L);
    }
    lua_pushnil(L);
    lua_setmetatable(L, 1);
    lua_rawset(L, 1);
    return 0;
}

/* The marks of a schema of n message types (see schema_box). */
static void push_marks(lua_State *L, uint32_t n) {
    lua_createtable(L, (int)(2 * n), 0);
    for (lua_Integer i = 1; i <= 2 * (lua_Integer)n; i++) {
        lua_createtable(L, 0, 1);
        lua_pushcfunction(L, mark_newindex);
        lua_setfield(L, -2, "__newindex");
        lua_rawseti(L, -2, i);
    }
}

/* open(array_mt, object_mt) -> { load, encode, decode, unknown, fields } */
int mw_protobuf_open(lua_State *L) {
    if (luaL_newmetatable(L, SCHEMA)) {
        lua_pushcfunction(L, schema_gc);
        lua_setfield(L, -2, "__gc");
        lua_pushliteral(L, "protobuf schema");
        lua_setfield(L, -2, "__name");
    }
    lua_pop(L, 1);
    if (lua_type(L, 1) != LUA_TTABLE) {
        lua_settop(L, 0);
        lua_newtable(L);
    }
    if (lua_type(L, 2) != LUA_TTABLE) {
        lua_settop(L, 1);
        lua_newtable(L);
    }
    lua_settop(L, 2);
    lua_createtable(L, 0, 0); /* side: weak keys */
    lua_createtable(L, 0, 1);
    lua_pushliteral(L, "k");
    lua_setfield(L, -2, "__mode");
    lua_setmetatable(L, -2);
    lua_insert(L, 1); /* 1 side, 2 array_mt, 3 object_mt */
    lua_createtable(L, 0, 6);
    lua_pushcfunction(L, proto_load);
    lua_setfield(L, -2, "load");
    push_closure(L, 1, proto_encode, encode_run);
    lua_setfield(L, -2, "encode");
    push_closure(L, 1, proto_decode, decode_run);
    lua_pushvalue(L, -1);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &decode_key);
    lua_setfield(L, -2, "decode");
    push_closure(L, 1, proto_unknown, NULL);
    lua_setfield(L, -2, "unknown");
    lua_pushcfunction(L, proto_fields);
    lua_setfield(L, -2, "fields");
    lua_pushcfunction(L, proto_enum_values);
    lua_setfield(L, -2, "enum_values");
    return 1;
}

/* ================================================================ connection codecs */

/* `codec = mw.protobuf.codec(name)` on a connection or server runs here, as the
 * native JSON, MessagePack and CBOR codecs do: decoded from the frame's bytes,
 * encoded into the buffer that becomes the frame (no Lua string either way). The
 * schema is the first user value of the session's userdata (`owner_idx`). */

int mw_protobuf_is_type(lua_State *L, int schema_idx, lua_Integer index) {
    schema_box *box = (schema_box *)luaL_testudata(L, schema_idx, SCHEMA);
    return box && box->s && index >= 0 && (lua_Unsigned)index < box->s->nmessages;
}

/* The protected halves of decode and encode, as closures with the native module's
 * upvalues, kept in the registry (made on first use): called directly, with no
 * closure of the module's in between. */
static char decode_from_key, encode_into_key;

static int make_halves(lua_State *L) {
    lua_rawgetp(L, LUA_REGISTRYINDEX, &decode_key);
    lua_getupvalue(L, -1, UV_INNER);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &decode_from_key);
    lua_getupvalue(L, -1, UV_SIDE);
    lua_pushcclosure(L, encode_run, 1);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &encode_into_key);
    return 0;
}

/* Pushes the half at `key` and the schema; LUA_OK, or an error status with the
 * message pushed (running out of memory the first time, or no schema). */
static int push_half(lua_State *L, const void *key, int owner_idx) {
    if (lua_rawgetp(L, LUA_REGISTRYINDEX, key) != LUA_TFUNCTION) {
        lua_pop(L, 1);
        lua_pushcfunction(L, make_halves);
        int status = lua_pcall(L, 0, 0, 0);
        if (status != LUA_OK) return status;
        lua_rawgetp(L, LUA_REGISTRYINDEX, key);
    }
    if (lua_getiuservalue(L, owner_idx, 1) != LUA_TUSERDATA) {
        lua_pop(L, 2);
        lua_pushliteral(L, "no protobuf schema");
        return LUA_ERRRUN;
    }
    return LUA_OK;
}

int mw_protobuf_decode_from(lua_State *L, int owner_idx, int index, const void *bytes, size_t n) {
    owner_idx = lua_absindex(L, owner_idx);
    int status = push_half(L, &decode_from_key, owner_idx);
    if (status == LUA_OK) {
        lua_pushinteger(L, index);
        lua_pushlightuserdata(L, (void *)bytes);
        lua_pushinteger(L, (lua_Integer)n);
        status = lua_pcall(L, 4, 1, 0);
    }
    if (status == LUA_OK) {
        lua_pushnil(L);
    } else {
        /* As decode says it: nil and the message (running out of memory too). */
        lua_pushnil(L);
        lua_insert(L, -2);
    }
    return LUA_OK;
}

#define ENCODE_INTO_ROOM 1024

int mw_protobuf_encode_into(lua_State *L, int owner_idx, int index, int value_idx, mwj_buffer *out) {
    owner_idx = lua_absindex(L, owner_idx);
    value_idx = lua_absindex(L, value_idx);
    mwj_buffer_init(out);
    /* Room for most messages from the start (malloc takes as long for 1 KiB as
     * for the encoder's first 256 bytes), so they are not copied as they grow. */
    buffer b = { NULL, 0, 0 };
    int status = push_half(L, &encode_into_key, owner_idx);
    if (status == LUA_OK) {
        if ((b.data = (uint8_t *)malloc(ENCODE_INTO_ROOM)) != NULL) b.room = ENCODE_INTO_ROOM;
        lua_pushinteger(L, index);
        lua_pushvalue(L, value_idx);
        lua_pushlightuserdata(L, &b);
        status = lua_pcall(L, 4, 0, 0);
    }
    if (status != LUA_OK) {
        free(b.data);
        mwj_encode_error(L, "mw.protobuf");
        return status;
    }
    /* The encoder's malloc'd bytes become the caller's buffer (freed by mwj_buffer_free). */
    if (b.size == 0) {
        free(b.data);
    } else {
        out->data = (char *)b.data;
        out->size = b.size;
        out->room = b.room;
    }
    return LUA_OK;
}
