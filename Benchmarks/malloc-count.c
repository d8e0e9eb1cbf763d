// An LD_PRELOAD allocation counter for the benchmark's allocations per delta:
//
//   cc -O2 -shared -fPIC -o malloc-count.so malloc-count.c
//   MALLOC_COUNT_FILE=/tmp/counts LD_PRELOAD=./malloc-count.so confabd ...
//
// Every malloc, calloc, realloc and aligned allocation adds one to a 64-bit counter (and its
// size to a second) kept in a shared mapping of MALLOC_COUNT_FILE, so the benchmark reads the
// running totals at any moment, without stopping the process or asking it anything. The
// allocations themselves are glibc's (__libc_*), so no dlsym (which allocates) is needed.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);

static uint64_t *counters;  // [0] allocations, [1] bytes asked for

__attribute__((constructor)) static void open_counters(void) {
    const char *path = getenv("MALLOC_COUNT_FILE");
    if (path == NULL) return;
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return;
    if (ftruncate(fd, 4096) == 0) {
        void *map = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (map != MAP_FAILED) counters = map;
    }
    close(fd);
}

static inline void count(size_t bytes) {
    if (counters != NULL) {
        __atomic_fetch_add(&counters[0], 1, __ATOMIC_RELAXED);
        __atomic_fetch_add(&counters[1], bytes, __ATOMIC_RELAXED);
    }
}

void *malloc(size_t size) {
    count(size);
    return __libc_malloc(size);
}

void *calloc(size_t n, size_t size) {
    count(n * size);
    return __libc_calloc(n, size);
}

void *realloc(void *pointer, size_t size) {
    count(size);
    return __libc_realloc(pointer, size);
}

void free(void *pointer) { __libc_free(pointer); }

void *memalign(size_t alignment, size_t size) {
    count(size);
    return __libc_memalign(alignment, size);
}

void *aligned_alloc(size_t alignment, size_t size) {
    count(size);
    return __libc_memalign(alignment, size);
}

int posix_memalign(void **out, size_t alignment, size_t size) {
    if (alignment % sizeof(void *) != 0 || (alignment & (alignment - 1)) != 0) return EINVAL;
    count(size);
    void *pointer = __libc_memalign(alignment, size);
    if (pointer == NULL) return ENOMEM;
    *out = pointer;
    return 0;
}

void *valloc(size_t size) {
    count(size);
    return __libc_memalign((size_t)sysconf(_SC_PAGESIZE), size);
}
