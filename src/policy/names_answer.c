/* names_answer.c — rl_names_resolved: a lookup's answer noted under the
 * name the program asked for (see names.h). */
#include "policy/names.h"

#include <netdb.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

/* Note addr under the name (n bytes), or under its literal (n == 0). */
static void note(struct rl_names *t, int family, const void *addr,
                 const char *name, size_t n)
{
    if (n == 0)
        rl_names_forget(t, family, addr);
    else
        rl_names_note(t, family, addr, name, n);
}

static void note_ai(struct rl_names *t, const struct addrinfo *ai,
                    const char *name, size_t n)
{
    for (; ai != NULL; ai = ai->ai_next) {
        if (ai->ai_addr == NULL)
            continue;
        if (ai->ai_family == AF_INET &&
            ai->ai_addrlen >= sizeof(struct sockaddr_in)) {
            struct sockaddr_in in;
            memcpy(&in, ai->ai_addr, sizeof in);
            note(t, AF_INET, &in.sin_addr, name, n);
        } else if (ai->ai_family == AF_INET6 &&
                   ai->ai_addrlen >= sizeof(struct sockaddr_in6)) {
            struct sockaddr_in6 in6;
            memcpy(&in6, ai->ai_addr, sizeof in6);
            note(t, AF_INET6, &in6.sin6_addr, name, n);
        }
    }
}

static void note_host(struct rl_names *t, const struct hostent *h,
                      const char *name, size_t n)
{
    int alen = h->h_addrtype == AF_INET ? 4 : h->h_addrtype == AF_INET6 ? 16 : 0;
    if (alen == 0 || h->h_length != alen || h->h_addr_list == NULL)
        return;
    for (char **a = h->h_addr_list; *a != NULL; a++)
        note(t, h->h_addrtype, *a, name, n);
}

void rl_names_resolved(struct rl_names *t, const struct rl_name_answer *a)
{
    char name[RL_NAME_MAX + 1];
    size_t n = 0;
    if (a->node == NULL)
        return;
    size_t len = strlen(a->node);
    if (!a->numeric && !rl_name_is_literal(a->node, len)) {
        n = rl_name_canon(a->node, len, name);
        if (n == 0)
            return; /* no name that can be kept */
    }
    if (a->ai != NULL)
        note_ai(t, a->ai, name, n);
    else if (a->h != NULL)
        note_host(t, a->h, name, n);
}
