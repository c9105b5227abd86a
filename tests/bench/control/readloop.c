/* readloop N — N one-byte reads of /dev/zero, an fd no preload marks:
 * recv_overhead.py counts the instructions of two such runs under
 * callgrind, so that their difference is N reads' and nothing of the
 * start-up. */
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 0;
    int fd = open("/dev/zero", O_RDONLY);
    char c;
    for (long i = 0; i < n; i++)
        if (read(fd, &c, 1) != 1)
            return 1;
    return 0;
}
