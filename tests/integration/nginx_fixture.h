/* nginx_fixture.h — a real HTTP/1.1 server for the request tests: Debian's
 * nginx-light, started by the test as one foreground process (no daemon,
 * no master) with a config, root, logs and pid of the test's temp dir,
 * keep-alive for 1000 requests. Its access log has a line per request,
 * "$msec $request $connection": the server's own wall-clock time of each
 * and the serial number of the connection that carried it. Include
 * after harness.h. */
#ifndef RL_TEST_NGINX_FIXTURE_H
#define RL_TEST_NGINX_FIXTURE_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#define NGX_BIN "/usr/sbin/nginx"

struct ngx_site {
    const char *addr; /* a loopback address to listen on */
    int port;
    char log[300];    /* its access log */
    bool h2_tls;      /* HTTPS with HTTP/2 (a throwaway self-signed
                         certificate in h_dir) */
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

/* Start nginx serving h_dir/www (files a.txt .. e.txt) on each site;
 * skips when nginx-light is not installed. */
H_FN void ngx_start(struct ngx_site *sites, int n)
{
    if (access(NGX_BIN, X_OK) != 0)
        h_skip("nginx is not installed (apt-get install nginx-light)");
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
        char cert[400];
        snprintf(cert, sizeof cert, "%s/ngx-cert.pem", h_dir);
        if (sites[i].h2_tls && access(cert, F_OK) != 0) {
            char cmd[1200];
            snprintf(cmd, sizeof cmd,
                     "cd '%s' && openssl req -x509 -newkey rsa:2048 -nodes "
                     "-keyout ngx-key.pem -out ngx-cert.pem -days 1 "
                     "-subj /CN=127.0.0.1 2>/dev/null",
                     h_dir);
            cr_assert_eq(system(cmd), 0, "openssl req failed");
        }
        sites[i].port = ngx_free_port(sites[i].addr);
        snprintf(sites[i].log, sizeof sites[i].log, "%s/access.%d.log", h_dir,
                 i);
        fprintf(f, "  server {\n    listen %s:%d%s;\n    root %s/www;\n"
                   "    access_log %s reqs;\n",
                sites[i].addr, sites[i].port,
                sites[i].h2_tls ? " ssl http2" : "", h_dir, sites[i].log);
        if (sites[i].h2_tls)
            fprintf(f, "    ssl_certificate %1$s/ngx-cert.pem;\n"
                       "    ssl_certificate_key %1$s/ngx-key.pem;\n",
                    h_dir);
        fprintf(f, "%s  }\n", sites[i].extra != NULL ? sites[i].extra : "");
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

H_FN void ngx_truncate(const struct ngx_site *s)
{
    FILE *f = fopen(s->log, "w");
    if (f != NULL)
        fclose(f);
}

#endif
