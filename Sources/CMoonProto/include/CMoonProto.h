/*
 * mw.protobuf in native code.
 *
 * Loading: Debian's libprotobuf parses the .proto files at run time
 * (compiler::SourceTreeDescriptorDatabase over a DiskSourceTree, with the
 * well-known types from the library's own generated pool underneath) into a
 * DescriptorPool; C++ then flattens the descriptors into the plain C schema
 * below and returns. That step never touches Lua, and every C++ exception
 * stops in it: a Lua error can never unwind through C++ frames.
 *
 * Encoding and decoding: C (proto_lua.c) walks that schema between the wire
 * bytes and Lua tables directly, under lua_pcall, with no protobuf message
 * objects in between.
 */
#ifndef MOONWIRE_CMOONPROTO_H
#define MOONWIRE_CMOONPROTO_H

#include <stddef.h>
#include <stdint.h>

#include <lua.h>

#include "CMoonJSON.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Field types: FieldDescriptor::Type's numbers (descriptor.proto). */
enum {
    MWP_DOUBLE = 1, MWP_FLOAT = 2, MWP_INT64 = 3, MWP_UINT64 = 4, MWP_INT32 = 5,
    MWP_FIXED64 = 6, MWP_FIXED32 = 7, MWP_BOOL = 8, MWP_STRING = 9, MWP_GROUP = 10,
    MWP_MESSAGE = 11, MWP_BYTES = 12, MWP_UINT32 = 13, MWP_ENUM = 14, MWP_SFIXED32 = 15,
    MWP_SFIXED64 = 16, MWP_SINT32 = 17, MWP_SINT64 = 18
};

typedef struct mwp_field {
    const char *name;
    uint32_t number;
    uint32_t name_id;  /* index (1-based) of the name's Lua string in the names table */
    uint8_t type;
    uint8_t repeated;
    uint8_t packed;    /* repeated and encoded packed */
    uint8_t presence;  /* explicit presence: absent stays nil, zero values are written */
    uint8_t utf8;      /* a proto3 string: must be valid UTF-8 */
    uint8_t map;       /* a map field: `sub` is its entry message */
    uint8_t required;  /* proto2 required */
    int32_t oneof;     /* index into the message's oneofs, or -1 */
    int32_t sub;       /* message (MESSAGE, GROUP) or enum (ENUM) index, or -1 */
} mwp_field;

typedef struct mwp_oneof {
    const char *name;
    uint32_t count;
    uint32_t *fields; /* indexes into the message's fields */
} mwp_oneof;

typedef struct mwp_message {
    const char *full_name;
    mwp_field *fields;     /* by number */
    uint32_t nfields;
    uint32_t dense;        /* by_number[n] for numbers 0 ..< dense: field index + 1, or 0 */
    uint16_t *by_number;
    mwp_oneof *oneofs;
    uint32_t noneofs;
    uint8_t map_entry;
} mwp_message;

typedef struct mwp_enum_value {
    const char *name;
    int32_t number;
    uint32_t name_id;
} mwp_enum_value;

typedef struct mwp_enum {
    const char *full_name;
    mwp_enum_value *values; /* by number; for aliases the first name declared */
    uint32_t nvalues;
    mwp_enum_value *declared; /* in declaration order (all names, aliases too) */
    uint32_t ndeclared;
    uint8_t closed;
} mwp_enum;

typedef struct mwp_schema {
    mwp_message *messages;
    uint32_t nmessages;
    mwp_enum *enums;
    uint32_t nenums;
    uint32_t nnames; /* name ids 1 ... nnames */
    const char **names;
    char *arena;     /* the strings */
} mwp_schema;

/* Parses `files` (paths on disk) with `import_paths` (directories searched
 * for imports, in order; each file's own directory when there are none) and
 * returns the schema of every message and enum in them and in what they
 * import. NULL with *error set (malloc'd; the caller frees it) on failure. */
mwp_schema *mwp_load(const char *const *files, size_t nfiles, const char *const *import_paths,
                     size_t npaths, char **error);

void mwp_schema_free(mwp_schema *schema);

/* Pushes the native module: load, encode, decode, unknown (see proto_lua.c). */
int mw_protobuf_open(lua_State *L);

/* For the fuzz target and tests: decodes `n` bytes as message `index` of the
 * schema userdata at `schema_idx` in protected mode. On LUA_OK pushes the value,
 * or nil and the error message. */
int mw_protobuf_decode_bytes(lua_State *L, int schema_idx, int index, const void *bytes, size_t n);

/* The connection codec (`codec = mw.protobuf.codec(name)`), with the contracts of
 * mw_json_decode_bytes and mw_json_encode_into, for message `index` of the schema
 * that is the first user value of the userdata at `owner_idx` (the connection's,
 * server's or peer's), checked with mw_protobuf_is_type when it was set. */

/* Is the value at `schema_idx` a schema userdata with a message `index`? */
int mw_protobuf_is_type(lua_State *L, int schema_idx, lua_Integer index);

/* Decodes `n` bytes (not a Lua string) in protected mode: pushes the value and
 * nil, or nil and the error message. Returns LUA_OK. */
int mw_protobuf_decode_from(lua_State *L, int owner_idx, int index, const void *bytes, size_t n);

/* Encodes the value at `value_idx` in protected mode into `out` (initialized here;
 * the caller frees it, also after an error). Returns LUA_OK with the bytes in
 * out->data[0 ..< out->size], or an error status with the message
 * ("mw.protobuf.encode: pkg.Type.field: ...") pushed. */
int mw_protobuf_encode_into(lua_State *L, int owner_idx, int index, int value_idx, mwj_buffer *out);

#ifdef __cplusplus
}
#endif

#endif
