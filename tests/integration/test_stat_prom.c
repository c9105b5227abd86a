/* `rlshim stat --prometheus` after real traffic: python clients under the
 * shim spend budgets of every kind (user rules, sites, per-destination
 * budgets, max_open, sliding window and token bucket, a full table's
 * overflow budget, fleet budgets on a real redis-server) against four
 * servers on loopback addresses, and the output is read with a real
 * parser of the text format (Debian's python3-prometheus-client), whose
 * samples must be what the traffic spent. */
#include "harness.h"

#include "../redis_server.h"

#define NSRV 4
static struct server srv[NSRV]; /* on 127.0.0.1 .. 127.0.0.4 */
static struct run r;
static struct redis R;

static void setup(void)
{
    h_setup();
    char addr[32];
    for (int i = 0; i < NSRV; i++) {
        snprintf(addr, sizeof addr, "127.0.0.%d", i + 1);
        setenv("HTTP_COUNT_HOST", addr, 1);
        h_server_start(&srv[i], "http_count.py");
    }
    unsetenv("HTTP_COUNT_HOST");
    memset(&R, 0, sizeof R);
}

static void teardown(void)
{
    redis_kill(&R);
    for (int i = 0; i < NSRV; i++)
        h_server_stop(&srv[i]);
    h_teardown();
}

TestSuite(stat_prom, .init = setup, .fini = teardown, .timeout = 90);

/* Arguments OP:ADDR:PORT:N. get: N connections, each one send of one
 * request, read to the end; hold: N connections kept open while it prints
 * `rlshim stat --prometheus` (run without the preload, by fork and exec,
 * as in test_truth.c), closed after. */
static const char client_py[] =
    "import os, socket, sys\n"
    "rlshim, cfg = sys.argv[1], sys.argv[2]\n"
    "env = dict(os.environ); env.pop('LD_PRELOAD', None)\n"
    "def cli(*a):\n"
    "    r, w = os.pipe()\n"
    "    pid = os.fork()\n"
    "    if pid == 0:\n"
    "        os.dup2(w, 1)\n"
    "        os.execve(rlshim, [rlshim, *a, '-c', cfg], env)\n"
    "    os.close(w)\n"
    "    out = b''\n"
    "    while True:\n"
    "        b = os.read(r, 65536)\n"
    "        if not b: break\n"
    "        out += b\n"
    "    os.close(r)\n"
    "    assert os.waitpid(pid, 0)[1] == 0\n"
    "    return out.decode()\n"
    "held = []\n"
    "for a in sys.argv[3:]:\n"
    "    op, addr, port, n = a.split(':')\n"
    "    for _ in range(int(n)):\n"
    "        s = socket.create_connection((addr, int(port)))\n"
    "        if op == 'hold':\n"
    "            held.append(s)\n"
    "            continue\n"
    "        s.sendall(b'GET / HTTP/1.0\\r\\n\\r\\n')\n"
    "        while s.recv(4096): pass\n"
    "        s.close()\n"
    "if held:\n"
    "    sys.stdout.write(cli('stat', '--prometheus'))\n"
    "for s in held: s.close()\n";

/* The real parser (it raises on a line that is not the format), and what
 * it lets through: a family twice (HELP/TYPE repeated, or its samples
 * split), a sample in no typed family (it makes those "untyped"), a
 * sample twice. Prints each sample as NAME{K=V,...} VALUE, labels sorted
 * by name and unescaped, for the test to look up. The text must be
 * UTF-8, as the format says. */
