// libcurl's setopt/getinfo functions are variadic and do not import into Swift.
// One typed wrapper per argument kind is all the Swift side needs.
#ifndef CONFAB_CCURL_SHIM_H
#define CONFAB_CCURL_SHIM_H
#include <curl/curl.h>

typedef size_t (*confab_curl_data_cb)(char *ptr, size_t size, size_t nmemb, void *userdata);
typedef int (*confab_curl_socket_cb)(CURL *easy, curl_socket_t s, int what, void *userp, void *socketp);
typedef int (*confab_curl_timer_cb)(CURLM *multi, long timeout_ms, void *userp);
typedef int (*confab_curl_closesocket_cb)(void *clientp, curl_socket_t item);

static inline CURLcode confab_easy_setopt_long(CURL *h, CURLoption o, long v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode confab_easy_setopt_pointer(CURL *h, CURLoption o, const void *v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode confab_easy_setopt_string(CURL *h, CURLoption o, const char *v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode confab_easy_setopt_off(CURL *h, CURLoption o, curl_off_t v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode confab_easy_setopt_data_cb(CURL *h, CURLoption o, confab_curl_data_cb v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode confab_easy_setopt_closesocket_cb(CURL *h, confab_curl_closesocket_cb v) { return curl_easy_setopt(h, CURLOPT_CLOSESOCKETFUNCTION, v); }
static inline CURLcode confab_easy_getinfo_long(CURL *h, CURLINFO i, long *v) { return curl_easy_getinfo(h, i, v); }
static inline CURLcode confab_easy_getinfo_pointer(CURL *h, CURLINFO i, void **v) { return curl_easy_getinfo(h, i, v); }

static inline CURLMcode confab_multi_setopt_long(CURLM *m, CURLMoption o, long v) { return curl_multi_setopt(m, o, v); }
static inline CURLMcode confab_multi_setopt_pointer(CURLM *m, CURLMoption o, void *v) { return curl_multi_setopt(m, o, v); }
static inline CURLMcode confab_multi_setopt_socket_cb(CURLM *m, confab_curl_socket_cb v) { return curl_multi_setopt(m, CURLMOPT_SOCKETFUNCTION, v); }
static inline CURLMcode confab_multi_setopt_timer_cb(CURLM *m, confab_curl_timer_cb v) { return curl_multi_setopt(m, CURLMOPT_TIMERFUNCTION, v); }

// CURLMsg's result lives in a union Swift sees awkwardly.
static inline CURLcode confab_msg_result(CURLMsg *m) { return m->data.result; }
#endif
