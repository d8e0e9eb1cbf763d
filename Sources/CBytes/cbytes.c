#define _GNU_SOURCE
#include <malloc.h>
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

// SHA-256 as FIPS 180-4 section 6.2 gives it, one 64-byte block at a time.
static const uint32_t sha256_k[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static uint32_t sha256_rotate(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

static void sha256_block(uint32_t state[8], const uint8_t block[64]) {
    uint32_t w[64];
    for (int i = 0; i < 16; i++) {
        w[i] = (uint32_t)block[4 * i] << 24 | (uint32_t)block[4 * i + 1] << 16 | (uint32_t)block[4 * i + 2] << 8 | block[4 * i + 3];
    }
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = sha256_rotate(w[i - 15], 7) ^ sha256_rotate(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = sha256_rotate(w[i - 2], 17) ^ sha256_rotate(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = state[0], b = state[1], c = state[2], d = state[3], e = state[4], f = state[5], g = state[6], h = state[7];
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = h + (sha256_rotate(e, 6) ^ sha256_rotate(e, 11) ^ sha256_rotate(e, 25)) + ((e & f) ^ (~e & g)) + sha256_k[i] + w[i];
        uint32_t t2 = (sha256_rotate(a, 2) ^ sha256_rotate(a, 13) ^ sha256_rotate(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        h = g; g = f; f = e; e = d + t1; d = c; c = b; b = a; a = t1 + t2;
    }
    state[0] += a; state[1] += b; state[2] += c; state[3] += d;
    state[4] += e; state[5] += f; state[6] += g; state[7] += h;
}

void cbytes_sha256(const void *bytes, size_t length, uint8_t digest[32]) {
    uint32_t state[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    const uint8_t *input = bytes;
    size_t whole = length - length % 64;
    for (size_t offset = 0; offset < whole; offset += 64) sha256_block(state, input + offset);
    // The tail, the 0x80 that ends the message and its length in bits: one block or two.
    uint8_t last[128] = {0};
    size_t tail = length - whole;
    if (tail > 0) memcpy(last, input + whole, tail);
    last[tail] = 0x80;
    size_t blocks = tail < 56 ? 1 : 2;
    uint64_t bits = (uint64_t)length * 8;
    for (int i = 0; i < 8; i++) last[blocks * 64 - 1 - i] = (uint8_t)(bits >> (8 * i));
    for (size_t i = 0; i < blocks; i++) sha256_block(state, last + 64 * i);
    for (int i = 0; i < 8; i++) {
        digest[4 * i] = (uint8_t)(state[i] >> 24);
        digest[4 * i + 1] = (uint8_t)(state[i] >> 16);
        digest[4 * i + 2] = (uint8_t)(state[i] >> 8);
        digest[4 * i + 3] = (uint8_t)state[i];
    }
}

int cbytes_malloc_thresholds(int mmap_bytes, int trim_bytes) {
    return mallopt(M_MMAP_THRESHOLD, mmap_bytes) == 1 && mallopt(M_TRIM_THRESHOLD, trim_bytes) == 1;
}

int cbytes_malloc_trim(void) {
    return malloc_trim(0);
}
