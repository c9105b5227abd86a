/* A pause belongs to the destination that asked (SPEC §12), measured at
 * the server: one server on 127.0.0.1 (tests/integration/servers/
 * http_status.py), reached under several names by the Host header each
 * request carries (the name a request is charged to, SPEC §11). A 429
 * from one name holds no request to another, under a budget the names
 * share and under a full per-destination table; and a pause holds the
 * requests already queued for their turn (8 python threads, and Scrapy,
 * whose TLS goes through a memory BIO). */
#include "harness.h"

#include <sys/stat.h>

#include "../redis_server.h"
#include "pause_arrivals.h"

static struct server st, sts;
static struct run r;
static struct redis R;

static void setup(void)
{
    h_setup();
    memset(&R, 0, sizeof R);
    h_server_start(&st, "http_status.py");
}

static void teardown(void)
{
    redis_kill(&R);
    h_server_stop(&sts);
    h_server_stop(&st);
    h_teardown();
}

TestSuite(pause_dest, .init = setup, .fini = teardown, .timeout = 90);

/* argv[1] = the server's port; then NAME PATH pairs, each one GET on one
 * session with `Host: NAME`; "error NAME" for one the shim refused. */
static const char by_host_py[] =
    "import requests, sys\n"
    "port = sys.argv[1]\n"
    "s = requests.Session()\n"
    "a = sys.argv[2:]\n"
    "for name, path in zip(a[0::2], a[1::2]):\n"
    "    try:\n"
    "        s.get('http://127.0.0.1:%s%s' % (port, path),\n"
    "              headers={'Host': name}, timeout=5).content\n"
    "    except Exception as e:\n"
    "        print('error', name, flush=True)\n";

static void run_by_host(char *const *pairs, int npairs)
{
    char port[16];
    snprintf(port, sizeof port, "%d", st.port);
    char *argv[200];
    int n = 0;
    argv[n++] = "/usr/bin/python3";
    argv[n++] = "-c";
    argv[n++] = (char *)by_host_py;
    argv[n++] = port;
    for (int i = 0; i < 2 * npairs && n < 198; i++)
        argv[n++] = pairs[i];
    argv[n] = NULL;
    h_run(&r, true, 60, argv);
    cr_assert_eq(r.status, 0, "python: status %d\n%s", r.status, r.out);
}

/* Requests the server answered whose path starts with `path`. */
static int seen(const char *path)
{
    int n = h_server_count(&st, "REQ"), k = 0;
    for (int i = 0; i < n; i++) {
        char line[512], m[32], p[200];
        h_server_line(&st, "REQ", i, line, sizeof line);
        if (sscanf(line, "REQ %*f %31s %199s", m, p) == 2 &&
            strncmp(p, path, strlen(path)) == 0)
            k++;
    }
    return k;
}

/* Delay mode with a max_delay far below the server's 600 s: a request
 * its pause held fails (ETIMEDOUT: a client told EAGAIN would wait for
 * its socket, held until the pause's end) and never reaches the server. */
#define DELAY_HEAD                                                          \
    "[rlshim]\nerrno = ETIMEDOUT\non_deny = delay\nmax_delay = 10s\n"

/* (a) One budget for every name (no `per`): evil.test's 429 with a
 * Retry-After of 600 s holds evil.test, and no request to good.test. */
Test(pause_dest, a_429_holds_its_name_not_the_others_of_a_shared_budget)
{
    h_config_write(DELAY_HEAD "[default]\nrequest = 10/s\n");
    char *pairs[] = {"evil.test", "/s/429/600", "good.test", "/ok/good/1",
                     "good.test", "/ok/good/2", "good.test", "/ok/good/3",
                     "evil.test", "/ok/evil/again"};
    run_by_host(pairs, 5);
    usleep(200 * 1000);
    cr_log_info("shared budget: good.test %d of 3, evil.test again %d of 0",
                seen("/ok/good/"), seen("/ok/evil/"));
    cr_expect_eq(seen("/s/429/600"), 1);
    cr_expect_eq(seen("/ok/good/"), 3,
                 "good.test: %d of its 3 requests reached the server\n%s",
                 seen("/ok/good/"), r.out);
    cr_expect_eq(seen("/ok/evil/"), 0, "evil.test's pause did not hold it");
    cr_expect(strstr(r.out, "error evil.test") != NULL, "%s", r.out);
    cr_expect(strstr(r.out, "error good.test") == NULL, "%s", r.out);
}

