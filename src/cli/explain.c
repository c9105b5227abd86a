/* explain.c — `rlshim check --explain [-k KEY] URL|HOST[:PORT]`: which
 * rule, site and budget a connection there would be charged to, with
 * their limits, as the shim of a process of this user would decide.
 *
 * The target is resolved here with getaddrinfo (the shim would see the
 * same answer, and note each address under the name), and every address
 * is explained: the user's rule (does its `to` cover it; one budget for
 * the user or one per destination name), the first site that covers it
 * (likewise), and their limits and max_open. A name that does not resolve
 * here (no DNS, a name only the crawler's network knows) is explained by
 * name, as `to` matches names: which name entries cover it, and which
 * address entries its addresses, unknown here, would decide. */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/explain.h"
#include "cli/pace_show.h"
#include "fleet/fleet_lease.h"
#include "policy/budget.h"
#include "policy/dest.h"
#include "policy/dests.h"
#include "policy/identity.h"
#include "policy/names.h"
#include "policy/pace.h"
#include "policy/pauses.h"
#include "state/store.h"
#include "util/clock.h"

/* Split "http://host:port/path", "host:port", "[v6]:port", "host" into
 * host and port (default: the scheme's, else 80). 0 or -1 (bad). */
static int split(const char *target, char *host, size_t hlen, char *port,
                 size_t plen)
{
    const char *p = target, *scheme_end = strstr(target, "://");
    snprintf(port, plen, "80");
    if (scheme_end != NULL) {
        if (strncmp(target, "https", 5) == 0 && target + 5 == scheme_end)
            snprintf(port, plen, "443");
        p = scheme_end + 3;
        const char *at = strchr(p, '@');
        const char *slash = strchr(p, '/');
        if (at != NULL && (slash == NULL || at < slash))
            p = at + 1; /* user:pass@ */
    }
    size_t n = strcspn(p, "/?#");
    char hp[256];
    if (n == 0 || n >= sizeof hp)
        return -1;
    memcpy(hp, p, n);
    hp[n] = '\0';
    char *colon;
    if (hp[0] == '[') {
        char *close = strchr(hp, ']');
        if (close == NULL)
            return -1;
        *close = '\0';
        snprintf(host, hlen, "%s", hp + 1);
        colon = close[1] == ':' ? close + 1 : NULL;
    } else {
        colon = strchr(hp, ':');
        if (colon != NULL && strchr(colon + 1, ':') != NULL)
            colon = NULL; /* a bare IPv6 address */
        if (colon != NULL)
            *colon = '\0';
        snprintf(host, hlen, "%s", hp);
    }
    if (colon != NULL && colon[1] != '\0')
        snprintf(port, plen, "%s", colon + 1);
    return host[0] != '\0' ? 0 : -1;
}

static void limits(const struct rl_rule *r)
{
    char rate[64];
    bool any = false;
    printf("      limits:");
    for (int k = 0; k < RL_KIND_COUNT; k++)
        for (unsigned i = 0; i < r->nlimits[k]; i++) {
            rl_config_format_rate(k, &r->limits[k][i], rate, sizeof rate);
            printf(" %s %s (%s)", rl_kind_name(k), rate,
                   r->algo == RL_ALGO_SLIDING_WINDOW ? "sliding_window"
                                                     : "token_bucket");
            any = true;
        }
    if (r->max_open > 0) {
        printf(" max_open %u", r->max_open);
        any = true;
    }
    printf("%s\n", any ? "" : " none");
}

/* Where the budget lives (SPEC §8): in Redis for every host, or in this
 * host's segment. A site's fleet budget is the site's for the user; a
 * per-destination one has a key per destination name (as the gate
 * decides), and neither is leased. */
static void where(const struct rl_config *cfg, const struct rl_rule *r,
                  const char *user)
{
    if (r->scope != RL_SCOPE_FLEET || cfg->fleet == NULL) {
        printf("      lives: on this host (its shared segment)\n");
        return;
    }
    char label[RL_STORE_LABEL_MAX];
    rl_budget_label(r, r->site != NULL ? user : rl_budget_user(r, user), label,
                    sizeof label);
    if (r->site != NULL || rl_rule_per_dest(r)) {
        static const char *const key[] = {"", "|DESTINATION", "|DOMAIN",
                                          "|ADDRESS"};
        static const char *const one[] = {"", ", one per destination name",
                                          ", one per registrable domain",
                                          ", one per server address"};
        printf("      lives: in the fleet's Redis %s (keys rlshim:{%s%s}:*), "
               "one budget for every host%s; never leased (each call is one "
               "round trip)\n",
               cfg->fleet, label, key[r->per], one[r->per]);
        return;
    }
    /* As the gate decides: no lease beside a site, in a dry run, or with
     * a decision log (one line per call). */
    bool leased = rl_fleet_leasable(r) && !rl_config_has_sites(cfg) &&
                  !r->dry_run && !cfg->dry_run && cfg->decision_log == NULL &&
                  getenv("RLSHIM_DECISION_LOG") == NULL;
    printf("      lives: in the fleet's Redis %s (keys rlshim:{%s}:*), one "
           "budget for every host; send units leased to this host %s\n",
           cfg->fleet, label,
           leased ? "ahead (at most 1/16 of the burst)"
                  : "never (each call is one round trip)");
}

