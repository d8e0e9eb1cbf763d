/*
 * The power-cut simulator's recorder: an LD_PRELOAD library for confabd.
 *
 * It sits between confabd and libc and writes a journal of everything that changes the data
 * directory: opens that create or truncate, write and pwrite (position and length), ftruncate,
 * rename, unlink, mkdir, and every fsync/fdatasync. What a power cut can keep is decided by
 * the syncs alone, so a sync records its result in full:
 *
 *   - fdatasync/fsync of a file copies the file's bytes as they are when the call starts into
 *     a blob, and once the real call has succeeded writes "sync INODE BLOB SIZE". Bytes written
 *     before the call are covered by it; bytes written while it runs may not be, so the copy
 *     is taken first (sound: the blob holds only what the sync is certain to have stored).
 *   - fsync of a directory lists the directory (name, inode, type) at the start and, once the
 *     call has succeeded, writes "dirsync DIR ENTRY..." with that listing.
 *
 * A line is written only after the real call returned success, and before the caller is told:
 * whatever confabd announced after a sync is preceded in the journal by that sync. The journal
 * is an ordinary file written with write(2), so it survives the SIGKILL that ends the run.
 * scripts/powercut.py reads it and rebuilds the directory as a disk would hold it.
 *
 * Environment:
 *   CONFAB_POWERCUT_DIR      the data directory to watch (required; nothing else is recorded)
 *   CONFAB_POWERCUT_JOURNAL  a directory outside it for "journal" and "blobs/" (required)
 *   CONFAB_POWERCUT_CONTROL  optional directory of control files, read at every sync:
 *                              "hold"  while it exists, syncs wait (a disk that has not
 *                                      answered yet; at most 120 s, then they go on),
 *                                      after writing "held NAME" to the journal
 *                              "fail"  while it exists, syncs fail with the errno named in
 *                                      it ("EIO" or "ENOSPC") without syncing
 *
 * Only the watched directory is recorded; sockets, the journal itself and everything else go
 * straight to libc. Built with: cc -shared -fPIC -O2 -o libconfab-powercut.so shim.c -ldl -lpthread
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

/* Per-descriptor verdict, so a write to a socket costs one array read. */
enum { FD_UNKNOWN = 0, FD_WATCHED = 1, FD_OTHER = 2 };
#define MAX_FD 65536
static _Atomic unsigned char fd_class[MAX_FD];

static char watched[PATH_MAX];      /* realpath of the data directory */
static size_t watched_len;
/* Half of PATH_MAX: room for the names appended to them. */
static char journal_dir[PATH_MAX / 2];
static char control_dir[PATH_MAX / 2];
static int journal_fd = -1;
static int enabled;
static pthread_mutex_t journal_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_ulong blob_counter;

static ssize_t (*real_write)(int, const void *, size_t);
static ssize_t (*real_pwrite)(int, const void *, size_t, off_t);
static ssize_t (*real_pwrite64)(int, const void *, size_t, off_t);
static int (*real_open)(const char *, int, ...);
static int (*real_open64)(const char *, int, ...);
static int (*real_openat)(int, const char *, int, ...);
static int (*real_openat64)(int, const char *, int, ...);
static int (*real_close)(int);
static int (*real_fsync)(int);
static int (*real_fdatasync)(int);
static int (*real_ftruncate)(int, off_t);
static int (*real_ftruncate64)(int, off_t);
static int (*real_rename)(const char *, const char *);
static int (*real_unlink)(const char *);
static int (*real_mkdir)(const char *, mode_t);
static int (*real_dup2)(int, int);
static int (*real_dup3)(int, int, int);

