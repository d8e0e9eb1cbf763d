#define _GNU_SOURCE
#include <string.h>
#include "cbytes.h"

const void *cbytes_memmem(const void *haystack, size_t haystack_length, const void *needle, size_t needle_length) {
    return memmem(haystack, haystack_length, needle, needle_length);
}

const void *cbytes_memrchr(const void *bytes, int byte, size_t length) {
    return memrchr(bytes, byte, length);
}

size_t cbytes_base64_encode(const unsigned char *bytes, size_t length, unsigned char *out) {
    static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    unsigned char *write = out;
    size_t read = 0;
    for (; read + 3 <= length; read += 3) {
        unsigned long value = (unsigned long)bytes[read] << 16 | (unsigned long)bytes[read + 1] << 8 | bytes[read + 2];
        *write++ = alphabet[value >> 18 & 63];
        *write++ = alphabet[value >> 12 & 63];
        *write++ = alphabet[value >> 6 & 63];
        *write++ = alphabet[value & 63];
    }
    if (read < length) {
        int two = length - read == 2;
        unsigned long value = (unsigned long)bytes[read] << 16 | (two ? (unsigned long)bytes[read + 1] << 8 : 0);
        *write++ = alphabet[value >> 18 & 63];
        *write++ = alphabet[value >> 12 & 63];
        *write++ = two ? alphabet[value >> 6 & 63] : '=';
        *write++ = '=';
    }
    return (size_t)(write - out);
}
