/* SPDX-License-Identifier: Apache-2.0 */
#ifndef LARDER_CSYSTEM_SHIM_H
#define LARDER_CSYSTEM_SHIM_H
#include <stddef.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <unistd.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <zlib.h>
#include <isa-l/igzip_lib.h>
#include <isa-l/crc.h>
#include <signal.h>
#include <sys/prctl.h>
#include <openssl/evp.h>
#include <sys/ioctl.h>
#include <linux/fs.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/vfs.h>

/* copy_file_range(2) is declared by glibc only under _GNU_SOURCE; call the
   system call directly. */
static inline long larder_copy_file_range(int in, int out, size_t length) {
    return syscall(SYS_copy_file_range, in, (void *)0, out, (void *)0, length, 0u);
}

/* The same from `*offset` of `in`, which it moves on (the descriptor's own
   position is left alone: another may be reading it at once). */
static inline long larder_copy_file_range_at(int in, long long *offset, int out, size_t length) {
    loff_t at = (loff_t)*offset;
    long n = syscall(SYS_copy_file_range, in, &at, out, (void *)0, length, 0u);
    if (n > 0) *offset = (long long)at;
    return n;
}

/* The whole file `in` as the contents of `out` sharing its blocks
   (FICLONE: a reflink on XFS, btrfs, bcachefs, overlayfs over those): no
   data moves, and each copy's later writes go to blocks of its own. 0 on
   success, else the errno (EOPNOTSUPP, EXDEV, ... where it cannot). */
static inline int larder_clone_file(int in, int out) {
    return ioctl(out, FICLONE, in) == 0 ? 0 : errno;
}

/* renameat2(2) with RENAME_NOREPLACE (glibc declares it only under
   _GNU_SOURCE): fails with EEXIST rather than replace the target. */
static inline int larder_rename_noreplace(const char *from, const char *to) {
    return (int)syscall(SYS_renameat2, AT_FDCWD, from, AT_FDCWD, to, 1u);
}

/* syncfs(2) (glibc declares it only under _GNU_SOURCE). */
static inline int larder_syncfs(int fd) {
    return (int)syscall(SYS_syncfs, fd);
}

/* The calling thread's id (gettid(2); glibc declares it only under _GNU_SOURCE). */
static inline int larder_thread_id(void) {
    return (int)syscall(SYS_gettid);
}

/* Puts the calling thread in SCHED_IDLE (sched_setscheduler(2) with 0, the
   caller; SCHED_IDLE is declared only under _GNU_SOURCE): it runs when no
   other thread wants the core, and any other that wakes preempts it at once.
   An unprivileged process may do this (and never undo it). 0 on success. */
static inline int larder_thread_idle(void) {
    struct { int priority; } parameters = { 0 };
    return (int)syscall(SYS_sched_setscheduler, 0, 5 /* SCHED_IDLE */, &parameters);
}

/* Marks the directory open as `fd` a top of directory hierarchies
   (FS_TOPDIR_FL, `chattr +T`): ext4 then places each new subdirectory in
   the block group with the fewest directories instead of its parent's,
   and its files follow it. A file system without the flag (tmpfs, xfs)
   refuses it. The owner may set it; 0 on success, else the errno. */
static inline int larder_mark_top_directory(int fd) {
    int flags = 0;
    if (ioctl(fd, FS_IOC_GETFLAGS, &flags) != 0) return errno;
    if (flags & FS_TOPDIR_FL) return 0;
    flags |= FS_TOPDIR_FL;
    return ioctl(fd, FS_IOC_SETFLAGS, &flags) == 0 ? 0 : errno;
}

/* The device numbers of the file system holding `path` ("8:1"), for
   /sys/dev/block; 0 on success. */
static inline int larder_device_numbers(const char *path, unsigned int *major_out, unsigned int *minor_out) {
    struct stat st;
    if (stat(path, &st) != 0) return -1;
    *major_out = major(st.st_dev);
    *minor_out = minor(st.st_dev);
    return 0;
}

/* Whether the directory open as `fd` has FS_TOPDIR_FL (1), has not (0), or
   its file system keeps no such flags (-1). */
