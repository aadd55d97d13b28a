/* Flip every byte of a small file's header, directory and tensor data in turn (and the
 * envelope's hash fields): open + verify must report each one. */
#include "sample.h"
#include "test.h"

typedef struct {
    int n;
} counter;

static void count_problem(void *u, const char *p, cmf_status c, const char *m) {
    (void)p, (void)c, (void)m;
    ((counter *)u)->n++;
}

/* 1 if opening + verifying the image reports a problem */
static int detected(const uint8_t *b, size_t len) {
    cmf_file *f = NULL;
    if (cmf_open_memory(b, len, "flip.cmf", 0, &f, NULL) != CMF_OK) return 1;
    counter c = {0};
    cmf_status st = cmf_verify(f, 1, count_problem, &c, NULL);
    cmf_close(f);
    return st != CMF_OK && c.n > 0;
}

int main(void) {
    cmf_err err;
    CHECK_MSG(sample_write("flip_sample.cmf", NULL, &err) == CMF_OK, "%s", err.msg);
    size_t len;
    uint8_t *b = slurp("flip_sample.cmf", &len);
    cmf_envelope e;
    CHECK(b && cmf_envelope_parse(b, &e, "x", NULL) == CMF_OK);
    if (!b) TEST_DONE();
    CHECK(!detected(b, len));
    cmf_file *f;
    CHECK(cmf_open_memory(b, len, "x", 0, &f, NULL) == CMF_OK);
    typedef struct {
        uint64_t off, len;
        const char *what;
    } range;
    range ranges[16];
    size_t nr = 0;
    ranges[nr++] = (range){0x70, 16, "envelope hashes"};
    ranges[nr++] = (range){e.header_off, e.header_len, "header"};
    ranges[nr++] = (range){e.dir_off, e.dir_len, "directory"};
    ranges[nr++] = (range){e.masks_off, e.masks_len, "masks"};
    ranges[nr++] = (range){e.vocab_off, e.vocab_len, "vocab"};
    for (size_t i = 0; i < cmf_file_tensor_count(f); i++) {
        const cmf_tensor *t = cmf_file_tensor_at(f, i);
        if (nr < 16) ranges[nr++] = (range){e.data_off + t->off, t->nbytes, t->name};
    }
    cmf_close(f);
    size_t flips = 0, missed = 0;
    for (size_t r = 0; r < nr; r++) {
        for (uint64_t k = 0; k < ranges[r].len; k++) {
            for (int bit = 0; bit < 8; bit += 7) { /* lowest and highest bit of each byte */
                uint8_t *p = b + ranges[r].off + k;
                *p ^= (uint8_t)(1u << bit);
                flips++;
                if (!detected(b, len)) {
                    missed++;
                    if (missed < 10)
                        fprintf(stderr, "undetected flip: %s byte %llu bit %d\n", ranges[r].what,
                                (unsigned long long)k, bit);
                }
                *p ^= (uint8_t)(1u << bit);
            }
        }
    }
    printf("%zu flips, %zu undetected\n", flips, missed);
    CHECK(flips > 20000 && missed == 0);
    free(b);
    TEST_DONE();
}
