#include "LuaCoverage.h"

#include <stdint.h>

#define COUNTERS 65536

__attribute__((section("__libfuzzer_extra_counters"), used))
static uint8_t counters[COUNTERS];

/* The line before; inputs are run one at a time on one thread. */
static unsigned previous;

static void line_hook(lua_State *L, lua_Debug *ar) {
    (void)L;
    unsigned line = (unsigned)ar->currentline;
    unsigned edge = (previous * 2654435761u ^ line) % COUNTERS;
    if (counters[edge] != UINT8_MAX) counters[edge]++;
    previous = line;
}

void mw_fuzz_lua_coverage(lua_State *L) {
    lua_sethook(L, line_hook, LUA_MASKLINE, 0);
}

void mw_fuzz_lua_end_run(lua_State *L) {
    lua_gc(L, LUA_GCCOLLECT);
    previous = 0;
}