/* What the explanation reads: the keys as the shim derives them, and the
 * pause table of this host's segment (pauses.store NULL: none yet). */
struct known {
    struct rl_dests d;
    struct rl_pauses pauses;
    uint64_t now;
};

/* What section r's pace (SPEC §14) is for the destination keyed `key`
 * now, as `rlshim stat` words it, and what would change it. */
static void pace_line(const struct rl_config *cfg, const struct known *k,
                      const struct rl_rule *r, const char *user,
                      const char *key)
{
    if (r->nlimits[RL_KIND_REQUEST] == 0)
        return;
    char why[64], conf[256];
    uint64_t interval;
    if (rl_cli_pace(k->pauses.store != NULL ? &k->pauses : NULL, cfg, r, user,
                    key, k->now, &interval, why, sizeof why))
        printf("      pace: %llu ms (%s)\n",
               (unsigned long long)(interval / 1000000), why);
    else
        printf("      pace: the rate alone%s\n",
               k->pauses.store == NULL ? " (no state on this host yet)" : "");
    rl_cli_pace_settings(r, conf, sizeof conf);
    printf("      adapts: %s\n", conf);
}

/* The budget of section r a destination (peer p, named `name`) is
 * charged to: with a per-destination key, the key as the gate derives it
 * (policy/dests.h). */
static void budget_line(const struct rl_config *cfg, const struct known *k,
                        const struct rl_rule *r, const char *user,
                        const struct rl_peer *p, const char *name)
{
    static const char *const per[] = {"user", "destination", "domain",
                                      "address"};
    char label[RL_STORE_LABEL_MAX], key[RL_NAME_MAX + 1];
    const struct rl_dests *d = &k->d;
    rl_budget_label(r, rl_budget_user(r, user), label, sizeof label);
    /* As the gate keys the pace: by the section's key of the
     * destination, whatever budget it shares (gate_charges.c). */
    rl_dests_key(d, r->per, p, name, strlen(name), key);
    if (rl_rule_per_dest(r)) {
        bool by_name = r->per == RL_PER_DOMAIN && !rl_regdomain_ready(&d->psl);
        bool no_addr = r->per == RL_PER_ADDRESS && p->family != AF_INET &&
                       p->family != AF_INET6;
        printf("      budget: %s, %s %s (per = %s%s%s)\n", label,
               by_name || no_addr ? "destination" : per[r->per], key,
               per[r->per],
               by_name ? "; libpsl cannot be loaded: keyed by name" : "",
               no_addr ? "; its address, unknown here, decides" : "");
    } else
        printf("      budget: %s%s\n", label,
               r->is_default || r->site != NULL ? " (per user)"
                                                : " (shared by the section)");
    where(cfg, r, user);
    limits(r);
    pace_line(cfg, k, r, user, key);
}

/* Does a `to` list cover a destination known by its name and port only?
 * COVERS: an entry of names (or "*:PORT", or no list) matches; MAYBE: only
 * an address entry could, by the address (listed into `addrs`); NO. */
enum cover { NO, MAYBE, COVERS };

static enum cover by_name(const struct rl_rule *r, struct rl_peer *p,
                          char *addrs, size_t len)
{
    size_t used = 0;
    bool maybe = false;

    addrs[0] = '\0';
    if (r->nto == 0)
        return COVERS;
    for (size_t i = 0; i < r->nto; i++) {
        const struct rl_dest *d = &r->to[i];
        if (d->form != RL_DEST_ADDR) {
            if (rl_dest_match(d, p))
                return COVERS;
            continue;
        }
        if (d->port != 0 && d->port != p->port)
            continue;
        char one[80];
        rl_config_format_dest(d, one, sizeof one);
        int k = snprintf(addrs + used, len - used, "%s%s", maybe ? ", " : "",
                         one);
        if (k > 0 && (size_t)k < len - used)
            used += (size_t)k;
        maybe = true;
    }
    return maybe ? MAYBE : NO;
}

