#include "CLuaShim.h"

#include <malloc.h>

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Lua's small blocks (tables, short strings, closures: most of what a message
 * allocates and the collector frees) come from per-size free lists kept by the
 * state, not from malloc and free each time: glibc's free alone cost about 100
 * instructions per block, about 6 000 per JSON message. The lists hold at most
 * SMALL_KEEP bytes; past that a freed block goes back to malloc. */
#define SMALL_STEP 16
#define SMALL_MAX 256
#define MW_CLASSES 8
#define SMALL_CLASSES (SMALL_MAX / SMALL_STEP)
#define SMALL_KEEP ((size_t)1 << 20)

struct small_block {
    struct small_block *next;
};

/* Under AddressSanitizer a kept block is poisoned past its link, so a use after
 * Lua freed it is still reported though the block did not go back to free().
 * The link stays readable: LeakSanitizer follows no pointer kept in poisoned
 * memory, and would report the kept blocks of a state still open at exit. */
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MW_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define MW_ASAN 1
#endif
#ifdef MW_ASAN
#include <sanitizer/asan_interface.h>
#define KEPT(block, bytes) \
    ASAN_POISON_MEMORY_REGION((char *)(block) + sizeof(struct small_block), (bytes) - sizeof(struct small_block))
#define REUSED(block, bytes) ASAN_UNPOISON_MEMORY_REGION(block, bytes)
#else
#define KEPT(block, bytes) ((void)(block), (void)(bytes))
#define REUSED(block, bytes) ((void)(block), (void)(bytes))
#endif

/* Fields without _Atomic are touched only by the thread running the state
 * (the watchdog's own fields by the watchdog, under `mu`). */
struct mw_guard {
    /* Set from other threads, read by the count hook. */
    _Atomic int interrupt; /* raise now: MW_INTERRUPT_TIMEOUT (the test runner's watchdog)
                              or MW_INTERRUPT_USER (Ctrl-C at `moonwire lua`'s REPL) */
    _Atomic int signal;    /* SIGINT/SIGTERM waiting for the host to act on it */
    lua_State *main;
    /* Calls from the host in progress (mw_pcall_traceback), how many began and
     * the thread making them: written by the state's thread, read by the watchdog. */
    _Atomic int depth;
    _Atomic unsigned long entry;
    _Atomic unsigned long owner; /* pthread_t */
    /* The Lua thread (main or coroutine) running now: the one a count hook must
     * go on. Kept by mw_pcall_traceback and the coroutine functions below. */
    lua_State *volatile running;
    /* Swift functions running inside the innermost call from the host. */
    int in_host;
    /* The call from the host (its entry) the count hook watches, 0 for none,
     * and when the watchdog first saw it running. */
    _Atomic unsigned long armed_entry;
    _Atomic double armed_since;
    /* The call from the host already warned about. */
    unsigned long warned_entry;
    /* When the hook first raised for the pending signal (0: not yet). */
    double signal_seen;
    _Atomic double warn_after, limit_after; /* seconds; 0 = never */
    mw_slow_fn on_slow;
    void *on_slow_ctx;
    /* Memory: bytes held, the limit (0 = none), and the last refusal. */
    size_t used, limit;
    int refused;
    /* The size of the allocation just refused: Lua collects and asks once more for
     * it, and that retry gets no headroom (else the headroom for reporting the error
     * would let the runaway code go on). 0: none pending. */
    size_t retry;
    char refused_at[256];
    /* Freed small blocks kept for reuse, one list per size class, and the
     * bytes they hold (at most SMALL_KEEP; see small_alloc). */
    struct small_block *small_free[SMALL_CLASSES];
    size_t small_kept;
    /* The metatables of the classes mw_testudata has checked, by name. */
    struct { char name[32]; const void *metatable; } classes[MW_CLASSES];
    /* Registry references of mw_push_constant's strings (0: not made yet). */
    int constants[MW_CONSTANT_SLOTS];
    /* The watchdog thread (started on first need) and what wakes it. */
    pthread_mutex_t mu;
    pthread_cond_t wake;
    pthread_t watchdog;
    int watching, stop;
    /* warn(): on after "@on" (lua -W); a message in pieces still going on. */
    int warn_on, warn_continuing;
};

static char exit_sentinel;

mw_guard *mw_guard_of(lua_State *L) { return *(mw_guard **)lua_getextraspace(L); }

