#ifndef LARDER_CARCHIVE_SHIM_H
#define LARDER_CARCHIVE_SHIM_H
#include <archive.h>
#include <archive_entry.h>
#endif
