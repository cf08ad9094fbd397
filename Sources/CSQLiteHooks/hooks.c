/* SPDX-License-Identifier: Apache-2.0 */
/* The system calls Larder gives SQLite's unix VFS (xSetSystemCall): opens
   that never block on what a test put in place of a file, and a budget for
   SQLite's temporary files. A C file, not a header: their state is one for
   the process. */
#include "hooks.h"
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

/* SQLite's temporary files (sorts, temporary tables, statement journals):
   the room granted them, per descriptor and in all, so that a budget holds
   them (a client's query can sort into them without end).
   Named "etilqs_..." and unlinked at once by SQLite; a write that would
   grow them past what `larder_temp_allow` grants fails with ENOSPC, which
   SQLite answers SQLITE_FULL. Growth is granted a chunk at a time. */
#define LARDER_TEMP_DESCRIPTORS 65536
#define LARDER_TEMP_CHUNK (1LL << 20)
static long long larder_temp_granted[LARDER_TEMP_DESCRIPTORS]; /* bytes granted to it */
static unsigned char larder_temp_tracked[LARDER_TEMP_DESCRIPTORS];
static long long larder_temp_total;      /* granted in all (atomic) */
static int (*larder_temp_allow)(long long bytes); /* nonzero: `bytes` more may be granted */
static __thread int larder_temp_refused; /* this thread's last temporary write was refused */

static int larder_is_temp_name(const char *path) {
    const char *slash = strrchr(path, '/');
    return strncmp(slash ? slash + 1 : path, "etilqs_", 7) == 0;
}

/* Grants `fd` room up to `end`, a chunk at a time; 0 when refused. */
static int larder_temp_grow(int fd, long long end) {
    if (fd < 0 || fd >= LARDER_TEMP_DESCRIPTORS || !larder_temp_tracked[fd]) return 1;
    while (end > larder_temp_granted[fd]) {
        int (*allow)(long long) = __atomic_load_n(&larder_temp_allow, __ATOMIC_ACQUIRE);
        if (allow && !allow(LARDER_TEMP_CHUNK)) { larder_temp_refused = 1; return 0; }
        larder_temp_granted[fd] += LARDER_TEMP_CHUNK;
        __atomic_add_fetch(&larder_temp_total, LARDER_TEMP_CHUNK, __ATOMIC_RELAXED);
    }
    return 1;
}

static void larder_temp_forget(int fd) {
    if (fd < 0 || fd >= LARDER_TEMP_DESCRIPTORS || !larder_temp_tracked[fd]) return;
    __atomic_sub_fetch(&larder_temp_total, larder_temp_granted[fd], __ATOMIC_RELAXED);
    larder_temp_granted[fd] = 0;
    larder_temp_tracked[fd] = 0;
}

static ssize_t larder_sqlite_pwrite(int fd, const void *buffer, size_t count, off_t offset) {
    if (!larder_temp_grow(fd, (long long)offset + (long long)count)) { errno = ENOSPC; return -1; }
    return pwrite(fd, buffer, count, offset);
}

static ssize_t larder_sqlite_pwrite64(int fd, const void *buffer, size_t count, off_t offset) {
    return larder_sqlite_pwrite(fd, buffer, count, offset);
}

static ssize_t larder_sqlite_write(int fd, const void *buffer, size_t count) {
    if (fd >= 0 && fd < LARDER_TEMP_DESCRIPTORS && larder_temp_tracked[fd]) {
        off_t at = lseek(fd, 0, SEEK_CUR);
        if (at >= 0 && !larder_temp_grow(fd, (long long)at + (long long)count)) { errno = ENOSPC; return -1; }
    }
    return write(fd, buffer, count);
}

static int larder_sqlite_ftruncate(int fd, off_t length) {
    if (!larder_temp_grow(fd, (long long)length)) { errno = ENOSPC; return -1; }
    return ftruncate(fd, length);
}

static int larder_sqlite_close(int fd) {
    larder_temp_forget(fd);
    return close(fd);
}

/* Every file the unix VFS opens (a database, its -wal, -shm and -journal,
   their directory) goes through this instead of open(2): opened without
   blocking, then kept only when it is a plain file or a directory. A test
   may swap its store's files for a FIFO, whose open or read blocks for good
   (holding SQLite's global mutex while opening -shm), or for a device.
   /dev/null and /dev/urandom, named so, stay: SQLite opens them itself (to
   fill descriptors 0-2 when closed; to seed its randomness). */
static int larder_sqlite_guarded_open(const char *path, int flags, int mode) {
    int fd = open(path, flags | O_NONBLOCK, mode);
    if (fd < 0) return fd;
    struct stat info;
    if (fstat(fd, &info) != 0
        || !(S_ISREG(info.st_mode) || S_ISDIR(info.st_mode) || (S_ISCHR(info.st_mode) && (strcmp(path, "/dev/null") == 0 || strcmp(path, "/dev/urandom") == 0)))) {
        close(fd);
        errno = EACCES;
        return -1;
    }
    if (!(flags & O_NONBLOCK)) {
        int now = fcntl(fd, F_GETFL);
        if (now >= 0) (void)fcntl(fd, F_SETFL, now & ~O_NONBLOCK);
    }
    if (fd < LARDER_TEMP_DESCRIPTORS) {
        larder_temp_forget(fd); /* (a descriptor closed elsewhere and given again) */
        if ((flags & O_CREAT) && (flags & O_EXCL) && larder_is_temp_name(path)) larder_temp_tracked[fd] = 1;
    }
    return fd;
}

/* Installs larder_sqlite_guarded_open in the unix VFS (whose system calls
   every unix-* VFS shares); SQLITE_OK, or SQLite's error. */
int larder_sqlite_guard_opens(void) {
    sqlite3_vfs *vfs = sqlite3_vfs_find("unix");
    if (!vfs || vfs->iVersion < 3 || !vfs->xSetSystemCall) return SQLITE_ERROR;
    int rc = vfs->xSetSystemCall(vfs, "open", (sqlite3_syscall_ptr)larder_sqlite_guarded_open);
    if (rc != SQLITE_OK) return rc;
    /* Those SQLite has (it uses one of the three writes, as it was built). */
    (void)vfs->xSetSystemCall(vfs, "pwrite", (sqlite3_syscall_ptr)larder_sqlite_pwrite);
    (void)vfs->xSetSystemCall(vfs, "pwrite64", (sqlite3_syscall_ptr)larder_sqlite_pwrite64);
    (void)vfs->xSetSystemCall(vfs, "write", (sqlite3_syscall_ptr)larder_sqlite_write);
    (void)vfs->xSetSystemCall(vfs, "ftruncate", (sqlite3_syscall_ptr)larder_sqlite_ftruncate);
    return vfs->xSetSystemCall(vfs, "close", (sqlite3_syscall_ptr)larder_sqlite_close);
}

/* What SQLite's temporary files have been granted in all. */
long long larder_sqlite_temp_bytes(void) {
    return __atomic_load_n(&larder_temp_total, __ATOMIC_RELAXED);
}

/* Who grants temporary files room (NULL: any room). */
void larder_sqlite_set_temp_allow(int (*allow)(long long bytes)) {
    __atomic_store_n(&larder_temp_allow, allow, __ATOMIC_RELEASE);
}

/* Whether this thread's last temporary write was refused; clears it. */
int larder_sqlite_take_temp_refusal(void) {
    int refused = larder_temp_refused;
    larder_temp_refused = 0;
    return refused;
}
