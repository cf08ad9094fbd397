/* A small keep-alive HTTP/1.1 load generator for Larder's benchmark.
 *
 *   loadgen HOST PORT get PATH THREADS SECONDS
 *   loadgen HOST PORT cycle JSON_BODY THREADS SECONDS   (POST /stores, then DELETE it)
 *   loadgen HOST PORT post PATH BODY THREADS SECONDS    (POST PATH, any 2xx; BODY "" for none)
 *   loadgen HOST PORT create JSON_BODY THREADS COUNT    (POST /stores COUNT times, never DELETE)
 *
 * Prints one JSON line: operations, seconds, rate, and p50/p99 latency of
 * the measured request (GET, POST, or the POST of a cycle) in milliseconds;
 * a cycle adds delete_p50_ms and delete_p99_ms, the latency of its DELETE. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static const char *host, *mode, *arg, *path;
static int port;
static double deadline;
static long count;             /* create: stores to make in all */
static long claimed;           /* create: stores claimed so far, by every thread */

typedef struct { double *lat; long n, cap; } samples_t;
typedef struct { samples_t main, del; long ops, errors; } result_t;

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }

static int connect_to(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
    inet_pton(AF_INET, host, &a.sin_addr);
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) { perror("connect"); exit(1); }
    return fd;
}

static void send_all(int fd, const char *p, size_t n) {
    while (n) { ssize_t w = write(fd, p, n); if (w <= 0) { perror("write"); exit(1); } p += w; n -= w; }
}

/* Reads one response; returns the status and copies the body into out. */
static int read_response(int fd, char *buf, size_t cap, char *out, size_t outcap) {
    size_t have = 0; char *end = NULL;
    while (!(end = memmem(buf, have, "\r\n\r\n", 4))) {
        ssize_t r = read(fd, buf + have, cap - have); if (r <= 0) return -1; have += r;
    }
    int status = atoi(buf + 9);
    size_t header = end + 4 - buf, length = 0;
    char *cl = memmem(buf, header, "Content-Length: ", 16);
    if (!cl) cl = memmem(buf, header, "content-length: ", 16);
    if (cl) length = strtoul(cl + 16, NULL, 10);
    while (have < header + length) { ssize_t r = read(fd, buf + have, cap - have); if (r <= 0) return -1; have += r; }
    size_t n = length < outcap - 1 ? length : outcap - 1;
    memcpy(out, buf + header, n); out[n] = 0;
    return status;
}

static void record(samples_t *r, double v) {
    if (r->n == r->cap) { r->cap = r->cap ? r->cap * 2 : 4096; r->lat = realloc(r->lat, r->cap * sizeof(double)); }
    r->lat[r->n++] = v;
}

/* Whether this thread has another operation to do. */
static int more(void) {
    if (strcmp(mode, "create") == 0) return __atomic_fetch_add(&claimed, 1, __ATOMIC_RELAXED) < count;
    return now() < deadline;
}

static void *worker(void *p) {
    result_t *r = p;
    int fd = connect_to();
    static __thread char buf[1 << 20], body[1 << 16], req[1 << 16];
    size_t body_len = strlen(arg);
    while (more()) {
        double t0 = now();
        if (strcmp(mode, "get") == 0) {
            int n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", arg, host);
            send_all(fd, req, n);
            int s = read_response(fd, buf, sizeof buf, body, sizeof body);
            if (s != 200) r->errors++;
            record(&r->main, now() - t0);
        } else if (strcmp(mode, "post") == 0) {
            int n = snprintf(req, sizeof req, "POST %s HTTP/1.1\r\nHost: %s\r\n%sContent-Length: %zu\r\n\r\n%s",
                             path, host, body_len ? "Content-Type: application/json\r\n" : "", body_len, arg);
            send_all(fd, req, n);
            int s = read_response(fd, buf, sizeof buf, body, sizeof body);
            if (s < 200 || s > 299) r->errors++;
            record(&r->main, now() - t0);
        } else {
            int n = snprintf(req, sizeof req, "POST /stores HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
                             host, body_len, arg);
            send_all(fd, req, n);
            int s = read_response(fd, buf, sizeof buf, body, sizeof body);
            record(&r->main, now() - t0);
            char *id = strstr(body, "\"id\":\"");
            if (s != 201 || !id) { r->errors++; continue; }
            if (strcmp(mode, "cycle") == 0) {
                id += 6; char *q = strchr(id, '"'); *q = 0;
                n = snprintf(req, sizeof req, "DELETE /stores/%s HTTP/1.1\r\nHost: %s\r\n\r\n", id, host);
                double t1 = now();
                send_all(fd, req, n);
                if (read_response(fd, buf, sizeof buf, body, sizeof body) != 204) r->errors++;
                record(&r->del, now() - t1);
            }
        }
        r->ops++;
    }
    close(fd);
    return NULL;
}

