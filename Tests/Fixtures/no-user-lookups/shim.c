/* Loaded with LD_PRELOAD into the debug client by StaticClientTests: every user or group
   database lookup aborts the process. The release client is one static executable, and
   glibc's lookups in a static executable load NSS modules that crash it for users those
   modules serve; the dynamic debug client would not crash, so this makes any lookup it
   makes as loud as the static one's would be. */
#define _GNU_SOURCE
#include <grp.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void refuse(const char *name) {
    static const char prefix[] = "no-user-lookups: the client called ";
    (void)!write(2, prefix, sizeof prefix - 1);
    (void)!write(2, name, strlen(name));
    (void)!write(2, "\n", 1);
    abort();
}

struct passwd *getpwuid(uid_t uid) { (void)uid; refuse("getpwuid"); return NULL; }
struct passwd *getpwnam(const char *name) { (void)name; refuse("getpwnam"); return NULL; }
int getpwuid_r(uid_t uid, struct passwd *entry, char *buffer, size_t size, struct passwd **result) {
    (void)uid; (void)entry; (void)buffer; (void)size; (void)result;
    refuse("getpwuid_r");
    return -1;
}
int getpwnam_r(const char *name, struct passwd *entry, char *buffer, size_t size, struct passwd **result) {
    (void)name; (void)entry; (void)buffer; (void)size; (void)result;
    refuse("getpwnam_r");
    return -1;
}
struct passwd *getpwent(void) { refuse("getpwent"); return NULL; }
struct group *getgrgid(gid_t gid) { (void)gid; refuse("getgrgid"); return NULL; }
struct group *getgrnam(const char *name) { (void)name; refuse("getgrnam"); return NULL; }
int getgrgid_r(gid_t gid, struct group *entry, char *buffer, size_t size, struct group **result) {
    (void)gid; (void)entry; (void)buffer; (void)size; (void)result;
    refuse("getgrgid_r");
    return -1;
}
int getgrnam_r(const char *name, struct group *entry, char *buffer, size_t size, struct group **result) {
    (void)name; (void)entry; (void)buffer; (void)size; (void)result;
    refuse("getgrnam_r");
    return -1;
}
