#include "CLuaShim.h"

#include <malloc.h>

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char exit_sentinel;

/* Like luaL_where, but blames the first caller from `level` up that is the
 * user's code: frames of moonwire's own Lua (chunks named "@moonwire/...", the
 * prelude and the test runner) and C functions (pcall) are passed over. */
static void where_user(lua_State *L, int level) {
    lua_Debug ar;
    for (int l = level; lua_getstack(L, l, &ar); l++) {
        lua_getinfo(L, "Sl", &ar);
        if (ar.currentline > 0 && strncmp(ar.source, "@moonwire/", 10) != 0) {
            lua_pushfstring(L, "%s:%d: ", ar.short_src, ar.currentline);
            return;
        }
    }
    luaL_where(L, level);
}

static int trampoline(lua_State *L) {
    mw_swift_fn fn = (mw_swift_fn)lua_touserdata(L, lua_upvalueindex(1));
    void *ctx = lua_touserdata(L, lua_upvalueindex(2));
    int status = fn(L, ctx);
    if (status >= 0) return status;
    if ((status == MW_RAISE_WHERE || status == MW_RAISE_WHERE_CALLER) && lua_type(L, -1) == LUA_TSTRING) {
        where_user(L, status == MW_RAISE_WHERE ? 1 : 2);
        lua_insert(L, -2);
        lua_concat(L, 2);
    }
    return lua_error(L);
}

void mw_push_swift_function(lua_State *L, mw_swift_fn fn, void *ctx) {
    lua_pushlightuserdata(L, (void *)fn);
    lua_pushlightuserdata(L, ctx);
    lua_pushcclosure(L, trampoline, 2);
}

void mw_push_exit_sentinel(lua_State *L) { lua_pushlightuserdata(L, &exit_sentinel); }

int mw_is_exit_sentinel(lua_State *L, int idx) {
    return lua_type(L, idx) == LUA_TLIGHTUSERDATA && lua_touserdata(L, idx) == &exit_sentinel;
}

int mw_message_handler(lua_State *L) {
    if (mw_is_exit_sentinel(L, 1)) return 1;
    const char *msg = lua_tostring(L, 1);
    if (msg == NULL) {
        if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING) {
            msg = lua_tostring(L, -1);
        } else {
            /* A table, nil or boolean is printed by the prelude's function
             * (mw.inspect) when there is one. */
            if (lua_getfield(L, LUA_REGISTRYINDEX, "moonwire.describe_error") == LUA_TFUNCTION) {
                lua_pushvalue(L, 1);
                if (lua_pcall(L, 1, 1, 0) == LUA_OK && lua_type(L, -1) == LUA_TSTRING) msg = lua_tostring(L, -1);
            }
            if (msg == NULL) msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
        }
    }
    luaL_traceback(L, L, msg, 1);
    return 1;
}

int mw_pcall_traceback(lua_State *L, int nargs, int nresults) {
    int base = lua_gettop(L) - nargs;
    lua_pushcfunction(L, mw_message_handler);
    lua_insert(L, base);
    int status = lua_pcall(L, nargs, nresults, base);
    lua_remove(L, base);
    return status;
}

static void *allocator(void *ud, void *ptr, size_t osize, size_t nsize) {
    (void)ud;
    (void)osize;
    if (nsize == 0) {
        free(ptr);
        return NULL;
    }
    return realloc(ptr, nsize);
}

static int panic(lua_State *L) {
    const char *msg = lua_tostring(L, -1);
    fprintf(stderr, "moonwire: unprotected Lua error: %s\n", msg ? msg : "(not a string)");
    fflush(stderr);
    abort();
}

lua_State *mw_newstate(void) {
    lua_State *L = lua_newstate(allocator, NULL);
    if (L != NULL) lua_atpanic(L, panic);
    return L;
}

/* The hook runs every this many VM instructions: rare enough to cost nothing
 * measurable, often enough to stop a runaway loop within microseconds. */
#define WATCHDOG_INSTRUCTIONS 10000

static void watchdog_hook(lua_State *L, lua_Debug *ar) {
    _Atomic int *flag = *(_Atomic int **)lua_getextraspace(L);
    if (flag != NULL && atomic_exchange(flag, 0)) {
        lua_getinfo(L, "Sl", ar);
        /* Not luaL_error: its own position prefix would name the caller's line. */
        lua_pushfstring(L, "%s:%d: timed out: still running without ever yielding (an endless loop?)",
                        ar->short_src, ar->currentline);
        lua_error(L);
    }
}

void mw_watchdog_install(lua_State *L, int *flag) {
    /* New threads copy the main thread's extra space and hook. */
    *(_Atomic int **)lua_getextraspace(L) = (_Atomic int *)flag;
    lua_sethook(L, watchdog_hook, LUA_MASKCOUNT, WATCHDOG_INSTRUCTIONS);
}

void mw_watchdog_trigger(int *flag) { atomic_store((_Atomic int *)flag, 1); }

void mw_watchdog_reset(int *flag) { atomic_store((_Atomic int *)flag, 0); }

void mw_tune_allocator(int mmap_threshold, int trim_threshold) {
    mallopt(M_MMAP_THRESHOLD, mmap_threshold);
    mallopt(M_TRIM_THRESHOLD, trim_threshold);
}
