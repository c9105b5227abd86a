/* A running process with a fleet config follows an edit (SPEC §16, §8)
 * that leaves the fleet's settings alone: python connects every 50 ms
 * under a connect limit, decided in this host or in a real redis-server
 * that the test starts, while the test edits the file; the pace at the
 * server follows within 1.5 s, as in suite `reload`. An edit of `fleet`
 * itself is not followed (the process keeps its Redis and its pace) and
 * is said once. */
#include <pthread.h>
#include <pwd.h>

#include "harness.h"
#include "reload_client.h"

#include "../redis_server.h"

static struct server srv;
static struct redis R;
static struct run r;

static void setup(void)
{
    h_setup();
    h_server_start(&srv, "sink.py");
    memset(&R, 0, sizeof R);
}

static void teardown(void)
{
    redis_kill(&R);
    h_server_stop(&srv);
    h_teardown();
}

TestSuite(reload_fleet, .init = setup, .fini = teardown, .timeout = 60);

static void need_redis(void)
{
    if (!redis_have())
        cr_skip_test("redis-server is not installed");
    cr_assert(redis_start(&R), "redis-server did not start");
}

/* The edits, in seconds after the client's first connect. */
#define AT_EDIT 3.0
#define AT_AGAIN 4.5
#define AT_END 6.5

/* The texts the editor writes (format strings of the Redis port, then
 * the sink's port), and the client's first connect. */
static const char *edit_text, *again_text;
static double t_start;

static void write_cfg(const char *path, const char *fmt)
{
    FILE *f = fopen(path, "w");
    if (f != NULL) {
        fprintf(f, fmt, R.port, srv.port, srv.port);
        fclose(f);
    }
}

static void *editor(void *arg)
{
    (void)arg;
    char tmp[300];
    snprintf(tmp, sizeof tmp, "%s.new", h_config);
    h_server_wait(&srv, "CONN", 1, 20);
    char line[512];
    t_start = atof(h_server_line(&srv, "CONN", 0, line, sizeof line) + 5);
    /* An atomic replace, then (when asked) an in-place write. */
    sleep_until(t_start + AT_EDIT);
    write_cfg(tmp, edit_text);
    rename(tmp, h_config);
    if (again_text != NULL) {
        sleep_until(t_start + AT_AGAIN);
        write_cfg(h_config, again_text);
    }
    return NULL;
}

/* Runs the client under `first`, edited to `edit` (and `again`, NULL:
 * none) while it runs; the connects before the edit (2.5 s) into *before,
 * from 1.5 s after it to the end (1.5 s) into *after. */
static void run_edited(const char *first, const char *edit, const char *again,
                       int *before, int *after)
{
    h_config_write(first, R.port, srv.port);
    edit_text = edit;
    again_text = again;
    reload_run(&r, &srv, reload_loop_py, AT_END + 0.5, editor);
    *before = conns_between(&srv, t_start, 0.5, AT_EDIT);
    *after = conns_between(&srv, t_start, AT_EDIT + 1.5, AT_END);
}

static int stderr_lines(const char *needle)
{
    char errlog[300];
    snprintf(errlog, sizeof errlog, "%s/stderr.log", h_dir);
    return h_file_lines(errlog, needle);
}

/* A fleet budget for someone else keeps the config a fleet config. */
#define LOCAL_CFG(rate)                                                        \
    "[rlshim]\nfleet = redis://127.0.0.1:%d\n"                                 \
    "[default]\nconnect = " rate "\nconnect_burst = 1\nto = 127.0.0.1:%d\n"    \
    "[user:zz-someone-else]\nscope = fleet\nconnect = 1/s\n"

Test(reload_fleet, a_local_budgets_edit_in_a_fleet_config_is_followed)
{
    need_redis();
    int a, b;
    run_edited(LOCAL_CFG("2/s"), LOCAL_CFG("8/s"), NULL, &a, &b);
    cr_log_info("connects: 2/s %d in 2.5 s, 8/s %d in 1.5 s (%s)", a, b,
                r.out);
    /* Counts with room for a machine 3x slower, as suite `reload`. */
    cr_expect(a >= 3 && a <= 7, "2/s for 2.5 s: %d", a);
    cr_expect(b >= 6 && b <= 14, "8/s for 1.5 s: %d", b);
    cr_expect_eq(stderr_lines("keeping the config read at"), 0,
                 "the edit was followed");
}

#define FLEET_CFG(rate)                                                        \
    "[rlshim]\nfleet = redis://127.0.0.1:%d\n"                                 \
    "[default]\nscope = fleet\nconnect = " rate "\nconnect_burst = 1\n"       \
    "to = 127.0.0.1:%d\n"

