/* SPDX-License-Identifier: Apache-2.0 */
#ifndef LARDER_CCURL_SHIM_H
#define LARDER_CCURL_SHIM_H
#include <curl/curl.h>

/* curl_easy_setopt and curl_easy_getinfo are variadic, which Swift cannot
   call: one typed wrapper per kind of argument. */
static inline CURLcode larder_curl_set_long(CURL *c, CURLoption o, long v) { return curl_easy_setopt(c, o, v); }
static inline CURLcode larder_curl_set_offset(CURL *c, CURLoption o, curl_off_t v) { return curl_easy_setopt(c, o, v); }
static inline CURLcode larder_curl_set_pointer(CURL *c, CURLoption o, void *v) { return curl_easy_setopt(c, o, v); }
static inline CURLcode larder_curl_set_text(CURL *c, CURLoption o, const char *v) { return curl_easy_setopt(c, o, v); }
static inline CURLcode larder_curl_set_list(CURL *c, CURLoption o, struct curl_slist *v) { return curl_easy_setopt(c, o, v); }
typedef size_t (*larder_curl_data_callback)(char *, size_t, size_t, void *);
static inline CURLcode larder_curl_set_callback(CURL *c, CURLoption o, larder_curl_data_callback f) { return curl_easy_setopt(c, o, f); }
static inline long larder_curl_status(CURL *c) {
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    return status;
}
#endif