static const char check_py[] =
    "import collections, sys\n"
    "from prometheus_client.parser import text_string_to_metric_families\n"
    "text = sys.stdin.buffer.read().decode('utf-8')\n"
    "sys.stdout.reconfigure(encoding='utf-8')\n"
    "if text and not text.endswith('\\n'): sys.exit('no final newline')\n"
    "fams = list(text_string_to_metric_families(text))\n"
    "n = collections.Counter(f.name for f in fams)\n"
    "if any(c > 1 for c in n.values()): sys.exit('a family twice: %s' % n)\n"
    "seen = set()\n"
    "for f in fams:\n"
    "    if f.type not in ('counter', 'gauge') or not f.documentation:\n"
    "        sys.exit('%s: type %s, help %r' % (f.name, f.type,\n"
    "                                           f.documentation))\n"
    "    for s in f.samples:\n"
    "        k = (s.name, tuple(sorted(s.labels.items())))\n"
    "        if k in seen: sys.exit('a sample twice: %s' % (k,))\n"
    "        seen.add(k)\n"
    "        print('%s{%s} %.17g' % (s.name, ','.join('%s=%s' % kv for kv in\n"
    "              sorted(s.labels.items())), s.value))\n";

/* Parse `text` with check_py into `norm`; fails the test on a refusal. */
static void parse(const char *text, char *norm, size_t len)
{
    char in[300], script[300], cmd[1000];
    snprintf(in, sizeof in, "%s/out.prom", h_dir);
    snprintf(script, sizeof script, "%s/check.py", h_dir);
    FILE *f = fopen(in, "w");
    cr_assert_not_null(f);
    fputs(text, f);
    fclose(f);
    f = fopen(script, "w");
    cr_assert_not_null(f);
    fputs(check_py, f);
    fclose(f);
    /* Debian's python: python3 on PATH may be another without the
     * package (the Makefile's TEST_DEPS installs it there). */
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s' < '%s' 2>&1", script,
             in);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    size_t n = fread(norm, 1, len - 1, p);
    norm[n] = '\0';
    int st = pclose(p);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0,
              "the parser refuses the output:\n%s\n-- the output:\n%s", norm,
              text);
}

/* The value of sample NAME{LABELS} (LABELS sorted, unescaped), or -1. */
static double value(const char *norm, const char *name, const char *labels)
{
    char key[512];
    snprintf(key, sizeof key, "%s{%s} ", name, labels);
    size_t kl = strlen(key);
    for (const char *p = norm; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : p)
        if (strncmp(p, key, kl) == 0)
            return strtod(p + kl, NULL);
    return -1;
}

#define expect_sample(norm, name, labels, want)                              \
    cr_expect_eq(value(norm, name, labels), (double)(want),                  \
                 "%s{%s}: %g, not %g, in:\n%s", name, labels,                \
                 value(norm, name, labels), (double)(want), norm)

/* Run the client as user `key` with ops; returns its stdout in r.out. */
static void client(const char *key, const char *ops[], int nops)
{
    char bin[512];
    snprintf(bin, sizeof bin, "%s/rlshim", h_env("RLSHIM_BUILD"));
    char *argv[16] = {"python3", "-c", (char *)client_py, bin, h_config};
    int n = 5;
    for (int i = 0; i < nops && n < 15; i++)
        argv[n++] = (char *)ops[i];
    argv[n] = NULL;
    setenv("RLSHIM_KEY", key, 1);
    h_run(&r, true, 60, argv);
    unsetenv("RLSHIM_KEY");
    cr_assert_eq(r.status, 0, "client %s: status %d: %s", key, r.status, r.out);
}

static void stat_prom(char *out, size_t len)
{
    char bin[512], state[300];
    snprintf(bin, sizeof bin, "%s/rlshim", h_env("RLSHIM_BUILD"));
    snprintf(state, sizeof state, "RLSHIM_STATE_DIR=%s", h_state);
    char *argv[] = {"env",        state, bin, "stat", "--prometheus", "-c",
                    h_config, NULL};
    static struct run s;
    h_run(&s, false, 10, argv);
    cr_assert_eq(s.status, 0, "rlshim stat: %s", s.out);
    snprintf(out, len, "%s", s.out);
}

/* Per-hour rates: nothing refills while the test runs, so what is
 * available is the burst (or the window's N) less what was spent. */
