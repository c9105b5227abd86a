/* What the shim reports covers [site:] budgets like a rule's (SPEC §3,
 * §9, §11): the exit report names each section whose budget a call
 * spent (rule or site) with exactly what it spent, which the server
 * counts too; `rlshim stat` (table, --json, --prometheus) shows a site's
 * budget and its TLS connections not counted; `rlshim timeline` draws a
 * site's limit and every kind of a log. Real clients (curl, node, a
 * static client under --seccomp) against servers on loopback. */
#include "harness.h"

static struct server srv;
static struct run r;
static char errlog[300];

static void setup(void)
{
    h_setup();
    h_server_start(&srv, "http_count.py");
    snprintf(errlog, sizeof errlog, "%s/stderr.log", h_dir);
}

static void teardown(void)
{
    h_server_stop(&srv);
    h_teardown();
}

TestSuite(site_report, .init = setup, .fini = teardown, .timeout = 60);

/* `rlshim ARGS...` (at most 6) against this test's state dir, its
 * stdout into s. */
static void rlshim(struct run *s, const char *a1, const char *a2,
                   const char *a3, const char *a4, const char *a5,
                   const char *a6)
{
    char bin[300], state[300];
    snprintf(bin, sizeof bin, "%s/rlshim", h_env("RLSHIM_BUILD"));
    snprintf(state, sizeof state, "RLSHIM_STATE_DIR=%s", h_state);
    char *argv[] = {"env",       state,       bin,         (char *)a1,
                    (char *)a2,  (char *)a3,  (char *)a4,  (char *)a5,
                    (char *)a6,  NULL};
    h_run(s, false, 20, argv);
    cr_assert_eq(s->status, 0, "rlshim %s: status %d: %s", a1, s->status,
                 s->out);
}

/* curl fetching `n` URLs of the server in one process; the server
 * closes each connection after its answer, so each URL connects. Denied
 * URLs fail; curl goes on to the next. */
static void curl_urls(int n)
{
    char u[8][64];
    char *argv[32];
    int a = 0;
    argv[a++] = "curl";
    argv[a++] = "-sS";
    argv[a++] = "--max-time";
    argv[a++] = "20";
    for (int i = 0; i < n && i < 8; i++) {
        snprintf(u[i], sizeof u[i], "http://127.0.0.1:%d/%d", srv.port, i);
        argv[a++] = "-o";
        argv[a++] = "/dev/null";
        argv[a++] = u[i];
    }
    argv[a] = NULL;
    h_run(&r, true, 40, argv);
}

static void show_stderr(void)
{
    char cat[400];
    snprintf(cat, sizeof cat, "cat '%s' >&2", errlog);
    cr_expect_eq(system(cat), 0);
}

/* Item 7: a site alone throttles; its report says so, with the counts the
 * server saw, and stat shows the same budget. */
Test(site_report, a_site_only_report_says_what_the_site_spent)
{
    h_config_write("[rlshim]\nreport = yes\n"
                   "[site:local]\nto = 127.0.0.1:%d\n"
                   "algorithm = sliding_window\nconnect = 2/min\n",
                   srv.port);
    curl_urls(4);
    usleep(200 * 1000);
    int got = h_server_count(&srv, "");
    cr_expect_eq(got, 2, "the server saw %d requests", got);
    char want[200];
    snprintf(want, sizeof want,
             "user %u site [site:local]: connect seen 4, allowed 2, "
             "denied 2, delayed 0\n",
             getuid());
    cr_expect_eq(h_file_lines(errlog, want), 1, "%s", want);
    cr_expect_eq(h_file_lines(errlog, "nothing was throttled"), 0);
    cr_expect_eq(h_file_lines(errlog, "rlshim: report: "), 1,
                 "one line: the site's one limit");
    if (h_file_lines(errlog, want) != 1)
        show_stderr();
    /* The same budget in `rlshim stat --json` and --prometheus. */
    struct run s;
    rlshim(&s, "stat", "-c", h_config, "--json", NULL, NULL);
    char row[300];
    snprintf(row, sizeof row,
             "\"user\": \"%u\", \"rule\": \"site:local\", \"limit\": "
             "\"connect\", \"algorithm\": \"sliding_window\", \"allowed\": "
             "2, \"denied\": 2, \"delayed\": 0",
             getuid());
    cr_expect_not_null(strstr(s.out, row), "stat --json:\n%s", s.out);
    rlshim(&s, "stat", "-c", h_config, "--prometheus", NULL, NULL);
    snprintf(row, sizeof row,
             "rlshim_calls_total{user=\"%u\",rule=\"site:local\","
             "limit=\"connect\",verdict=\"deny\"} 2\n",
             getuid());
    cr_expect_not_null(strstr(s.out, row), "stat --prometheus:\n%s", s.out);
    snprintf(row, sizeof row,
             "rlshim_calls_total{user=\"%u\",rule=\"site:local\","
             "limit=\"connect\",verdict=\"allow\"} 2\n",
             getuid());
    cr_expect_not_null(strstr(s.out, row), "stat --prometheus:\n%s", s.out);
}

