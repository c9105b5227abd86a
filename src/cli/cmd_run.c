/* cmd_run.c — `rlshim run [-c FILE] [-k KEY] [--] PROGRAM [ARGS...]`.
 *
 * Validates the config (a broken one stops here, with every error, rather
 * than in the program), finds librlshim.so beside this binary, prepends
 * it to LD_PRELOAD (absolute; what was there stays), sets RLSHIM_CONFIG
 * (absolute) and RLSHIM_KEY, and execs PROGRAM. PROGRAM is searched in
 * PATH here, never in "." unless PATH says so. When PROGRAM cannot be
 * interposed (static, Go, setuid/setgid, file capabilities) one warning
 * line says so (suggesting --seccomp for static and Go programs) and it
 * runs anyway. With --seccomp, cmd_run_seccomp.c takes over once PROGRAM
 * is found and the config checked. */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "cli/cmd_run_seccomp.h"
#include "cli/commands.h"
#include "policy/config.h"

#ifndef RL_VERSION
#define RL_VERSION "unknown"
#endif

#define EXIT_NOT_FOUND 127
#define EXIT_CANNOT_EXEC 126

static const char usage[] =
    "usage: rlshim run [--seccomp] [-c FILE] [-k KEY] [--] PROGRAM "
    "[ARGS...]\n"
    "\n"
    "Run PROGRAM with librlshim.so preloaded, so that its connects and sends\n"
    "are throttled by the config. Exits with PROGRAM's status; 1 for a bad\n"
    "config, 2 for bad usage, 126 when PROGRAM cannot be run, 127 when it\n"
    "is not found.\n"
    "\n"
    "  -c, --config FILE  the config (default: $RLSHIM_CONFIG, else\n"
    "                     " RL_SYSCONFDIR "/rlshim.ini)\n"
    "  -k, --key KEY      run as user KEY (sets RLSHIM_KEY)\n"
    "      --seccomp      for static and Go programs: no preload; this\n"
    "                     process stays as a seccomp supervisor that\n"
    "                     decides their connects and addressed datagrams\n"
    "  -h, --help         this text\n"
    "  -V, --version      the version\n";

/* ---- finding things -----------------------------------------------------*/

#ifndef RL_PKGLIBDIR
#define RL_PKGLIBDIR "/usr/local/lib/rlshim"
#endif

/* Where librlshim.so is looked for, in this order (rlshim(1), FILES):
 * beside the binary (the build tree), ../lib/rlshim (make install),
 * ../lib/MULTIARCH/rlshim (the Debian package: /usr/bin and
 * /usr/lib/x86_64-linux-gnu/rlshim), the directory this build was
 * configured with, and ../lib (an install made before the private
 * directory). */
#ifdef RL_MULTIARCH
#define RL_MULTIARCH_REL "../lib/" RL_MULTIARCH "/rlshim/librlshim.so"
#endif

static int find_library(char *out, size_t len)
{
    char self[PATH_MAX], cand[PATH_MAX + 64];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    static const char *const rel[] = {
        "librlshim.so",
        "../lib/rlshim/librlshim.so",
#ifdef RL_MULTIARCH_REL
        RL_MULTIARCH_REL,
#endif
        NULL, /* RL_PKGLIBDIR */
        "../lib/librlshim.so",
    };
    char *slash;

    if (n <= 0)
        return -errno;
    self[n] = '\0';
    slash = strrchr(self, '/');
    if (slash == NULL)
        return -ENOENT;
    *slash = '\0';
    for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
        char real[PATH_MAX];
        if (rel[i] != NULL)
            snprintf(cand, sizeof cand, "%s/%s", self, rel[i]);
        else
            snprintf(cand, sizeof cand, "%s/librlshim.so", RL_PKGLIBDIR);
        if (realpath(cand, real) != NULL && access(real, R_OK) == 0) {
            if (strlen(real) >= len)
                return -ENAMETOOLONG;
            strcpy(out, real);
            return 0;
        }
    }
    snprintf(out, len, "%s", self);
    return -ENOENT;
}

