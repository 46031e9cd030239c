/*
 * Coverage of Lua code for libFuzzer (the lua-json target of scripts/fuzz.sh).
 *
 * The Lua interpreter is Debian's liblua5.4, not built with -fsanitize=fuzzer, so
 * libFuzzer sees no new edges when a mutated input takes a new path through
 * json.lua. A line hook turns each step from one Lua line to the next into a
 * counter in the __libfuzzer_extra_counters section, which libFuzzer reads like
 * its own edge counters.
 */
#ifndef MOONWIRE_LUA_COVERAGE_H
#define MOONWIRE_LUA_COVERAGE_H

#include <lua.h>

/* Installs the line hook on L (the hook also sees the coroutines L creates). */
void mw_fuzz_lua_coverage(lua_State *L);

/* Ends one input: a full garbage collection, so that what the input allocated is freed
 * before the next one (libFuzzer takes more mallocs than frees in a run for a possible
 * leak and scans the whole heap for it, which made the target ~10 times slower), and
 * the next input's first line starts a fresh edge. */
void mw_fuzz_lua_end_run(lua_State *L);

#endif
