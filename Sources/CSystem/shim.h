/* SPDX-License-Identifier: Apache-2.0 */
#ifndef LARDER_CSYSTEM_SHIM_H
#define LARDER_CSYSTEM_SHIM_H
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <unistd.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <zlib.h>
#include <signal.h>
#include <sys/prctl.h>
#include <openssl/evp.h>

/* copy_file_range(2) is declared by glibc only under _GNU_SOURCE; call the
   system call directly. */
static inline long larder_copy_file_range(int in, int out, size_t length) {
    return syscall(SYS_copy_file_range, in, (void *)0, out, (void *)0, length, 0u);
}

/* renameat2(2) with RENAME_NOREPLACE (glibc declares it only under
   _GNU_SOURCE): fails with EEXIST rather than replace the target. */
static inline int larder_rename_noreplace(const char *from, const char *to) {
    return (int)syscall(SYS_renameat2, AT_FDCWD, from, AT_FDCWD, to, 1u);
}

/* The calling thread's id (gettid(2); glibc declares it only under _GNU_SOURCE). */
static inline int larder_thread_id(void) {
    return (int)syscall(SYS_gettid);
}

/* Names the calling thread (prctl is variadic, so Swift cannot call it);
   the kernel keeps the first 15 bytes. */
static inline void larder_name_thread(const char *name) {
    prctl(PR_SET_NAME, name, 0, 0, 0);
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

#include <spawn.h>
#include <fcntl.h>
#ifndef POSIX_SPAWN_SETSID /* glibc 2.26 and later; declared only under _GNU_SOURCE */
#define POSIX_SPAWN_SETSID 0x80
#endif

/* Starts `path` with `argv` and `envp` in a session of its own (so a
   terminal's Ctrl-C and the starter's process group do not reach it), its
   standard input /dev/null and its standard output and error appended to
   `log`, no other descriptor inherited. Returns the pid, or -errno. */
static inline int larder_spawn_detached(const char *path, char *const argv[], char *const envp[], const char *log) {
    posix_spawn_file_actions_t actions;
    posix_spawnattr_t attributes;
    posix_spawn_file_actions_init(&actions);
    posix_spawnattr_init(&attributes);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 1, log, O_WRONLY | O_CREAT | O_APPEND, 0600);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
    posix_spawn_file_actions_addclosefrom_np(&actions, 3);
#endif
    posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawnattr_setsigmask(&attributes, &none);
    posix_spawnattr_setsigdefault(&attributes, &all);
    pid_t pid = 0;
    int rc = posix_spawn(&pid, path, &actions, &attributes, argv, envp);
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attributes);
    return rc == 0 ? (int)pid : -rc;
}

#endif
