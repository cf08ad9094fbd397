#ifndef LARDER_CSYSTEM_SHIM_H
#define LARDER_CSYSTEM_SHIM_H
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <zlib.h>
#include <openssl/evp.h>

/* copy_file_range(2) is declared by glibc only under _GNU_SOURCE; call the
   system call directly. */
static inline long larder_copy_file_range(int in, int out, size_t length) {
    return syscall(SYS_copy_file_range, in, (void *)0, out, (void *)0, length, 0u);
}

/* SHA-256 from OpenSSL's libcrypto, behind an opaque pointer. */
static inline void *larder_sha256_new(void) {
    EVP_MD_CTX *context = EVP_MD_CTX_new();
    if (context) EVP_DigestInit_ex(context, EVP_sha256(), NULL);
    return context;
}
static inline void larder_sha256_update(void *context, const void *bytes, size_t count) {
    EVP_DigestUpdate((EVP_MD_CTX *)context, bytes, count);
}
static inline void larder_sha256_final(void *context, unsigned char *out32) {
    unsigned int length = 0;
    EVP_DigestFinal_ex((EVP_MD_CTX *)context, out32, &length);
    EVP_MD_CTX_free((EVP_MD_CTX *)context);
}

static inline uint32_t larder_crc32(uint32_t crc, const void *bytes, size_t count) {
    return (uint32_t)crc32((uLong)crc, (const Bytef *)bytes, (uInt)count);
}

/* Raw deflate (no zlib header), as zip entries hold it. */
static inline void *larder_deflate_new(int level) {
    z_stream *z = (z_stream *)calloc(1, sizeof(z_stream));
    if (!z) return NULL;
    if (deflateInit2(z, level, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) != Z_OK) { free(z); return NULL; }
    return z;
}
/* Compresses input into output; returns zlib's code. *used and *made report progress. */
static inline int larder_deflate(void *context, const void *input, size_t input_count, void *output, size_t output_count,
                                 int finish, size_t *used, size_t *made) {
    z_stream *z = (z_stream *)context;
    z->next_in = (Bytef *)input;
    z->avail_in = (uInt)input_count;
    z->next_out = (Bytef *)output;
    z->avail_out = (uInt)output_count;
    int rc = deflate(z, finish ? Z_FINISH : Z_NO_FLUSH);
    *used = input_count - z->avail_in;
    *made = output_count - z->avail_out;
    return rc;
}
/* Compresses one whole chunk on its own. The chunk ends with a sync flush
   (byte-aligned, not final) unless it is the last, so chunks compressed in
   parallel concatenate into one valid deflate stream. Returns the bytes
   made, or -1. */
static inline long larder_deflate_chunk(int level, const void *input, size_t count, void *output, size_t capacity, int last) {
    z_stream z;
    memset(&z, 0, sizeof z);
    if (deflateInit2(&z, level, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) != Z_OK) return -1;
    z.next_in = (Bytef *)input;
    z.avail_in = (uInt)count;
    z.next_out = (Bytef *)output;
    z.avail_out = (uInt)capacity;
    int rc = deflate(&z, last ? Z_FINISH : Z_SYNC_FLUSH);
    long made = (long)(capacity - z.avail_out);
    int ok = last ? rc == Z_STREAM_END : (rc == Z_OK && z.avail_in == 0);
    deflateEnd(&z);
    return ok ? made : -1;
}
static inline size_t larder_deflate_bound(size_t count) { return (size_t)compressBound((uLong)count) + 64; }
static inline uint32_t larder_crc32_combine(uint32_t a, uint32_t b, size_t length_b) {
    return (uint32_t)crc32_combine((uLong)a, (uLong)b, (z_off_t)length_b);
}

static inline void larder_deflate_free(void *context) {
    deflateEnd((z_stream *)context);
    free(context);
}
#endif
