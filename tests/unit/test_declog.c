/* test_declog.c — the decision-log writer and reader: the fields of SPEC
 * §9 in one JSON line, read back the same; lines of many writers stay
 * whole; no fd is kept; a log that cannot be written costs one stderr
 * line and nothing else. */
#include <criterion/criterion.h>
#include <sys/stat.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "policy/config.h"
#include "util/declog.h"
#include "util/declog_read.h"

/* The decision log under test (a process's is a member of its struct
 * rl_proc). */
static struct rl_declog dlog;

static const struct rl_declog_rec rec = {
    .mono_ns = 123456789012ull,
    .user = "alice \"the\" \\scraper",
    .rule = "scrape",
    .site = NULL,
    .dest = "192.0.2.7",
    .port = 8443,
    .call = "connect",
    .limit = "connect",
    .units = 1,
    .verdict = RL_DECLOG_DELAY,
    .wait_ns = 250000000,
};

Test(declog, a_line_has_every_field_of_the_spec)
{
    char buf[RL_DECLOG_LINE_MAX];
    /* 2026-12-01T02:03:04.567890Z */
    uint64_t wall = 1796090584ull * 1000000000ull + 567890123ull;
    size_t n = rl_declog_format(buf, sizeof buf, &rec, wall, 42, 43);
    cr_assert_gt(n, 0);
    cr_assert_eq(buf[n - 1], '\n');
    buf[n] = '\0';
    cr_assert_str_eq(
        buf,
        "{\"t\":\"2026-12-01T02:03:04.567890Z\",\"mono_ns\":123456789012,"
        "\"pid\":42,\"tid\":43,\"user\":\"alice \\\"the\\\" \\\\scraper\","
        "\"rule\":\"scrape\",\"site\":null,\"dest\":{\"name\":\"192.0.2.7\","
        "\"port\":8443},\"call\":\"connect\",\"limit\":\"connect\","
        "\"units\":1,\"verdict\":\"delay\",\"wait_ns\":250000000}\n");
}