__attribute__((constructor)) static void powercut_init(void) {
    real_write = dlsym(RTLD_NEXT, "write");
    real_pwrite = dlsym(RTLD_NEXT, "pwrite");
    real_pwrite64 = dlsym(RTLD_NEXT, "pwrite64");
    real_open = dlsym(RTLD_NEXT, "open");
    real_open64 = dlsym(RTLD_NEXT, "open64");
    real_openat = dlsym(RTLD_NEXT, "openat");
    real_openat64 = dlsym(RTLD_NEXT, "openat64");
    real_close = dlsym(RTLD_NEXT, "close");
    real_fsync = dlsym(RTLD_NEXT, "fsync");
    real_fdatasync = dlsym(RTLD_NEXT, "fdatasync");
    real_ftruncate = dlsym(RTLD_NEXT, "ftruncate");
    real_ftruncate64 = dlsym(RTLD_NEXT, "ftruncate64");
    real_rename = dlsym(RTLD_NEXT, "rename");
    real_unlink = dlsym(RTLD_NEXT, "unlink");
    real_mkdir = dlsym(RTLD_NEXT, "mkdir");
    real_dup2 = dlsym(RTLD_NEXT, "dup2");
    real_dup3 = dlsym(RTLD_NEXT, "dup3");

    const char *dir = getenv("CONFAB_POWERCUT_DIR");
    const char *journal = getenv("CONFAB_POWERCUT_JOURNAL");
    const char *control = getenv("CONFAB_POWERCUT_CONTROL");
    if (!dir || !journal) return;
    /* The data directory may not exist yet: resolve what does, keep the rest as given. */
    if (!realpath(dir, watched)) {
        if (strlen(dir) >= sizeof watched) return;
        strcpy(watched, dir);
    }
    watched_len = strlen(watched);
    while (watched_len > 1 && watched[watched_len - 1] == '/') watched[--watched_len] = 0;
    if (strlen(journal) >= sizeof journal_dir || (control && strlen(control) >= sizeof control_dir)) {
        fprintf(stderr, "powercut shim: journal or control path too long\n");
        _exit(97);
    }
    strcpy(journal_dir, journal);
    if (control) strcpy(control_dir, control);
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/blobs", journal_dir);
    real_mkdir(path, 0700);
    snprintf(path, sizeof path, "%s/journal", journal_dir);
    journal_fd = real_open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (journal_fd < 0) {
        fprintf(stderr, "powercut shim: cannot open %s: %s\n", path, strerror(errno));
        _exit(97);
    }
    /* Keep it away from the range confabd's own descriptors use. */
    int high = fcntl(journal_fd, F_DUPFD_CLOEXEC, 900);
    if (high >= 0) { real_close(journal_fd); journal_fd = high; }
    if (journal_fd < MAX_FD) atomic_store(&fd_class[journal_fd], FD_OTHER);
    enabled = 1;
}

/* One journal line, written whole (one write under the lock, so threads never interleave). */
static void journal(const char *format, ...) {
    char small[4096];
    char *line = small;
    va_list args, again;
    va_start(args, format);
    va_copy(again, args);
    int n = vsnprintf(small, sizeof small - 1, format, args);
    va_end(args);
    if (n >= 0 && (size_t)n >= sizeof small - 1) {
        /* A directory listing of thousands of logs: never cut a line short. */
        line = malloc((size_t)n + 2);
        if (!line) { fprintf(stderr, "powercut shim: out of memory\n"); _exit(97); }
        vsnprintf(line, (size_t)n + 1, format, again);
    }
    va_end(again);
    if (n < 0) return;
    line[n++] = '\n';
    int saved = errno;
    pthread_mutex_lock(&journal_lock);
    size_t done = 0;
    while (done < (size_t)n) {
        ssize_t w = real_write(journal_fd, line + done, n - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) { fprintf(stderr, "powercut shim: journal write failed\n"); _exit(97); }
        done += (size_t)w;
    }
    pthread_mutex_unlock(&journal_lock);
    if (line != small) free(line);
    errno = saved;
}

/* The path relative to the watched directory ("." for itself), or NULL if outside. */
static const char *relative(const char *absolute) {
    if (strncmp(absolute, watched, watched_len) != 0) return NULL;
    if (absolute[watched_len] == 0) return ".";
    if (absolute[watched_len] != '/') return NULL;
    return absolute + watched_len + 1;
}

static int fd_path(int fd, char *out, size_t size) {
    char link[64];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, out, size - 1);
    if (n <= 0) return -1;
    out[n] = 0;
    return 0;
}

