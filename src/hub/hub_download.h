/* hub_download.h - fetch files into blobs/ in parallel: resume, checksum, atomic rename. */
#ifndef CORTIQ_HUB_DOWNLOAD_H
#define CORTIQ_HUB_DOWNLOAD_H

#include "hub/hub_env.h"
#include "hub/hub_listing.h"

/* Progress shared by every batch of one pull. */
typedef struct hub_progress_state {
    cortiq_hub_progress p;
    cortiq_hub_progress_fn fn;
    void *user;
    double t0, last_report;
} hub_progress_state;

double hub_now(void);
void hub_progress_emit(hub_progress_state *ps, cortiq_hub_event ev, const char *file, uint64_t size,
                       uint64_t resumed);

/* Download files[0..n) of repo at commit (all missing from the cache) into repo_dir, at most
 * parallel at a time, each linked into snapshots/<commit>/ when done. A cut transfer is
 * resumed (Range) up to 3 times before the call fails; the partial file stays for the next
 * call. The first failure stops the others. */
cmf_status hub_download(const hub_env *env, const char *repo, const char *commit,
                        const char *repo_dir, const hub_file *const *files, size_t n,
                        unsigned parallel, long stall_s, hub_progress_state *ps, cmf_err *err);

#endif