Test(declog, dates_are_right_across_leap_years_and_eras)
{
    static const struct {
        uint64_t secs;
        const char *want;
    } cases[] = {
        {0, "1970-01-01T00:00:00"},
        {951782400, "2000-02-29T00:00:00"},
        {4107542399ull, "2100-02-28T23:59:59"},
        {4107542400ull, "2100-03-01T00:00:00"},
        {1709251199, "2024-02-29T23:59:59"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char buf[RL_DECLOG_LINE_MAX];
        size_t n = rl_declog_format(buf, sizeof buf, &rec,
                                    cases[i].secs * 1000000000ull, 1, 1);
        buf[n] = '\0';
        cr_assert(strncmp(buf + 6, cases[i].want, strlen(cases[i].want)) == 0,
                  "%llu: %s", (unsigned long long)cases[i].secs, buf);
    }
}

Test(declog, a_line_reads_back_the_same)
{
    char buf[RL_DECLOG_LINE_MAX];
    size_t n = rl_declog_format(buf, sizeof buf, &rec, 0, 42, 43);
    buf[n] = '\0';
    struct rl_declog_entry e;
    cr_assert_eq(rl_declog_parse(buf, &e), 0);
    cr_assert_eq(e.mono_ns, rec.mono_ns);
    cr_assert_eq(e.pid, 42);
    cr_assert_eq(e.tid, 43);
    cr_assert_str_eq(e.user, rec.user);
    cr_assert_str_eq(e.rule, "scrape");
    cr_assert_str_eq(e.dest, "192.0.2.7");
    cr_assert_eq(e.port, 8443);
    cr_assert_str_eq(e.call, "connect");
    cr_assert_str_eq(e.limit, "connect");
    cr_assert_eq(e.units, 1);
    cr_assert_eq(e.verdict, RL_DECLOG_DELAY);
    cr_assert_eq(e.wait_ns, 250000000);
}

Test(declog, long_fields_are_cut_and_the_line_stays_json)
{
    char user[2000];
    memset(user, 'u', sizeof user - 1);
    user[sizeof user - 1] = '\0';
    struct rl_declog_rec r = rec;
    r.user = user;
    r.rule = user;
    r.dest = user;
    char buf[RL_DECLOG_LINE_MAX];
    size_t n = rl_declog_format(buf, sizeof buf, &r, 0, 1, 1);
    cr_assert_leq(n, sizeof buf);
    buf[n < sizeof buf ? n : sizeof buf - 1] = '\0';
    struct rl_declog_entry e;
    cr_assert_eq(rl_declog_parse(buf, &e), 0, "%s", buf);
}

Test(declog, bad_lines_are_refused)
{
    static const char *const bad[] = {
        "",
        "not json",
        "{\"mono_ns\":1}",
        "{\"t\":\"x\",\"mono_ns\":1,\"user\":\"u\",\"dest\":{\"name\":\"h\"},"
        "\"limit\":\"connect\",\"units\":1,\"verdict\":\"maybe\","
        "\"wait_ns\":0}",
        /* cut by a full disk */
        "{\"t\":\"x\",\"mono_ns\":1,\"user\":\"u\",\"dest\":{\"name\":\"h\"},"
        "\"limit\":\"connect\",\"units\":1,\"verdict\":\"allow\",\"wai",
        "{\"mono_ns\":-1,\"user\":\"u\",\"dest\":{\"name\":\"h\"},"
        "\"limit\":\"connect\",\"units\":1,\"verdict\":\"allow\","
        "\"wait_ns\":0}",
    };
    struct rl_declog_entry e;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        cr_assert_eq(rl_declog_parse(bad[i], &e), -EINVAL, "%s", bad[i]);
    /* Unknown fields of a later version are skipped. */
    cr_assert_eq(rl_declog_parse("{\"x\":[1]}", &e), -EINVAL);
    cr_assert_eq(
        rl_declog_parse("{\"new\":{\"a\":true,\"b\":-1.5},\"mono_ns\":1,"
                        "\"user\":\"u\",\"dest\":{\"name\":\"h\",\"zone\":"
                        "null},\"limit\":\"send\",\"units\":2,\"verdict\":"
                        "\"deny\",\"wait_ns\":0}",
                        &e),
        0);
    cr_assert_eq(e.verdict, RL_DECLOG_DENY);
}

static int count_fds(void)
{
    int n = 0;
    DIR *d = opendir("/proc/self/fd");
    cr_assert_not_null(d);
    while (readdir(d) != NULL)
        n++;
    closedir(d);
    return n;
}

/* Set the log up on a new empty file whose name mkstemp makes of path. */
static void log_to_new_file(char *path)
{
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    close(fd);
    cr_assert_eq(rl_declog_setup(&dlog, path), 0);
}

/* The fd the log keeps: the one at or above RL_DECLOG_FD_FLOOR that
 * names `path` (-1: none). */
static int kept_fd(const char *path)
{
    for (int fd = RL_DECLOG_FD_FLOOR; fd < RL_DECLOG_FD_FLOOR + 64; fd++) {
        char link[64], to[4096];
        snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
        ssize_t n = readlink(link, to, sizeof to - 1);
        if (n > 0) {
            to[n] = '\0';
            if (strcmp(to, path) == 0)
                return fd;
        }
    }
    return -1;
}

/* Many processes' worth of lines into one file: each line whole, none
 * lost; the writer keeps one fd, high and close-on-exec (forked children
 * that are not the log's owner write theirs the slow way). */
Test(declog, lines_of_many_writers_stay_whole_and_one_high_fd_is_kept)
{
    char path[] = "/tmp/rlshim-declog-XXXXXX";
    log_to_new_file(path);
    cr_assert(rl_declog_enabled(&dlog));
    int before = count_fds();
    enum { PROCS = 4, LINES = 500 };
    for (int p = 0; p < PROCS; p++) {
        pid_t pid = fork();
        cr_assert_geq(pid, 0);
        if (pid == 0) {
            struct rl_declog_rec r = rec;
            for (int i = 0; i < LINES; i++) {
                r.units = (uint64_t)i;
                rl_declog_write(&dlog, &r);
            }
            _exit(0);
        }
    }
    struct rl_declog_rec r = rec;
    rl_declog_write(&dlog, &r);
    cr_assert_eq(count_fds(), before + 1);
    int kept = kept_fd(path);
    cr_assert_geq(kept, RL_DECLOG_FD_FLOOR, "no fd of the log at %d or above",
                  RL_DECLOG_FD_FLOOR);
    cr_assert(fcntl(kept, F_GETFD) & FD_CLOEXEC);
    rl_declog_write(&dlog, &r);
    cr_assert_eq(count_fds(), before + 1, "a second line opened another fd");
    for (int p = 0; p < PROCS; p++) {
        int st;
        cr_assert_gt(wait(&st), 0);
        cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f);
    char *line = NULL;
    size_t cap = 0;
    int n = 0;
    while (getline(&line, &cap, f) > 0) {
        struct rl_declog_entry e;
        cr_assert_eq(rl_declog_parse(line, &e), 0, "line %d: %s", n, line);
        n++;
    }
    free(line);
    fclose(f);
    unlink(path);
    rl_declog_setup(&dlog, NULL);
    cr_assert_eq(n, PROCS * LINES + 2);
    cr_assert_eq(count_fds(), before, "set up again: the fd is let go");
}

/* The program closes the kept fd and opens a file of its own at that
 * number (dup2): after rl_declog_release, as the close hooks call it,
 * the next line goes to the log, none to the program's file. */
Test(declog, a_released_fd_number_gets_no_line)
{
    char path[] = "/tmp/rlshim-declog-XXXXXX", mine[] = "/tmp/rlshim-mine-XXXXXX";
    int fd = mkstemp(path), own = mkstemp(mine);
    cr_assert(fd >= 0 && own >= 0);
    close(fd);
    cr_assert_eq(rl_declog_setup(&dlog, path), 0);
    struct rl_declog_rec r = rec;
    rl_declog_write(&dlog, &r);
    int kept = kept_fd(path);
    cr_assert_geq(kept, 0);
    cr_assert(rl_declog_holds(&dlog, (unsigned)kept, (unsigned)kept));
    cr_assert(rl_declog_holds(&dlog, 3, ~0u));
    cr_assert_not(rl_declog_holds(&dlog, 0, (unsigned)kept - 1));
    rl_declog_release(&dlog);
    cr_assert_not(rl_declog_holds(&dlog, 0, ~0u));
    cr_assert_eq(dup2(own, kept), kept);
    rl_declog_write(&dlog, &r);
    struct stat st;
    cr_assert_eq(fstat(own, &st), 0);
    cr_assert_eq(st.st_size, 0, "%lld bytes of the log in the program's file",
                 (long long)st.st_size);
    cr_assert_eq(stat(path, &st), 0);
    FILE *f = fopen(path, "r");
    int n = 0, ch;
    while ((ch = fgetc(f)) != EOF)
        n += ch == '\n';
    fclose(f);
    cr_assert_eq(n, 2, "%d lines in the log, not 2", n);
    close(kept);
    close(own);
    rl_declog_setup(&dlog, NULL);
    unlink(path);
    unlink(mine);
}

/* Unwritable: one stderr line for the process, errno untouched, the
 * caller goes on. Run in a child so that stderr can be caught. */
Test(declog, an_unwritable_log_costs_one_stderr_line)
{
    char err[] = "/tmp/rlshim-declog-err-XXXXXX";
    int fe = mkstemp(err);
    cr_assert_geq(fe, 0);
    unlink(err);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        dup2(fe, 2);
        rl_declog_setup(&dlog, "/nonexistent-dir/rlshim/log.jsonl");
        for (int i = 0; i < 50; i++) {
            errno = 1234;
            rl_declog_write(&dlog, &rec);
            if (errno != 1234)
                _exit(3);
        }
        _exit(0);
    }
    int st;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %d", st);
    char buf[4096];
    ssize_t n = pread(fe, buf, sizeof buf - 1, 0);
    close(fe);
    cr_assert_gt(n, 0);
    buf[n] = '\0';
    int lines = 0;
    for (char *p = buf; *p; p++)
        lines += *p == '\n';
    cr_assert_eq(lines, 1, "%s", buf);
    cr_assert(strstr(buf, "decision_log") != NULL, "%s", buf);
    cr_assert(strstr(buf, "No such file") != NULL, "%s", buf);
}