/* (a) on a fleet budget: the pause goes to Redis keyed by its name. A
 * second host (its own state dir, nothing of the 429 in its segment)
 * is held for evil.test by Redis alone, and not for good.test. */
Test(pause_dest, a_429_on_the_fleet_holds_its_name_not_the_others)
{
    if (!redis_have())
        cr_skip_test("redis-server is not installed");
    cr_assert(redis_start(&R), "redis-server did not start");
    h_config_write(DELAY_HEAD "fleet = redis://127.0.0.1:%d\n"
                              "[default]\nscope = fleet\nrequest = 10/s\n",
                   R.port);
    char host_b[300];
    snprintf(host_b, sizeof host_b, "%s/host-b", h_dir);
    cr_assert_eq(mkdir(host_b, 0700), 0);
    char *first[] = {"evil.test", "/s/429/600"};
    run_by_host(first, 1);
    char port[16];
    snprintf(port, sizeof port, "%d", st.port);
    char *argv[] = {"/usr/bin/python3", "-c", (char *)by_host_py, port,
                    "good.test", "/ok/good/1", "good.test", "/ok/good/2",
                    "evil.test", "/ok/evil/again", "good.test", "/ok/good/3",
                    NULL};
    h_run_with(&r, true, 60, argv, h_config, host_b, "host-b.log");
    cr_assert_eq(r.status, 0, "host b: status %d\n%s", r.status, r.out);
    usleep(200 * 1000);
    cr_log_info("fleet: good.test %d of 3, evil.test again %d of 0",
                seen("/ok/good/"), seen("/ok/evil/"));
    cr_expect_eq(seen("/s/429/600"), 1);
    cr_expect_eq(seen("/ok/good/"), 3,
                 "good.test: %d of its 3 requests reached the server\n%s",
                 seen("/ok/good/"), r.out);
    cr_expect_eq(seen("/ok/evil/"), 0,
                 "evil.test's pause on Redis did not hold host b");
    cr_expect(strstr(r.out, "error evil.test") != NULL, "%s", r.out);
    cr_expect(strstr(r.out, "error good.test") == NULL, "%s", r.out);
}

/* (b) A budget per destination in a table of 16: 40 names answer 429
 * with Retry-After: 600. They take no room from good.test (its own
 * budget, or the overflow budget, is not paused by them), and each evil
 * name stays held. */
Test(pause_dest, forty_paused_names_hold_no_other_name_in_a_full_table)
{
    h_config_write(DELAY_HEAD "max_destinations = 16\n"
                   "[site:every]\nper = destination\nrequest = 10/s\n");
    static char names[42][32];
    char *pairs[200];
    int n = 0;
    for (int i = 0; i < 40; i++) {
        snprintf(names[i], sizeof names[i], "evil%d.test", i);
        pairs[n++] = names[i];
        pairs[n++] = "/s/429/600";
    }
    for (int i = 1; i <= 3; i++) {
        pairs[n++] = "good.test";
        pairs[n++] = i == 1 ? "/ok/good/1" : i == 2 ? "/ok/good/2"
                                                    : "/ok/good/3";
    }
    /* The first and the last evil names again: still paused. */
    pairs[n++] = names[0];
    pairs[n++] = "/ok/evil/0";
    pairs[n++] = names[39];
    pairs[n++] = "/ok/evil/39";
    run_by_host(pairs, n / 2);
    usleep(200 * 1000);
    cr_log_info("full table: good.test %d of 3, evil again %d of 0",
                seen("/ok/good/"), seen("/ok/evil/"));
    cr_expect_eq(seen("/s/429/600"), 40);
    cr_expect_eq(seen("/ok/good/"), 3,
                 "good.test: %d of its 3 requests reached the server\n%s",
                 seen("/ok/good/"), r.out);
    cr_expect_eq(seen("/ok/evil/"), 0, "an evil name's pause was lost");
}

/* None arrived inside the pause (pause_arrivals.h), and after it they
 * came one at a time. */
