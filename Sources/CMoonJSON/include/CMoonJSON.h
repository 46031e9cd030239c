/*
 * mw.json in native code: RapidJSON (Debian's rapidjson-dev) parses, C builds
 * the Lua values and writes the text.
 *
 * Decoding runs in two steps so that no Lua error can jump through C++ frames:
 * RapidJSON's SAX reader (C++, json_parse.cpp) fills a token tape and never
 * touches Lua; then C (json_lua.c) turns the tape into Lua values under
 * lua_pcall. Encoding is all C, also under lua_pcall, writing into a buffer
 * owned by the caller's frame (C or Swift), which frees it whatever happens.
 *
 * Anything RapidJSON rejects, and the few inputs where it would disagree with
 * mw.json's rules (a raw DEL byte, a lone high surrogate, text after the value,
 * nesting past 500), is decoded again by the reference decoder (json.lua), which
 * gives the exact value or error message mw.json has always given.
 */
#ifndef MOONWIRE_CMOONJSON_H
#define MOONWIRE_CMOONJSON_H

#include <stddef.h>
#include <stdint.h>

#include <lua.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MWJ_MAX_DEPTH 500

enum mwj_type { MWJ_NULL, MWJ_FALSE, MWJ_TRUE, MWJ_INT, MWJ_FLOAT, MWJ_STRING, MWJ_OBJECT, MWJ_ARRAY };

/* One value of the tape. A string's bytes are in the tape's string arena at
 * v.off; an object or array is followed by its `len` members (key, value) or items. */
typedef struct mwj_token {
    uint32_t type;
    uint32_t len;
    union {
        int64_t i;
        double d;
        uint64_t off;
    } v;
} mwj_token;

typedef struct mwj_tape {
    mwj_token *tokens;
    size_t count, capacity;
    char *strings;
    size_t used, room;
    int depth, max_depth;
    uint32_t open[MWJ_MAX_DEPTH + 1];
    mwj_token inline_tokens[64];
    char inline_strings[1024];
} mwj_tape;

void mwj_tape_init(mwj_tape *tape);
void mwj_tape_free(mwj_tape *tape);

/* Parse results. */
#define MWJ_OK 0
#define MWJ_FALLBACK 1 /* the reference decoder decides (an error, or an edge case) */
#define MWJ_NOMEM 2

/* RapidJSON over `n` bytes into `tape` (json_parse.cpp). */
int mwj_parse(const char *text, size_t n, mwj_tape *tape);

/* The digits of a positive finite double by Grisu2 (RapidJSON's dtoa): writes
 * them to `digits` (at least 18 bytes), returns their count, and sets *k so
 * that value ~= digits * 10^k. */
int mwj_grisu2(double value, char *digits, int *k);

/* `connect --json`: the JSON object or array in `n` bytes re-indented with two spaces,
 * keys in their order, numbers as written. On MWJ_OK, *out is a malloc'd,
 * NUL-terminated text of *count bytes that the caller frees; MWJ_FALLBACK when the
 * bytes are not one JSON object or array (with nothing but whitespace around it). */
int mwj_pretty(const char *text, size_t n, char **out, size_t *count);

/* host.json_native(module): replaces module.encode and module.decode (the
 * json.lua ones) by the native ones, keeping json.lua's decode as the
 * reference; returns the module. */
int mw_json_install(lua_State *L);

/* The decoder's cache of map keys seen lately (so that messages of one shape do not
 * hash and intern the same keys each time), for the other native decoders too:
 * mwj_key_cache_push pushes the table of its strings and returns the cache;
 * mwj_push_key pushes the Lua string of `n` bytes at `s` through it, `strings`
 * being the stack slot of that table. Before mw_json_install: pushes nil, returns NULL. */
void *mwj_key_cache_push(lua_State *L);
void mwj_push_key(lua_State *L, void *cache, int strings, const char *s, size_t n);

/* Decodes `n` bytes (not a Lua string) in protected mode. On LUA_OK pushes two
 * values: the value, or nil and the error message. Otherwise pushes the error. */
int mw_json_decode_bytes(lua_State *L, const void *bytes, size_t n);

/* Where the encoder writes: `inline_data` until the text outgrows it, then
 * malloc'd memory. Owned by the caller (a C or Swift frame), so the text needs
 * no copy and no callback to be used: init, encode, read data/size, free. */
typedef struct mwj_buffer {
    char *data;
    size_t size, room;
    char inline_data[512];
} mwj_buffer;

void mwj_buffer_init(mwj_buffer *b);
void mwj_buffer_free(mwj_buffer *b);
/* Replaces the error value on top of the stack with "<module>.encode: " and its
 * text: the native encoders' *_encode_into errors (`module`: "mw.json", ...). */
void mwj_encode_error(lua_State *L, const char *module);

/* Encodes the value at `idx` in protected mode into `out` (initialized here;
 * the caller frees it, also after an error). Returns LUA_OK with the text in
 * out->data[0 ..< out->size], or an error status with the message pushed. */
int mw_json_encode_into(lua_State *L, int idx, mwj_buffer *out);

#ifdef __cplusplus
}
#endif

#endif
