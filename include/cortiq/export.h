/* cortiq/export.h - what the shared library exports, and results the caller must read.
 *
 * The library is built with -fvisibility=hidden: a function is part of libcortiq's ABI only
 * when its declaration in include/cortiq/ carries CORTIQ_API. Everything else (helpers shared
 * between the library's own files) stays internal, whatever its linkage.
 *
 * CORTIQ_NODISCARD marks every public function that returns a cmf_status: the status decides
 * whether the caller may go on (and whether the outputs were written at all), so ignoring it is
 * a compile-time warning, an error under -Werror.
 */
#ifndef CORTIQ_EXPORT_H
#define CORTIQ_EXPORT_H

#if defined(__GNUC__) || defined(__clang__)
#define CORTIQ_API       __attribute__((visibility("default")))
#define CORTIQ_NODISCARD __attribute__((warn_unused_result))
#else
#define CORTIQ_API
#define CORTIQ_NODISCARD
#endif

#endif /* CORTIQ_EXPORT_H */