void *mw_testudata(lua_State *L, int idx, const char *tname) {
    void *p = lua_touserdata(L, idx);
    if (p == NULL || !lua_getmetatable(L, idx)) return NULL;
    const void *metatable = lua_topointer(L, -1);
    lua_pop(L, 1);
    /* A class's metatable stays the registry's for the life of the state: it is
     * looked up once per name, then compared by address (luaL_testudata looks
     * the name up in the registry on every call). */
    mw_guard *g = mw_guard_of(L);
    for (int i = 0; i < MW_CLASSES; i++) {
        if (g->classes[i].metatable == NULL) {
            if (strlen(tname) >= sizeof g->classes[i].name) break;
            luaL_getmetatable(L, tname);
            const void *known = lua_topointer(L, -1);
            lua_pop(L, 1);
            if (known == NULL) return NULL;
            strcpy(g->classes[i].name, tname);
            g->classes[i].metatable = known;
        }
        if (strcmp(g->classes[i].name, tname) == 0) return metatable == g->classes[i].metatable ? p : NULL;
    }
    return luaL_testudata(L, idx, tname);
}

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

static void disarm(mw_guard *g, lua_State *L);
static int arm_signal(void);

/* Whether this thread takes the arming signal: threads that block every signal
 * (Dispatch's workers) unblock it the first time they call into Lua. */
static __thread int tl_arm_unblocked;

static void unblock_arm_signal(void) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, arm_signal());
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
    tl_arm_unblocked = 1;
}

/* The guard of the call from the host running on this thread, for the arming
 * signal's handler (NULL between calls). */
static __thread mw_guard *tl_guard;

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
    int depth = atomic_load_explicit(&g->depth, memory_order_relaxed);
    lua_State *running = g->running;
    if (depth == 0) {
        if (!tl_arm_unblocked) unblock_arm_signal();
        atomic_store_explicit(&g->owner, (unsigned long)pthread_self(), memory_order_relaxed);
        atomic_store_explicit(&g->entry, atomic_load_explicit(&g->entry, memory_order_relaxed) + 1,
                              memory_order_relaxed);
        tl_guard = g;
    }
    g->running = L;
    atomic_store_explicit(&g->depth, depth + 1, memory_order_release);
    int status = lua_pcall(L, nargs, nresults, base);
    atomic_store_explicit(&g->depth, depth, memory_order_release);
    g->running = running;
    if (depth == 0) {
        tl_guard = NULL;
        if (atomic_load_explicit(&g->armed_entry, memory_order_relaxed) != 0) disarm(g, L);
    }
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

/* A block Lua sees as `size` bytes (at most SMALL_MAX) is in class
 * (size - 1) / SMALL_STEP and always has room for its class's whole size, so
 * any block of the class can serve any request of the class. */
static inline size_t small_class(size_t size) { return (size - 1) / SMALL_STEP; }

/* The room of every block of class c. */
static inline size_t class_room(size_t c) { return (c + 1) * SMALL_STEP; }

static void *small_alloc(mw_guard *g, size_t size) {
    size_t c = small_class(size);
    struct small_block *b = g->small_free[c];
    if (b != NULL) {
        REUSED(b, class_room(c));
        g->small_free[c] = b->next;
        g->small_kept -= class_room(c);
        return b;
    }
    return malloc(class_room(c));
}

static void small_release(mw_guard *g, void *ptr, size_t size) {
    size_t c = small_class(size), bytes = class_room(c);
    if (g->small_kept + bytes > SMALL_KEEP) {
        free(ptr);
        return;
    }
    struct small_block *b = ptr;
    b->next = g->small_free[c];
    g->small_free[c] = b;
    g->small_kept += bytes;
    KEPT(b, bytes);
}

static void small_drain(mw_guard *g) {
    for (size_t c = 0; c < SMALL_CLASSES; c++) {
        while (g->small_free[c] != NULL) {
            struct small_block *b = g->small_free[c];
            REUSED(b, class_room(c));
            g->small_free[c] = b->next;
            free(b);
        }
    }
    g->small_kept = 0;
}

/* realloc with the small-block lists: a block never moves when it shrinks (Lua
 * must not see a shrink fail), and a small block keeps its class's room. */