static void expect_none_inside_then_one_at_a_time(struct server *sv, int n)
{
    double t[16], t429;
    char times[400];
    expect_none_inside_the_pause(sv, n, "", t, &t429, times);
    /* After the pause, one at a time: never two within half a period. */
    for (int i = 1; i < n; i++)
        if (t[i - 1] > t429)
            cr_expect_geq(t[i] - t[i - 1], 0.25,
                          "two requests %.3f s apart after the pause "
                          "(at%s s)",
                          t[i] - t[i - 1], times);
}

/* Eight threads, each one GET on a connection of its own, started
 * together under 2 requests a second: the first to arrive is answered
 * 429 with Retry-After: 3 while the others wait for their turns. */
static const char threads_py[] =
    "import requests, sys, threading\n"
    "u = sys.argv[1]\n"
    "def one():\n"
    "    try:\n"
    "        requests.get(u, timeout=30).content\n"
    "    except Exception as e:\n"
    "        print('error %r' % e, flush=True)\n"
    "ts = [threading.Thread(target=one) for i in range(8)]\n"
    "[t.start() for t in ts]\n"
    "[t.join() for t in ts]\n";

Test(pause_dest, a_429_holds_the_requests_already_queued, .timeout = 60)
{
    char log[300];
    snprintf(log, sizeof log, "%s/decisions.jsonl", h_dir);
    h_config_write("[rlshim]\non_deny = delay\nmax_delay = 30s\n"
                   "decision_log = %s\n"
                   "[default]\nrequest = 2/s\nrequest_burst = 1\n",
                   log);
    char u[160];
    snprintf(u, sizeof u, "http://127.0.0.1:%d/once/429/3", st.port);
    char *argv[] = {"/usr/bin/python3", "-c", (char *)threads_py, u, NULL};
    h_run(&r, true, 50, argv);
    cr_assert_eq(r.status, 0, "python: status %d\n%s", r.status, r.out);
    cr_assert_eq(h_server_wait(&st, "REQ", 8, 5), 8, "%s", r.out);
    expect_none_inside_then_one_at_a_time(&st, 8);
    /* The decision log says the same: the pause held the requests, those
     * queued before the 429 was read decided again at their turns
     * (moved_ns), those that asked after it held at once (a slow start of
     * the threads can make them all such: no turn to move then), and
     * verify agrees. */
    int moved = h_file_lines(log, "\"moved_ns\"");
    /* (The 429's own line, verdict "pause", carries the reason too.) */
    int held = h_file_lines(log, "\"reason\":\"retry_after\"") -
               h_file_lines(log, "\"verdict\":\"pause\"");
    cr_log_info("decisions: %d held by the pause, %d of them moved", held,
                moved);
    cr_expect_geq(held, 1, "no decision says the pause held it");
    char cmd[800];
    snprintf(cmd, sizeof cmd, "%s/rlshim verify '%s' --obeyed-retry-after",
             h_env("RLSHIM_BUILD"), log);
    cr_expect_eq(system(cmd), 0, "%s", cmd);
}

/* One keep-alive connection, two threads (clients/split_conn.py, mode
 * "free"): one writes the requests one after another, the shim sleeping
 * it to each turn, while the other reads the answers. */

/* The second request is answered 429 with Retry-After: 3 while the
 * writer sleeps for the third's turn: the reader hears it, and the
 * writer's queued request waits for the pause's end. */
Test(pause_dest, a_429_read_by_another_thread_holds_the_writer, .timeout = 60)
{
    char log[300];
    snprintf(log, sizeof log, "%s/decisions.jsonl", h_dir);
    h_config_write("[rlshim]\non_deny = delay\nmax_delay = 30s\n"
                   "decision_log = %s\n"
                   "[default]\nrequest = 2/s\nrequest_burst = 1\n",
                   log);
    split_conn_run(&r, &st, "free");
    /* The decision log: the 429 was heard (its line, verdict "pause"),
     * and the pause held the writer's next request. */
    int heard = h_file_lines(log, "\"verdict\":\"pause\"");
    int held = h_file_lines(log, "\"reason\":\"retry_after\"") - heard;
    cr_log_info("decisions: the 429 heard %d time(s), %d held by it", heard,
                held);
    cr_expect_eq(heard, 1, "the reader thread's 429 was not heard");
    cr_expect_geq(held, 1, "no decision says the pause held a request");
    expect_none_inside_then_one_at_a_time(&st, 6);
}

