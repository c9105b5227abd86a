/* A wait past max_delay on a non-blocking socket in delay mode (SPEC §2):
 * the call fails at once with ETIMEDOUT (not EAGAIN, which means "wait
 * until writable" and held curl until its own timeout, aiohttp for ever),
 * and the process says once on stderr why. The server
 * (tests/integration/servers/http_status.py) answers the first request
 * 429 with `Retry-After: 600`; `max_delay = 2s`. curl and aiohttp, each
 * fetching three URLs on one connection: the two after the 429 fail, the
 * client ends about as soon as the same client fetching from a server
 * that never pauses (the control), the server sees the first request
 * only, and stderr has the line once. */
#include "harness.h"

static struct server st;
static struct run r, ctl;

static bool tls; /* the server speaks HTTPS (tls_setup) */

static void setup(void)
{
    h_setup();
    tls = false;
    h_server_start(&st, "http_status.py");
}

static void tls_setup(void)
{
    h_setup();
    tls = true;
    setenv("RL_TLS", "1", 1);
    h_server_start(&st, "http_status.py");
    unsetenv("RL_TLS");
}

static void teardown(void)
{
    h_server_stop(&st);
    h_teardown();
}

TestSuite(overdue, .init = setup, .fini = teardown, .timeout = 120);
TestSuite(overdue_tls, .init = tls_setup, .fini = teardown, .timeout = 120);

/* The pause is ten minutes: a client held for it is killed long before. */
#define RUN_FOR 40
#define MAX_DELAY_S 2

static const char config[] = "[default]\nrequest = 10/s\nrequest_burst = 1\n"
                             "on_deny = delay\nmax_delay = 2s\n";

/* What overdue() writes: the queued requests' test takes turns half a
 * second apart, so that the 429 comes while they wait. */
static const char *config_text = config;

static const char line[] =
    "(Retry-After), over max_delay 2 s";

static char urls[3][96];

/* The 429 first (paused), then two more; the control's are all plain. */
static void make_urls(bool paused)
{
    const char *scheme = tls ? "https" : "http";
    snprintf(urls[0], sizeof urls[0], "%s://127.0.0.1:%d%s", scheme, st.port,
             paused ? "/s/429/600" : "/ok");
    snprintf(urls[1], sizeof urls[1], "%s://127.0.0.1:%d/ok", scheme,
             st.port);
    snprintf(urls[2], sizeof urls[2], "%s://127.0.0.1:%d/ok2", scheme,
             st.port);
}

static const char aiohttp_py[] =
    "import aiohttp, asyncio, sys\n"
    "async def main():\n"
    "    async with aiohttp.ClientSession() as s:\n"
    "        for u in sys.argv[1:]:\n"
    "            try:\n"
    "                t = aiohttp.ClientTimeout(total=600)\n"
    "                async with s.get(u, timeout=t, ssl=False) as r:\n"
    "                    await r.read()\n"
    "                    print('status', r.status)\n"
    "            except Exception as e:\n"
    "                print('error: %r' % e)\n"
    "asyncio.run(main())\n";

static void curl_argv(char **argv)
{
    char *v[] = {"curl", "-sk", "-o", "/dev/null", "-o", "/dev/null",
                 "-o", "/dev/null", urls[0], urls[1], urls[2], NULL};
    memcpy(argv, v, sizeof v);
}

static void aiohttp_argv(char **argv)
{
    char *v[] = {"/usr/bin/python3", "-c", (char *)aiohttp_py, urls[0],
                 urls[1], urls[2], NULL, NULL, NULL, NULL, NULL, NULL};
    memcpy(argv, v, sizeof v);
}