static const char cfg_fmt[] =
    "[rlshim]\n"
    "on_deny = fail\n"
    "[user:crawler]\n"
    "connect = 10/h\nconnect_burst = 50\n"
    "send = 10/h\nsend_burst = 40\n"
    /* A key with characters the format escapes in a label value. */
    "[user:ho\"l\\d]\n"
    "algorithm = sliding_window\n"
    "connect = 30/h\n"
    "max_open = 4\n"
    "[site:local]\n"
    "to = 127.0.0.1\n"
    "algorithm = sliding_window\n"
    "connect = 20/h\n"
    "[site:win-dest]\n"
    "to = 127.0.0.4\n"
    "per = destination\n"
    "algorithm = sliding_window\n"
    "connect = 6/h\n"
    "[site:every-host]\n"
    "per = destination\n"
    "connect = 10/h\nconnect_burst = 5\n"
    "max_open = 2\n";

#define HOLDER "ho\"l\\d"

Test(stat_prom, every_kind_of_budget_is_valid_text_format_with_what_was_spent)
{
    h_config_write("%s", cfg_fmt);
    char ops[5][64];
    const char *op[5];
    const int get[NSRV] = {3, 2, 1, 2};
    for (int i = 0; i < NSRV; i++) {
        snprintf(ops[i], sizeof ops[i], "get:127.0.0.%d:%d:%d", i + 1,
                 srv[i].port, get[i]);
        op[i] = ops[i];
    }
    client("crawler", op, NSRV);
    for (int i = 0; i < NSRV; i++)
        cr_assert_eq(h_server_wait(&srv[i], "", get[i], 5), get[i],
                     "127.0.0.%d got %d", i + 1, h_server_count(&srv[i], ""));
    /* The holder: one request to .3, then one connection to .2 held open
     * while it prints the exposition. */
    snprintf(ops[0], sizeof ops[0], "get:127.0.0.3:%d:1", srv[2].port);
    snprintf(ops[1], sizeof ops[1], "hold:127.0.0.2:%d:1", srv[1].port);
    op[0] = ops[0];
    op[1] = ops[1];
    client(HOLDER, op, 2);
    static char during[65536], after[65536], norm[65536];
    snprintf(during, sizeof during, "%s", r.out);
    stat_prom(after, sizeof after);

    /* While the connection was held: one open in the holder's rule and
     * in its budget of .2. */
    parse(during, norm, sizeof norm);
    const char *open = "rlshim_open_connections";
    const char *max = "rlshim_max_open_connections";
    expect_sample(norm, open, "rule=user:" HOLDER ",user=" HOLDER, 1);
    expect_sample(norm, max, "rule=user:" HOLDER ",user=" HOLDER, 4);
    expect_sample(norm, open,
                  "dest=127.0.0.2,rule=site:every-host,user=" HOLDER, 1);
    expect_sample(norm, max, "dest=127.0.0.2,rule=site:every-host,user=" HOLDER,
                  2);
    expect_sample(norm, open,
                  "dest=127.0.0.3,rule=site:every-host,user=" HOLDER, 0);

    /* After both exited. */
    parse(after, norm, sizeof norm);
    const char *calls = "rlshim_calls_total", *avail = "rlshim_available";
    const char *delayed = "rlshim_delayed_seconds_total";
    /* The crawler's own rule: token bucket, 8 connections, 8 sends. */
    const char *l = "limit=connect,rule=user:crawler,user=crawler";
    char k[256];
    snprintf(k, sizeof k, "%s,verdict=allow", l);
    expect_sample(norm, calls, k, 8);
    snprintf(k, sizeof k, "%s,verdict=delay", l);
    expect_sample(norm, calls, k, 0);
    snprintf(k, sizeof k, "%s,verdict=deny", l);
    expect_sample(norm, calls, k, 0);
    expect_sample(norm, delayed, l, 0);
    expect_sample(norm, avail, l, 50 - 8);
    l = "limit=send,rule=user:crawler,user=crawler";
    snprintf(k, sizeof k, "%s,verdict=allow", l);
    expect_sample(norm, calls, k, 8);
    expect_sample(norm, avail, l, 40 - 8);
    /* A site, sliding window: 3 of 20. */
    l = "limit=connect,rule=site:local,user=crawler";
    snprintf(k, sizeof k, "%s,verdict=allow", l);
    expect_sample(norm, calls, k, 3);
    expect_sample(norm, avail, l, 20 - 3);
    /* Per destination, token bucket with max_open: the section's counters
     * (every destination's), what is left to each destination. */
    l = "limit=connect,rule=site:every-host,user=crawler";
    snprintf(k, sizeof k, "%s,verdict=allow", l);
    expect_sample(norm, calls, k, 2 + 1);
    expect_sample(norm, avail, l, -1); /* only per destination */
    expect_sample(norm, avail, "dest=127.0.0.2,limit=connect,"
                               "rule=site:every-host,user=crawler",
                  5 - 2);
    expect_sample(norm, avail, "dest=127.0.0.3,limit=connect,"
                               "rule=site:every-host,user=crawler",
                  5 - 1);
    expect_sample(norm, open, "dest=127.0.0.2,rule=site:every-host,"
                              "user=crawler",
                  0);
    expect_sample(norm, max, "dest=127.0.0.3,rule=site:every-host,"
                             "user=crawler",
                  2);
    /* Per destination, sliding window: 2 of 6. */
    l = "limit=connect,rule=site:win-dest,user=crawler";
    snprintf(k, sizeof k, "%s,verdict=allow", l);
    expect_sample(norm, calls, k, 2);
    expect_sample(norm, avail, "dest=127.0.0.4,limit=connect,"
                               "rule=site:win-dest,user=crawler",
                  6 - 2);
    /* The holder's rule: sliding window with max_open, its connections
     * closed now. */
    l = "limit=connect,rule=user:" HOLDER ",user=" HOLDER;
    snprintf(k, sizeof k, "%s,verdict=allow", l);
    expect_sample(norm, calls, k, 2);
    expect_sample(norm, avail, l, 30 - 2);
    expect_sample(norm, open, "rule=user:" HOLDER ",user=" HOLDER, 0);
    expect_sample(norm, max, "rule=user:" HOLDER ",user=" HOLDER, 4);
    l = "limit=connect,rule=site:every-host,user=" HOLDER;
    snprintf(k, sizeof k, "%s,verdict=allow", l);
    expect_sample(norm, calls, k, 2);
    expect_sample(norm, avail, "dest=127.0.0.2,limit=connect,"
                               "rule=site:every-host,user=" HOLDER,
                  5 - 1);
    expect_sample(norm, avail, "dest=127.0.0.3,limit=connect,"
                               "rule=site:every-host,user=" HOLDER,
                  5 - 1);
    expect_sample(norm, open,
                  "dest=127.0.0.2,rule=site:every-host,user=" HOLDER, 0);
}

