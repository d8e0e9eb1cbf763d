// libuv, plus the two socket facts Swift cannot reach through Glibc's module:
// SO_PEERCRED's struct ucred needs _GNU_SOURCE, which must come before any header.
#ifndef CONFAB_CLIBUV_SHIM_H
#define CONFAB_CLIBUV_SHIM_H
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <sys/socket.h>
#include <sys/types.h>
#include <uv.h>

// Returns 0 and fills uid/pid/gid for the process on the other end of a Unix socket, or -errno.
static inline int confab_peer_credentials(int fd, uid_t *uid, gid_t *gid, pid_t *pid) {
    struct ucred cred;
    socklen_t len = sizeof(cred);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return -1;
    *uid = cred.uid;
    *gid = cred.gid;
    *pid = cred.pid;
    return 0;
}
#endif