/* The target's name could not be resolved here (`why`): explain it by
 * name. */
static int explain_name(const struct rl_config *cfg, const struct known *d,
                        const struct rl_rule *rule, const char *user,
                        const char *name, size_t n, const char *port,
                        const char *why)
{
    struct rl_peer p = {.family = AF_UNSPEC, .namelen = (int16_t)n,
                        .name = name};
    char addrs[512];
    bool charged = false, maybe = false;

    p.port = (uint16_t)strtoul(port, NULL, 10);
    printf("  %s port %u: addresses unknown (%s): explained by its name\n",
           name, p.port, why);
    if (rule == NULL) {
        printf("    no rule for user %s (unknown = %s)\n", user,
               cfg->unknown == RL_UNKNOWN_DENY ? "deny: denied" : "allow");
    } else {
        enum cover c = by_name(rule, &p, addrs, sizeof addrs);
        if (c == COVERS) {
            printf("    rule [%s] covers it by name\n", rule->section);
            budget_line(cfg, d, rule, user, &p, name);
            charged = true;
        } else if (c == MAYBE) {
            printf("    rule [%s] covers it only if its address is in %s\n",
                   rule->section, addrs);
            budget_line(cfg, d, rule, user, &p, name);
            maybe = true;
        } else {
            printf("    rule [%s] does not cover it (its 'to')\n",
                   rule->section);
        }
    }
    bool site = false;
    const char *before = NULL; /* the first site that its address may pick */
    for (size_t i = 0; i < cfg->nrules && !site; i++) {
        const struct rl_rule *r = &cfg->rules[i];
        if (r->site == NULL)
            continue;
        enum cover c = by_name(r, &p, addrs, sizeof addrs);
        if (c == NO)
            continue;
        if (c == COVERS) {
            printf("    site [%s] covers it by name (the first that does%s%s%s)\n",
                   r->section, before != NULL ? ", unless [" : "",
                   before != NULL ? before : "",
                   before != NULL ? "] does by its address" : "");
            site = charged = true;
        } else {
            printf("    site [%s] covers it only if its address is in %s (the "
                   "first that does then)\n",
                   r->section, addrs);
            if (before == NULL)
                before = r->section;
            maybe = true;
        }
        budget_line(cfg, d, r, user, &p, name);
    }
    if (!site && rl_config_has_sites(cfg))
        printf("    no site covers it by name\n");
    if (charged)
        printf("    charged: every budget above %smust allow\n",
               maybe ? "that covers it " : "");
    else if (maybe)
        printf("    charged only if its address is in the 'to' above; else "
               "passes untouched\n");
    else
        printf("    not charged: passes untouched\n");
    return 0;
}

/* key = cgroup (SPEC §16): the key this process has, and where it came
 * from; a cgroup that could not be read is said, as the shim says it. */
static void explain_key(const struct rl_identity *id, bool given)
{
    const char *problem = rl_identity_cgroup_problem(id);
    if (id->has_key)
        printf("key %s%s\n", id->key,
               given                               ? " (--key)"
               : strncmp(id->key, "cgroup:", 7) != 0 ? " (RLSHIM_KEY)"
                                                     : "");
    else
        printf("key %u (%s)\n", id->uid, problem);
}