static void *resize_block(mw_guard *g, void *ptr, size_t old, size_t nsize) {
    if (old == 0) return nsize <= SMALL_MAX ? small_alloc(g, nsize) : malloc(nsize);
    if (old <= SMALL_MAX) {
        if (nsize <= old || small_class(nsize) == small_class(old)) return ptr;
        if (nsize > SMALL_MAX) return realloc(ptr, nsize);
        void *block = small_alloc(g, nsize);
        if (block != NULL) {
            memcpy(block, ptr, old);
            small_release(g, ptr, old);
        }
        return block;
    }
    if (nsize <= SMALL_MAX) {
        /* Shrinking from malloc's sizes into a class: room for the whole class. */
        void *block = realloc(ptr, class_room(small_class(nsize)));
        return block != NULL ? block : ptr;
    }
    return realloc(ptr, nsize);
}

/* Counts every byte the state holds. Past the limit, growth is refused only
 * where Lua can raise the memory error safely: inside a call from the host
 * and with no Swift function running (its frames would be skipped). Anywhere
 * else (the host pushing a message, a Swift binding building its result) the
 * allocation goes through and the next Lua allocation is refused instead. */
static void *guarded_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
    mw_guard *g = ud;
    size_t old = ptr != NULL ? osize : 0;
    if (nsize == 0) {
        if (ptr != NULL) {
            if (old <= SMALL_MAX) small_release(g, ptr, old);
            else free(ptr);
        }
        g->used -= old;
        return NULL;
    }
    /* Lua's retry of a refused allocation (right after its emergency collection, the
     * same size) gets no headroom: it passes only if the collection made room under
     * the limit itself. */
    int is_retry = g->retry != 0 && nsize == g->retry;
    g->retry = 0;
    size_t cap = g->limit + (g->refused && !is_retry ? REPORT_HEADROOM : 0);
    if (nsize > old && g->limit != 0 && g->used - old + nsize > cap &&
        atomic_load_explicit(&g->depth, memory_order_relaxed) > 0 && g->in_host == 0) {
        if (!is_retry) g->retry = nsize;
        if (!g->refused) {
            g->refused = 1;
            /* The main thread's stack: right when the refusal happens in a
             * callback; a coroutine's error carries its own traceback. */
            user_location(g->main, 0, g->refused_at, sizeof g->refused_at);
        }
        return NULL;
    }
    void *block = resize_block(g, ptr, old, nsize);
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

/* A count hook makes Lua check for it before every VM instruction (about a
 * fifth of a short callback's cost), so no thread has one while the script
 * behaves: the watchdog thread below puts it on the running Lua thread when
 * a call from the host has run for a while, or a signal or the test runner's
 * interruption is waiting. The hook then runs every this many instructions:
 * often enough to stop a runaway loop within microseconds, and it reads the
 * clock only then. */
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
    int interrupt = atomic_exchange(&g->interrupt, 0);
    if (interrupt != 0) {
        user_location(L, 0, where, sizeof where);
        if (interrupt == MW_INTERRUPT_USER)
            lua_pushfstring(L, "%s: interrupted!", where); /* lua.c's words for Ctrl-C */
        else
            lua_pushfstring(L, "%s: timed out: still running without ever yielding (an endless loop?)", where);
        lua_error(L);
    }
    unsigned long entry = atomic_load_explicit(&g->entry, memory_order_relaxed);
    if (atomic_load_explicit(&g->depth, memory_order_relaxed) == 0 ||
        atomic_load(&g->armed_entry) != entry) {
        /* Left on a thread from a call that is over: off again. */
        lua_sethook(L, NULL, 0, 0);
        return;
    }
    double warn_after = atomic_load(&g->warn_after), limit_after = atomic_load(&g->limit_after);
    if (warn_after <= 0 && limit_after <= 0) return;
    double running = monotonic_seconds() - atomic_load(&g->armed_since);
    if (limit_after > 0 && running >= limit_after) {
        char message[sizeof where + 160];
        user_location(L, 0, where, sizeof where);
        /* Raised again at every hook; a callback that catches it for as long
         * again cannot be stopped, and holds the loop for good. */
        if (running >= 2 * limit_after) give_up(where, "caught its interruption and kept running", 1);
        snprintf(message, sizeof message,
                 "%s: interrupted: the callback ran for %.1f s without returning to the event loop "
                 "(callback timeout %g s)", where, running, limit_after);
        lua_pushstring(L, message);
        lua_error(L);
    }
    if (g->warned_entry != entry && warn_after > 0 && running >= warn_after) {
        g->warned_entry = entry;
        user_location(L, 0, where, sizeof where);
        if (g->on_slow != NULL) g->on_slow(g->on_slow_ctx, where, running);
    }
}

