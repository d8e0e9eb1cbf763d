// Attached readers for the fan-out benchmark: one process, one thread, N Unix-socket
// connections, the same kind of reader for confabd and for Redis pub/sub, so the two are
// compared with the same reading cost.
//
//   fanout-reader confab SOCKET COUNT READERS ID[,ID...] [--stamps] [--reasoning] [--timeout SECONDS]
//   fanout-reader redis  SOCKET COUNT READERS CHANNEL    [--timeout SECONDS]
//
// confab: reader i sends conversation.attach (no history) for ID number i % (number of IDs)
// and counts the lines that are message.delta notifications (message.reasoning with
// --reasoning: a thought's pieces, streamed by [[burst:N]] [[burst-thinking]]). redis: every reader SUBSCRIBEs
// to CHANNEL and counts the pushed messages. Both split what they read into lines and look
// at each one. Once every reader is attached it prints "ready"; when every reader has COUNT
// (or the timeout runs out) it prints one line of key=value figures and exits (status 0, or
// 3 after a timeout).
//
// With --stamps each delta's text (confab: written by the fake upstream's [[burst:N]] [[stamp]])
// or each message's payload (redis) starts with a CLOCK_MONOTONIC time in nanoseconds; the
// reader reads the same clock once per read(2) and prints the percentiles of the difference,
// in microseconds.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

struct reader {
    int fd;
    char *buffer;
    size_t used;
    long count;
    uint64_t last_ns;
    int payload_in;  // redis: lines until the payload of the message just counted
    int skipping;    // the rest of a line longer than the buffer is being dropped
};

enum { BUFFER_BYTES = 1 << 20 };

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void die(const char *what) {
    fprintf(stderr, "fanout-reader: %s: %s\n", what, strerror(errno));
    exit(2);
}

static int connect_unix(const char *path) {
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) die("socket");
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof address.sun_path) {
        fprintf(stderr, "fanout-reader: socket path too long\n");
        exit(2);
    }
    strcpy(address.sun_path, path);
    if (connect(fd, (struct sockaddr *)&address, sizeof address) != 0) die("connect");
    return fd;
}

static void send_all(int fd, const char *data, size_t length) {
    while (length > 0) {
        ssize_t n = send(fd, data, length, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR) continue;
            die("send");
        }
        data += n;
        length -= (size_t)n;
    }
}

// Reads (blocking) until a whole line containing `needle` has arrived; keeps what follows it.
static void await_line(struct reader *r, const char *needle) {
    for (;;) {
        char *start = r->buffer, *end = r->buffer + r->used, *newline;
        while ((newline = memchr(start, '\n', (size_t)(end - start))) != NULL) {
            if (memmem(start, (size_t)(newline - start), needle, strlen(needle)) != NULL) {
                r->used = (size_t)(end - newline - 1);
                memmove(r->buffer, newline + 1, r->used);
                return;
            }
            start = newline + 1;
        }
        if (r->used == BUFFER_BYTES) {
            fprintf(stderr, "fanout-reader: no '%s' in the first %d bytes\n", needle, BUFFER_BYTES);
            exit(2);
        }
        ssize_t n = read(r->fd, r->buffer + r->used, BUFFER_BYTES - r->used);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            fprintf(stderr, "fanout-reader: connection closed while waiting for '%s'\n", needle);
            exit(2);
        }
        r->used += (size_t)n;
    }
}