static int explain(const struct rl_config *cfg, const struct known *d,
                   const char *key, const char *target)
{
    char host[300], port[16];
    if (split(target, host, sizeof host, port, sizeof port) < 0) {
        fprintf(stderr,
                "rlshim check: cannot read '%s' as URL or "
                "HOST[:PORT]\n",
                target);
        return 2;
    }
    struct rl_identity id;
    rl_identity_resolve(&id, cfg->key_mode);
    if (key != NULL) {
        id.has_key = true;
        snprintf(id.key, sizeof id.key, "%s", key);
    }
    char ubuf[RL_IDENTITY_MAX + 16];
    const char *user = rl_identity_user(&id, ubuf, sizeof ubuf);
    const struct rl_rule *rule =
        rl_config_find_rule(cfg, id.has_key ? id.key : NULL, id.uid,
                            id.has_login ? id.login : NULL);

    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
    int e = getaddrinfo(host, port, &hints, &res);
    char canon[RL_NAME_MAX + 1];
    size_t cn = rl_name_canon(host, strlen(host), canon);
    bool literal = rl_name_is_literal(host, strlen(host));
    bool by_name_only = e != 0 && cn > 0 && !literal &&
                        (e == EAI_NONAME || e == EAI_AGAIN || e == EAI_FAIL ||
                         e == EAI_NODATA);
    if (e != 0 && !by_name_only) {
        fprintf(stderr, "rlshim check: %s: %s\n", host, gai_strerror(e));
        return 1;
    }
    if (cfg->key_mode == RL_KEY_CGROUP)
        explain_key(&id, key != NULL);
    printf("%s: user %s, rule %s%s%s\n", target, user, rule != NULL ? "[" : "",
           rule != NULL ? rule->section : "none", rule != NULL ? "]" : "");
    if (by_name_only)
        return explain_name(cfg, d, rule, user, canon, cn, port,
                            gai_strerror(e));
    /* The names this look-up resolved, noted as the shim's resolver hooks
     * note them (policy/names.h). */
    struct rl_names *names = calloc(1, sizeof *names);
    if (names == NULL) {
        freeaddrinfo(res);
        fprintf(stderr, "rlshim check: %s\n", strerror(ENOMEM));
        return 1;
    }
    struct rl_peer seen[16];
    unsigned nseen = 0;
    for (struct addrinfo *ai = res; ai != NULL; ai = ai->ai_next) {
        struct rl_peer p;
        bool again = false;
        if (!rl_peer_from_addr(names, ai->ai_addr, ai->ai_addrlen, &p))
            continue;
        for (unsigned i = 0; i < nseen; i++)
            again |= seen[i].family == p.family && seen[i].port == p.port &&
                     memcmp(seen[i].addr, p.addr, sizeof p.addr) == 0;
        if (again)
            continue; /* the resolver's answer repeats an address */
        if (nseen < 16)
            seen[nseen++] = p;
        if (cn > 0 && !literal)
            rl_names_note(names, p.family, p.addr, canon, cn);
        char a[INET6_ADDRSTRLEN], name[RL_NAME_MAX + 1];
        inet_ntop(p.family, p.addr, a, sizeof a);
        size_t nl = rl_dests_name(names, ai->ai_addr, ai->ai_addrlen, name);
        (void)nl;
        printf("  %s%s%s port %u, name %s\n", p.family == AF_INET6 ? "[" : "",
               a, p.family == AF_INET6 ? "]" : "", p.port, name);
        bool charged = false;
        if (rule != NULL &&
            rl_rule_covers(names, rule, ai->ai_addr, ai->ai_addrlen)) {
            printf("    rule [%s] covers it\n", rule->section);
            budget_line(cfg, d, rule, user, &p, name);
            charged = true;
        } else if (rule != NULL) {
            printf("    rule [%s] does not cover it (its 'to')\n",
                   rule->section);
        } else {
            printf("    no rule for user %s (unknown = %s)\n", user,
                   cfg->unknown == RL_UNKNOWN_DENY ? "deny: denied" : "allow");
        }
        const struct rl_rule *site =
            rl_config_find_site(names, cfg, ai->ai_addr, ai->ai_addrlen);
        if (site != NULL) {
            printf("    site [%s] covers it (the first that does)\n",
                   site->section);
            budget_line(cfg, d, site, user, &p, name);
            charged = true;
        } else if (rl_config_has_sites(cfg)) {
            printf("    no site covers it\n");
        }
        printf("    %s\n", charged ? "charged: every budget above must allow"
                                   : "not charged: passes untouched");
    }
    rl_names_unmap(names);
    free(names);
    freeaddrinfo(res);
    return 0;
}

int rl_cli_explain(const struct rl_config *cfg, const char *key,
                   const char *target)
{
    /* The keys as the shim derives them (`per = domain` loads libpsl,
     * and says so on stderr when it cannot). */
    struct known k = {.now = rl_clock_now_ns()};
    if (rl_dests_setup(&k.d, cfg) < 0) {
        fprintf(stderr, "rlshim check: %s\n", strerror(ENOMEM));
        return 1;
    }
    /* The paces the shim learned, in this host's segment, if there is
     * one for this config (none yet: nothing learned). */
    struct rl_store *st = NULL;
    char why[512];
    if (rl_store_attach(&st, NULL, (uint32_t)getuid(), rl_budget_hash(cfg),
                        why, sizeof why) == 0)
        rl_pauses_of(st, &k.pauses);
    int rc = explain(cfg, &k, key, target);
    rl_store_close(st);
    rl_dests_close(&k.d);
    return rc;
}
