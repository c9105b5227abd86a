/* nginx_fixture.h — a real HTTP server for the request tests: Debian's
 * nginx-light, started by the test as one foreground process (no daemon,
 * no master) with a config, root, logs and pid of the test's temp dir,
 * keep-alive for 1000 requests. A site with `tls` speaks HTTPS with
 * HTTP/2 offered by ALPN (HTTP/1.1 to clients that do not ask for it),
 * with a self-signed certificate made by `openssl req` at start-up. Its
 * access log has a line per request, "$msec $request $connection": the
 * server's own wall-clock time of each and the serial number of the
 * connection that carried it (an HTTP/2 connection's streams share it).
 * Include after harness.h. */
#ifndef RL_TEST_NGINX_FIXTURE_H
#define RL_TEST_NGINX_FIXTURE_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#define NGX_BIN "/usr/sbin/nginx"

struct ngx_site {
    const char *addr; /* a loopback address to listen on */
    bool tls;         /* HTTPS and HTTP/2 */
    int port;
    char log[300];    /* its access log */
    const char *extra; /* more directives for its server block, or NULL */
};

static pid_t ngx_pid;

/* A port free on addr now (the kernel's pick; nginx binds it next). */
H_FN int ngx_free_port(const char *addr)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert_geq(fd, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET};
    inet_pton(AF_INET, addr, &sa.sin_addr);
    cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    socklen_t len = sizeof sa;
    getsockname(fd, (struct sockaddr *)&sa, &len);
    close(fd);
    return ntohs(sa.sin_port);
}

H_FN bool ngx_accepting(const char *addr, int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
    inet_pton(AF_INET, addr, &sa.sin_addr);
    bool ok = connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
    close(fd);
    return ok;
}

/* A throwaway certificate for CN localhost: h_dir/ngx.crt and ngx.key. */
H_FN void ngx_make_cert(void)
{
    char cmd[1200];
    snprintf(cmd, sizeof cmd,
             "openssl req -x509 -newkey ec -pkeyopt "
             "ec_paramgen_curve:prime256v1 -nodes -days 1 -subj /CN=localhost "
             "-keyout '%1$s/ngx.key' -out '%1$s/ngx.crt' >/dev/null 2>&1",
             h_dir);
    cr_assert_eq(system(cmd), 0, "openssl req failed");
}

/* Start nginx serving h_dir/www (files a.txt .. e.txt) on each site;
 * skips when nginx-light is not installed. */
H_FN void ngx_start(struct ngx_site *sites, int n)
{
    if (access(NGX_BIN, X_OK) != 0)
        h_skip("nginx is not installed (apt-get install nginx-light)");
    for (int i = 0; i < n; i++)
        if (sites[i].tls) {
            ngx_make_cert();
            break;
        }
    char path[400], conf[400];
    snprintf(path, sizeof path, "%s/www", h_dir);
    cr_assert_eq(mkdir(path, 0755), 0);
    for (char c = 'a'; c <= 'e'; c++) {
        char name[16], body[8];
        snprintf(name, sizeof name, "www/%c.txt", c);
        snprintf(body, sizeof body, "%c\n", c);
        h_file_fill(name, body, 2, path, sizeof path);
    }
    /* The temp dir is 0700 and the worker may drop privileges. */
    chmod(h_dir, 0755);
    snprintf(conf, sizeof conf, "%s/nginx.conf", h_dir);
    FILE *f = fopen(conf, "w");
    cr_assert_not_null(f);
    fprintf(f,
            "daemon off;\nmaster_process off;\nworker_processes 1;\n"
            "pid %1$s/nginx.pid;\nerror_log %1$s/nginx-error.log;\n"
            "events { worker_connections 256; }\n"
            "http {\n"
            "  log_format reqs '$msec $request $connection';\n"
            "  keepalive_requests 1000;\n  keepalive_timeout 60s;\n"
            "  client_body_temp_path %1$s/ngx-body;\n"
            "  proxy_temp_path %1$s/ngx-proxy;\n"
            "  fastcgi_temp_path %1$s/ngx-fcgi;\n"
            "  uwsgi_temp_path %1$s/ngx-uwsgi;\n"
            "  scgi_temp_path %1$s/ngx-scgi;\n",
            h_dir);
    for (int i = 0; i < n; i++) {
        sites[i].port = ngx_free_port(sites[i].addr);
        snprintf(sites[i].log, sizeof sites[i].log, "%s/access.%d.log", h_dir,
                 i);
        fprintf(f, "  server {\n    listen %s:%d%s;\n    root %s/www;\n",
                sites[i].addr, sites[i].port,
                sites[i].tls ? " ssl http2" : "", h_dir);
        if (sites[i].tls)
            fprintf(f,
                    "    ssl_certificate %1$s/ngx.crt;\n"
                    "    ssl_certificate_key %1$s/ngx.key;\n",
                    h_dir);
        fprintf(f, "    access_log %s reqs;\n%s  }\n", sites[i].log,
                sites[i].extra != NULL ? sites[i].extra : "");
    }
    fputs("}\n", f);
    fclose(f);
    ngx_pid = fork();
    cr_assert_neq(ngx_pid, -1);
    if (ngx_pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        unsetenv("LD_PRELOAD");
        int null = open("/dev/null", O_RDWR);
        dup2(null, 0);
        dup2(null, 1);
        execl(NGX_BIN, "nginx", "-p", h_dir, "-c", conf, (char *)NULL);
        _exit(127);
    }
    double end = h_now() + 5;
    for (int i = 0; i < n; i++)
        while (!ngx_accepting(sites[i].addr, sites[i].port)) {
            cr_assert_lt(h_now(), end, "nginx did not start (see %s)",
                         "nginx-error.log");
            usleep(10000);
        }
}

