/* hub_curl.c - libcurl resolved at first use: dlopen, then dlsym of each function the hub
 * calls, then curl_global_init, all under one pthread_once. The library is never closed:
 * curl keeps global state for the life of the process. */
#include "hub/hub_curl.h"

#include "common/err.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

hub_curl_api hub_curl;

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static cmf_status g_status = CMF_OK;
static char g_msg[256];

/* RTLD_LOCAL: curl's symbols (and its dependencies') stay out of the global namespace, where
 * they could clash with another copy the host program links. */
static void load(void) {
    void *lib = dlopen(HUB_CURL_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *why = dlerror();
        g_status = CMF_E_NETWORK;
        snprintf(g_msg, sizeof g_msg,
                 HUB_CURL_SONAME " not found: install " HUB_CURL_PACKAGE
                                 " (apt install " HUB_CURL_PACKAGE ")%s%s",
                 why ? "; dlopen: " : "", why ? why : "");
        return;
    }
    hub_curl_api api;
    const char *missing = NULL;
#define HUB_CURL_RESOLVE(name)                                                                     \
    if (!missing && !(api.name = (__typeof__(api.name))dlsym(lib, "curl_" #name)))                 \
        missing = "curl_" #name;
    HUB_CURL_FUNCTIONS(HUB_CURL_RESOLVE)
#undef HUB_CURL_RESOLVE
    if (missing) {
        g_status = CMF_E_NETWORK;
        snprintf(g_msg, sizeof g_msg,
                 HUB_CURL_SONAME " has no %s: it is too old, install a newer " HUB_CURL_PACKAGE
                                 " (apt install " HUB_CURL_PACKAGE ")",
                 missing);
        dlclose(lib);
        return;
    }
    CURLcode rc = api.global_init(CURL_GLOBAL_DEFAULT);
    if (rc != CURLE_OK) {
        g_status = CMF_E_NETWORK;
        snprintf(g_msg, sizeof g_msg, "libcurl could not start: %s", api.easy_strerror(rc));
        return;
    }
    hub_curl = api;
}

cmf_status hub_curl_load(cmf_err *err) {
    pthread_once(&g_once, load);
    if (g_status) return cmf_err_set(err, g_status, "hub", "%s", g_msg);
    return CMF_OK;
}
