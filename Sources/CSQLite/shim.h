/* SPDX-License-Identifier: Apache-2.0 */
#ifndef LARDER_CSQLITE_SHIM_H
#define LARDER_CSQLITE_SHIM_H
#include <sqlite3.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* sqlite3_db_config is variadic, which Swift cannot call: one wrapper per shape. */
static inline int larder_sqlite3_db_config_int(sqlite3 *db, int op, int value) {
    int current = 0;
    return sqlite3_db_config(db, op, value, &current);
}

/* SQLITE_TRANSIENT is a macro casting -1 to a function pointer. */
static inline sqlite3_destructor_type larder_sqlite3_transient(void) {
    return SQLITE_TRANSIENT;
}

/* The descriptor the unix VFS reads `db`'s main file with, or -1: the
   unixFile it hands out keeps it after its methods, its VFS and its inode
   (a layout SQLite has kept since 3.7; the caller checks the descriptor is
   the file's). */
static inline int larder_sqlite3_main_descriptor(sqlite3 *db) {
    sqlite3_file *file = 0;
    if (sqlite3_file_control(db, "main", SQLITE_FCNTL_FILE_POINTER, &file) != SQLITE_OK || !file || !file->pMethods) return -1;
    struct larder_unix_file_head { const sqlite3_io_methods *methods; sqlite3_vfs *vfs; void *inode; int descriptor; };
    return ((const struct larder_unix_file_head *)file)->descriptor;
}

/* Every file the unix VFS opens (a database, its -wal, -shm and -journal,
   their directory) goes through this instead of open(2): opened without
   blocking, then kept only when it is a plain file or a directory. A test
   may swap its store's files for a FIFO, whose open or read blocks for good
   (holding SQLite's global mutex while opening -shm), or for a device.
   /dev/null stays: SQLite opens it to fill descriptors 0-2 when closed. */
static int larder_sqlite_guarded_open(const char *path, int flags, int mode) {
    int fd = open(path, flags | O_NONBLOCK, mode);
    if (fd < 0) return fd;
    struct stat info;
    if (fstat(fd, &info) != 0
        || !(S_ISREG(info.st_mode) || S_ISDIR(info.st_mode) || (S_ISCHR(info.st_mode) && strcmp(path, "/dev/null") == 0))) {
        close(fd);
        errno = EACCES;
        return -1;
    }
    if (!(flags & O_NONBLOCK)) {
        int now = fcntl(fd, F_GETFL);
        if (now >= 0) (void)fcntl(fd, F_SETFL, now & ~O_NONBLOCK);
    }
    return fd;
}

/* Installs larder_sqlite_guarded_open in the unix VFS (whose system calls
   every unix-* VFS shares); SQLITE_OK, or SQLite's error. */
static inline int larder_sqlite_guard_opens(void) {
    sqlite3_vfs *vfs = sqlite3_vfs_find("unix");
    if (!vfs || vfs->iVersion < 3 || !vfs->xSetSystemCall) return SQLITE_ERROR;
    return vfs->xSetSystemCall(vfs, "open", (sqlite3_syscall_ptr)larder_sqlite_guarded_open);
}

#endif