H_FN void ngx_stop(void)
{
    if (ngx_pid > 0) {
        kill(ngx_pid, SIGKILL);
        waitpid(ngx_pid, NULL, 0);
        ngx_pid = 0;
    }
}

/* The access log's requests and the span (s) from its first to its last
 * (the server's $msec stamps). */
H_FN int ngx_requests(const struct ngx_site *s, double *first, double *last)
{
    FILE *f = fopen(s->log, "r");
    int n = 0;
    *first = *last = 0;
    if (f == NULL)
        return 0;
    char line[1024];
    while (fgets(line, sizeof line, f) != NULL) {
        double t = atof(line);
        if (n++ == 0)
            *first = t;
        *last = t;
    }
    fclose(f);
    return n;
}

/* After the client has exited: wait until the access log holds `want`
 * requests (nginx logs a request after its response is on its way, so a
 * loaded machine can let the client exit first), for at most 5 s, then a
 * little more for any request beyond them. */
H_FN void ngx_settle(const struct ngx_site *s, int want)
{
    double first, last;
    for (int i = 0; i < 500 && ngx_requests(s, &first, &last) < want; i++)
        usleep(10 * 1000);
    usleep(200 * 1000);
}

/* The least time between arrival i and arrival i + k of the n sorted
 * stamps in t (k = 1: neighbours; 1e9 when there is no such pair). "No
 * two at one turn" is k = 1 at least 0.4 of a period and k = 2 at least
 * 1.4: a request that reaches the server late shortens only the gap after
 * it, two requests at one turn break both. */
H_FN double ngx_least_gap(const double *t, int n, int k)
{
    double least = 1e9;
    for (int i = k; i < n; i++)
        if (t[i] - t[i - k] < least)
            least = t[i] - t[i - k];
    return least;
}

/* The access log's stamps (s, the server's $msec), up to cap, as logged. */
H_FN int ngx_times(const struct ngx_site *s, double *out, int cap)
{
    FILE *f = fopen(s->log, "r");
    int n = 0;
    if (f == NULL)
        return 0;
    char line[1024];
    while (n < cap && fgets(line, sizeof line, f) != NULL)
        out[n++] = atof(line);
    fclose(f);
    return n;
}

H_FN void ngx_truncate(const struct ngx_site *s)
{
    FILE *f = fopen(s->log, "w");
    if (f != NULL)
        fclose(f);
}

/* argv = prefix..., then n URLs of site s (a.txt, b.txt, ...: http or
 * https as the site speaks), each after "-o out" when out is not NULL.
 * The result stays valid until the next call. */