Test(declog, a_relative_path_is_refused)
{
    cr_assert_eq(rl_declog_setup(&dlog, "log.jsonl"), -EINVAL);
    cr_assert_not(rl_declog_enabled(&dlog));
    cr_assert_eq(rl_declog_setup(&dlog, "/tmp/x.jsonl"), 0);
    cr_assert(rl_declog_enabled(&dlog));
    cr_assert_eq(rl_declog_setup(&dlog, ""), 0);
    cr_assert_not(rl_declog_enabled(&dlog));
}

Test(declog, an_ipv6_literal_is_bracketed_before_its_port)
{
    char buf[64];
    rl_declog_hostport(buf, sizeof buf, "2001:db8::1", 443);
    cr_expect_str_eq(buf, "[2001:db8::1]:443");
    rl_declog_hostport(buf, sizeof buf, "198.51.100.1", 80);
    cr_expect_str_eq(buf, "198.51.100.1:80");
    rl_declog_hostport(buf, sizeof buf, "example.test", 8080);
    cr_expect_str_eq(buf, "example.test:8080");
}

Test(declog, dest_of_an_address_or_a_peer)
{
    struct sockaddr_in in = {.sin_family = AF_INET, .sin_port = htons(80)};
    inet_pton(AF_INET, "198.51.100.1", &in.sin_addr);
    char host[64];
    unsigned port;
    rl_declog_dest(&in, sizeof in, host, sizeof host, &port);
    cr_assert_str_eq(host, "198.51.100.1");
    cr_assert_eq(port, 80);
    struct sockaddr_in6 in6 = {.sin6_family = AF_INET6,
                               .sin6_port = htons(443)};
    inet_pton(AF_INET6, "::ffff:203.0.113.9", &in6.sin6_addr);
    rl_declog_dest(&in6, sizeof in6, host, sizeof host, &port);
    cr_assert_str_eq(host, "203.0.113.9");
    cr_assert_eq(port, 443);
    rl_declog_dest(NULL, 0, host, sizeof host, &port);
    cr_assert_str_eq(host, "?");
    cr_assert_eq(port, 0);
}

