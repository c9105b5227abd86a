/* fuzz_config.c — libFuzzer target for the config parser.
 *
 * Any bytes go in as a file's text; the loader must return a table or
 * errors, never crash, hang or leak. A table that loads is also printed
 * back and queried, so the code that reads it is exercised too; a `to`
 * entry printed back must parse to the same entry. */
#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "policy/config.h"
#include "policy/dest.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int same_dest(const struct rl_dest *a, const struct rl_dest *b)
{
    return a->form == b->form && a->family == b->family &&
           a->prefix == b->prefix && a->port == b->port &&
           memcmp(a->addr, b->addr, sizeof a->addr) == 0 &&
           a->namelen == b->namelen &&
           (a->name == NULL) == (b->name == NULL) &&
           (a->name == NULL || strcmp(a->name, b->name) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct rl_config *cfg = NULL;
    struct rl_diag d = {0};
    char *text;
    char buf[256];

    if (size > RL_CONFIG_FILE_MAX)
        return 0;
    text = malloc(size + 1);
    if (text == NULL)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';

    if (rl_config_load_string(text, "fuzz.ini", &cfg, &d) == 0) {
        struct sockaddr_in in = {.sin_family = AF_INET,
                                 .sin_port = htons(443),
                                 .sin_addr.s_addr = htonl(0x0a000001)};
        struct sockaddr_in6 in6 = {.sin6_family = AF_INET6,
                                   .sin6_port = htons(8080),
                                   .sin6_addr = IN6ADDR_LOOPBACK_INIT};
        for (size_t i = 0; i < cfg->nrules; i++) {
            const struct rl_rule *r = &cfg->rules[i];
            (void)rl_rule_covers(NULL, r, &in, sizeof in);
            (void)rl_rule_covers(NULL, r, &in6, sizeof in6);
            for (size_t j = 0; j < r->nto; j++) {
                struct rl_dest again;
                rl_dest_format(&r->to[j], buf, sizeof buf);
                if (rl_dest_parse(buf, &again) != NULL ||
                    !same_dest(&again, &r->to[j]))
                    abort(); /* printed back, it means something else */
                rl_dest_clear(&again);
            }
            for (int k = 0; k < RL_KIND_COUNT; k++)
                for (unsigned n = 0; n < r->nlimits[k]; n++)
                    rl_config_format_rate(k, &r->limits[k][n], buf, sizeof buf);
        }
        (void)rl_config_find_rule(cfg, "alice", 1000, "bob");
        rl_config_free(cfg);
    } else {
        rl_config_error_line(&d, true, buf, sizeof buf);
    }
    rl_diag_free(&d);
    free(text);
    return 0;
}
