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

#endif
