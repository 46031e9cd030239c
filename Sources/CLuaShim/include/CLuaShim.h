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

/* What keeps one state's script from taking the process down (CLuaShim.c),
 * shared by all its threads through the extra space. */
typedef void (*mw_slow_fn)(void *ctx, const char *where, double seconds);
typedef struct mw_guard mw_guard;

/* A new state with its guard: a counting allocator with an optional limit,
 * a panic handler that aborts with a message, and a watchdog thread (started
 * when limits are set or a signal comes) that puts a count hook on the running
 * Lua thread when a call from the host runs long or a signal or interruption
 * waits; the hook acts on the guard's flags and limits. */
lua_State *mw_newstate(void);
/* After luaL_openlibs: coroutine.resume and coroutine.wrap that keep the
 * guard informed of the running thread (the one the hook must go on). */
void mw_track_coroutines(lua_State *L);
/* lua_close, then frees the guard. */
void mw_close(lua_State *L);
mw_guard *mw_guard_of(lua_State *L);

/* Past `bytes` held (0: no limit), allocations that Lua code makes are refused,
 * which raises Lua's memory error there. */
void mw_guard_set_memory_limit(mw_guard *g, size_t bytes);
size_t mw_guard_memory_used(mw_guard *g);
size_t mw_guard_memory_limit(mw_guard *g);
/* Whether an allocation was refused (since the last collection below); if so,
 * where: the user's file:line on the main thread at the time, or "?". */
int mw_guard_refusal(mw_guard *g, char *where, size_t size);
/* After a call from the host: if an allocation was refused, a full collection
 * (what the failed code built is garbage now) and the refusal forgotten. */
void mw_guard_collect_after_refusal(lua_State *L);

/* A call from the host that runs `warn_after` seconds calls `on_slow` once
 * with the user's file:line; past `limit_after` it is interrupted with an
 * error there. 0 turns either off. */
void mw_guard_set_callback_limits(mw_guard *g, double warn_after, double limit_after);
void mw_guard_on_slow(mw_guard *g, mw_slow_fn fn, void *ctx);

/* From any thread: a signal arrived. Running Lua code unwinds (as with
 * mw.exit) until the host takes the signal on its thread. */
void mw_guard_signal(mw_guard *g, int signo);
int mw_guard_take_signal(mw_guard *g);
int mw_guard_pending_signal(mw_guard *g);

/* From any thread: raise a timeout in the running Lua code (`moonwire test`'s
 * watchdog, for code that never yields). */
/* What an interruption raises in the Lua code running: the test runner's
 * timeout, or lua.c's "interrupted!" for Ctrl-C at the REPL. */
enum { MW_INTERRUPT_TIMEOUT = 1, MW_INTERRUPT_USER = 2 };
void mw_guard_interrupt(mw_guard *g, int kind);
void mw_guard_clear_interrupt(mw_guard *g);

/* Macro wrappers. */
static inline int mw_upvalueindex(int i) { return lua_upvalueindex(i); }
static inline int mw_registryindex(void) { return LUA_REGISTRYINDEX; }
/* "Lua 5.4.4  Copyright (C) 1994-2022 Lua.org, PUC-Rio", as lua -v prints it. */
static inline const char *mw_lua_copyright(void) { return LUA_COPYRIGHT; }
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
/* luaL_testudata with the metatable of each class name looked up once per state. */
void *mw_testudata(lua_State *L, int idx, const char *tname);

/* Pushes a constant string the host pushes often (a message's kind on every
 * message): made and interned once per state, kept in the registry, and pushed
 * from there after that. `slot` (0 to MW_CONSTANT_SLOTS - 1) names the string
 * for the state; the same slot must always be given the same bytes. */
#define MW_CONSTANT_SLOTS 4
void mw_push_constant(lua_State *L, int slot, const char *s, size_t len);

/* Process-wide allocator settings for message-sized buffers (see MemoryTuning in
 * the CLI): heap instead of mmap up to mmap_threshold, keep up to trim_threshold
 * of free memory. */
void mw_tune_allocator(int mmap_threshold, int trim_threshold);

#endif
