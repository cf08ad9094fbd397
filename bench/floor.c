/* The physical floors of Larder's operations, for bench/floors.py: what the
 * machine does for the least work an operation must do, measured the same
 * way as Larder in the same run.
 *
 *   floor httpd PORT          a libmicrohttpd server answering 200 "ok" (the
 *                             flags Larder's server uses); prints its listening
 *                             line, serves until killed; PORT 0 takes a free one
 *   floor rename DIR N        rename(2) of a directory holding a file, N times
 *   floor handout DIR N       write a small JSON file into a directory, then
 *                             rename the directory, N times
 *   floor copy SRC DST N      copy SRC to a new DST with copy_file_range(2), N times
 *   floor scan DIR [N]        readdir DIR, stat each directory in it and each
 *                             file in those (a restart's scan of its stores), N times
 *
 * Each prints one JSON line with p50_ms and p99_ms of an operation (scan: of
 * a whole pass, with the directories and files it saw), and removes every
 * file it made. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }

static void die(const char *what, const char *path) { fprintf(stderr, "floor: %s %s: %s\n", what, path, strerror(errno)); exit(1); }

static int cmp(const void *a, const void *b) { double x = *(double *)a, y = *(double *)b; return x < y ? -1 : x > y; }

/* Prints p50 and p99 in ms of `n` durations in seconds (sorts them). */
static void report(double *took, long n) {
    qsort(took, n, sizeof(double), cmp);
    printf("{\"n\": %ld, \"p50_ms\": %.4f, \"p99_ms\": %.4f}\n", n, took[n / 2] * 1e3, took[(long)(n * 0.99)] * 1e3);
}

static void write_file(const char *path, const char *text) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0660);
    if (fd < 0) die("open", path);
    size_t n = strlen(text);
    if (write(fd, text, n) != (ssize_t)n) die("write", path);
    close(fd);
}

static void make_dir(const char *path) { if (mkdir(path, 0770) != 0 && errno != EEXIST) die("mkdir", path); }

/* --- httpd ---------------------------------------------------------------- */

static enum MHD_Result answer(void *cls, struct MHD_Connection *c, const char *url, const char *method, const char *version,
                              const char *data, size_t *size, void **state) {
    (void)cls; (void)url; (void)method; (void)version; (void)data;
    static int seen;
    /* The headers, then any body (read and ignored); answered once the
     * request is whole, as libmicrohttpd otherwise closes the connection. */
    if (!*state) { *state = &seen; return MHD_YES; }
    if (*size) { *size = 0; return MHD_YES; }
    struct MHD_Response *r = MHD_create_response_from_buffer(2, "ok", MHD_RESPMEM_PERSISTENT);
    enum MHD_Result ok = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ok;
}

static int httpd(int port) {
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    unsigned int threads = cores > 2 ? (unsigned int)cores : 2;
    struct MHD_Daemon *d = MHD_start_daemon(MHD_USE_EPOLL_INTERNAL_THREAD | MHD_USE_TURBO, (uint16_t)port, NULL, NULL, answer, NULL,
                                            MHD_OPTION_THREAD_POOL_SIZE, threads, MHD_OPTION_END);
    if (!d) { fprintf(stderr, "floor: httpd did not start\n"); return 1; }
    printf("floor listening on %u\n", MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT)->port);
    fflush(stdout);
    for (;;) pause();
}

/* --- rename and handout --------------------------------------------------- */

/* DIR/from/i (each with a file in it) for i < n, and DIR/to. */
static void make_dirs(const char *dir, long n) {
    char path[4096];
    snprintf(path, sizeof path, "%s/from", dir); make_dir(path);
    snprintf(path, sizeof path, "%s/to", dir); make_dir(path);
    for (long i = 0; i < n; i++) {
        snprintf(path, sizeof path, "%s/from/st_%08ld", dir, i); make_dir(path);
        snprintf(path, sizeof path, "%s/from/st_%08ld/store.sqlite", dir, i); write_file(path, "SQLite format 3");
    }
}

static void remove_dirs(const char *dir, long n) {
    char path[4096];
    for (long i = 0; i < n; i++) {
        for (int side = 0; side < 2; side++) {
            const char *where = side ? "to" : "from";
            snprintf(path, sizeof path, "%s/%s/st_%08ld/store.sqlite", dir, where, i); unlink(path);
            snprintf(path, sizeof path, "%s/%s/st_%08ld/store.json", dir, where, i); unlink(path);
            snprintf(path, sizeof path, "%s/%s/st_%08ld", dir, where, i); rmdir(path);
        }
    }
    snprintf(path, sizeof path, "%s/from", dir); rmdir(path);
    snprintf(path, sizeof path, "%s/to", dir); rmdir(path);
}