/* Destinations that find no room in the table (max_destinations) share
 * the section's overflow budget: it is a destination's budget too, under
 * the name policy/dests.c gives it, with its max_open area. */
Test(stat_prom, the_overflow_budget_of_a_full_table_is_a_destination)
{
    h_config_write("[rlshim]\non_deny = fail\nmax_destinations = 1\n"
                   "[site:every-host]\nper = destination\n"
                   "connect = 10/h\nconnect_burst = 5\nmax_open = 2\n");
    char ops[2][64];
    const char *op[2] = {ops[0], ops[1]};
    /* .2 takes the one entry (its bucket not full: never re-used); .3
     * then finds no room: one request, one connection held. */
    snprintf(ops[0], sizeof ops[0], "get:127.0.0.2:%d:2", srv[1].port);
    snprintf(ops[1], sizeof ops[1], "get:127.0.0.3:%d:1", srv[2].port);
    client("crawler", op, 2);
    snprintf(ops[0], sizeof ops[0], "hold:127.0.0.3:%d:1", srv[2].port);
    client("crawler", op, 1);
    static char during[65536], after[65536], norm[65536];
    snprintf(during, sizeof during, "%s", r.out);
    stat_prom(after, sizeof after);
    const char *open = "rlshim_open_connections";
    const char *ovf = "dest=(more destinations),";
    char k[256];
    parse(during, norm, sizeof norm);
    snprintf(k, sizeof k, "%srule=site:every-host,user=crawler", ovf);
    expect_sample(norm, open, k, 1);
    parse(after, norm, sizeof norm);
    expect_sample(norm, open, k, 0);
    expect_sample(norm, "rlshim_max_open_connections", k, 2);
    snprintf(k, sizeof k, "%slimit=connect,rule=site:every-host,user=crawler",
             ovf);
    expect_sample(norm, "rlshim_available", k, 5 - 2);
    expect_sample(norm, "rlshim_available",
                  "dest=127.0.0.2,limit=connect,rule=site:every-host,"
                  "user=crawler",
                  5 - 2);
    expect_sample(norm, "rlshim_calls_total",
                  "limit=connect,rule=site:every-host,user=crawler,"
                  "verdict=allow",
                  2 + 2);
}

