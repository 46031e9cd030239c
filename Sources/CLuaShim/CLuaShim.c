#include "CLuaShim.h"

#include <malloc.h>

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Fields without _Atomic are touched only by the thread running the state. */
struct mw_guard {
    /* Set from other threads, read by the count hook. */
    _Atomic int interrupt; /* the test runner's watchdog: raise a timeout now */
    _Atomic int signal;    /* SIGINT/SIGTERM waiting for the host to act on it */
    lua_State *main;
    /* Calls from the host in progress (mw_pcall_traceback), and how many began. */
    int depth;
    unsigned long entry;
    /* Swift functions running inside the innermost call from the host. */
    int in_host;
    /* How long the current call from the host has run, as the hook sees it. */
    unsigned long timed_entry;
    double entry_seen;
    int warned;
    /* When the hook first raised for the pending signal (0: not yet). */
    double signal_seen;
    double warn_after, limit_after; /* seconds; 0 = never */
    mw_slow_fn on_slow;
    void *on_slow_ctx;
    /* Memory: bytes held, the limit (0 = none), and the last refusal. */
    size_t used, limit;
    int refused;
    char refused_at[256];
};

static char exit_sentinel;

mw_guard *mw_guard_of(lua_State *L) { return *(mw_guard **)lua_getextraspace(L); }

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
    mw_guard *g = mw_guard_of(L);
    /* Swift is on the C stack: no allocation may be refused (the memory error
     * would longjmp across it). */
    g->in_host++;
    int status = fn(L, ctx);
    g->in_host--;
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
    /* The report is built even at the memory limit (mw_pcall_traceback puts
     * the count back). */
    mw_guard_of(L)->in_host++;
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
    mw_guard *g = mw_guard_of(L);
    int base = lua_gettop(L) - nargs;
    lua_pushcfunction(L, mw_message_handler);
    lua_insert(L, base);
    /* A call from the host: its Lua code may have allocations refused (the
     * error stays inside this pcall), even when the host is itself inside a
     * Swift function that Lua called. */
    int in_host = g->in_host;
    g->in_host = 0;
    if (g->depth++ == 0) g->entry++;
    int status = lua_pcall(L, nargs, nresults, base);
    g->depth--;
    g->in_host = in_host;
    lua_remove(L, base);
    return status;
}

/* `file:line` of the first frame from `level` up that is the user's (see
 * where_user), into buf. Reads the stack only, allocates nothing: the
 * allocator may call it. */
static void user_location(lua_State *L, int level, char *buf, size_t size) {
    lua_Debug ar;
    for (int l = level; lua_getstack(L, l, &ar); l++) {
        lua_getinfo(L, "Sl", &ar);
        if (ar.currentline > 0 && strncmp(ar.source, "@moonwire/", 10) != 0) {
            snprintf(buf, size, "%s:%d", ar.short_src, ar.currentline);
            return;
        }
    }
    /* None is the user's: the running function's own place, if it has one. */
    if (lua_getstack(L, level, &ar) && lua_getinfo(L, "Sl", &ar) && ar.currentline > 0) {
        snprintf(buf, size, "%s:%d", ar.short_src, ar.currentline);
    } else {
        snprintf(buf, size, "?");
    }
}

/* After a refusal, this much more is allowed for reporting it (the
 * traceback, the message). */
#define REPORT_HEADROOM (1 << 20)

/* Counts every byte the state holds. Past the limit, growth is refused only
 * where Lua can raise the memory error safely: inside a call from the host
 * and with no Swift function running (its frames would be skipped). Anywhere
 * else (the host pushing a message, a Swift binding building its result) the
 * allocation goes through and the next Lua allocation is refused instead. */
static void *guarded_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
    mw_guard *g = ud;
    size_t old = ptr != NULL ? osize : 0;
    if (nsize == 0) {
        free(ptr);
        g->used -= old;
        return NULL;
    }
    size_t cap = g->limit + (g->refused ? REPORT_HEADROOM : 0);
    if (nsize > old && g->limit != 0 && g->used - old + nsize > cap && g->depth > 0 && g->in_host == 0) {
        if (!g->refused) {
            g->refused = 1;
            /* The main thread's stack: right when the refusal happens in a
             * callback; a coroutine's error carries its own traceback. */
            user_location(g->main, 0, g->refused_at, sizeof g->refused_at);
        }
        return NULL;
    }
    void *block = realloc(ptr, nsize);
    if (block != NULL) g->used = g->used - old + nsize;
    return block;
}

static int panic(lua_State *L) {
    const char *msg = lua_tostring(L, -1);
    fprintf(stderr, "moonwire: unprotected Lua error: %s\n", msg ? msg : "(not a string)");
    fflush(stderr);
    abort();
}

static double monotonic_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Seconds Lua code may go on catching a signal's interruption before the
 * process ends without it. */
#define STUCK_GRACE 1.0

/* Lua code that catches every interruption (a pcall in an endless loop) holds
 * the thread for good: nothing but ending the process frees it. */
static _Noreturn void give_up(const char *where, const char *what, int code) {
    fflush(stdout);
    fprintf(stderr, "%s: the script %s; moonwire exits with %d\n", where, what, code);
    fflush(stderr);
    _exit(code);
}

