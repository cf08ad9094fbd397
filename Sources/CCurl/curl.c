/* SPDX-License-Identifier: Apache-2.0 */
#include "larder_curl.h"
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

static struct {
    CURLcode (*global_init)(long);
    CURL *(*easy_init)(void);
    void (*easy_cleanup)(CURL *);
    CURLcode (*easy_perform)(CURL *);
    CURLcode (*easy_setopt)(CURL *, CURLoption, ...);
    CURLcode (*easy_getinfo)(CURL *, CURLINFO, ...);
    const char *(*easy_strerror)(CURLcode);
    struct curl_slist *(*slist_append)(struct curl_slist *, const char *);
    void (*slist_free_all)(struct curl_slist *);
} api;
static int loaded;
static char missing[512];
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void load(void) {
    void *library = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
    if (!library) {
        snprintf(missing, sizeof missing, "%s", dlerror());
        return;
    }
#define FIND(field, name) \
    if (!(*(void **)&api.field = dlsym(library, name))) { snprintf(missing, sizeof missing, "libcurl.so.4 has no %s", name); return; }
    FIND(global_init, "curl_global_init")
    FIND(easy_init, "curl_easy_init")
    FIND(easy_cleanup, "curl_easy_cleanup")
    FIND(easy_perform, "curl_easy_perform")
    FIND(easy_setopt, "curl_easy_setopt")
    FIND(easy_getinfo, "curl_easy_getinfo")
    FIND(easy_strerror, "curl_easy_strerror")
    FIND(slist_append, "curl_slist_append")
    FIND(slist_free_all, "curl_slist_free_all")
#undef FIND
    if (api.global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        snprintf(missing, sizeof missing, "curl_global_init failed");
        return;
    }
    loaded = 1;
}

int larder_curl_load(void) {
    pthread_once(&once, load);
    return loaded;
}

const char *larder_curl_missing(void) { return missing; }

CURL *larder_curl_easy_init(void) { return api.easy_init(); }
void larder_curl_easy_cleanup(CURL *c) { api.easy_cleanup(c); }
CURLcode larder_curl_perform(CURL *c) { return api.easy_perform(c); }
const char *larder_curl_strerror(CURLcode code) { return api.easy_strerror(code); }
struct curl_slist *larder_curl_slist_append(struct curl_slist *list, const char *line) { return api.slist_append(list, line); }
void larder_curl_slist_free_all(struct curl_slist *list) { api.slist_free_all(list); }

CURLcode larder_curl_set_long(CURL *c, CURLoption o, long v) { return api.easy_setopt(c, o, v); }
CURLcode larder_curl_set_offset(CURL *c, CURLoption o, curl_off_t v) { return api.easy_setopt(c, o, v); }
CURLcode larder_curl_set_pointer(CURL *c, CURLoption o, void *v) { return api.easy_setopt(c, o, v); }
CURLcode larder_curl_set_text(CURL *c, CURLoption o, const char *v) { return api.easy_setopt(c, o, v); }
CURLcode larder_curl_set_list(CURL *c, CURLoption o, struct curl_slist *v) { return api.easy_setopt(c, o, v); }
CURLcode larder_curl_set_callback(CURL *c, CURLoption o, larder_curl_data_callback f) { return api.easy_setopt(c, o, f); }

long larder_curl_status(CURL *c) {
    long status = 0;
    api.easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    return status;
}
