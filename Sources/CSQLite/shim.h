/* SPDX-License-Identifier: Apache-2.0 */
#ifndef LARDER_CSQLITE_SHIM_H
#define LARDER_CSQLITE_SHIM_H
#include <sqlite3.h>

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

#endif