/* [rlshim] decision_log: an absolute path, kept; anything else refused. */
Test(declog, the_config_key_takes_an_absolute_path)
{
    char path[] = "/tmp/rlshim-declog-cfg-XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    FILE *f = fdopen(fd, "w");
    fputs("[rlshim]\ndecision_log = /var/tmp/x.jsonl\nlog = /var/tmp/l\n"
          "[default]\n"
          "connect = 1/s\nto = 127.0.0.1\n",
          f);
    fclose(f);
    struct rl_config *cfg = NULL;
    struct rl_diag d = {0};
    cr_assert_eq(rl_config_load(path, &cfg, &d), 0);
    cr_assert_str_eq(cfg->decision_log, "/var/tmp/x.jsonl");
    rl_config_free(cfg);
    rl_diag_free(&d);
    f = fopen(path, "w");
    fputs("[rlshim]\ndecision_log = x.jsonl\n[default]\nconnect = 1/s\n"
          "to = 127.0.0.1\n",
          f);
    fclose(f);
    d = (struct rl_diag){0};
    cr_assert_lt(rl_config_load(path, &cfg, &d), 0);
    cr_assert_gt(d.n, 0);
    cr_assert(strstr(d.msgs[0], "decision_log") != NULL, "%s", d.msgs[0]);
    rl_diag_free(&d);
    f = fopen(path, "w");
    fputs("[rlshim]\ndecision_log = off\n[default]\n"
          "connect = 1/s\nto = 127.0.0.1\n",
          f);
    fclose(f);
    d = (struct rl_diag){0};
    cr_assert_eq(rl_config_load(path, &cfg, &d), 0);
    cr_assert_null(cfg->decision_log);
    rl_config_free(cfg);
    rl_diag_free(&d);
    unlink(path);
}

