/* The floor for a client's cold start: connect to confabd's socket, send one
 * JSON-RPC request, print the response line, exit. scripts/bench.py times it
 * next to `confab ls` so the ratio shows what the Swift client adds.
 * Usage: rpcclient SOCKET_PATH 'JSON-REQUEST' */
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc != 3) { fprintf(stderr, "usage: %s SOCKET REQUEST\n", argv[0]); return 2; }
    struct sockaddr_un addr = { .sun_family = AF_UNIX };
    if (strlen(argv[1]) >= sizeof addr.sun_path) { fprintf(stderr, "socket path too long\n"); return 2; }
    strcpy(addr.sun_path, argv[1]);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof addr) != 0) { perror("connect"); return 1; }
    size_t len = strlen(argv[2]);
    char request[65536];
    if (len + 1 > sizeof request) { fprintf(stderr, "request too long\n"); return 2; }
    memcpy(request, argv[2], len);
    request[len++] = '\n';
    for (size_t sent = 0; sent < len;) {
        ssize_t n = write(fd, request + sent, len - sent);
        if (n <= 0) { perror("write"); return 1; }
        sent += (size_t)n;
    }
    /* The daemon may send notifications first; the answer is the line with our id. */
    static char buffer[1 << 20];
    size_t used = 0;
    for (;;) {
        ssize_t n = read(fd, buffer + used, sizeof buffer - used - 1);
        if (n <= 0) { fprintf(stderr, "connection closed before the answer\n"); return 1; }
        used += (size_t)n;
        buffer[used] = 0;
        char *line = buffer, *end;
        while ((end = strchr(line, '\n')) != NULL) {
            *end = 0;
            if (strstr(line, "\"id\":1") || strstr(line, "\"id\": 1")) {
                puts(line);
                close(fd);
                return 0;
            }
            line = end + 1;
        }
        used = (size_t)(buffer + used - line);
        memmove(buffer, line, used);
        if (used >= sizeof buffer - 1) { fprintf(stderr, "line too long\n"); return 1; }
    }
}