/* rename(2) of each directory; with `json`, a store.json written into it first. */
static int moves(const char *dir, long n, int json) {
    static const char record[] =
        "{\"id\":\"st_0123456789abcdef0123456789abcdef\",\"template\":\"gallery\",\"version\":\"6\",\"snapshot\":null,"
        "\"fixtures\":[\"artists\",\"artworks\"],\"build\":null,\"label\":null,\"created_at\":\"2026-11-24T06:09:23.990Z\","
        "\"expires_at\":\"2026-11-25T06:09:23.990Z\",\"keep\":false,\"creation\":{\"template\":\"gallery\",\"version\":\"6\"}}";
    make_dirs(dir, n);
    double *took = malloc(n * sizeof(double));
    char from[4096], to[4096], file[4096];
    for (long i = 0; i < n; i++) {
        snprintf(from, sizeof from, "%s/from/st_%08ld", dir, i);
        snprintf(to, sizeof to, "%s/to/st_%08ld", dir, i);
        snprintf(file, sizeof file, "%.4000s/store.json", from);
        double t0 = now();
        if (json) write_file(file, record);
        if (rename(from, to) != 0) die("rename", from);
        took[i] = now() - t0;
    }
    remove_dirs(dir, n);
    report(took, n);
    return 0;
}

/* --- copy ----------------------------------------------------------------- */

static int copy(const char *source, const char *target, long n) {
    double *took = malloc(n * sizeof(double));
    for (long i = 0; i < n; i++) {
        double t0 = now();
        int in = open(source, O_RDONLY | O_CLOEXEC);
        if (in < 0) die("open", source);
        int out = open(target, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0660);
        if (out < 0) die("open", target);
        struct stat st;
        if (fstat(in, &st) != 0) die("stat", source);
        for (off_t left = st.st_size; left > 0;) {
            ssize_t w = copy_file_range(in, NULL, out, NULL, left, 0);
            if (w <= 0) die("copy_file_range", target);
            left -= w;
        }
        close(in);
        close(out);
        took[i] = now() - t0;
        unlink(target);
    }
    report(took, n);
    return 0;
}

/* --- scan ----------------------------------------------------------------- */

static int scan(const char *dir, long n) {
    double *took = malloc(n * sizeof(double));
    long dirs = 0, files = 0;
    for (long i = 0; i < n; i++) {
        dirs = files = 0;
        double t0 = now();
        DIR *top = opendir(dir);
        if (!top) die("opendir", dir);
        struct dirent *e;
        struct stat st;
        while ((e = readdir(top))) {
            if (e->d_name[0] == '.') continue;
            if (fstatat(dirfd(top), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode)) continue;
            dirs++;
            int fd = openat(dirfd(top), e->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
            DIR *inner = fd < 0 ? NULL : fdopendir(fd);
            if (!inner) continue;
            struct dirent *f;
            while ((f = readdir(inner))) {
                if (f->d_name[0] == '.' && (!f->d_name[1] || (f->d_name[1] == '.' && !f->d_name[2]))) continue;
                if (fstatat(dirfd(inner), f->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0) files++;
            }
            closedir(inner);
        }
        closedir(top);
        took[i] = now() - t0;
    }
    qsort(took, n, sizeof(double), cmp);
    printf("{\"n\": %ld, \"dirs\": %ld, \"files\": %ld, \"p50_ms\": %.3f, \"min_ms\": %.3f}\n", n, dirs, files, took[n / 2] * 1e3, took[0] * 1e3);
    return 0;
}

int main(int argc, char **argv) {
    const char *what = argc > 1 ? argv[1] : "";
    if (strcmp(what, "httpd") == 0 && argc == 3) return httpd(atoi(argv[2]));
    if (strcmp(what, "rename") == 0 && argc == 4) return moves(argv[2], atol(argv[3]), 0);
    if (strcmp(what, "handout") == 0 && argc == 4) return moves(argv[2], atol(argv[3]), 1);
    if (strcmp(what, "copy") == 0 && argc == 5) return copy(argv[2], argv[3], atol(argv[4]));
    if (strcmp(what, "scan") == 0 && (argc == 3 || argc == 4)) return scan(argv[2], argc == 4 ? atol(argv[3]) : 1);
    fprintf(stderr, "usage: floor httpd PORT | rename DIR N | handout DIR N | copy SRC DST N | scan DIR [N]\n");
    return 2;
}
