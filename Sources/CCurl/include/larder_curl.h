/* SPDX-License-Identifier: Apache-2.0 */
#ifndef LARDER_CURL_H
#define LARDER_CURL_H
#include <curl/curl.h>

/* libcurl, loaded when a bucket is first named (dlopen of libcurl.so.4):
   the binary does not link it, so a machine that never names a bucket
   needs none of its libraries, and the clients' packages carry none. */

/* 1 once libcurl is loaded (tried once); 0 with the loader's reason in
   larder_curl_missing(). */
int larder_curl_load(void);
const char *larder_curl_missing(void);

CURL *larder_curl_easy_init(void);
void larder_curl_easy_cleanup(CURL *c);
CURLcode larder_curl_perform(CURL *c);
const char *larder_curl_strerror(CURLcode code);
struct curl_slist *larder_curl_slist_append(struct curl_slist *list, const char *line);
void larder_curl_slist_free_all(struct curl_slist *list);

/* curl_easy_setopt and curl_easy_getinfo are variadic, which Swift cannot
   call: one typed wrapper per kind of argument. */
CURLcode larder_curl_set_long(CURL *c, CURLoption o, long v);
CURLcode larder_curl_set_offset(CURL *c, CURLoption o, curl_off_t v);
CURLcode larder_curl_set_pointer(CURL *c, CURLoption o, void *v);
CURLcode larder_curl_set_text(CURL *c, CURLoption o, const char *v);
CURLcode larder_curl_set_list(CURL *c, CURLoption o, struct curl_slist *v);
typedef size_t (*larder_curl_data_callback)(char *, size_t, size_t, void *);
CURLcode larder_curl_set_callback(CURL *c, CURLoption o, larder_curl_data_callback f);
long larder_curl_status(CURL *c);
#endif
