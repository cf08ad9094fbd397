/* SPDX-License-Identifier: Apache-2.0 */
#ifndef LARDER_CSQLITEHOOKS_H
#define LARDER_CSQLITEHOOKS_H
#include <sqlite3.h>

/* Installs the guarded open and the temporary files' budget in the unix
   VFS (whose system calls every unix-* VFS shares): SQLITE_OK, or SQLite's
   error. Before the first connection. */
int larder_sqlite_guard_opens(void);

/* What SQLite's temporary files have been granted in all. */
long long larder_sqlite_temp_bytes(void);

/* Who grants temporary files room, `bytes` at a time (nonzero: granted;
   NULL: any room). */
void larder_sqlite_set_temp_allow(int (*allow)(long long bytes));

/* Whether this thread's last temporary write was refused; clears it. */
int larder_sqlite_take_temp_refusal(void);

#endif