/* The rule and the site both limit connects: each line says what its own
 * budget spent (a call is counted once per budget, not once per budget
 * in each line): the site's two denials are the site's, given back to the
 * rule, whose allowed are the connects the server saw. */
Test(site_report, the_rule_and_the_site_each_report_their_own_budget)
{
    h_config_write("[rlshim]\nreport = yes\n"
                   "[default]\nalgorithm = sliding_window\nconnect = 10/min\n"
                   "[site:local]\nto = 127.0.0.1:%d\n"
                   "algorithm = sliding_window\nconnect = 2/min\n",
                   srv.port);
    curl_urls(4);
    usleep(200 * 1000);
    cr_expect_eq(h_server_count(&srv, ""), 2);
    char want[200];
    snprintf(want, sizeof want,
             "user %u rule [default]: connect seen 2, allowed 2, denied 0, "
             "delayed 0\n",
             getuid());
    cr_expect_eq(h_file_lines(errlog, want), 1, "%s", want);
    snprintf(want, sizeof want,
             "user %u site [site:local]: connect seen 4, allowed 2, "
             "denied 2, delayed 0\n",
             getuid());
    cr_expect_eq(h_file_lines(errlog, want), 1, "%s", want);
    cr_expect_eq(h_file_lines(errlog, "rlshim: report: "), 2);
    if (h_file_lines(errlog, want) != 1)
        show_stderr();
}

/* A site that no call reached: the report says nothing was throttled,
 * naming both what it looked for. */
Test(site_report, a_site_no_call_reached_is_said_so)
{
    h_config_write("[rlshim]\nreport = yes\n"
                   "[site:elsewhere]\nto = 127.0.0.1:%d\nconnect = 1/h\n",
                   srv.port == 65535 ? 1 : srv.port + 1);
    curl_urls(2);
    usleep(200 * 1000);
    cr_expect_eq(h_server_count(&srv, ""), 2);
    cr_expect_eq(h_file_lines(errlog, "no user section of "), 1);
    cr_expect_eq(h_file_lines(errlog, "and no call went to a destination of "
                                      "a site: nothing was throttled"),
                 1);
    cr_expect_eq(h_file_lines(errlog, "rlshim: report: "), 1);
}

/* Item 16: the rule limits connects, the site requests: the requests are
 * the site's, reported under it (the rule has no request limit), the
 * connects under the rule; each count is what the server saw (a request
 * per connection: the server closes each). */
Test(site_report, a_sites_requests_are_reported_under_the_site)
{
    h_config_write("[rlshim]\nreport = yes\non_deny = delay\n"
                   "[default]\nconnect = 100/s\n"
                   "[site:local]\nto = 127.0.0.1:%d\n"
                   "request = 2/s\nrequest_burst = 1\n",
                   srv.port);
    curl_urls(4);
    cr_assert_eq(r.status, 0, "curl: status %d", r.status);
    usleep(200 * 1000);
    cr_expect_eq(h_server_count(&srv, ""), 4);
    char want[200];
    snprintf(want, sizeof want,
             "user %u site [site:local]: request seen 4, allowed 4, "
             "denied 0, delayed 3\n",
             getuid());
    cr_expect_eq(h_file_lines(errlog, want), 1, "%s", want);
    snprintf(want, sizeof want,
             "user %u rule [default]: connect seen 4, allowed 4, denied 0, "
             "delayed 0\n",
             getuid());
    cr_expect_eq(h_file_lines(errlog, want), 1, "%s", want);
    cr_expect_eq(h_file_lines(errlog, "rule [default]: request"), 0,
                 "the rule has no request limit");
    cr_expect_eq(h_file_lines(errlog, "rlshim: report: "), 2);
    if (h_file_lines(errlog, want) != 1)
        show_stderr();
}

