#ifndef CRE2_H
#define CRE2_H

// RE2 (Debian's libre2-dev) behind a C API, for Swift: a regular expression compiled once and
// searched for in texts in time linear in their length, whatever the expression (no
// backtracking, no backreferences or lookaround). The C++ library stays behind this header.

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cre2_pattern cre2_pattern;

/// Compiles `pattern` (UTF-8, `length` bytes, RE2's syntax) to match UTF-8 text, without
/// capture groups, using at most about `max_memory` bytes for the program and its search
/// cache. NULL when it cannot: then `error` (when not NULL) holds RE2's message, cut to
/// `error_size` bytes with a NUL at the end.
cre2_pattern *cre2_compile(const char *pattern, size_t length, long long max_memory, char *error, size_t error_size);

/// 1 when the pattern matches somewhere in `text` (`length` bytes of UTF-8), 0 when not.
int cre2_search(const cre2_pattern *pattern, const char *text, size_t length);

/// The size of the compiled program, in instructions: how much work a byte of text can cost.
int cre2_program_size(const cre2_pattern *pattern);

void cre2_free(cre2_pattern *pattern);

#ifdef __cplusplus
}
#endif

#endif