/* scope = fleet: the counters are the host's, what is available is the
 * fleet's, in Redis; the host's words (what it falls back on while Redis
 * is away) stay full and are not shown as available. */
Test(stat_prom, fleet_budgets_count_what_was_spent_and_claim_no_available)
{
    cr_assert(redis_have(), "redis-server is not installed (TEST_DEPS)");
    cr_assert(redis_start(&R), "redis-server did not start");
    h_config_write("[rlshim]\non_deny = fail\nfleet = redis://127.0.0.1:%d\n"
                   "[user:crawler]\nscope = fleet\n"
                   "connect = 10/h\nconnect_burst = 20\n"
                   "send = 10/h\nsend_burst = 30\n"
                   "[site:every-host]\nper = destination\nscope = fleet\n"
                   "connect = 10/h\nconnect_burst = 5\n",
                   R.port);
    char ops[64];
    const char *op[1] = {ops};
    snprintf(ops, sizeof ops, "get:127.0.0.2:%d:3", srv[1].port);
    client("crawler", op, 1);
    cr_assert_eq(h_server_wait(&srv[1], "", 3, 5), 3);
    static char out[65536], norm[65536];
    stat_prom(out, sizeof out);
    parse(out, norm, sizeof norm);
    const char *calls = "rlshim_calls_total", *avail = "rlshim_available";
    expect_sample(norm, calls,
                  "limit=connect,rule=user:crawler,user=crawler,verdict=allow",
                  3);
    expect_sample(norm, calls,
                  "limit=send,rule=user:crawler,user=crawler,verdict=allow", 3);
    expect_sample(norm, calls,
                  "limit=connect,rule=site:every-host,user=crawler,"
                  "verdict=allow",
                  3);
    expect_sample(norm, avail, "limit=connect,rule=user:crawler,user=crawler",
                  -1);
    expect_sample(norm, avail, "limit=send,rule=user:crawler,user=crawler", -1);
    expect_sample(norm, avail,
                  "dest=127.0.0.2,limit=connect,rule=site:every-host,"
                  "user=crawler",
                  -1);
}

/* A key is any bytes; a label value is UTF-8: a byte that is not becomes
 * U+FFFD (the rest of the key as it was). */
Test(stat_prom, a_key_that_is_not_utf8_is_still_a_utf8_label)
{
    h_config_write("[rlshim]\non_deny = fail\n[default]\nconnect = 10/h\n");
    char ops[64];
    const char *op[1] = {ops};
    snprintf(ops, sizeof ops, "get:127.0.0.2:%d:2", srv[1].port);
    client("b\xff\xc3\xa9" "d", op, 1);
    static char out[65536], norm[65536];
    stat_prom(out, sizeof out);
    parse(out, norm, sizeof norm);
    expect_sample(norm, "rlshim_calls_total",
                  "limit=connect,rule=default,user=b\xef\xbf\xbd\xc3\xa9" "d,"
                  "verdict=allow",
                  2);
    expect_sample(norm, "rlshim_available",
                  "limit=connect,rule=default,user=b\xef\xbf\xbd\xc3\xa9" "d",
                  10 - 2);
}