static int classify(int fd) {
    if (!enabled || fd < 0) return FD_OTHER;
    if (fd >= MAX_FD) {
        char path[PATH_MAX];
        return fd_path(fd, path, sizeof path) == 0 && relative(path) ? FD_WATCHED : FD_OTHER;
    }
    int known = atomic_load(&fd_class[fd]);
    if (known != FD_UNKNOWN) return known;
    char path[PATH_MAX];
    int verdict = fd_path(fd, path, sizeof path) == 0 && relative(path) ? FD_WATCHED : FD_OTHER;
    atomic_store(&fd_class[fd], (unsigned char)verdict);
    return verdict;
}

static void forget(int fd) {
    if (fd >= 0 && fd < MAX_FD) atomic_store(&fd_class[fd], FD_UNKNOWN);
}

static unsigned long inode_of(int fd) {
    struct stat info;
    return fstat(fd, &info) == 0 ? (unsigned long)info.st_ino : 0;
}

/* An absolute, resolved form of a path whose last component may not exist yet. */
static int resolve(const char *path, char *out) {
    char copy[PATH_MAX], parent[PATH_MAX];
    if (strlen(path) >= sizeof copy) return -1;
    strcpy(copy, path);
    char *slash = strrchr(copy, '/');
    const char *name;
    if (!slash) {
        if (!getcwd(parent, sizeof parent)) return -1;
        name = copy;
    } else {
        *slash = 0;
        name = slash + 1;
        if (!realpath(copy[0] ? copy : "/", parent)) return -1;
    }
    if (snprintf(out, PATH_MAX, "%s/%s", strcmp(parent, "/") == 0 ? "" : parent, name) >= PATH_MAX) return -1;
    return 0;
}

/* Names in the journal: confabd's are plain, but escape anything that would split a line. */
static void escape(const char *in, char *out, size_t size) {
    size_t o = 0;
    for (; *in && o + 4 < size; in++) {
        unsigned char c = (unsigned char)*in;
        if (c <= ' ' || c == '%' || c >= 0x7f) o += (size_t)snprintf(out + o, size - o, "%%%02X", c);
        else out[o++] = (char)c;
    }
    out[o] = 0;
}

static void after_open(int fd, int flags) {
    if (!enabled || fd < 0) return;
    forget(fd);
    if (classify(fd) != FD_WATCHED) return;
    char path[PATH_MAX], name[PATH_MAX * 3];
    if (fd_path(fd, path, sizeof path) != 0) return;
    escape(relative(path), name, sizeof name);
    struct stat info;
    if (fstat(fd, &info) != 0) return;
    if (S_ISDIR(info.st_mode)) return;
    /* A new file gets a new life in the journal: an inode number can be reused. */
    if ((flags & O_CREAT) && info.st_size == 0 && (flags & O_EXCL))
        journal("create %lu %s", (unsigned long)info.st_ino, name);
    else if (flags & (O_CREAT | O_TRUNC))
        journal("open %lu %s flags=%#x size=%lld", (unsigned long)info.st_ino, name, flags, (long long)info.st_size);
}

/* Waits while the "hold" control file exists; returns the errno "fail" names, or 0. */
static int control(const char *name) {
    if (!control_dir[0]) return 0;
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/hold", control_dir);
    if (access(path, F_OK) == 0) {
        /* Said before waiting: a test waits for this line, then cuts the power. */
        journal("held %s", name);
        struct timespec pause = { 0, 1000000 };
        for (int waited = 0; access(path, F_OK) == 0 && waited < 120000; waited++) nanosleep(&pause, NULL);
    }
    snprintf(path, sizeof path, "%s/fail", control_dir);
    int fd = real_open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    char word[32] = { 0 };
    ssize_t n = read(fd, word, sizeof word - 1);
    real_close(fd);
    if (n > 0 && strncmp(word, "ENOSPC", 6) == 0) return ENOSPC;
    return EIO;
}