Test(declog, control_characters_are_escaped)
{
    struct rl_declog_rec r = rec;
    r.user = "a\x01\n\x7f";
    char buf[RL_DECLOG_LINE_MAX];
    size_t n = rl_declog_format(buf, sizeof buf, &r, 0, 1, 1);
    buf[n] = '\0';
    cr_assert(strstr(buf, "\"user\":\"a\\u0001\\u000a\\u007f\"") != NULL, "%s",
              buf);
    struct rl_declog_entry e;
    cr_assert_eq(rl_declog_parse(buf, &e), 0);
    cr_assert_str_eq(e.user, "a\x01\n\x7f");
}

/* ---- requests (SPEC §11) --------------------------------------------- */

static const struct rl_declog_rec req = {
    .mono_ns = 5,
    .user = "crawler",
    .rule = "site:every-host",
    .site = "every-host",
    .dest = "example.com",
    .port = 443,
    .call = "SSL_write",
    .limit = "request",
    .units = 1,
    .verdict = RL_DECLOG_ALLOW,
    .wait_ns = 0,
    .method = "GET",
    .target = "/a?q=\"x\"\\y\t",
};

Test(declog, a_request_line_carries_its_method_and_target_escaped)
{
    char buf[RL_DECLOG_LINE_MAX];
    size_t n = rl_declog_format(buf, sizeof buf, &req, 0, 7, 8);
    buf[n] = '\0';
    cr_assert_str_eq(
        buf,
        "{\"t\":\"1970-01-01T00:00:00.000000Z\",\"mono_ns\":5,\"pid\":7,"
        "\"tid\":8,\"user\":\"crawler\",\"rule\":\"site:every-host\","
        "\"site\":\"every-host\",\"dest\":{\"name\":\"example.com\","
        "\"port\":443},\"call\":\"SSL_write\",\"limit\":\"request\","
        "\"units\":1,\"verdict\":\"allow\",\"wait_ns\":0,\"method\":\"GET\","
        "\"target\":\"/a?q=\\\"x\\\"\\\\y\\u0009\"}\n");
    struct rl_declog_entry e;
    cr_assert_eq(rl_declog_parse(buf, &e), 0, "%s", buf);
    cr_expect_str_eq(e.method, "GET");
    cr_expect_str_eq(e.target, req.target);
    cr_expect_str_eq(e.limit, "request");
    cr_expect_str_eq(e.dest, "example.com");
    /* Other calls have neither (the first test pins their line). */
    n = rl_declog_format(buf, sizeof buf, &rec, 0, 7, 8);
    buf[n] = '\0';
    cr_expect_null(strstr(buf, "method"), "%s", buf);
    cr_assert_eq(rl_declog_parse(buf, &e), 0);
    cr_expect_str_eq(e.method, "");
    cr_expect_str_eq(e.target, "");
}

Test(declog, a_target_is_cut_at_256_bytes_and_stays_utf8)
{
    char target[1000];
    memset(target, 'a', sizeof target - 1);
    target[sizeof target - 1] = '\0';
    struct rl_declog_rec r = req;
    r.target = target;
    char buf[RL_DECLOG_LINE_MAX];
    size_t n = rl_declog_format(buf, sizeof buf, &r, 0, 1, 1);
    buf[n] = '\0';
    struct rl_declog_entry e;
    cr_assert_eq(rl_declog_parse(buf, &e), 0, "%s", buf);
    cr_expect_eq(strlen(e.target), 256);
    cr_expect_eq(strspn(e.target, "a"), 256);
    /* "é" (2 bytes) across the cut is left out, not split. */
    memcpy(target + 255, "\xc3\xa9", 2);
    n = rl_declog_format(buf, sizeof buf, &r, 0, 1, 1);
    buf[n] = '\0';
    cr_assert_eq(rl_declog_parse(buf, &e), 0, "%s", buf);
    cr_expect_eq(strlen(e.target), 255);
    /* Inside the cut it is kept; a byte that is not UTF-8 is U+FFFD. */
    r.target = "/caf\xc3\xa9/\xff";
    n = rl_declog_format(buf, sizeof buf, &r, 0, 1, 1);
    buf[n] = '\0';
    cr_expect_not_null(strstr(buf, "\"target\":\"/caf\xc3\xa9/\\ufffd\""),
                       "%s", buf);
    cr_assert_eq(rl_declog_parse(buf, &e), 0, "%s", buf);
    cr_expect_str_eq(e.target, "/caf\xc3\xa9/?");
}

