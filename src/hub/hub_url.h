/* hub_url.h - URLs of the hub API and of file downloads, and the origin rule for the token. */
#ifndef CORTIQ_HUB_URL_H
#define CORTIQ_HUB_URL_H

#include <stdbool.h>

/* malloc'd "<endpoint>/api/models/<repo>" (+ "/revision/<rev>" when rev is non-NULL). */
char *hub_url_model_info(const char *endpoint, const char *repo, const char *rev);
/* malloc'd "<endpoint>/api/models/<repo>/tree/<commit>[/<dir>]". */
char *hub_url_tree(const char *endpoint, const char *repo, const char *commit, const char *dir);
/* malloc'd "<endpoint>/<repo>/resolve/<commit>/<path>". */
char *hub_url_resolve(const char *endpoint, const char *repo, const char *commit, const char *path);

/* True when a and b have the same scheme, host and port (case-insensitive host, default
 * ports filled in): the only URLs the token may go to. */
bool hub_url_same_origin(const char *a, const char *b);

#endif
