/* hub_curl.h - libcurl, loaded at the first hub request instead of linked: linking it makes
 * every process (each CLI command, each program on libcortiq) pay for the dynamic linking of
 * libcurl and its ~30 dependencies, for a feature most runs never use.
 *
 * <curl/curl.h> still gives the types and constants; the functions are called through the
 * table hub_curl, e.g. hub_curl.easy_setopt(h, CURLOPT_URL, url) for curl_easy_setopt. */
#ifndef CORTIQ_HUB_CURL_H
#define CORTIQ_HUB_CURL_H

#include <curl/curl.h>

#include "cortiq/status.h"

/* The shared object looked up, and the Debian package that ships it. */
#define HUB_CURL_SONAME  "libcurl.so.4"
#define HUB_CURL_PACKAGE "libcurl4"

/* Every libcurl function the hub calls, without the curl_ prefix. */
#define HUB_CURL_FUNCTIONS(X)                                                                      \
    X(global_init)                                                                                 \
    X(easy_init)                                                                                   \
    X(easy_cleanup)                                                                                \
    X(easy_setopt)                                                                                 \
    X(easy_getinfo)                                                                                \
    X(easy_perform)                                                                                \
    X(easy_strerror)                                                                               \
    X(free)                                                                                        \
    X(multi_init)                                                                                  \
    X(multi_cleanup)                                                                               \
    X(multi_add_handle)                                                                            \
    X(multi_remove_handle)                                                                         \
    X(multi_perform)                                                                               \
    X(multi_poll)                                                                                  \
    X(multi_info_read)                                                                             \
    X(multi_strerror)                                                                              \
    X(slist_append)                                                                                \
    X(slist_free_all)                                                                              \
    X(url)                                                                                         \
    X(url_cleanup)                                                                                 \
    X(url_get)                                                                                     \
    X(url_set)

/* One pointer per function, typed from the header's own prototype (so a mismatch cannot
 * compile); curl_easy_setopt and curl_easy_getinfo stay variadic, as they are. */
typedef struct hub_curl_api {
#define HUB_CURL_MEMBER(name) __typeof__(curl_##name) *name;
    HUB_CURL_FUNCTIONS(HUB_CURL_MEMBER)
#undef HUB_CURL_MEMBER
} hub_curl_api;

/* Filled by the first successful hub_curl_load; read-only afterwards. */
extern hub_curl_api hub_curl;

/* Load libcurl (dlopen of HUB_CURL_SONAME, every function above, curl_global_init) once per
 * process, thread-safely. CMF_E_NETWORK when it cannot: the message names the library and
 * the package to install. Every hub_curl call must come after a CMF_OK from here. */
cmf_status hub_curl_load(cmf_err *err);

#endif