static void hook(lua_State *L) { lua_sethook(L, guard_hook, LUA_MASKCOUNT, GUARD_INSTRUCTIONS); }

/* Whether threads that start running now get the hook: the watchdog armed it
 * for the call in progress. */
static int armed_now(mw_guard *g) {
    unsigned long armed = atomic_load_explicit(&g->armed_entry, memory_order_relaxed);
    return armed != 0 && armed == atomic_load_explicit(&g->entry, memory_order_relaxed);
}

/* At the end of a call from the host the watchdog armed: the hook off the
 * threads it may be on. A suspended coroutine that still has it takes it off
 * at its first hook (see guard_hook). */
static void unhook(lua_State *L) {
    if (lua_gethook(L) == guard_hook) lua_sethook(L, NULL, 0, 0);
}

static void disarm(mw_guard *g, lua_State *L) {
    atomic_store(&g->armed_entry, 0);
    unhook(g->main);
    if (L != g->main) unhook(L);
}

/* The arming signal, sent by the watchdog to the thread making the call from
 * the host. Its handler sets the hook on the running Lua thread, as lua.c does
 * on SIGINT: lua_sethook may be called from a signal handler. SIGURG: nothing
 * else here uses it (it needs F_SETOWN on a socket), it is ignored by default,
 * and, not being a real-time signal, sending it again while one is pending
 * queues nothing. */
static int arm_signal(void) { return SIGURG; }

static void on_arm_signal(int signo) {
    (void)signo;
    int saved = errno;
    mw_guard *g = tl_guard;
    if (g != NULL && atomic_load_explicit(&g->depth, memory_order_relaxed) > 0) {
        lua_State *L = g->running;
        hook(g->main);
        if (L != NULL && L != g->main) hook(L);
    }
    errno = saved;
}

static pthread_once_t arm_signal_once = PTHREAD_ONCE_INIT;

static void install_arm_signal(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_arm_signal;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(arm_signal(), &sa, NULL);
}

/* How often the watchdog looks, in seconds (< 0: only when woken): a
 * twentieth of the shorter callback limit, within 5 ms .. 100 ms; every 10 ms
 * while a signal or an interruption waits for Lua code to run. */
static double watch_period(mw_guard *g) {
    double warn_after = atomic_load(&g->warn_after), limit_after = atomic_load(&g->limit_after);
    double shortest = warn_after > 0 && (limit_after <= 0 || warn_after < limit_after) ? warn_after : limit_after;
    double period = shortest > 0 ? shortest / 20 : -1;
    if (period > 0.1) period = 0.1;
    if (period > 0 && period < 0.005) period = 0.005;
    int pending = atomic_load(&g->signal) != 0 || atomic_load(&g->interrupt) != 0;
    if (pending && (period < 0 || period > 0.01)) period = 0.01;
    return period;
}

/* A call from the host seen running at two looks (at least one period old),
 * or one running while a signal or an interruption waits, gets the hook. It is
 * sent again at each look while that holds: the running thread may have
 * changed under the first. */
static void watch(mw_guard *g, unsigned long *seen_entry, double *seen_at, double period) {
    if (atomic_load_explicit(&g->depth, memory_order_acquire) == 0) {
        *seen_entry = 0;
        return;
    }
    unsigned long entry = atomic_load_explicit(&g->entry, memory_order_relaxed);
    double now = monotonic_seconds();
    int pending = atomic_load(&g->signal) != 0 || atomic_load(&g->interrupt) != 0;
    int old = entry == *seen_entry;
    if (!old) {
        *seen_entry = entry;
        *seen_at = now;
    }
    if (!pending && !(old && period > 0 && now - *seen_at >= period * 0.9)) return;
    if (atomic_load(&g->armed_entry) != entry) {
        atomic_store(&g->armed_since, *seen_at);
        atomic_store(&g->armed_entry, entry);
    }
    pthread_kill((pthread_t)atomic_load_explicit(&g->owner, memory_order_relaxed), arm_signal());
}