/* The hook runs every this many VM instructions: often enough to stop a
 * runaway loop within microseconds, and it reads the clock only then. */
#define GUARD_INSTRUCTIONS 10000

static void guard_hook(lua_State *L, lua_Debug *ar) {
    mw_guard *g = mw_guard_of(L);
    (void)ar;
    char where[sizeof g->refused_at];
    int signo = atomic_load(&g->signal);
    if (signo != 0) {
        /* SIGINT/SIGTERM: unwind like mw.exit; the host shuts down once the
         * Lua code is off the stack. Raised again at every hook until then; a
         * script whose pcall keeps catching it for a second is ended here. */
        double now = monotonic_seconds();
        if (g->signal_seen == 0) g->signal_seen = now;
        if (now - g->signal_seen >= STUCK_GRACE) {
            user_location(L, 0, where, sizeof where);
            give_up(where, "caught the signal's interruption and kept running", 128 + signo);
        }
        mw_push_exit_sentinel(L);
        lua_error(L);
    }
    if (atomic_exchange(&g->interrupt, 0)) {
        user_location(L, 0, where, sizeof where);
        lua_pushfstring(L, "%s: timed out: still running without ever yielding (an endless loop?)", where);
        lua_error(L);
    }
    if (g->depth == 0 || (g->warn_after <= 0 && g->limit_after <= 0)) return;
    double now = monotonic_seconds();
    if (g->timed_entry != g->entry) {
        /* The first hook of this call from the host: it began at most a few
         * thousand instructions ago. */
        g->timed_entry = g->entry;
        g->entry_seen = now;
        g->warned = 0;
        return;
    }
    double running = now - g->entry_seen;
    if (g->limit_after > 0 && running >= g->limit_after) {
        char message[sizeof where + 160];
        user_location(L, 0, where, sizeof where);
        /* Raised again at every hook; a callback that catches it for as long
         * again cannot be stopped, and holds the loop for good. */
        if (running >= 2 * g->limit_after) give_up(where, "caught its interruption and kept running", 1);
        snprintf(message, sizeof message,
                 "%s: interrupted: the callback ran for %.1f s without returning to the event loop "
                 "(callback timeout %g s)", where, running, g->limit_after);
        lua_pushstring(L, message);
        lua_error(L);
    }
    if (!g->warned && g->warn_after > 0 && running >= g->warn_after) {
        g->warned = 1;
        user_location(L, 0, where, sizeof where);
        if (g->on_slow != NULL) g->on_slow(g->on_slow_ctx, where, running);
    }
}

lua_State *mw_newstate(void) {
    mw_guard *g = calloc(1, sizeof *g);
    if (g == NULL) return NULL;
    lua_State *L = lua_newstate(guarded_alloc, g);
    if (L == NULL) {
        free(g);
        return NULL;
    }
    g->main = L;
    /* New threads copy the main thread's extra space and hook. */
    *(mw_guard **)lua_getextraspace(L) = g;
    lua_atpanic(L, panic);
    lua_sethook(L, guard_hook, LUA_MASKCOUNT, GUARD_INSTRUCTIONS);
    return L;
}

void mw_close(lua_State *L) {
    mw_guard *g = mw_guard_of(L);
    lua_close(L);
    free(g);
}

void mw_guard_set_memory_limit(mw_guard *g, size_t bytes) { g->limit = bytes; }

size_t mw_guard_memory_used(mw_guard *g) { return g->used; }

void mw_guard_set_callback_limits(mw_guard *g, double warn_after, double limit_after) {
    g->warn_after = warn_after;
    g->limit_after = limit_after;
}

void mw_guard_on_slow(mw_guard *g, mw_slow_fn fn, void *ctx) {
    g->on_slow = fn;
    g->on_slow_ctx = ctx;
}

int mw_guard_refusal(mw_guard *g, char *where, size_t size) {
    if (!g->refused) return 0;
    snprintf(where, size, "%s", g->refused_at);
    return 1;
}

size_t mw_guard_memory_limit(mw_guard *g) { return g->limit; }

void mw_guard_collect_after_refusal(lua_State *L) {
    mw_guard *g = mw_guard_of(L);
    if (!g->refused) return;
    g->refused = 0;
    lua_gc(L, LUA_GCCOLLECT);
}

void mw_guard_signal(mw_guard *g, int signo) { atomic_store(&g->signal, signo); }

int mw_guard_pending_signal(mw_guard *g) { return atomic_load(&g->signal); }

int mw_guard_take_signal(mw_guard *g) {
    g->signal_seen = 0;
    return atomic_exchange(&g->signal, 0);
}

void mw_guard_interrupt(mw_guard *g) { atomic_store(&g->interrupt, 1); }

void mw_guard_clear_interrupt(mw_guard *g) { atomic_store(&g->interrupt, 0); }

void mw_tune_allocator(int mmap_threshold, int trim_threshold) {
    mallopt(M_MMAP_THRESHOLD, mmap_threshold);
    mallopt(M_TRIM_THRESHOLD, trim_threshold);
}
