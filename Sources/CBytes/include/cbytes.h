// glibc's byte searches that Swift's Glibc module leaves out: they are GNU extensions,
// declared only under _GNU_SOURCE, which that module is not built with.
#ifndef CBYTES_H
#define CBYTES_H
#include <stddef.h>

/// memmem(3): the first occurrence of `needle` in `haystack`, or NULL.
const void *cbytes_memmem(const void *haystack, size_t haystack_length, const void *needle, size_t needle_length);
/// memrchr(3): the last `byte` in the `length` bytes at `bytes`, or NULL.
const void *cbytes_memrchr(const void *bytes, int byte, size_t length);
/// Standard padded base64 (RFC 4648) of the `length` bytes at `bytes`, written to `out`, which
/// has room for (length + 2) / 3 * 4 bytes. Returns the bytes written.
size_t cbytes_base64_encode(const unsigned char *bytes, size_t length, unsigned char *out);

#endif
