#include "ccurl.h"
#include <dlfcn.h>
#include <stdio.h>

// The functions used, as libcurl.so.4 exports them.
static struct {
    CURLcode (*global_init)(long flags);
    CURL *(*easy_init)(void);
    void (*easy_cleanup)(CURL *);
    const char *(*easy_strerror)(CURLcode);
    CURLHcode (*easy_header)(CURL *, const char *, size_t, unsigned int, int, struct curl_header **);
    CURLcode (*easy_setopt)(CURL *, CURLoption, ...);
    CURLcode (*easy_getinfo)(CURL *, CURLINFO, ...);
    struct curl_slist *(*slist_append)(struct curl_slist *, const char *);
    void (*slist_free_all)(struct curl_slist *);
    CURLM *(*multi_init)(void);
    CURLMcode (*multi_cleanup)(CURLM *);
    CURLMcode (*multi_add_handle)(CURLM *, CURL *);
    CURLMcode (*multi_remove_handle)(CURLM *, CURL *);
    CURLMcode (*multi_socket_action)(CURLM *, curl_socket_t, int, int *);
    CURLMsg *(*multi_info_read)(CURLM *, int *);
    const char *(*multi_strerror)(CURLMcode);
    CURLMcode (*multi_setopt)(CURLM *, CURLMoption, ...);
} curl;

// 0: not tried; 1: loaded; -1: failed. Only the loop thread calls in.
static int state;
static char error[512];

static int resolve(void *library, const char *name, void **slot) {
    *slot = dlsym(library, name);
    if (*slot != NULL) return 0;
    snprintf(error, sizeof error, "libcurl.so.4 has no %s", name);
    return -1;
}

int confab_curl_load(void) {
    if (state != 0) return state == 1 ? 0 : -1;
    state = -1;
    void *library = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
    if (library == NULL) {
        const char *reason = dlerror();
        snprintf(error, sizeof error, "%s", reason != NULL ? reason : "libcurl.so.4 cannot be loaded");
        return -1;
    }
#define RESOLVE(field, name) if (resolve(library, name, (void **)&curl.field) != 0) return -1
    RESOLVE(global_init, "curl_global_init");
    RESOLVE(easy_init, "curl_easy_init");
    RESOLVE(easy_cleanup, "curl_easy_cleanup");
    RESOLVE(easy_strerror, "curl_easy_strerror");
    RESOLVE(easy_header, "curl_easy_header");
    RESOLVE(easy_setopt, "curl_easy_setopt");
    RESOLVE(easy_getinfo, "curl_easy_getinfo");
    RESOLVE(slist_append, "curl_slist_append");
    RESOLVE(slist_free_all, "curl_slist_free_all");
    RESOLVE(multi_init, "curl_multi_init");
    RESOLVE(multi_cleanup, "curl_multi_cleanup");
    RESOLVE(multi_add_handle, "curl_multi_add_handle");
    RESOLVE(multi_remove_handle, "curl_multi_remove_handle");
    RESOLVE(multi_socket_action, "curl_multi_socket_action");
    RESOLVE(multi_info_read, "curl_multi_info_read");
    RESOLVE(multi_strerror, "curl_multi_strerror");
    RESOLVE(multi_setopt, "curl_multi_setopt");
#undef RESOLVE
    CURLcode rc = curl.global_init(CURL_GLOBAL_DEFAULT);
    if (rc != CURLE_OK) {
        snprintf(error, sizeof error, "curl_global_init: %s", curl.easy_strerror(rc));
        return -1;
    }
    state = 1;
    return 0;
}

const char *confab_curl_load_error(void) { return error; }

CURL *confab_easy_init(void) { return curl.easy_init(); }
void confab_easy_cleanup(CURL *h) { curl.easy_cleanup(h); }
const char *confab_easy_strerror(CURLcode code) { return curl.easy_strerror(code); }
CURLHcode confab_easy_header(CURL *h, const char *name, size_t index, unsigned int origin, int request, struct curl_header **hout) {
    return curl.easy_header(h, name, index, origin, request, hout);
}
CURLcode confab_easy_setopt_long(CURL *h, CURLoption o, long v) { return curl.easy_setopt(h, o, v); }
CURLcode confab_easy_setopt_pointer(CURL *h, CURLoption o, const void *v) { return curl.easy_setopt(h, o, v); }
CURLcode confab_easy_setopt_string(CURL *h, CURLoption o, const char *v) { return curl.easy_setopt(h, o, v); }
CURLcode confab_easy_setopt_off(CURL *h, CURLoption o, curl_off_t v) { return curl.easy_setopt(h, o, v); }
CURLcode confab_easy_setopt_data_cb(CURL *h, CURLoption o, confab_curl_data_cb v) { return curl.easy_setopt(h, o, v); }
CURLcode confab_easy_setopt_closesocket_cb(CURL *h, confab_curl_closesocket_cb v) {
    return curl.easy_setopt(h, CURLOPT_CLOSESOCKETFUNCTION, v);
}
CURLcode confab_easy_getinfo_long(CURL *h, CURLINFO i, long *v) { return curl.easy_getinfo(h, i, v); }
CURLcode confab_easy_getinfo_pointer(CURL *h, CURLINFO i, void **v) { return curl.easy_getinfo(h, i, v); }

struct curl_slist *confab_slist_append(struct curl_slist *list, const char *text) { return curl.slist_append(list, text); }
void confab_slist_free_all(struct curl_slist *list) { curl.slist_free_all(list); }

CURLM *confab_multi_init(void) { return curl.multi_init(); }
CURLMcode confab_multi_cleanup(CURLM *m) { return curl.multi_cleanup(m); }
CURLMcode confab_multi_add_handle(CURLM *m, CURL *h) { return curl.multi_add_handle(m, h); }
CURLMcode confab_multi_remove_handle(CURLM *m, CURL *h) { return curl.multi_remove_handle(m, h); }
CURLMcode confab_multi_socket_action(CURLM *m, curl_socket_t s, int ev_bitmask, int *running_handles) {
    return curl.multi_socket_action(m, s, ev_bitmask, running_handles);
}
CURLMsg *confab_multi_info_read(CURLM *m, int *msgs_in_queue) { return curl.multi_info_read(m, msgs_in_queue); }
const char *confab_multi_strerror(CURLMcode code) { return curl.multi_strerror(code); }
CURLMcode confab_multi_setopt_long(CURLM *m, CURLMoption o, long v) { return curl.multi_setopt(m, o, v); }
CURLMcode confab_multi_setopt_pointer(CURLM *m, CURLMoption o, void *v) { return curl.multi_setopt(m, o, v); }
CURLMcode confab_multi_setopt_socket_cb(CURLM *m, confab_curl_socket_cb v) { return curl.multi_setopt(m, CURLMOPT_SOCKETFUNCTION, v); }
CURLMcode confab_multi_setopt_timer_cb(CURLM *m, confab_curl_timer_cb v) { return curl.multi_setopt(m, CURLMOPT_TIMERFUNCTION, v); }
