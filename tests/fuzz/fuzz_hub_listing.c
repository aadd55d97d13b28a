/* fuzz_hub_listing: any bytes as a hub answer. The input is a tree page (JSON) whose checked
 * entries feed the file selection for every kind of want; the same bytes are also tried as a
 * safetensors index's weight_map and as a model reference. What must hold: no crash, and
 * every path the listing accepted is one hub_path_ok passes (it becomes a cache file name). */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cortiq/hub.h"
#include "hub/hub_listing.h"
#include "hub/hub_select.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = 0;
    cortiq_hub_ref ref;
    (void)cortiq_hub_ref_parse(text, &ref);
    json_t *page = json_loadb(text, size, 0, NULL);
    hub_listing l = {.commit = "0000000000000000000000000000000000000000"};
    size_t cap = 0;
    if (page && hub_listing_add_page(&l, &cap, page, "fuzz", NULL) == CMF_OK) {
        for (size_t i = 0; i < l.n; i++)
            if (!hub_path_ok(l.files[i].path) || !hub_file_blob_name(&l.files[i])[0]) abort();
        for (int want = 0; want < 3; want++) {
            hub_selection sel;
            if (hub_select(&l, "a/b", NULL, (cortiq_hub_want)want, &sel, NULL) == CMF_OK &&
                sel.sharded_index)
                (void)hub_select_index_shards(&l, text, &sel, NULL);
            hub_selection_free(&sel);
        }
    }
    json_decref(page);
    hub_listing_free(&l);
    free(text);
    return 0;
}
