// Counts calls to the allocator, for the JSON benchmark's allocations per operation.
// Loaded with LD_PRELOAD; the benchmark reads the count through confab_malloc_count().
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>
#include <stdatomic.h>

static atomic_long calls;
static void *(*real_malloc)(size_t);
static void *(*real_calloc)(size_t, size_t);
static void *(*real_realloc)(void *, size_t);
static int (*real_posix_memalign)(void **, size_t, size_t);
static void *(*real_aligned_alloc)(size_t, size_t);

// dlsym may call calloc before real_calloc is known: serve that from a static arena.
static char arena[4096];
static size_t arena_used;

long confab_malloc_count(void) { return atomic_load(&calls); }

void *malloc(size_t size) {
    if (!real_malloc) real_malloc = dlsym(RTLD_NEXT, "malloc");
    atomic_fetch_add(&calls, 1);
    return real_malloc(size);
}

void *calloc(size_t count, size_t size) {
    if (!real_calloc) {
        static int resolving;
        if (resolving) {
            size_t bytes = (count * size + 15) & ~(size_t)15;
            if (arena_used + bytes > sizeof arena) return NULL;
            void *p = arena + arena_used;
            arena_used += bytes;
            return p;
        }
        resolving = 1;
        real_calloc = dlsym(RTLD_NEXT, "calloc");
        resolving = 0;
    }
    atomic_fetch_add(&calls, 1);
    return real_calloc(count, size);
}

static void (*real_free)(void *);

void free(void *pointer) {
    if ((char *)pointer >= arena && (char *)pointer < arena + sizeof arena) return;
    if (!real_free) real_free = dlsym(RTLD_NEXT, "free");
    real_free(pointer);
}

void *realloc(void *pointer, size_t size) {
    if (!real_realloc) real_realloc = dlsym(RTLD_NEXT, "realloc");
    atomic_fetch_add(&calls, 1);
    return real_realloc(pointer, size);
}

int posix_memalign(void **out, size_t alignment, size_t size) {
    if (!real_posix_memalign) real_posix_memalign = dlsym(RTLD_NEXT, "posix_memalign");
    atomic_fetch_add(&calls, 1);
    return real_posix_memalign(out, alignment, size);
}

void *aligned_alloc(size_t alignment, size_t size) {
    if (!real_aligned_alloc) real_aligned_alloc = dlsym(RTLD_NEXT, "aligned_alloc");
    atomic_fetch_add(&calls, 1);
    return real_aligned_alloc(alignment, size);
}
