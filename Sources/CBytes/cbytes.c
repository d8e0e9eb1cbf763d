#define _GNU_SOURCE
#include <string.h>
#include "cbytes.h"

const void *cbytes_memmem(const void *haystack, size_t haystack_length, const void *needle, size_t needle_length) {
    return memmem(haystack, haystack_length, needle, needle_length);
}

const void *cbytes_memrchr(const void *bytes, int byte, size_t length) {
    return memrchr(bytes, byte, length);
}
