// libuv, plus the peer credentials of a Unix socket, which Swift cannot reach through
// Glibc: glibc declares struct ucred only under _GNU_SOURCE, and defining that here would
// change other system types (fd_set) in this module but not in CCurl, which clang refuses.
// The kernel's layout is fixed, so the struct is declared here; SO_PEERCRED is always defined.
#ifndef CONFAB_CLIBUV_SHIM_H
#define CONFAB_CLIBUV_SHIM_H
#include <dirent.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>
#include <uv.h>

struct confab_ucred {
    pid_t pid;
    uid_t uid;
    gid_t gid;
};

// Returns 0 and fills uid/pid/gid for the process on the other end of a Unix socket, or -1.
static inline int confab_peer_credentials(int fd, uid_t *uid, gid_t *gid, pid_t *pid) {
    struct confab_ucred cred;
    socklen_t len = sizeof(cred);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || len != sizeof(cred)) return -1;
    *uid = cred.uid;
    *gid = cred.gid;
    *pid = cred.pid;
    return 0;
}
// Closes every descriptor from `first` up, for a program about to be executed in place of
// this process: close_range(2) (Linux 5.9), else one by one as /proc/self/fd lists them.
// Returns 0, or -1 when neither could be done.
static inline int confab_close_descriptors_from(int first) {
#ifdef SYS_close_range
    if (syscall(SYS_close_range, (unsigned)first, ~0U, 0U) == 0) return 0;
#endif
    DIR *dir = opendir("/proc/self/fd");
    if (dir == NULL) return -1;
    int own = dirfd(dir);
    struct dirent *entry;
    while ((entry = readdir(dir)) != NULL) {
        if (entry->d_name[0] < '0' || entry->d_name[0] > '9') continue;
        int fd = atoi(entry->d_name);
        if (fd >= first && fd != own) close(fd);
    }
    closedir(dir);
    return 0;
}
// prctl(2) is variadic, which Swift cannot call: the one use of it, spelled out.
static inline int confab_set_parent_death_signal(int signal) {
    return prctl(PR_SET_PDEATHSIG, (unsigned long)signal, 0UL, 0UL, 0UL);
}
#endif