static void overdue(void (*make)(char **), const char *who)
{
    h_config_write("%s", config_text);
    char *argv[12];
    make_urls(true);
    make(argv);
    h_run(&r, true, RUN_FOR, argv);
    char errlog[300];
    snprintf(errlog, sizeof errlog, "%s/stderr.log", h_dir);
    cr_log_info("%s: status %d in %.2f s: %s", who, r.status, r.wall, r.out);
    cr_expect_neq(r.status, -1, "%s was still waiting after %d s", who,
                  RUN_FOR);
    /* The paused ones never went. */
    cr_expect_eq(h_server_count(&st, "REQ"), 1, "%d requests arrived",
                 h_server_count(&st, "REQ"));
    cr_expect_eq(h_file_lines(errlog, line), 1,
                 "%s: the line about the pause, once, is not there: %d",
                 who, h_file_lines(errlog, line));
    cr_expect_eq(h_file_lines(errlog, "rlshim: 127.0.0.1 paused by the "
                                      "server for "),
                 1, "%s: it does not name the destination", who);
    make_urls(false);
    make(argv);
    h_run_control(&ctl, RUN_FOR, argv);
    cr_log_info("%s: %.2f s throttled, %.2f s for the control", who, r.wall,
                ctl.wall);
    /* At once: no longer than the control (with room for a machine three
     * times slower) and max_delay, which it need not even wait. */
    cr_expect_lt(r.wall, 3 * ctl.wall + MAX_DELAY_S,
                 "%s took %.2f s, the control %.2f s: it waited", who,
                 r.wall, ctl.wall);
}

Test(overdue, curl_fails_at_once_past_max_delay)
{
    overdue(curl_argv, "curl");
    /* curl's own words for ETIMEDOUT on a send: a send failure. */
    cr_expect_eq(r.status, 55, "curl: status %d", r.status);
}

Test(overdue, aiohttp_fails_at_once_past_max_delay)
{
    overdue(aiohttp_argv, "aiohttp");
    cr_expect_eq(r.status, 0, "aiohttp: status %d", r.status);
    cr_expect_not_null(strstr(r.out, "status 429\nerror: ClientOSError(110"),
                       "aiohttp was not told ETIMEDOUT: %s", r.out);
}

/* Requests queued for their turns when the 429 comes: at its turn each is
 * decided again, paused past max_delay, and fails at once (ETIMEDOUT),
 * not held for the pause. aiohttp, four requests at once on their own
 * connections. */
static const char queued_py[] =
    "import aiohttp, asyncio, sys\n"
    "async def get(s, u):\n"
    "    try:\n"
    "        t = aiohttp.ClientTimeout(total=600)\n"
    "        async with s.get(u, timeout=t, ssl=False) as r:\n"
    "            await r.read()\n"
    "            return 'status %d' % r.status\n"
    "    except Exception as e:\n"
    "        return 'error: %r' % e\n"
    "async def main():\n"
    "    c = aiohttp.TCPConnector(limit=8, force_close=True)\n"
    "    async with aiohttp.ClientSession(connector=c) as s:\n"
    "        gets = [get(s, u) for u in sys.argv[1:]]\n"
    "        for line in await asyncio.gather(*gets):\n"
    "            print(line)\n"
    "asyncio.run(main())\n";

static void queued_argv(char **argv)
{
    char *v[] = {"/usr/bin/python3", "-c", (char *)queued_py, urls[0],
                 urls[1], urls[2], NULL, NULL, NULL, NULL, NULL, NULL};
    memcpy(argv, v, sizeof v);
}

Test(overdue, aiohttp_queued_requests_fail_at_once_past_max_delay)
{
    config_text = "[default]\nrequest = 2/s\nrequest_burst = 1\n"
                  "on_deny = delay\nmax_delay = 2s\n";
    overdue(queued_argv, "aiohttp queued");
    cr_expect_eq(r.status, 0, "aiohttp: status %d", r.status);
    cr_expect_not_null(strstr(r.out, "status 429\nerror: "),
                       "aiohttp's queued requests did not fail: %s", r.out);
}

/* Over TLS the write that fails is the library's: SSL_get_error says
 * SSL_ERROR_SYSCALL with errno ETIMEDOUT (not SSL_ERROR_WANT_WRITE, on
 * which the program waits for a writable socket and writes again, for
 * the whole pause). curl writes through a BIO of its own; aiohttp
 * through python's ssl on a memory BIO. */
Test(overdue_tls, curl_fails_at_once_past_max_delay)
{
    overdue(curl_argv, "curl over TLS");
    cr_expect_eq(r.status, 55, "curl: status %d", r.status);
}

Test(overdue_tls, aiohttp_fails_at_once_past_max_delay)
{
    overdue(aiohttp_argv, "aiohttp over TLS");
    cr_expect_eq(r.status, 0, "aiohttp: status %d", r.status);
    cr_expect_not_null(strstr(r.out, "status 429\nerror: "),
                       "aiohttp did not fail the next request: %s", r.out);
}
