/* config_int.h — what the files of the config parser share (config.c,
 * config_values.c, config_sections.c, config_find.c); nothing outside
 * them includes it.
 *
 * config.c holds the key table and feeds the file through inih to the
 * handler that dispatches each `key = value` by the table; config_values.c
 * holds the parsers the table names (a value into its field);
 * config_sections.c the section kinds, the section headers and what is
 * settled once the whole file is read; config_find.c the look-ups on a
 * loaded table. */
#ifndef RL_POLICY_CONFIG_INT_H
#define RL_POLICY_CONFIG_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "policy/config.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* ---- section kinds ------------------------------------------------------*/

enum sect_kind { SK_RLSHIM, SK_DEFAULT, SK_USER, SK_SITE };
#define RL_CFG_NSECT_KINDS 4u

struct sect_kind_row {
    const char *name;  /* "[name]", or "[name:LABEL]" when `label` is set */
    const char *label; /* what the part after the colon is, for messages */
    const char *meta;  /* how messages spell that part: "NAME", "LABEL" */
    bool rule;         /* its keys make a struct rl_rule */
};

/* config_sections.c */
extern const struct sect_kind_row rl_cfg_sect_kinds[RL_CFG_NSECT_KINDS];

#define IN(kind) (1u << (kind))
#define IN_RLSHIM IN(SK_RLSHIM)
#define IN_RULE (IN(SK_DEFAULT) | IN(SK_USER) | IN(SK_SITE))

/* ---- keys ---------------------------------------------------------------*/

/* A value that is one word of a short list, and what each word sets. */
struct words {
    const char *const *names;
    const int *values;
    unsigned n;
};

struct pstate;
struct key;

/* Check `v` (never empty) and set what it says, through `field` (in
 * struct rl_config in [rlshim], in struct rl_rule in a rule; NULL when
 * the key has no field there) or the parse state. Errors go to ps. */
typedef void key_parser(struct pstate *ps, const struct key *k, void *field,
                        const char *v);

struct key {
    const char *name;
    unsigned where; /* IN(section kind)s it may appear in */
    key_parser *parse;
    size_t cfg_off;            /* the field it sets in struct rl_config ... */
    size_t cfg_size;           /* ... 0: none */
    size_t rule_off;           /* the field it sets in struct rl_rule ... */
    size_t rule_size;          /* ... 0: none */
    const struct words *words; /* rl_cfg_p_word's list */
    int kind;     /* rl_cfg_p_rates, rl_cfg_p_bursts: enum rl_kind */
    uint64_t max; /* rl_cfg_p_count: the largest value accepted */
};

/* The rows of the key table (config.c), a constant because each section
 * keeps the line of each key (struct sect). */
#define RL_CFG_NKEYS 40u
extern const struct key rl_cfg_keys[]; /* RL_CFG_NKEYS rows */

/* The parsers the table names (config_values.c). */
key_parser rl_cfg_p_word, rl_cfg_p_bool, rl_cfg_p_duration, rl_cfg_p_log,
    rl_cfg_p_decision_log, rl_cfg_p_count, rl_cfg_p_algorithm, rl_cfg_p_rates,
    rl_cfg_p_bursts, rl_cfg_p_to, rl_cfg_p_fleet, rl_cfg_p_fleet_password,
    rl_cfg_p_factor, rl_cfg_p_percent, rl_cfg_p_backoff_on;

/* ---- parse state --------------------------------------------------------*/

/* Rates and bursts as written, kept until the algorithm is known. */
struct raw_kind {
    struct rl_rate rates[RL_MAX_RATES];
    unsigned nrates;
    unsigned rate_line;
    uint64_t bursts[RL_MAX_RATES];
    unsigned nbursts;
    unsigned burst_line;
};

struct sect {
    enum sect_kind kind;
    const char *name; /* as messages spell it: "rlshim", "user:alice" */
    size_t rule;      /* index in cfg->rules (kinds that make a rule) */
    unsigned line;
    unsigned key_line[RL_CFG_NKEYS]; /* 0 = not seen yet */
    struct raw_kind raw[RL_KIND_COUNT];
};

#define CUR_NONE (-1) /* before the first section */
#define CUR_SKIP (-2) /* in a section already reported as wrong */

struct pstate {
    const char *name; /* the file, as messages call it */
    struct rl_diag *diag;
    bool nomem;
    const char *text;
    size_t len; /* of text */
    size_t pos;
    unsigned lineno;
    char first; /* the line's first non-blank byte (inih's start) */
    struct sect *sects;
    size_t nsects;
    int cur;
    struct rl_config *cfg;
};

/* "NAME:LINE: " then the message, into ps->diag (config.c). */
void rl_cfg_err(struct pstate *ps, unsigned line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static inline const char *sect_name(struct pstate *ps)
{
    return ps->sects[ps->cur].name;
}

static inline struct rl_rule *cur_rule(struct pstate *ps)
{
    return &ps->cfg->rules[ps->sects[ps->cur].rule];
}

static inline bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' ||
           c == '\f';
}

/* config_sections.c: "[rlshim], [default] or [user:NAME]": the section
 * kinds in `mask`. */
void rl_cfg_list_sections(unsigned mask, char *buf, size_t len);

/* config_sections.c: a line whose first non-blank byte is '[' (p points
 * at it): a new current section, or an error and CUR_SKIP. */
void rl_cfg_section_line(struct pstate *ps, const char *p);

/* config_sections.c: once the whole file is read, what depends on several
 * keys (a rule's algorithm and rates, what it inherits from [rlshim], the
 * fleet keys). */
void rl_cfg_settle(struct pstate *ps);

/* What the whole file says of SPEC §14's backoff, once its sections are
 * read: cfg->response_timeout_ns. */
void rl_cfg_adapt_settle(struct rl_config *cfg);

/* config_sections.c: the hash of what shapes the budgets (config.h). */
uint64_t rl_cfg_hash(const struct rl_config *c);

#endif
