/* fuzz_header: any bytes as header JSON -> cmf_header_parse. Must never crash or leak. */
#include <stdint.h>

#include "cortiq/format.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    cmf_header h;
    cmf_err err;
    if (cmf_header_parse((const char *)data, size, &h, "fuzz", &err) == CMF_OK) cmf_header_free(&h);
    return 0;
}