/* ---- node https: TLS the shim cannot see, under a site ---- */

static const char node_https_js[] =
    "const https = require('https');\n"
    "const agent = new https.Agent({keepAlive: true, maxSockets: 1,\n"
    "                               rejectUnauthorized: false});\n"
    "const urls = process.argv.slice(1);\n"
    "function next(i) {\n"
    "  if (i >= urls.length) { agent.destroy(); return; }\n"
    "  https.get(urls[i], {agent}, (res) => {\n"
    "    res.resume(); res.on('end', () => next(i + 1));\n"
    "  }).on('error', (e) => { console.error('error: ' + e); next(i + 1); });\n"
    "}\n"
    "next(0);\n";

/* Item 16: this node links no libssl, so its requests cannot be counted:
 * the site whose request limit covers the connection counts it, in the
 * exit report under the site, in `rlshim stat`'s table, --json and
 * --prometheus. */
Test(site_report, a_sites_tls_connections_not_counted_are_reported)
{
    if (system("ldd /usr/bin/node 2>/dev/null | grep -q libssl") == 0)
        h_skip("this node links libssl: its requests are seen (the test is "
               "for a node with OpenSSL built in)");
    struct server hs;
    h_server_start(&hs, "https_count.py");
    h_config_write("[rlshim]\nreport = yes\non_deny = delay\n"
                   "[site:tls]\nto = 127.0.0.1:%d\n"
                   "request = 2/s\nrequest_burst = 1\n",
                   hs.port);
    char u[3][96];
    for (int i = 0; i < 3; i++)
        snprintf(u[i], sizeof u[i], "https://127.0.0.1:%d/%c.txt", hs.port,
                 'a' + i);
    char *argv[] = {"/usr/bin/node", "-e", (char *)node_https_js, u[0], u[1],
                    u[2], NULL};
    h_run(&r, true, 30, argv);
    usleep(200 * 1000);
    int got = h_server_count(&hs, "REQ");
    h_server_stop(&hs);
    cr_assert_eq(r.status, 0, "node: status %d", r.status);
    cr_expect_eq(got, 3, "the server saw %d requests", got);
    char line[200];
    snprintf(line, sizeof line,
             "rlshim: requests to 127.0.0.1:%d are not counted: TLS the "
             "shim cannot see",
             hs.port);
    cr_expect_eq(h_file_lines(errlog, line), 1, "the line, once: %s", line);
    snprintf(line, sizeof line,
             "user %u site [site:tls]: 1 TLS connections: requests not "
             "counted (TLS the shim cannot see)\n",
             getuid());
    cr_expect_eq(h_file_lines(errlog, line), 1, "%s", line);
    cr_expect_eq(h_file_lines(errlog, "nothing was throttled"), 0);
    if (h_file_lines(errlog, line) != 1)
        show_stderr();
    struct run s;
    rlshim(&s, "stat", "-c", h_config, NULL, NULL, NULL);
    snprintf(line, sizeof line,
             "%-16u %-18s TLS connections not counted: 1 (requests over "
             "TLS the shim cannot see)\n",
             getuid(), "site:tls");
    cr_expect_not_null(strstr(s.out, line), "rlshim stat:\n%s", s.out);
    rlshim(&s, "stat", "-c", h_config, "--json", NULL, NULL);
    snprintf(line, sizeof line,
             "\"user\": \"%u\", \"rule\": \"site:tls\", \"limit\": "
             "\"request\", ",
             getuid());
    const char *row = strstr(s.out, line);
    cr_expect_not_null(row, "stat --json:\n%s", s.out);
    const char *end = row != NULL ? strchr(row, '}') : NULL;
    const char *field = row != NULL ? strstr(row, "\"tls_not_counted\": 1}")
                                    : NULL;
    cr_expect(field != NULL && field < end, "stat --json:\n%s", s.out);
    rlshim(&s, "stat", "-c", h_config, "--prometheus", NULL, NULL);
    snprintf(line, sizeof line,
             "rlshim_tls_connections_not_counted_total{user=\"%u\","
             "rule=\"site:tls\",limit=\"request\"} 1\n",
             getuid());
    cr_expect_not_null(strstr(s.out, line), "stat --prometheus:\n%s", s.out);
}

/* ---- rlshim timeline on a site-only log with two kinds ---- */