Test(declog, the_longest_request_line_is_cut_and_still_parses)
{
    /* Every name at its cap, all of it escaped, and a target of 256
     * control bytes (6 bytes each): past the line's room. */
    char name[300], target[300];
    memset(name, '"', sizeof name - 1);
    name[sizeof name - 1] = '\0';
    memset(target, 1, sizeof target - 1);
    target[sizeof target - 1] = '\0';
    struct rl_declog_rec r = req;
    r.user = r.rule = r.site = r.dest = name;
    r.method = name;
    r.target = target;
    char buf[RL_DECLOG_LINE_MAX + 1];
    size_t n = rl_declog_format(buf, RL_DECLOG_LINE_MAX, &r, 0, 1, 1);
    cr_assert_leq(n, RL_DECLOG_LINE_MAX);
    cr_assert_eq(buf[n - 1], '\n');
    buf[n] = '\0';
    struct rl_declog_entry e;
    cr_assert_eq(rl_declog_parse(buf, &e), 0, "%s", buf);
    cr_expect_eq(e.verdict, RL_DECLOG_ALLOW);
}

/* SPEC §12: a request a pause held says why, after wait_ns (before the
 * program's method and target, which may be cut); other lines say
 * nothing of it. */
Test(declog, a_request_a_pause_held_carries_its_reason)
{
    struct rl_declog_rec r = req;
    r.verdict = RL_DECLOG_DELAY;
    r.wait_ns = 2000000000ull;
    r.reason = "retry_after";
    char buf[RL_DECLOG_LINE_MAX];
    size_t n = rl_declog_format(buf, sizeof buf, &r, 0, 7, 8);
    buf[n] = '\0';
    cr_expect(strstr(buf, "\"wait_ns\":2000000000,\"reason\":\"retry_after\","
                          "\"method\":\"GET\"") != NULL,
              "%s", buf);
    struct rl_declog_entry e;
    cr_assert_eq(rl_declog_parse(buf, &e), 0, "%s", buf);
    cr_expect_str_eq(e.reason, "retry_after");
    r.reason = "backoff";
    n = rl_declog_format(buf, sizeof buf, &r, 0, 7, 8);
    buf[n] = '\0';
    cr_assert_eq(rl_declog_parse(buf, &e), 0, "%s", buf);
    cr_expect_str_eq(e.reason, "backoff");
    n = rl_declog_format(buf, sizeof buf, &req, 0, 7, 8);
    buf[n] = '\0';
    cr_expect_null(strstr(buf, "reason"), "%s", buf);
    cr_assert_eq(rl_declog_parse(buf, &e), 0);
    cr_expect_str_eq(e.reason, "");
}

/* The log's file is removed while the process runs (a test that deletes
 * it between two phases): the next line makes a new one, as when every
 * line opened the path. */
Test(declog, a_removed_log_is_made_again_at_the_next_line)
{
    char path[] = "/tmp/rlshim-declog-XXXXXX";
    log_to_new_file(path);
    struct rl_declog_rec r = rec;
    rl_declog_write(&dlog, &r);
    cr_assert_eq(unlink(path), 0);
    /* Past the time between two looks (a coarse clock's tick too). */
    usleep((RL_DECLOG_LOOK_NS + 8000000u) / 1000u);
    rl_declog_write(&dlog, &r);
    struct stat st;
    cr_assert_eq(stat(path, &st), 0, "no log after the removal");
    cr_assert_gt(st.st_size, 0, "the line after the removal went nowhere");
    int kept = kept_fd(path);
    cr_assert_geq(kept, 0);
    rl_declog_setup(&dlog, NULL);
    cr_assert_eq(kept_fd(path), -1, "set up again: the fd is let go");
    unlink(path);
}
