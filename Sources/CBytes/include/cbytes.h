// glibc's byte searches that Swift's Glibc module leaves out: they are GNU extensions,
// declared only under _GNU_SOURCE, which that module is not built with; and the allocator's
// mmap threshold (malloc.h, not in that module either). And SHA-256, which
// names the blobs attachments are stored as: no crypto library is linked into the daemon.
#ifndef CBYTES_H
#define CBYTES_H
#include <stddef.h>
#include <stdint.h>

/// memmem(3): the first occurrence of `needle` in `haystack`, or NULL.
const void *cbytes_memmem(const void *haystack, size_t haystack_length, const void *needle, size_t needle_length);
/// memrchr(3): the last `byte` in the `length` bytes at `bytes`, or NULL.
const void *cbytes_memrchr(const void *bytes, int byte, size_t length);
/// Standard padded base64 (RFC 4648) of the `length` bytes at `bytes`, written to `out`, which
/// has room for (length + 2) / 3 * 4 bytes. Returns the bytes written.
size_t cbytes_base64_encode(const unsigned char *bytes, size_t length, unsigned char *out);

/// SHA-256 (FIPS 180-4) of the `length` bytes at `bytes`, into the 32 bytes at `digest`.
void cbytes_sha256(const void *bytes, size_t length, uint8_t digest[32]);

/// mallopt(M_MMAP_THRESHOLD, mmap_bytes) and mallopt(M_TRIM_THRESHOLD, trim_bytes), which the
/// Glibc module leaves out (malloc.h): blocks of `mmap_bytes` or more mapped on their own, and
/// up to `trim_bytes` freed at the heap's top kept for reuse. Returns 1 when glibc took both.
int cbytes_malloc_thresholds(int mmap_bytes, int trim_bytes);

/// malloc_trim(0): every free page of every heap given back to the system. 1 if any was.
int cbytes_malloc_trim(void);

#endif