static bool is_exec_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) &&
           access(path, X_OK) == 0;
}

/* Like execvp's search, done here so we can warn about the file we will
 * run. Returns 0, -ENOENT (nowhere) or -EACCES (found, not executable). */
static int find_program(const char *prog, char *out, size_t len)
{
    const char *path = getenv("PATH");
    int rc = -ENOENT;

    if (strchr(prog, '/') != NULL) {
        struct stat st;
        if (stat(prog, &st) != 0)
            return -errno;
        if (!S_ISREG(st.st_mode) || access(prog, X_OK) != 0)
            return -EACCES;
        snprintf(out, len, "%s", prog);
        return 0;
    }
    if (path == NULL)
        path = "/usr/local/bin:/usr/bin:/bin";
    for (const char *p = path;; p++) {
        const char *end = strchr(p, ':');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        char cand[PATH_MAX];

        /* An empty PATH entry is the current directory (POSIX): the
         * user's PATH said so, so we honour it; "." is never added. */
        if (n == 0)
            snprintf(cand, sizeof cand, "./%s", prog);
        else
            snprintf(cand, sizeof cand, "%.*s/%s", (int)n, p, prog);
        if (is_exec_file(cand)) {
            snprintf(out, len, "%s", cand);
            return 0;
        }
        if (access(cand, F_OK) == 0)
            rc = -EACCES;
        if (end == NULL)
            break;
        p = end;
    }
    return rc;
}

/* ---- can the shim see it? -----------------------------------------------*/

struct elf_info {
    bool elf;
    bool has_interp;
    bool go;
};

static bool read_at(int fd, void *buf, size_t n, uint64_t off)
{
    return pread(fd, buf, n, (off_t)off) == (ssize_t)n;
}

static bool is_go_section(const char *name)
{
    return strcmp(name, ".note.go.buildid") == 0 ||
           strcmp(name, ".go.buildinfo") == 0 ||
           strcmp(name, ".gopclntab") == 0;
}

/* One ELF class: EHDR/PHDR/SHDR are its types. */
#define ELF_SCAN(EHDR, PHDR, SHDR)                                             \
    do {                                                                       \
        EHDR eh;                                                               \
        if (!read_at(fd, &eh, sizeof eh, 0))                                   \
            return;                                                            \
        info->elf = true;                                                      \
        for (unsigned i = 0; i < eh.e_phnum && i < 4096; i++) {                \
            PHDR ph;                                                           \
            if (!read_at(fd, &ph, sizeof ph,                                   \
                         eh.e_phoff + (uint64_t)i * eh.e_phentsize))           \
                break;                                                         \
            if (ph.p_type == PT_INTERP)                                        \
                info->has_interp = true;                                       \
        }                                                                      \
        SHDR strsh;                                                            \
        if (eh.e_shstrndx == SHN_UNDEF || eh.e_shstrndx >= eh.e_shnum ||       \
            !read_at(fd, &strsh, sizeof strsh,                                 \
                     eh.e_shoff + (uint64_t)eh.e_shstrndx * eh.e_shentsize))   \
            return;                                                            \
        for (unsigned i = 0; i < eh.e_shnum && i < 65536; i++) {               \
            SHDR sh;                                                           \
            char name[32] = "";                                                \
            if (!read_at(fd, &sh, sizeof sh,                                   \
                         eh.e_shoff + (uint64_t)i * eh.e_shentsize))           \
                break;                                                         \
            if (sh.sh_name >= strsh.sh_size)                                   \
                continue;                                                      \
            if (pread(fd, name, sizeof name - 1,                               \
                      (off_t)(strsh.sh_offset + sh.sh_name)) <= 0)             \
                continue;                                                      \
            if (is_go_section(name))                                           \
                info->go = true;                                               \
        }                                                                      \
    } while (0)