static void *watchdog_main(void *arg) {
    mw_guard *g = arg;
    unsigned long seen_entry = 0;
    double seen_at = 0;
    pthread_mutex_lock(&g->mu);
    while (!g->stop) {
        double period = watch_period(g);
        if (period < 0) {
            pthread_cond_wait(&g->wake, &g->mu);
        } else {
            struct timespec until;
            clock_gettime(CLOCK_MONOTONIC, &until);
            long ns = until.tv_nsec + (long)(period * 1e9);
            until.tv_sec += ns / 1000000000L;
            until.tv_nsec = ns % 1000000000L;
            pthread_cond_timedwait(&g->wake, &g->mu, &until);
        }
        if (g->stop) break;
        watch(g, &seen_entry, &seen_at, period);
    }
    pthread_mutex_unlock(&g->mu);
    return NULL;
}

/* Has the watchdog look now; starts it first if `start` and it is not running. */
static void wake_watchdog(mw_guard *g, int start) {
    pthread_mutex_lock(&g->mu);
    if (start && !g->watching && !g->stop) {
        pthread_once(&arm_signal_once, install_arm_signal);
        /* The watchdog takes no signal (the arming one is for the Lua thread). */
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_BLOCK, &all, &old);
        g->watching = pthread_create(&g->watchdog, NULL, watchdog_main, g) == 0;
        pthread_sigmask(SIG_SETMASK, &old, NULL);
    }
    pthread_cond_signal(&g->wake);
    pthread_mutex_unlock(&g->mu);
}

void mw_push_constant(lua_State *L, int slot, const char *s, size_t len) {
    mw_guard *g = mw_guard_of(L);
    if (g->constants[slot] == 0) {
        lua_pushlstring(L, s, len);
        g->constants[slot] = luaL_ref(L, LUA_REGISTRYINDEX);
    }
    lua_rawgeti(L, LUA_REGISTRYINDEX, g->constants[slot]);
}

/* Lua's warning function as the lua program has it: nothing until a "@on"
 * control message (lua -W), then "Lua warning: " and the pieces of each
 * message on stderr, a newline after the last piece. */
static void warn_to_stderr(void *ud, const char *message, int tocont) {
    mw_guard *g = ud;
    if (!g->warn_continuing && !tocont && message[0] == '@') {
        if (strcmp(message, "@on") == 0) g->warn_on = 1;
        else if (strcmp(message, "@off") == 0) g->warn_on = 0;
        return;
    }
    if (g->warn_on) {
        if (!g->warn_continuing) fputs("Lua warning: ", stderr);
        fputs(message, stderr);
        if (!tocont) fputs("\n", stderr);
        fflush(stderr);
    }
    g->warn_continuing = tocont;
}

lua_State *mw_newstate(void) {
    mw_guard *g = calloc(1, sizeof *g);
    if (g == NULL) return NULL;
    lua_State *L = lua_newstate(guarded_alloc, g);
    if (L == NULL) {
        small_drain(g);
        free(g);
        return NULL;
    }
    g->main = L;
    pthread_mutex_init(&g->mu, NULL);
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&g->wake, &attr);
    pthread_condattr_destroy(&attr);
    /* New threads copy the main thread's extra space. */
    *(mw_guard **)lua_getextraspace(L) = g;
    lua_atpanic(L, panic);
    lua_setwarnf(L, warn_to_stderr, g);
    /* The collector of the `lua5.4` interpreter (lua.c): generational. Incremental (a new
     * state's default) falls behind a script that makes many short-lived objects with
     * finalizers, a timer handle per mw.after or mw.sleep among them: 100 000 timers a
     * second grew the heap by tens of MB a second, without bound, until a full collection. */
    lua_gc(L, LUA_GCGEN, 0, 0);
    return L;
}

void mw_close(lua_State *L) {
    mw_guard *g = mw_guard_of(L);
    pthread_mutex_lock(&g->mu);
    g->stop = 1;
    int watching = g->watching;
    pthread_cond_signal(&g->wake);
    pthread_mutex_unlock(&g->mu);
    if (watching) pthread_join(g->watchdog, NULL);
    lua_close(L);
    small_drain(g);
    pthread_cond_destroy(&g->wake);
    pthread_mutex_destroy(&g->mu);
    free(g);
}

