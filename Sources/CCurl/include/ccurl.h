// libcurl, loaded on first use.
//
// confabd does not link libcurl: an idle daemon (most of its life) then maps neither libcurl
// nor the TLS, Kerberos, LDAP and SSH libraries Debian's libcurl brings with it, about 8 MiB
// of its resident memory and 30 libraries for the dynamic loader at every start. The first
// request to a model server or a tool loads libcurl.so.4 with dlopen(3); every function used is
// called through the table filled then. These wrappers are also typed: libcurl's setopt and
// getinfo are variadic and do not import into Swift.
#ifndef CONFAB_CCURL_H
#define CONFAB_CCURL_H
#include <curl/curl.h>

/// Loads libcurl.so.4 and runs curl_global_init, once. 0 when libcurl is ready; -1 when it
/// cannot be loaded, and every later call says -1 again (confab_curl_load_error says why).
int confab_curl_load(void);
/// Why loading failed; "" before a failure.
const char *confab_curl_load_error(void);

typedef size_t (*confab_curl_data_cb)(char *ptr, size_t size, size_t nmemb, void *userdata);
typedef int (*confab_curl_socket_cb)(CURL *easy, curl_socket_t s, int what, void *userp, void *socketp);
typedef int (*confab_curl_timer_cb)(CURLM *multi, long timeout_ms, void *userp);
typedef int (*confab_curl_closesocket_cb)(void *clientp, curl_socket_t item);

// Only after confab_curl_load() has returned 0.
CURL *confab_easy_init(void);
void confab_easy_cleanup(CURL *h);
const char *confab_easy_strerror(CURLcode code);
CURLHcode confab_easy_header(CURL *h, const char *name, size_t index, unsigned int origin, int request, struct curl_header **hout);
CURLcode confab_easy_setopt_long(CURL *h, CURLoption o, long v);
CURLcode confab_easy_setopt_pointer(CURL *h, CURLoption o, const void *v);
CURLcode confab_easy_setopt_string(CURL *h, CURLoption o, const char *v);
CURLcode confab_easy_setopt_off(CURL *h, CURLoption o, curl_off_t v);
CURLcode confab_easy_setopt_data_cb(CURL *h, CURLoption o, confab_curl_data_cb v);
CURLcode confab_easy_setopt_closesocket_cb(CURL *h, confab_curl_closesocket_cb v);
CURLcode confab_easy_getinfo_long(CURL *h, CURLINFO i, long *v);
CURLcode confab_easy_getinfo_pointer(CURL *h, CURLINFO i, void **v);

struct curl_slist *confab_slist_append(struct curl_slist *list, const char *text);
void confab_slist_free_all(struct curl_slist *list);

CURLM *confab_multi_init(void);
CURLMcode confab_multi_cleanup(CURLM *m);
CURLMcode confab_multi_add_handle(CURLM *m, CURL *h);
CURLMcode confab_multi_remove_handle(CURLM *m, CURL *h);
CURLMcode confab_multi_socket_action(CURLM *m, curl_socket_t s, int ev_bitmask, int *running_handles);
CURLMsg *confab_multi_info_read(CURLM *m, int *msgs_in_queue);
const char *confab_multi_strerror(CURLMcode code);
CURLMcode confab_multi_setopt_long(CURLM *m, CURLMoption o, long v);
CURLMcode confab_multi_setopt_pointer(CURLM *m, CURLMoption o, void *v);
CURLMcode confab_multi_setopt_socket_cb(CURLM *m, confab_curl_socket_cb v);
CURLMcode confab_multi_setopt_timer_cb(CURLM *m, confab_curl_timer_cb v);

// CURLMsg's result lives in a union Swift sees awkwardly.
static inline CURLcode confab_msg_result(CURLMsg *m) { return m->data.result; }
#endif
