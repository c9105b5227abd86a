/* kinds.c — the table of limit kinds (kinds.h). */
#include "model/kinds.h"

#include <string.h>

const struct rl_kind_info rl_kinds[RL_KIND_COUNT] = {
    [RL_KIND_CONNECT] = {.name = "connect",
                         .burst_key = "connect_burst",
                         .unit = "connection",
                         .charges = "a new stream connection"},
    [RL_KIND_SEND] = {.name = "send",
                      .burst_key = "send_burst",
                      .unit = "call",
                      .charges = "a send-family call (sendmmsg: a message)",
                      .leased = true},
    [RL_KIND_SEND_BYTES] = {.name = "send_bytes",
                            .burst_key = "send_bytes_burst",
                            .unit = "byte",
                            .charges = "the bytes a send-family call sends",
                            .sizes = true,
                            .leased = true},
    [RL_KIND_REQUEST] = {.name = "request",
                         .burst_key = "request_burst",
                         .unit = "request",
                         .charges = "an HTTP request the program writes",
                         .paused = true},
};

const char *rl_kind_name(int kind)
{
    return kind >= 0 && kind < RL_KIND_COUNT ? rl_kinds[kind].name : "?";
}

int rl_kind_by_name(const char *name)
{
    for (int k = 0; k < RL_KIND_COUNT; k++)
        if (strcmp(name, rl_kinds[k].name) == 0)
            return k;
    return -1;
}
