/* fleet_scripts.c — the scripts' text (see fleet_scripts.h), as the
 * Makefile links it in from src/fleet/lua/: ld -r -b binary names a
 * file's bytes after the file. Hidden: the shim's own references bind
 * inside the library, never through its symbol table. */
#include "fleet/fleet_scripts.h"

#define RL_LUA_FILE(name)                                                      \
    extern const char _binary_##name##_lua_start[]                             \
        __attribute__((visibility("hidden")));                                 \
    extern const char _binary_##name##_lua_end[]                               \
        __attribute__((visibility("hidden")));                                 \
    const struct rl_fleet_lua rl_fleet_lua_##name = {                          \
        _binary_##name##_lua_start, _binary_##name##_lua_end}

RL_LUA_FILE(bucket);
RL_LUA_FILE(window);
RL_LUA_FILE(pause);
RL_LUA_FILE(pace);
