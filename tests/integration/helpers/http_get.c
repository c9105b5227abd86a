/* http_get — GETs each PATH from 127.0.0.1:PORT with User-Agent UA, one
 * connection per path (Connection: close), reading each answer to the
 * server's close with recv. Links no zlib, so under the shim a libz.so.1
 * in its maps is one the shim loaded. Prints, before the first request
 * and after the last, whether one is mapped:
 *
 *   http_get PORT UA PATH...      -> libz_before=0|1, then libz_after=0|1
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Is a libz mapped into this process? */
static int libz_mapped(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[4096];
    int found = 0;
    if (f == NULL)
        return -1;
    while (!found && fgets(line, sizeof line, f) != NULL)
        found = strstr(line, "/libz.so") != NULL;
    fclose(f);
    return found;
}

static int get(int port, const char *ua, const char *path)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        perror("http_get: connect");
        return -1;
    }
    char req[512];
    int n = snprintf(req, sizeof req,
                     "GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
                     "User-Agent: %s\r\nConnection: close\r\n\r\n",
                     path, port, ua);
    if (send(fd, req, (size_t)n, 0) != n) {
        perror("http_get: send");
        close(fd);
        return -1;
    }
    char buf[512];
    ssize_t got;
    while ((got = recv(fd, buf, sizeof buf, 0)) > 0)
        ;
    close(fd);
    return got == 0 ? 0 : -1;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: http_get PORT UA PATH...\n");
        return 2;
    }
    int port = atoi(argv[1]);
    printf("libz_before=%d\n", libz_mapped());
    fflush(stdout);
    for (int i = 3; i < argc; i++)
        if (get(port, argv[2], argv[i]) != 0)
            return 1;
    printf("libz_after=%d\n", libz_mapped());
    return 0;
}
