/* Times a few commands side by side: one run of each in turn, ROUNDS times (after 3 rounds
 * not counted), so that a load that comes and goes on a shared machine falls on all of them
 * alike, and the ratio of their medians means something. Started with posix_spawn from C, so
 * the driver adds next to nothing to the short commands it times; standard output goes to
 * /dev/null. Prints each command's median wall time (10th and 90th percentiles) and median
 * CPU time (user + system, from wait4, the command's own children included).
 * Usage: interleave ROUNDS -- CMD ARGS... ';;' CMD ARGS... [';;' ...] */
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>

extern char **environ;

static int ascending(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    if (argc < 4 || strcmp(argv[2], "--") != 0 || atoi(argv[1]) < 1) {
        fprintf(stderr, "usage: %s ROUNDS -- CMD ARGS... ';;' CMD ARGS...\n", argv[0]);
        return 2;
    }
    int rounds = atoi(argv[1]), count = 0;
    char **commands[32];
    commands[count++] = &argv[3];
    for (int i = 3; i < argc; i++) {
        if (strcmp(argv[i], ";;") != 0) continue;
        if (count == 32) { fprintf(stderr, "at most 32 commands\n"); return 2; }
        argv[i] = NULL;
        commands[count++] = &argv[i + 1];
    }
    double *wall = calloc((size_t)(count * rounds), sizeof *wall);
    double *cpu = calloc((size_t)(count * rounds), sizeof *cpu);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    for (int round = -3; round < rounds; round++) {
        for (int c = 0; c < count; c++) {
            struct timespec start, end;
            struct rusage usage;
            pid_t pid;
            int status;
            clock_gettime(CLOCK_MONOTONIC, &start);
            if (posix_spawnp(&pid, commands[c][0], &actions, NULL, commands[c], environ) != 0) {
                perror(commands[c][0]);
                return 1;
            }
            wait4(pid, &status, 0, &usage);
            clock_gettime(CLOCK_MONOTONIC, &end);
            if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                fprintf(stderr, "%s failed (status %d)\n", commands[c][0], status);
                return 1;
            }
            if (round < 0) continue;
            wall[c * rounds + round] = (double)(end.tv_sec - start.tv_sec) * 1e3 + (double)(end.tv_nsec - start.tv_nsec) / 1e6;
            cpu[c * rounds + round] = (double)(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) * 1e3
                + (double)(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e3;
        }
    }
    for (int c = 0; c < count; c++) {
        double *w = wall + c * rounds, *u = cpu + c * rounds;
        qsort(w, (size_t)rounds, sizeof *w, ascending);
        qsort(u, (size_t)rounds, sizeof *u, ascending);
        printf("%s", commands[c][0]);
        for (char **arg = commands[c] + 1; *arg; arg++) printf(" %s", *arg);
        printf("\n  wall median %.2f ms (p10 %.2f, p90 %.2f), CPU median %.2f ms, n=%d\n",
               w[rounds / 2], w[rounds / 10], w[rounds * 9 / 10], u[rounds / 2], rounds);
    }
    return 0;
}