Test(reload_fleet, a_fleet_budgets_rate_edit_is_followed)
{
    need_redis();
    long evals_before = redis_calls(&R, "evalsha") + redis_calls(&R, "eval");
    int a, b;
    run_edited(FLEET_CFG("2/s"), FLEET_CFG("8/s"), NULL, &a, &b);
    long evals = redis_calls(&R, "evalsha") + redis_calls(&R, "eval") -
                 evals_before;
    cr_log_info("connects: 2/s %d in 2.5 s, 8/s %d in 1.5 s; %ld scripts "
                "(%s)",
                a, b, evals, r.out);
    cr_expect(a >= 3 && a <= 7, "2/s for 2.5 s: %d", a);
    cr_expect(b >= 6 && b <= 14, "8/s for 1.5 s: %d", b);
    /* Decided in Redis before and after the edit, on the same fleet. */
    cr_expect_geq(evals, a + b, "every connect went to Redis: %ld", evals);
    cr_expect_eq(stderr_lines("keeping the config read at"), 0,
                 "the edit was followed");
    cr_expect_eq(stderr_lines("fleet Redis"), 0, "Redis was never away");
}

/* The second Redis port of an edit that moves `fleet`: one nothing
 * listens on (the process must not go there). */
static int elsewhere;

Test(reload_fleet, an_edit_of_fleet_is_not_followed_and_said_once)
{
    need_redis();
    elsewhere = redis_free_port();
    char moved[512], again[512];
    snprintf(moved, sizeof moved,
             "; the first Redis was on %%d\n"
             "[rlshim]\nfleet = redis://127.0.0.1:%d\n"
             "[default]\nscope = fleet\nconnect = 8/s\nconnect_burst = 1\n"
             "to = 127.0.0.1:%%d\n",
             elsewhere);
    snprintf(again, sizeof again,
             "; the first Redis was on %%d\n"
             "[rlshim]\nfleet = redis://127.0.0.1:%d\n"
             "[default]\nscope = fleet\nconnect = 9/s\nconnect_burst = 1\n"
             "to = 127.0.0.1:%%d\n",
             elsewhere);
    /* The new Redis port is in them already: the first one goes to the
     * comment line (write_cfg's arguments). */
    int a, b;
    run_edited(FLEET_CFG("2/s"), moved, again, &a, &b);
    cr_log_info("connects: 2/s %d in 2.5 s, after the edits %d in 1.5 s (%s)",
                a, b, r.out);
    cr_expect(a >= 3 && a <= 7, "2/s for 2.5 s: %d", a);
    cr_expect(b >= 1 && b <= 5, "still 2/s for 1.5 s: %d", b);
    cr_expect_eq(stderr_lines("`fleet` changed"), 1, "said once");
    cr_expect_eq(stderr_lines("keeping the config read at"), 1, "said once");
    cr_expect_eq(stderr_lines("fleet Redis"), 0,
                 "the process kept its Redis, never away");
}

/* An edit that moves the user to another fleet section: its budget is
 * that section's, under that section's Redis key (the fleet, set up for
 * the first one, is not set up again). A rate of 1/min keeps the key in
 * Redis for a minute (it expires when the bucket is full again). */
Test(reload_fleet, a_user_moved_to_another_fleet_section_spends_its_key)
{
    need_redis();
    struct passwd *pw = getpwuid(getuid());
    cr_assert_not_null(pw, "no login for uid %d", (int)getuid());
    char moved[512], pattern[300], key[300];
    snprintf(moved, sizeof moved,
             "[rlshim]\nfleet = redis://127.0.0.1:%%d\n"
             "[default]\nscope = fleet\nconnect = 2/s\nconnect_burst = 1\n"
             "to = 127.0.0.1:%%d\n"
             "[user:%s]\nscope = fleet\nconnect = 1/min\nconnect_burst = 1\n"
             "to = 127.0.0.1:%%d\n",
             pw->pw_name);
    int a, b;
    run_edited(FLEET_CFG("2/s"), moved, NULL, &a, &b);
    snprintf(pattern, sizeof pattern,
             "--scan --pattern 'rlshim:{user:%s|*}:connect:*'", pw->pw_name);
    redis_cli(&R, pattern, key, sizeof key);
    cr_log_info("connects: 2/s %d in 2.5 s, 1/min %d in 1.5 s; key '%s' (%s)",
                a, b, key, r.out);
    cr_expect(a >= 3 && a <= 7, "2/s for 2.5 s: %d", a);
    cr_expect(b <= 1, "1/min for 1.5 s: %d", b);
    cr_expect(key[0] != '\0', "the new section's key is in Redis");
    cr_expect_eq(stderr_lines("keeping the config read at"), 0,
                 "the edit was followed");
}
