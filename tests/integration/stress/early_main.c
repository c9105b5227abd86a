/* early_main.c — the program linked against early.c's library: after its
 * constructor (and the shim's) ran, three more connects, then it prints
 * what everyone saw:  early_ok=N early_denied=N early_other=N
 * main_ok=N main_denied=N main_other=N */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

extern _Atomic int early_ok, early_denied, early_other;
void early_join(void);

int main(void)
{
    early_join();
    int port = (int)strtol(getenv("EARLY_PORT"), NULL, 10);
    int ok = 0, denied = 0, other = 0;
    for (int i = 0; i < 3; i++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in a = {.sin_family = AF_INET,
                                .sin_port = htons(port)};
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0)
            ok += send(fd, "main\n", 5, MSG_NOSIGNAL) == 5;
        else if (errno == EAGAIN)
            denied++;
        else
            other++;
        close(fd);
    }
    printf("early_ok=%d\nearly_denied=%d\nearly_other=%d\n"
           "main_ok=%d\nmain_denied=%d\nmain_other=%d\n",
           early_ok, early_denied, early_other, ok, denied, other);
    return 0;
}