/* coroutine.resume and coroutine.wrap, as the manual describes them, keeping
 * `running` (which thread a count hook must go on) up to date. Resumes `co`
 * with the `narg` values on top of L's stack; returns how many results it moved
 * onto L, or -1 with the error value on top of L. */
static int resume_tracked(lua_State *L, lua_State *co, int narg) {
    mw_guard *g = mw_guard_of(L);
    if (!lua_checkstack(co, narg)) {
        lua_pushliteral(L, "too many arguments to resume");
        return -1;
    }
    if (lua_status(co) == LUA_OK && lua_gettop(co) == 0) {
        lua_pushliteral(L, "cannot resume dead coroutine");
        return -1;
    }
    lua_xmove(L, co, narg);
    g->running = co;
    if (armed_now(g)) hook(co);
    int nres = 0;
    int status = lua_resume(co, L, narg, &nres);
    g->running = L;
    if (armed_now(g)) hook(L);
    if (status == LUA_OK || status == LUA_YIELD) {
        if (!lua_checkstack(L, nres + 1)) {
            lua_pop(co, nres);
            lua_pushliteral(L, "too many results to resume");
            return -1;
        }
        lua_xmove(co, L, nres);
        return nres;
    }
    lua_xmove(co, L, 1);
    return -1;
}

static int coroutine_resume(lua_State *L) {
    lua_State *co = lua_tothread(L, 1);
    luaL_argexpected(L, co != NULL, 1, "thread");
    int n = resume_tracked(L, co, lua_gettop(L) - 1);
    lua_pushboolean(L, n >= 0);
    lua_insert(L, n >= 0 ? -(n + 1) : -2);
    return n >= 0 ? n + 1 : 2;
}

static int coroutine_wrapped(lua_State *L) {
    lua_State *co = lua_tothread(L, lua_upvalueindex(1));
    int n = resume_tracked(L, co, lua_gettop(L));
    if (n >= 0) return n;
    int status = lua_status(co);
    if (status != LUA_OK && status != LUA_YIELD) {
        /* It died of the error: close its to-be-closed variables. */
        status = lua_resetthread(co);
        lua_xmove(co, L, 1);
    }
    if (status != LUA_ERRMEM && lua_type(L, -1) == LUA_TSTRING) {
        luaL_where(L, 1);
        lua_insert(L, -2);
        lua_concat(L, 2);
    }
    return lua_error(L);
}

static int coroutine_wrap(lua_State *L) {
    luaL_checktype(L, 1, LUA_TFUNCTION);
    lua_State *co = lua_newthread(L);
    lua_pushvalue(L, 1);
    lua_xmove(L, co, 1);
    lua_pushcclosure(L, coroutine_wrapped, 1);
    return 1;
}

void mw_track_coroutines(lua_State *L) {
    if (lua_getglobal(L, "coroutine") == LUA_TTABLE) {
        lua_pushcfunction(L, coroutine_resume);
        lua_setfield(L, -2, "resume");
        lua_pushcfunction(L, coroutine_wrap);
        lua_setfield(L, -2, "wrap");
    }
    lua_pop(L, 1);
}

void mw_guard_set_memory_limit(mw_guard *g, size_t bytes) { g->limit = bytes; }

size_t mw_guard_memory_used(mw_guard *g) { return g->used; }

void mw_guard_set_callback_limits(mw_guard *g, double warn_after, double limit_after) {
    atomic_store(&g->warn_after, warn_after);
    atomic_store(&g->limit_after, limit_after);
    wake_watchdog(g, warn_after > 0 || limit_after > 0);
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

void mw_guard_signal(mw_guard *g, int signo) {
    atomic_store(&g->signal, signo);
    wake_watchdog(g, 1);
}

int mw_guard_pending_signal(mw_guard *g) { return atomic_load(&g->signal); }

int mw_guard_take_signal(mw_guard *g) {
    g->signal_seen = 0;
    return atomic_exchange(&g->signal, 0);
}

void mw_guard_interrupt(mw_guard *g, int kind) {
    atomic_store(&g->interrupt, kind);
    wake_watchdog(g, 1);
}

void mw_guard_clear_interrupt(mw_guard *g) { atomic_store(&g->interrupt, 0); }

void mw_tune_allocator(int mmap_threshold, int trim_threshold) {
    mallopt(M_MMAP_THRESHOLD, mmap_threshold);
    mallopt(M_TRIM_THRESHOLD, trim_threshold);
}