static void scan_elf(int fd, struct elf_info *info)
{
    unsigned char ident[EI_NIDENT];

    memset(info, 0, sizeof *info);
    if (!read_at(fd, ident, sizeof ident, 0) ||
        memcmp(ident, ELFMAG, SELFMAG) != 0 || ident[EI_DATA] != ELFDATA2LSB)
        return;
    if (ident[EI_CLASS] == ELFCLASS64)
        ELF_SCAN(Elf64_Ehdr, Elf64_Phdr, Elf64_Shdr);
    else if (ident[EI_CLASS] == ELFCLASS32)
        ELF_SCAN(Elf32_Ehdr, Elf32_Phdr, Elf32_Shdr);
}

/* "#!INTERP ..." gives INTERP (and for "/usr/bin/env NAME", NAME found in
 * PATH): the program that actually runs. */
static bool script_interpreter(int fd, char *out, size_t len)
{
    char line[256];
    ssize_t n = pread(fd, line, sizeof line - 1, 0);
    char *p, *end, *arg;

    if (n < 3 || line[0] != '#' || line[1] != '!')
        return false;
    line[n] = '\0';
    line[strcspn(line, "\n")] = '\0';
    p = line + 2;
    p += strspn(p, " \t");
    end = p + strcspn(p, " \t");
    arg = *end ? end + 1 + strspn(end + 1, " \t") : end;
    *end = '\0';
    arg[strcspn(arg, " \t")] = '\0';
    if (*p == '\0')
        return false;
    if (strcmp(strrchr(p, '/') ? strrchr(p, '/') + 1 : p, "env") == 0 &&
        *arg != '\0' && *arg != '-')
        return find_program(arg, out, len) == 0;
    snprintf(out, len, "%s", p);
    return true;
}

/* Why the shim cannot see PROGRAM's calls, or "" when it can. */
static void interposition_problems(const char *path, char *why, size_t len)
{
    char target[PATH_MAX];
    struct elf_info info;
    struct stat st;
    int fd;

    why[0] = '\0';
    if (stat(path, &st) == 0) {
        if (st.st_mode & S_ISUID)
            strncat(why, ", setuid", len - strlen(why) - 1);
        if (st.st_mode & S_ISGID)
            strncat(why, ", setgid", len - strlen(why) - 1);
    }
    if (getxattr(path, "security.capability", NULL, 0) > 0)
        strncat(why, ", file capabilities", len - strlen(why) - 1);

    snprintf(target, sizeof target, "%s", path);
    fd = open(target, O_RDONLY | O_CLOEXEC);
    if (fd >= 0 && script_interpreter(fd, target, sizeof target)) {
        close(fd);
        fd = open(target, O_RDONLY | O_CLOEXEC);
    }
    if (fd < 0)
        return;
    scan_elf(fd, &info);
    close(fd);
    if (info.elf && !info.has_interp)
        strncat(why, ", statically linked", len - strlen(why) - 1);
    if (info.go)
        strncat(why, ", a Go program (raw system calls)",
                len - strlen(why) - 1);
}

/* ---- the environment ----------------------------------------------------*/

/* LD_PRELOAD = LIB, then whatever was there (without LIB again). */
static int prepend_preload(const char *lib)
{
    const char *old = getenv("LD_PRELOAD");
    size_t cap = strlen(lib) + (old ? strlen(old) : 0) + 2;
    char *val = malloc(cap);
    int rc;

    if (val == NULL)
        return -ENOMEM;
    strcpy(val, lib);
    if (old != NULL) {
        /* Entries are separated by blanks or colons (ld.so(8)). */
        for (const char *p = old; *p;) {
            size_t n = strcspn(p, " :");
            if (n > 0 && !(n == strlen(lib) && strncmp(p, lib, n) == 0)) {
                strcat(val, " ");
                strncat(val, p, n);
            }
            p += n;
            p += strspn(p, " :");
        }
    }
    rc = setenv("LD_PRELOAD", val, 1) == 0 ? 0 : -errno;
    free(val);
    return rc;
}