static int cmp(const void *a, const void *b) { double x = *(double *)a, y = *(double *)b; return x < y ? -1 : x > y; }

/* Every thread's samples of one kind, sorted, into *out; answers how many. */
static long gather(result_t *r, int threads, int del, double **out) {
    long n = 0, k = 0;
    for (int i = 0; i < threads; i++) n += (del ? r[i].del : r[i].main).n;
    double *all = malloc((n ? n : 1) * sizeof(double));
    for (int i = 0; i < threads; i++) {
        samples_t *s = del ? &r[i].del : &r[i].main;
        if (s->n) memcpy(all + k, s->lat, s->n * sizeof(double));
        k += s->n;
    }
    qsort(all, n, sizeof(double), cmp);
    *out = all;
    return n;
}

int main(int argc, char **argv) {
    int post = argc > 3 && strcmp(argv[3], "post") == 0;
    if (argc != 7 + post) {
        fprintf(stderr, "usage: loadgen HOST PORT get|cycle PATH|BODY THREADS SECONDS\n"
                        "       loadgen HOST PORT post PATH BODY THREADS SECONDS\n"
                        "       loadgen HOST PORT create BODY THREADS COUNT\n");
        return 2;
    }
    host = argv[1]; port = atoi(argv[2]); mode = argv[3];
    if (post) path = argv[4];
    arg = argv[4 + post];
    int threads = atoi(argv[5 + post]);
    long last = atol(argv[6 + post]);
    if (strcmp(mode, "get") && strcmp(mode, "cycle") && strcmp(mode, "post") && strcmp(mode, "create")) {
        fprintf(stderr, "loadgen: unknown mode %s\n", mode);
        return 2;
    }
    if (threads < 1 || threads > 256) { fprintf(stderr, "loadgen: 1 to 256 threads\n"); return 2; }
    if (strcmp(mode, "create") == 0) count = last;
    pthread_t t[256]; result_t r[256]; memset(r, 0, sizeof r);
    double start = now(); deadline = start + last;
    for (int i = 0; i < threads; i++) pthread_create(&t[i], NULL, worker, &r[i]);
    long ops = 0, errors = 0;
    for (int i = 0; i < threads; i++) { pthread_join(t[i], NULL); ops += r[i].ops; errors += r[i].errors; }
    double elapsed = now() - start;
    double *all, *del;
    long n = gather(r, threads, 0, &all), d = gather(r, threads, 1, &del);
    printf("{\"operations\": %ld, \"errors\": %ld, \"seconds\": %.2f, \"per_second\": %.0f, \"p50_ms\": %.3f, \"p99_ms\": %.3f",
           ops, errors, elapsed, ops / elapsed, n ? all[n / 2] * 1e3 : 0, n ? all[(long)(n * 0.99)] * 1e3 : 0);
    if (strcmp(mode, "cycle") == 0)
        printf(", \"delete_p50_ms\": %.3f, \"delete_p99_ms\": %.3f", d ? del[d / 2] * 1e3 : 0, d ? del[(long)(d * 0.99)] * 1e3 : 0);
    printf("}\n");
    return errors ? 1 : 0;
}