/* Item 16: the log's rule is null; its lines name the site, whose limits
 * (one per kind) are drawn: a chart per kind, each with its limit line,
 * in the terminal and in the SVG. */
Test(site_report, timeline_draws_each_kind_of_a_site_only_log_with_its_limit)
{
    char log[300], svg[300];
    snprintf(log, sizeof log, "%s/decisions.jsonl", h_dir);
    snprintf(svg, sizeof svg, "%s/timeline.svg", h_dir);
    h_config_write("[rlshim]\non_deny = delay\ndecision_log = %s\n"
                   "[site:local]\nto = 127.0.0.1:%d\n"
                   "connect = 5/s\nconnect_burst = 1\n"
                   "request = 4/s\nrequest_burst = 1\n",
                   log, srv.port);
    curl_urls(4);
    cr_assert_eq(r.status, 0, "curl: status %d", r.status);
    usleep(200 * 1000);
    cr_expect_eq(h_server_count(&srv, ""), 4);
    cr_expect_eq(h_file_lines(log, "\"limit\":\"connect\""), 4);
    cr_expect_eq(h_file_lines(log, "\"limit\":\"request\""), 4);
    cr_expect_eq(h_file_lines(log, "\"rule\":null"), 8);
    struct run s;
    rlshim(&s, "timeline", log, "-c", h_config, "--svg", svg);
    cr_expect_not_null(strstr(s.out, "connect calls per 100 ms"), "%s", s.out);
    cr_expect_not_null(strstr(s.out, "request calls per 100 ms"), "%s", s.out);
    cr_expect_not_null(strstr(s.out, "limit 5 per 1.000 s: 0.50 per bin\n"),
                       "%s", s.out);
    cr_expect_not_null(strstr(s.out, "limit 4 per 1.000 s: 0.40 per bin\n"),
                       "%s", s.out);
    /* Each chart has the 4 calls (how many waited is the machine's). */
    int charts = 0;
    for (const char *q = strstr(s.out, "\n127.0.0.1: "); q != NULL;
         q = strstr(q + 1, "\n127.0.0.1: ")) {
        unsigned a = 0, d = 0, x = 9;
        cr_expect_eq(sscanf(q, "\n127.0.0.1: %u allowed, %u delayed, %u "
                               "denied",
                            &a, &d, &x),
                     3);
        cr_expect_eq(a + d, 4, "%s", s.out);
        cr_expect_eq(x, 0, "%s", s.out);
        charts++;
    }
    cr_expect_eq(charts, 2, "%s", s.out);
    cr_expect_eq(h_file_lines(errlog, "no connect limit drawn"), 0);
    /* The SVG: a panel per kind, each with its limit line, and the
     * legend's. */
    char cmd[600];
    snprintf(cmd, sizeof cmd,
             "python3 -c 'import sys, xml.etree.ElementTree as E; "
             "r = E.parse(sys.argv[1]).getroot(); ns = \"{http://www.w3.org/"
             "2000/svg}\"; "
             "print(sum(1 for e in r.iter(ns + \"line\") "
             "if e.get(\"class\") == \"limit\"), "
             "sum(1 for e in r.iter(ns + \"text\") "
             "if e.get(\"class\") == \"title\"))' %s",
             svg);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    int limits = -1, panels = -1;
    cr_assert_eq(fscanf(p, "%d %d", &limits, &panels), 2);
    cr_assert_eq(pclose(p), 0);
    cr_expect_eq(panels, 2, "one panel per kind");
    cr_expect_eq(limits, 3, "each panel's limit, and the legend's");
    /* A config where no section the lines name limits them: no line
     * drawn, and stderr says why. */
    char other[300];
    snprintf(other, sizeof other, "%s/other.ini", h_dir);
    FILE *f = fopen(other, "w");
    cr_assert_not_null(f);
    fputs("[site:elsewhere]\nconnect = 1/s\n", f);
    fclose(f);
    rlshim(&s, "timeline", log, "-c", other, NULL, NULL);
    cr_expect_null(strstr(s.out, "limit "), "%s", s.out);
    cr_expect_eq(h_file_lines(errlog, "no connect limit drawn for 1 of 1 "
                                      "destinations: no section their lines "
                                      "name limits it"),
                 1);
    cr_expect_eq(h_file_lines(errlog, "no request limit drawn for 1 of 1 "
                                      "destinations"),
                 1);
}