#define NGX_URLS_MAX 16
static char ngx_urls[NGX_URLS_MAX][96];
static char *ngx_argv[64];

H_FN char **ngx_client(const struct ngx_site *s, char *const prefix[],
                       const char *out, int n)
{
    int k = 0;
    for (; prefix[k] != NULL && k < 16; k++)
        ngx_argv[k] = prefix[k];
    for (int i = 0; i < n && i < NGX_URLS_MAX; i++) {
        snprintf(ngx_urls[i], sizeof ngx_urls[i], "%s://%s:%d/%c.txt",
                 s->tls ? "https" : "http", s->addr, s->port, 'a' + i % 5);
        if (out != NULL) {
            ngx_argv[k++] = "-o";
            ngx_argv[k++] = (char *)out;
        }
        ngx_argv[k++] = ngx_urls[i];
    }
    ngx_argv[k] = NULL;
    return ngx_argv;
}

/* The server's connections behind its log: nginx numbers them ($connection,
 * the last field). */
H_FN int ngx_connections(const struct ngx_site *s)
{
    char cmd[400];
    snprintf(cmd, sizeof cmd, "awk '{print $NF}' '%s' | sort -u | wc -l",
             s->log);
    FILE *p = popen(cmd, "r");
    int n = -1;
    if (p != NULL && fscanf(p, "%d", &n) != 1)
        n = -1;
    if (p != NULL)
        pclose(p);
    return n;
}

/* The runs of the checks below (a struct run is 64 KiB: not on the
 * stack). */
static struct run ngx_run, ngx_ctl;

/* Paced: argv, under `config` (a request limit of one per `gap` s in
 * delay mode, a burst of 1), makes its n requests to s on one connection
 * at least (n-1) gaps apart at the server (0.9 of it: the server's stamps
 * are milliseconds and the first request's own turn is free); the
 * control (the same client, no request key) makes them all in well under
 * half of that, in the same run. s's log keeps the control's requests. */
H_FN void ngx_check_paced(const struct ngx_site *s, const char *config,
                          char **argv, int n, double gap, const char *who)
{
    struct run *r = &ngx_run, *ctl = &ngx_ctl;
    ngx_truncate(s);
    h_config_write("%s", config);
    h_run(r, true, 30, argv);
    cr_assert_eq(r->status, 0, "%s: status %d\n%s", who, r->status, r->out);
    usleep(200 * 1000);
    double first, last;
    int got = ngx_requests(s, &first, &last);
    double span = last - first;
    cr_expect_eq(got, n, "%s: the server saw %d requests, not %d", who, got,
                 n);
    cr_expect_eq(ngx_connections(s), 1, "%s: %d connections: not keep-alive",
                 who, ngx_connections(s));
    cr_expect_geq(span, (n - 1) * gap * 0.9,
                  "%s: %d requests in %.3f s at the server", who, got, span);
    ngx_truncate(s);
    h_run_control(ctl, 30, argv);
    usleep(200 * 1000);
    double cfirst, clast;
    int cn = ngx_requests(s, &cfirst, &clast);
    cr_expect_eq(cn, n, "%s control: the server saw %d", who, cn);
    cr_expect_lt(clast - cfirst, span / 2,
                 "%s: the control took %.3f s, the paced run %.3f s", who,
                 clast - cfirst, span);
    cr_log_info("%s: paced %.3f s, control %.3f s", who, span,
                clast - cfirst);
}

/* Refused: under `config` (fail mode, a budget of `allowed` requests),
 * only `allowed` of argv's requests reach s; the client neither hangs nor
 * crashes (the run is ngx_run). */
H_FN void ngx_check_refused(const struct ngx_site *s, const char *config,
                            char **argv, int allowed, const char *who)
{
    struct run *r = &ngx_run;
    ngx_truncate(s);
    h_config_write("%s", config);
    h_run(r, true, 30, argv);
    cr_assert_neq(r->status, -1, "%s hung", who);
    cr_assert_lt(r->status, 128, "%s died: status %d", who, r->status);
    usleep(300 * 1000);
    double first, last;
    int n = ngx_requests(s, &first, &last);
    cr_expect_eq(n, allowed, "%s: the server saw %d requests, not %d", who, n,
                 allowed);
}

#endif