static int setup_config(const char *copt)
{
    const char *path = rl_cli_config_path(copt);
    const char *env = getenv("RLSHIM_CONFIG");
    struct rl_config *cfg = NULL;
    struct rl_diag d = {0};
    char abs[PATH_MAX];
    int rc;

    if (copt == NULL && (env == NULL || *env == '\0') &&
        access(path, F_OK) != 0 && errno == ENOENT) {
        fprintf(stderr,
                "rlshim: warning: no config file (%s): nothing will be "
                "throttled\n",
                path);
        return 0;
    }
    rc = rl_config_load(path, &cfg, &d);
    if (rc < 0) {
        for (size_t i = 0; i < d.n; i++)
            fprintf(stderr, "%s\n", d.msgs[i]);
        fprintf(stderr, "rlshim run: not running anything: fix %s first\n",
                path);
        rl_diag_free(&d);
        return 1;
    }
    rl_config_free(cfg);
    if (realpath(path, abs) == NULL) {
        fprintf(stderr, "rlshim run: %s: %s\n", path, strerror(errno));
        return 1;
    }
    if (setenv("RLSHIM_CONFIG", abs, 1) != 0) {
        perror("rlshim run: setenv");
        return 1;
    }
    return 0;
}

int rl_cmd_run(int argc, char **argv)
{
    static const struct option opts[] = {
        {"config", required_argument, NULL, 'c'},
        {"key", required_argument, NULL, 'k'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {"seccomp", no_argument, NULL, 'S'},
        {NULL, 0, NULL, 0},
    };
    const char *copt = NULL, *key = NULL;
    char lib[PATH_MAX], prog[PATH_MAX], why[256];
    int c, rc;
    bool seccomp = false;

    while ((c = getopt_long(argc, argv, "+c:k:hV", opts, NULL)) != -1) {
        switch (c) {
        case 'c':
            copt = optarg;
            break;
        case 'k':
            key = optarg;
            break;
        case 'h':
            fputs(usage, stdout);
            return 0;
        case 'V':
            printf("rlshim %s\n", RL_VERSION);
            return 0;
        case 'S':
            seccomp = true;
            break;
        default:
            fputs(usage, stderr);
            return 2;
        }
    }
    if (optind >= argc) {
        fprintf(stderr, "rlshim run: no PROGRAM given\n%s", usage);
        return 2;
    }
    if (key != NULL && (*key == '\0' || strlen(key) > RL_CONFIG_USER_MAX)) {
        fprintf(stderr, "rlshim run: the key must be 1 to %d bytes\n",
                RL_CONFIG_USER_MAX);
        return 2;
    }

    rc = find_program(argv[optind], prog, sizeof prog);
    if (rc == -EACCES) {
        fprintf(stderr, "rlshim: %s: permission denied\n", argv[optind]);
        return EXIT_CANNOT_EXEC;
    }
    if (rc < 0) {
        fprintf(stderr, "rlshim: %s: command not found\n", argv[optind]);
        return EXIT_NOT_FOUND;
    }

    rc = setup_config(copt);
    if (rc != 0)
        return rc;
    if (key != NULL && setenv("RLSHIM_KEY", key, 1) != 0) {
        perror("rlshim run: setenv");
        return 1;
    }
    if (seccomp)
        return rl_run_seccomp(prog, argv + optind);
    rc = find_library(lib, sizeof lib);
    if (rc < 0) {
        fprintf(stderr,
                "rlshim run: librlshim.so is not beside %s, in its "
                "../lib/rlshim, nor in %s (see rlshim(1), FILES)\n",
                lib, RL_PKGLIBDIR);
        return 1;
    }
    if (prepend_preload(lib) < 0) {
        perror("rlshim run: setenv");
        return 1;
    }

    interposition_problems(prog, why, sizeof why);
    if (why[0] != '\0')
        fprintf(stderr,
                "rlshim: warning: the shim cannot see the calls of %s (%s); "
                "running it unthrottled%s\n",
                argv[optind], why + 2,
                strstr(why, "static") || strstr(why, "Go")
                    ? " (rlshim run --seccomp throttles it)"
                    : "");

    execv(prog, argv + optind);
    rc = errno;
    fprintf(stderr, "rlshim: %s: %s\n", prog, strerror(rc));
    return rc == ENOENT ? EXIT_NOT_FOUND : EXIT_CANNOT_EXEC;
}