static int copy_file(int written_fd, const char *blob, long long *size) {
    /* confabd's descriptor is write-only: read the same file through a descriptor of our own. */
    char link[64];
    snprintf(link, sizeof link, "/proc/self/fd/%d", written_fd);
    int fd = real_open(link, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    int out = real_open(blob, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (out < 0) { real_close(fd); return -1; }
    char buffer[1 << 16];
    off_t offset = 0;
    for (;;) {
        ssize_t n = pread(fd, buffer, sizeof buffer, offset);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) { real_close(out); real_close(fd); return -1; }
        if (n == 0) break;
        ssize_t done = 0;
        while (done < n) {
            ssize_t w = real_write(out, buffer + done, (size_t)(n - done));
            if (w < 0 && errno == EINTR) continue;
            if (w <= 0) { real_close(out); real_close(fd); return -1; }
            done += w;
        }
        offset += n;
    }
    real_close(out);
    real_close(fd);
    *size = (long long)offset;
    return 0;
}

static int list_directory(const char *path, char *out, size_t size) {
    DIR *handle = opendir(path);
    if (!handle) return -1;
    size_t o = 0;
    out[0] = 0;
    struct dirent *entry;
    while ((entry = readdir(handle))) {
        if (strcmp(entry->d_name, ".") == 0 || strcmp(entry->d_name, "..") == 0) continue;
        char name[NAME_MAX * 3 + 1];
        escape(entry->d_name, name, sizeof name);
        char type = entry->d_type == DT_DIR ? 'd' : entry->d_type == DT_REG ? 'f' : 'o';
        int n = snprintf(out + o, size - o, " %s:%lu:%c", name, (unsigned long)entry->d_ino, type);
        if (n < 0 || (size_t)n >= size - o) { closedir(handle); return -1; }
        o += (size_t)n;
    }
    closedir(handle);
    return 0;
}

static int synced(int fd, int (*real)(int), const char *kind) {
    if (classify(fd) != FD_WATCHED) return real(fd);
    struct stat info;
    if (fstat(fd, &info) != 0) return real(fd);
    char path[PATH_MAX], name[PATH_MAX * 3];
    if (fd_path(fd, path, sizeof path) != 0 || !relative(path)) return real(fd);
    escape(relative(path), name, sizeof name);
    int failure = control(name);
    if (failure) {
        journal("syncfail %s %lu %s errno=%d", kind, (unsigned long)info.st_ino, name, failure);
        errno = failure;
        return -1;
    }
    if (S_ISDIR(info.st_mode)) {
        static char listing[8 << 20];     /* about 200,000 entries */
        static pthread_mutex_t listing_lock = PTHREAD_MUTEX_INITIALIZER;
        pthread_mutex_lock(&listing_lock);
        if (list_directory(path, listing, sizeof listing) != 0) {
            pthread_mutex_unlock(&listing_lock);
            journal("unrecorded dirsync %s (listing failed)", name);
            return real(fd);
        }
        int result = real(fd);
        if (result == 0) journal("dirsync %s%s", name, listing);
        else journal("syncfail %s %lu %s errno=%d", kind, (unsigned long)info.st_ino, name, errno);
        pthread_mutex_unlock(&listing_lock);
        return result;
    }
    unsigned long number = atomic_fetch_add(&blob_counter, 1);
    char blob[PATH_MAX];
    /* The pid too: confabd re-executes itself at start, and the counter starts again. */
    snprintf(blob, sizeof blob, "%s/blobs/%d-%lu", journal_dir, (int)getpid(), number);
    long long size = 0;
    if (copy_file(fd, blob, &size) != 0) {
        journal("unrecorded %s %lu %s (copy failed)", kind, (unsigned long)info.st_ino, name);
        return real(fd);
    }
    int result = real(fd);
    int saved = errno;
    if (result == 0) journal("sync %lu %d-%lu %lld %s %s", (unsigned long)info.st_ino, (int)getpid(), number, size, kind, name);
    else journal("syncfail %s %lu %s errno=%d", kind, (unsigned long)info.st_ino, name, saved);
    errno = saved;
    return result;
}

int fsync(int fd) { return synced(fd, real_fsync, "fsync"); }
int fdatasync(int fd) { return synced(fd, real_fdatasync, "fdatasync"); }

static void record_write(int fd, const char *kind, ssize_t n, long long offset) {
    if (n <= 0 || classify(fd) != FD_WATCHED) return;
    if (offset < 0) offset = (long long)lseek(fd, 0, SEEK_CUR) - n;
    journal("%s %lu %lld %zd", kind, inode_of(fd), offset, n);
}

ssize_t write(int fd, const void *buffer, size_t count) {
    ssize_t n = real_write(fd, buffer, count);
    if (n > 0 && enabled) { int saved = errno; record_write(fd, "write", n, -1); errno = saved; }
    return n;
}

ssize_t pwrite(int fd, const void *buffer, size_t count, off_t offset) {
    ssize_t n = real_pwrite(fd, buffer, count, offset);
    if (n > 0 && enabled) { int saved = errno; record_write(fd, "pwrite", n, offset); errno = saved; }
    return n;
}

ssize_t pwrite64(int fd, const void *buffer, size_t count, off_t offset) {
    ssize_t n = real_pwrite64(fd, buffer, count, offset);
    if (n > 0 && enabled) { int saved = errno; record_write(fd, "pwrite", n, offset); errno = saved; }
    return n;
}

static int truncated(int fd, off_t length, int (*real)(int, off_t)) {
    int result = real(fd, length);
    if (result == 0 && enabled && classify(fd) == FD_WATCHED) {
        int saved = errno;
        journal("truncate %lu %lld", inode_of(fd), (long long)length);
        errno = saved;
    }
    return result;
}

int ftruncate(int fd, off_t length) { return truncated(fd, length, real_ftruncate); }
int ftruncate64(int fd, off_t length) { return truncated(fd, length, real_ftruncate64); }

#define OPEN_MODE(flags) \
    mode_t mode = 0; \
    if ((flags) & (O_CREAT | O_TMPFILE)) { va_list args; va_start(args, flags); mode = va_arg(args, mode_t); va_end(args); }

int open(const char *path, int flags, ...) {
    OPEN_MODE(flags)
    int fd = real_open(path, flags, mode);
    if (fd >= 0) { int saved = errno; after_open(fd, flags); errno = saved; }
    return fd;
}

int open64(const char *path, int flags, ...) {
    OPEN_MODE(flags)
    int fd = real_open64(path, flags, mode);
    if (fd >= 0) { int saved = errno; after_open(fd, flags); errno = saved; }
    return fd;
}

int openat(int dirfd, const char *path, int flags, ...) {
    OPEN_MODE(flags)
    int fd = real_openat(dirfd, path, flags, mode);
    if (fd >= 0) { int saved = errno; after_open(fd, flags); errno = saved; }
    return fd;
}

int openat64(int dirfd, const char *path, int flags, ...) {
    OPEN_MODE(flags)
    int fd = real_openat64(dirfd, path, flags, mode);
    if (fd >= 0) { int saved = errno; after_open(fd, flags); errno = saved; }
    return fd;
}

int close(int fd) {
    forget(fd);
    return real_close(fd);
}

int dup2(int old, int new) {
    int result = real_dup2(old, new);
    if (result >= 0) forget(result);
    return result;
}

int dup3(int old, int new, int flags) {
    int result = real_dup3(old, new, flags);
    if (result >= 0) forget(result);
    return result;
}

/* The watched-relative, escaped form of a path, or 0 if it is outside. */
static int watched_name(const char *path, char *name, size_t size) {
    char absolute[PATH_MAX];
    if (!enabled || resolve(path, absolute) != 0) return 0;
    const char *inside = relative(absolute);
    if (!inside) return 0;
    escape(inside, name, size);
    return 1;
}

int rename(const char *from, const char *to) {
    char a[PATH_MAX * 3], b[PATH_MAX * 3];
    int watch = watched_name(from, a, sizeof a) && watched_name(to, b, sizeof b);
    int result = real_rename(from, to);
    if (result == 0 && watch) { int saved = errno; journal("rename %s %s", a, b); errno = saved; }
    return result;
}

int unlink(const char *path) {
    char name[PATH_MAX * 3];
    int watch = watched_name(path, name, sizeof name);
    int result = real_unlink(path);
    if (result == 0 && watch) { int saved = errno; journal("unlink %s", name); errno = saved; }
    return result;
}

int mkdir(const char *path, mode_t mode) {
    char name[PATH_MAX * 3];
    int result = real_mkdir(path, mode);
    if (result == 0 && watched_name(path, name, sizeof name)) {
        int saved = errno;
        struct stat info;
        journal("mkdir %s %lu", name, stat(path, &info) == 0 ? (unsigned long)info.st_ino : 0UL);
        errno = saved;
    }
    return result;
}