static int compare_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    if (argc < 6) {
        fprintf(stderr, "usage: fanout-reader confab SOCKET COUNT READERS ID[,ID...] [--stamps] [--reasoning] [--timeout S]\n"
                        "       fanout-reader redis SOCKET COUNT READERS CHANNEL [--timeout S]\n");
        return 2;
    }
    int redis = strcmp(argv[1], "redis") == 0;
    const char *path = argv[2];
    long count = atol(argv[3]);
    int readers = atoi(argv[4]);
    char *targets = argv[5];
    int stamps = 0, reasoning = 0;
    double timeout = 120;
    for (int i = 6; i < argc; i++) {
        if (strcmp(argv[i], "--stamps") == 0) stamps = 1;
        else if (strcmp(argv[i], "--reasoning") == 0) reasoning = 1;
        else if (strcmp(argv[i], "--timeout") == 0 && i + 1 < argc) timeout = atof(argv[++i]);
        else {
            fprintf(stderr, "fanout-reader: unknown argument %s\n", argv[i]);
            return 2;
        }
    }
    if (count <= 0 || readers <= 0) {
        fprintf(stderr, "fanout-reader: COUNT and READERS must be positive\n");
        return 2;
    }

    char *ids[4096];
    int id_count = 0;
    for (char *id = strtok(targets, ","); id != NULL && id_count < 4096; id = strtok(NULL, ",")) ids[id_count++] = id;

    struct reader *all = calloc((size_t)readers, sizeof *all);
    int epoll = epoll_create1(EPOLL_CLOEXEC);
    if (all == NULL || epoll < 0) die("set-up");
    for (int i = 0; i < readers; i++) {
        struct reader *r = &all[i];
        r->fd = connect_unix(path);
        r->buffer = malloc(BUFFER_BYTES);
        if (r->buffer == NULL) die("malloc");
        char request[512];
        int length;
        if (redis) {
            length = snprintf(request, sizeof request, "SUBSCRIBE %s\r\n", ids[0]);
        } else {
            length = snprintf(request, sizeof request,
                              "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"conversation.attach\","
                              "\"params\":{\"conversation\":\"%s\",\"history\":0}}\n", ids[i % id_count]);
        }
        send_all(r->fd, request, (size_t)length);
        // Redis confirms with the subscription count (":1"), confabd with the response to id 1.
        await_line(r, redis ? ":" : "\"id\":1");
        fcntl(r->fd, F_SETFL, fcntl(r->fd, F_GETFL) | O_NONBLOCK);
        struct epoll_event event = {.events = EPOLLIN, .data.ptr = r};
        if (epoll_ctl(epoll, EPOLL_CTL_ADD, r->fd, &event) != 0) die("epoll_ctl");
    }
    printf("ready\n");
    fflush(stdout);

    const char *needle = redis ? "message\r" : reasoning ? "\"message.reasoning\"" : "\"message.delta\"";
    size_t needle_length = strlen(needle);
    long expected = count * readers, delivered = 0;
    int complete = 0;
    uint64_t *samples = NULL;
    long sample_count = 0;
    if (stamps) {
        samples = malloc((size_t)expected * sizeof *samples);
        if (samples == NULL) die("malloc samples");
    }
    uint64_t first_ns = 0, deadline = now_ns() + (uint64_t)(timeout * 1e9);
    int timed_out = 0;
    struct epoll_event events[256];
    while (complete < readers) {
        uint64_t now = now_ns();
        if (now >= deadline) {
            timed_out = 1;
            break;
        }
        int ready = epoll_wait(epoll, events, 256, (int)((deadline - now) / 1000000) + 1);
        if (ready < 0) {
            if (errno == EINTR) continue;
            die("epoll_wait");
        }
        for (int e = 0; e < ready; e++) {
            struct reader *r = events[e].data.ptr;
            ssize_t n = read(r->fd, r->buffer + r->used, BUFFER_BYTES - r->used);
            if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
            if (n <= 0) {
                fprintf(stderr, "fanout-reader: a connection closed after %ld of %ld\n", r->count, count);
                epoll_ctl(epoll, EPOLL_CTL_DEL, r->fd, NULL);
                complete++;
                continue;
            }
            uint64_t arrived = now_ns();
            if (first_ns == 0) first_ns = arrived;
            r->used += (size_t)n;
            char *start = r->buffer, *end = r->buffer + r->used, *newline;
            if (r->skipping) {
                newline = memchr(start, '\n', (size_t)(end - start));
                if (newline == NULL) {
                    r->used = 0;
                    continue;
                }
                r->skipping = 0;
                start = newline + 1;
            }
            long before = r->count;
            while ((newline = memchr(start, '\n', (size_t)(end - start))) != NULL) {
                size_t line_length = (size_t)(newline - start);
                if (r->payload_in > 0) {
                    // A pushed message is "*3", "$7", "message", "$n", channel, "$n", payload.
                    if (--r->payload_in == 0 && stamps) {
                        uint64_t stamp = strtoull(start, NULL, 10);
                        if (stamp > 0 && stamp <= arrived && sample_count < expected) samples[sample_count++] = arrived - stamp;
                    }
                    start = newline + 1;
                    continue;
                }
                int match = redis ? (line_length == needle_length && memcmp(start, needle, needle_length) == 0)
                                  : memmem(start, line_length, needle, needle_length) != NULL;
                if (match) {
                    r->count++;
                    if (redis) r->payload_in = 4;
                    if (stamps && !redis) {
                        char *content = memmem(start, line_length, "\"content\":\"", 11);
                        if (content != NULL) {
                            uint64_t stamp = strtoull(content + 11, NULL, 10);
                            if (stamp > 0 && stamp <= arrived && sample_count < expected) samples[sample_count++] = arrived - stamp;
                        }
                    }
                }
                start = newline + 1;
            }
            r->used = (size_t)(end - start);
            memmove(r->buffer, start, r->used);
            if (r->used == BUFFER_BYTES) {
                // Only a reply's final message is this long (its whole text): not a delta.
                r->used = 0;
                r->skipping = 1;
            }
            if (r->count > before) {
                delivered += r->count - before;
                r->last_ns = arrived;
                if (before < count && r->count >= count) {
                    complete++;
                    // Done: what follows (the reply's final message) is not read.
                    epoll_ctl(epoll, EPOLL_CTL_DEL, r->fd, NULL);
                }
            }
        }
    }
    uint64_t last_ns = 0;
    int finished = 0;
    for (int i = 0; i < readers; i++) {
        if (all[i].last_ns > last_ns) last_ns = all[i].last_ns;
        if (all[i].count >= count) finished++;
    }
    printf("delivered=%ld expected=%ld complete=%d readers=%d first_ns=%llu last_ns=%llu timed_out=%d",
           delivered, expected, finished, readers, (unsigned long long)first_ns, (unsigned long long)last_ns, timed_out);
    if (stamps && sample_count > 0) {
        qsort(samples, (size_t)sample_count, sizeof *samples, compare_u64);
#define AT(q) (samples[(long)((double)(sample_count - 1) * (q))] / 1000.0)
        printf(" samples=%ld p50_us=%.1f p99_us=%.1f p999_us=%.1f max_us=%.1f", sample_count, AT(0.5), AT(0.99), AT(0.999),
               samples[sample_count - 1] / 1000.0);
    }
    printf("\n");
    return timed_out ? 3 : 0;
}
