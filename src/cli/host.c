/* host.c — see host.h. */
#include "cli/host.h"

#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "policy/config.h"

/* glibc's ld.so reads this one file: no environment, no other path. */
#define PRELOAD_FILE "/etc/ld.so.preload"

extern char **environ;

/* The entry of ld.so.preload that names librlshim.so (ld.so splits the
 * file on white space and colons), or "" when none does. *line is its
 * line. -errno when the file cannot be read (-ENOENT: none). */
static int preload_entry(char *out, size_t len, int *line)
{
    FILE *f = fopen(PRELOAD_FILE, "re");
    if (f == NULL)
        return -errno;
    char buf[4096];
    out[0] = '\0';
    for (int n = 1; fgets(buf, sizeof buf, f) != NULL; n++) {
        for (char *save, *tok = strtok_r(buf, " \t\n:", &save); tok != NULL;
             tok = strtok_r(NULL, " \t\n:", &save)) {
            const char *base = strrchr(tok, '/');
            base = base != NULL ? base + 1 : tok;
            if (strcmp(base, "librlshim.so") == 0 && out[0] == '\0') {
                snprintf(out, len, "%s", tok);
                *line = n;
            }
        }
    }
    fclose(f);
    return 0;
}

/* Run `true` as every program on the host is run: with the host's preload
 * (and LD_PRELOAD = lib when lib is not NULL), and say whether ld.so
 * complained. The complaint, if any, in `why`. */
static bool loads(const char *lib, char *why, size_t len)
{
    int pipefd[2];
    if (pipe(pipefd) != 0) {
        snprintf(why, len, "pipe: %s", strerror(errno));
        return false;
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, pipefd[1], 2);
    posix_spawn_file_actions_addclose(&fa, pipefd[0]);
    char pre[4200];
    snprintf(pre, sizeof pre, "LD_PRELOAD=%s", lib != NULL ? lib : "");
    /* No config for the child: loading is what is asked, not a rule. */
    char *envp[] = {pre, "RLSHIM_CONFIG=/dev/null", NULL};
    const char *prog = access("/usr/bin/true", X_OK) == 0 ? "/usr/bin/true"
                                                          : "/bin/true";
    char *argv[] = {(char *)prog, NULL};
    pid_t pid;
    int rc = posix_spawn(&pid, prog, &fa, NULL, argv,
                         lib != NULL ? envp : envp + 1);
    posix_spawn_file_actions_destroy(&fa);
    close(pipefd[1]);
    if (rc != 0) {
        close(pipefd[0]);
        snprintf(why, len, "%s: %s", prog, strerror(rc));
        return false;
    }
    size_t n = 0;
    ssize_t got;
    while (n + 1 < len && (got = read(pipefd[0], why + n, len - 1 - n)) > 0)
        n += (size_t)got;
    why[n] = '\0';
    close(pipefd[0]);
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    char *nl = strchr(why, '\n');
    if (nl != NULL)
        *nl = '\0';
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        if (why[0] == '\0')
            snprintf(why, len, "%s exited with status %d", prog,
                     WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
        return false;
    }
    return strstr(why, "ld.so") == NULL;
}

/* A [user:cgroup:/PATH] section: the processes it covers, or why it
 * covers none (a cgroup section means nothing under another key mode). */
static void print_cgroup_user(const struct rl_config *cfg, const char *section,
                              const char *path)
{
    size_t n = strlen(path);
    bool below = n >= 2 && strcmp(path + n - 2, "/*") == 0;
    if (cfg->key_mode != RL_KEY_CGROUP)
        printf("  [%s]: covers nobody: the config's key is not cgroup "
               "([rlshim] key = cgroup)\n", section);
    else if (below)
        printf("  [%s]: every process in a cgroup below %.*s (key = cgroup)\n",
               section, (int)(n - 2), path);
    else
        printf("  [%s]: every process in the cgroup %s (key = cgroup)\n",
               section, path);
}

/* "user:1000 (alice)", "user:scraper", "default". */
static void print_users(const struct rl_config *cfg)
{
    bool any_default = false;
    size_t named = 0;
    for (size_t i = 0; i < cfg->nrules; i++) {
        const struct rl_rule *r = &cfg->rules[i];
        if (r->site != NULL)
            continue;
        if (r->user == NULL) {
            any_default = true;
            continue;
        }
        named++;
        const char *u = r->user;
        if (strncmp(u, "cgroup:", 7) == 0) {
            print_cgroup_user(cfg, r->section, u + 7);
            continue;
        }
        char *end;
        unsigned long uid = strtoul(u, &end, 10);
        struct passwd *pw = NULL;
        if (*u != '\0' && *end == '\0')
            pw = getpwuid((uid_t)uid);
        else
            pw = getpwnam(u);
        if (pw == NULL)
            printf("  [%s]: a key (RLSHIM_KEY=%s, or the program's name with "
                   "key = exe), no login of that name\n",
                   r->section, u);
        else if (*end == '\0')
            printf("  [%s]: uid %s (%s)\n", r->section, u, pw->pw_name);
        else
            printf("  [%s]: login %s (uid %u)\n", r->section, u,
                   (unsigned)pw->pw_uid);
    }
    size_t sites = 0;
    for (size_t i = 0; i < cfg->nrules; i++)
        sites += cfg->rules[i].site != NULL;
    if (any_default)
        printf("  [default]: every other user, each with a budget of its "
               "own\n");
    if (sites > 0)
        printf("  %zu [site:…] section%s: every user, for the destinations "
               "%s cover%s\n",
               sites, sites == 1 ? "" : "s", sites == 1 ? "it" : "they",
               sites == 1 ? "s" : "");
    if (!any_default && sites == 0) {
        if (named == 0)
            printf("  nobody: the config has no user, default or site "
                   "section\n");
        printf("a user without a rule: not throttled; pays one config read "
               "at its first network call, then one branch per call\n");
    } else if (!any_default) {
        printf("a user without a rule: throttled by the sites only\n");
    } else {
        printf("a user without a rule: none ([default] gives every user "
               "one)\n");
    }
}

int rl_cli_host(const struct rl_config *cfg, const char *path)
{
    char lib[4096], why[512];
    int line = 0, rc = 0;
    int r = preload_entry(lib, sizeof lib, &line);
    if (r == -ENOENT || (r == 0 && lib[0] == '\0')) {
        printf("preload: %s %s: only programs started with LD_PRELOAD (or "
               "rlshim run) are throttled\n",
               PRELOAD_FILE, r == -ENOENT ? "does not exist"
                                          : "does not name librlshim.so");
    } else if (r < 0) {
        printf("preload: %s: %s\n", PRELOAD_FILE, strerror(-r));
        rc = 1;
    } else {
        struct stat st;
        printf("preload: %s:%d names %s: every dynamically linked program "
               "loads it\n",
               PRELOAD_FILE, line, lib);
        if (stat(lib, &st) != 0) {
            printf("library: %s: %s: ld.so warns at every program's start "
                   "and runs it unthrottled; fix the file or remove the "
                   "line (rlshim(1), HOST-WIDE)\n",
                   lib, strerror(errno));
            rc = 1;
        } else if (!loads(NULL, why, sizeof why)) {
            printf("library: %s does not load: %s\n", lib, why);
            rc = 1;
        } else {
            printf("library: %s loads (a program started here shows no "
                   "ld.so error)\n",
                   lib);
        }
    }
    if (cfg == NULL) {
        printf("config: %s does not exist: nothing is throttled\n", path);
        return rc;
    }
    printf("config: %s throttles:\n", path);
    print_users(cfg);
    return rc;
}
