/*
 * C side of the Lua bridge.
 *
 * Lua raises errors and yields with longjmp. A longjmp across a Swift frame skips
 * its cleanup and is undefined behaviour, so Swift code never calls anything that
 * can raise. Every Lua-callable Swift function is entered through mw_trampoline:
 * Swift returns a status and, after it has returned, C raises the error.
 *
 * Also here: static inline wrappers for Lua's function-like macros, which Swift
 * cannot import.
 */
#ifndef MOONWIRE_CLUASHIM_H
#define MOONWIRE_CLUASHIM_H

#include <lua.h>
#include <lualib.h>
#include <lauxlib.h>

/* A Swift function callable from Lua. Returns the number of results pushed, or
 * one of the MW_RAISE statuses with the error value on top of the stack. */
typedef int (*mw_swift_fn)(lua_State *L, void *ctx);

/* Raise the value on top of the stack as it is. */
#define MW_RAISE (-1)
/* Raise the string on top of the stack, prefixed with the caller's "file:line:". */
#define MW_RAISE_WHERE (-2)
/* The same, one level further up: for functions the prelude wraps, so that the
 * location is the script's line, not the prelude's. */
#define MW_RAISE_WHERE_CALLER (-3)

/* Push a Lua C closure that calls fn(L, ctx) through the trampoline. */
void mw_push_swift_function(lua_State *L, mw_swift_fn fn, void *ctx);

/* Message handler for lua_pcall: turns any error value into a string with a
 * traceback. The exit sentinel passes through untouched. */
int mw_message_handler(lua_State *L);

/* lua_pcall with mw_message_handler, the handler removed again afterwards. */
int mw_pcall_traceback(lua_State *L, int nargs, int nresults);

/* The unique value that mw.exit() raises to unwind the running Lua code. */
void mw_push_exit_sentinel(lua_State *L);
int mw_is_exit_sentinel(lua_State *L, int idx);

/* A new state whose allocation failures and panics abort with a message
 * instead of jumping to nowhere. */
lua_State *mw_newstate(void);

/* The watchdog of `moonwire test`: a count hook on every thread of the state
 * (coroutines inherit it) that raises a timeout error once `flag` is set from
 * another thread. This interrupts Lua code that never yields. */
void mw_watchdog_install(lua_State *L, int *flag);
void mw_watchdog_trigger(int *flag);
void mw_watchdog_reset(int *flag);

/* Macro wrappers. */
static inline int mw_upvalueindex(int i) { return lua_upvalueindex(i); }
static inline int mw_registryindex(void) { return LUA_REGISTRYINDEX; }
static inline void mw_pop(lua_State *L, int n) { lua_pop(L, n); }
static inline void mw_newtable(lua_State *L) { lua_newtable(L); }
static inline void mw_pushcfunction(lua_State *L, lua_CFunction f) { lua_pushcfunction(L, f); }
static inline void mw_insert(lua_State *L, int idx) { lua_insert(L, idx); }
static inline void mw_remove(lua_State *L, int idx) { lua_remove(L, idx); }
static inline void mw_replace(lua_State *L, int idx) { lua_replace(L, idx); }
static inline int mw_isnoneornil(lua_State *L, int idx) { return lua_isnoneornil(L, idx); }
static inline int mw_isfunction(lua_State *L, int idx) { return lua_isfunction(L, idx); }
static inline int mw_istable(lua_State *L, int idx) { return lua_istable(L, idx); }
static inline lua_Number mw_tonumber(lua_State *L, int idx, int *isnum) { return lua_tonumberx(L, idx, isnum); }
static inline lua_Integer mw_tointeger(lua_State *L, int idx, int *isnum) { return lua_tointegerx(L, idx, isnum); }
static inline void *mw_newuserdata(lua_State *L, size_t size) { return lua_newuserdatauv(L, size, 1); }
static inline int mw_loadbuffer(lua_State *L, const char *buf, size_t size, const char *name) {
    return luaL_loadbufferx(L, buf, size, name, "t");
}
static inline void mw_getmetatable_named(lua_State *L, const char *name) { luaL_getmetatable(L, name); }

/* Process-wide allocator settings for message-sized buffers (see MemoryTuning in
 * the CLI): heap instead of mmap up to mmap_threshold, keep up to trim_threshold
 * of free memory. */
void mw_tune_allocator(int mmap_threshold, int trim_threshold);

#endif