/* Scrapy: eight requests at once (Twisted writes each into a memory BIO
 * and sends its ciphertext from the reactor), the server's TLS; its own
 * retry is off (it would send the 429's request again: a request of
 * its own, not one queued before the answer), AutoThrottle is off by
 * default. */
static const char scrapy_py[] =
    "import sys, scrapy\n"
    "from scrapy.crawler import CrawlerProcess\n"
    "class Pages(scrapy.Spider):\n"
    "    name = 'pages'\n"
    "    custom_settings = {'CONCURRENT_REQUESTS_PER_DOMAIN': 8,\n"
    "        'CONCURRENT_REQUESTS': 8, 'DOWNLOAD_DELAY': 0,\n"
    "        'ROBOTSTXT_OBEY': False, 'RETRY_ENABLED': False,\n"
    "        'AUTOTHROTTLE_ENABLED': False, 'HTTPERROR_ALLOW_ALL': True,\n"
    "        'TELNETCONSOLE_ENABLED': False, 'LOG_LEVEL': 'ERROR',\n"
    "        'DOWNLOAD_TIMEOUT': 30}\n"
    "    def start_requests(self):\n"
    "        for i in range(8):\n"
    "            yield scrapy.Request('%s?%d' % (sys.argv[1], i),\n"
    "                                 dont_filter=True)\n"
    "    def parse(self, response):\n"
    "        print('page', response.status, flush=True)\n"
    "p = CrawlerProcess()\n"
    "p.crawl(Pages)\n"
    "p.start()\n";

/* The same over a memory BIO: the server answers the 2nd request 429
 * with Retry-After: 3 while the others wait for their turns, their
 * bytes already in their BIOs and their sockets held until then. None
 * reaches the server inside the pause: the hold of each socket reaches
 * to the end of the pause of its request's destination. */
Test(pause_dest, a_429_holds_the_requests_queued_in_a_memory_bio,
     .timeout = 60)
{
    if (system("/usr/bin/python3 -c 'import scrapy' 2>/dev/null") != 0)
        h_skip("python3-scrapy is not installed (apt-get install "
               "python3-scrapy)");
    setenv("RL_TLS", "1", 1);
    h_server_start(&sts, "http_status.py");
    unsetenv("RL_TLS");
    char log[300];
    snprintf(log, sizeof log, "%s/decisions.jsonl", h_dir);
    h_config_write("[rlshim]\non_deny = delay\nmax_delay = 30s\n"
                   "decision_log = %s\n"
                   "[default]\nrequest = 2/s\nrequest_burst = 1\n",
                   log);
    char u[160];
    snprintf(u, sizeof u, "https://127.0.0.1:%d/nth/2/429/3", sts.port);
    char *argv[] = {"/usr/bin/python3", "-c", (char *)scrapy_py, u, NULL};
    h_run(&r, true, 50, argv);
    int n = h_server_wait(&sts, "REQ", 8, 5);
    cr_assert_eq(r.status, 0, "scrapy: status %d\n%s", r.status, r.out);
    cr_assert_eq(n, 8, "the server saw %d requests\n%s", n, r.out);
    expect_none_inside_then_one_at_a_time(&sts, 8);
    /* The decision log: the pause held them (reason retry_after, moved
     * from the turn they had), and verify agrees. */
    int moved = h_file_lines(log, "\"moved_ns\"");
    int held = h_file_lines(log, "\"reason\":\"retry_after\"") -
               h_file_lines(log, "\"verdict\":\"pause\"");
    cr_log_info("scrapy: %d decisions held by the pause, %d moved", held,
                moved);
    cr_expect_geq(held, 1, "no decision says the pause held it");
    char cmd[800];
    snprintf(cmd, sizeof cmd, "%s/rlshim verify '%s' --obeyed-retry-after",
             h_env("RLSHIM_BUILD"), log);
    cr_expect_eq(system(cmd), 0, "%s", cmd);
}