static inline int larder_is_top_directory(int fd) {
    int flags = 0;
    if (ioctl(fd, FS_IOC_GETFLAGS, &flags) != 0) return -1;
    return (flags & FS_TOPDIR_FL) != 0;
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
/* SHA-384 of a whole buffer into out48 (sqlx's migration checksum). */
static inline void larder_sha384(const void *bytes, size_t count, unsigned char *out48) {
    unsigned int length = 0;
    EVP_Digest(bytes, count, out48, &length, EVP_sha384(), NULL);
}

/* CRC-32 (the zip and gzip one) from ISA-L: folded with carry-less
   multiplies, about 3x zlib's here. */
static inline uint32_t larder_crc32(uint32_t crc, const void *bytes, size_t count) {
    const unsigned char *p = (const unsigned char *)bytes;
    while (count > 0) { /* ISA-L takes a 64-bit length; stay in its tested range all the same */
        size_t n = count > (1u << 30) ? (1u << 30) : count;
        crc = crc32_gzip_refl(crc, p, (uint64_t)n);
        p += n;
        count -= n;
    }
    return crc;
}
/* The CRC of A followed by B, from each one's CRC and B's length (zlib). */
static inline uint32_t larder_crc32_combine(uint32_t a, uint32_t b, size_t length_b) {
    return (uint32_t)crc32_combine((uLong)a, (uLong)b, (z_off_t)length_b);
}

/* Raw deflate (no zlib or gzip wrapper), as zip entries hold it, from ISA-L's
   igzip at its level 1: on SQLite pages 5 to 9 times zlib's level 1 on one
   core, in fewer bytes (bench/run). A stream and the working memory of its
   level, in one allocation. */
typedef struct {
    struct isal_zstream stream;
    uint8_t level_buffer[ISAL_DEF_LVL1_DEFAULT];
} larder_deflate_state;

static inline void *larder_deflate_new(void) {
    larder_deflate_state *state = (larder_deflate_state *)malloc(sizeof(larder_deflate_state));
    if (!state) return NULL;
    isal_deflate_init(&state->stream);
    state->stream.level = 1;
    state->stream.level_buf = state->level_buffer;
    state->stream.level_buf_size = (uint32_t)sizeof state->level_buffer;
    state->stream.gzip_flag = IGZIP_DEFLATE;
    state->stream.flush = NO_FLUSH;
    return state;
}

static inline void larder_deflate_free(void *context) { free(context); }

/* Compresses from input into output, as much as both allow (at most 1 GiB
   of input a call); *used and *made report what was taken and made. With
   `finish`, the input is the stream's last. Returns 1 once the stream has
   ended, 0 while it has more to take or to make, negative on an error. */
static inline int larder_deflate(void *context, const void *input, size_t input_count, void *output, size_t output_count,
                                 int finish, size_t *used, size_t *made) {
    struct isal_zstream *z = &((larder_deflate_state *)context)->stream;
    uint32_t in = (uint32_t)(input_count > (1u << 30) ? (1u << 30) : input_count);
    uint32_t out = (uint32_t)(output_count > (1u << 30) ? (1u << 30) : output_count);
    z->next_in = (uint8_t *)input;
    z->avail_in = in;
    z->next_out = (uint8_t *)output;
    z->avail_out = out;
    z->end_of_stream = finish && in == input_count ? 1 : 0;
    int rc = isal_deflate(z);
    *used = in - z->avail_in;
    *made = out - z->avail_out;
    if (rc != COMP_OK) return rc < 0 ? rc : -1000 - rc;
    return z->internal_state.state == ZSTATE_END ? 1 : 0;
}

/* Compresses one whole piece on its own with `context` (from
   larder_deflate_new, begun afresh), ended with a sync flush (byte-aligned,
   not final), so pieces compressed in parallel concatenate into one deflate
   stream; the caller ends the stream with an empty final block. `capacity`
   should be larder_deflate_bound(count). Returns the bytes made, or -1. */
static inline long larder_deflate_piece(void *context, const void *input, size_t count, void *output, size_t capacity) {
    if (count > (1u << 30) || capacity > (1u << 30)) return -1;
    struct isal_zstream *z = &((larder_deflate_state *)context)->stream;
    isal_deflate_reset(z);
    z->flush = SYNC_FLUSH;
    z->end_of_stream = 0;
    z->next_in = (uint8_t *)input;
    z->avail_in = (uint32_t)count;
    z->next_out = (uint8_t *)output;
    z->avail_out = (uint32_t)capacity;
    int rc = isal_deflate(z);
    /* All input taken and flushed: output room left over, or the next block not begun. */
    int ok = rc == COMP_OK && z->avail_in == 0 && (z->avail_out > 0 || z->internal_state.state == ZSTATE_NEW_HDR);
    return ok ? (long)(capacity - z->avail_out) : -1;
}

/* Room enough for any piece of `count` bytes: igzip falls back to stored
   blocks (5 bytes a 64 KiB) where compressing would grow the data. */
static inline size_t larder_deflate_bound(size_t count) { return count + count / 8 + 1024; }

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
