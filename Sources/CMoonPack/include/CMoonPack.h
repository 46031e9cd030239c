/*
 * mw.msgpack and mw.cbor in native code: one decoder per format reading the bytes
 * straight into Lua values, one encoder writing both formats, all C under
 * lua_pcall (no Lua error crosses a Swift frame). The values are mw.json's: nil as
 * mw.json.null, arrays and maps carrying mw.json.array / mw.json.object's
 * metatables, so an empty table keeps its shape through decode and encode.
 *
 * Every length is checked against the bytes left before anything is made (a 2 GiB
 * declared length in a 10-byte message is an error, not an allocation), nesting
 * stops at MWP_MAX_DEPTH, and errors say where, in words:
 * "value[3].user.id: str is not valid UTF-8 (byte 41)".
 */
#ifndef MOONWIRE_CMOONPACK_H
#define MOONWIRE_CMOONPACK_H

#include <stddef.h>

#include <lua.h>

#include "CMoonJSON.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MWP_MAX_DEPTH 500

/* host.pack_native(json_module) -> msgpack_module, cbor_module: the two modules,
 * sharing mw.json's null and array/object metatables. */
int mw_pack_install(lua_State *L);

/* As mw_json_decode_bytes: decodes `n` bytes in protected mode and pushes two
 * values, the value and nil, or nil and the error message. Returns LUA_OK, or the
 * status of a failure outside the decoder (out of memory), with its error pushed. */
int mw_msgpack_decode_bytes(lua_State *L, const void *bytes, size_t n);
int mw_cbor_decode_bytes(lua_State *L, const void *bytes, size_t n);

/* As mw_json_encode_into: the value at `idx` encoded into `out` (initialized here,
 * freed by the caller). LUA_OK, or an error status with the message
 * ("mw.msgpack.encode: value.x: ...") pushed. */
int mw_msgpack_encode_into(lua_State *L, int idx, mwj_buffer *out);
int mw_cbor_encode_into(lua_State *L, int idx, mwj_buffer *out);

#ifdef __cplusplus
}
#endif

#endif
