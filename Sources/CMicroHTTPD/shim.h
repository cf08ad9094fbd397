/* SPDX-License-Identifier: Apache-2.0 */
#ifndef LARDER_CMICROHTTPD_SHIM_H
#define LARDER_CMICROHTTPD_SHIM_H
#include <stdint.h>
#include <string.h>
#include <sys/types.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <errno.h>
#include <unistd.h>
#include <microhttpd.h>

/* Swift cannot call variadic C functions: MHD_start_daemon and MHD_get_daemon_info
   are wrapped here with fixed arguments. */

typedef struct larder_mhd_settings {
    const char *host;            /* numeric IPv4 or IPv6 address */
    uint16_t port;               /* 0 = any free port */
    unsigned int threads;        /* thread pool size */
    unsigned int connection_limit;
    unsigned int connection_timeout_seconds;
    size_t connection_memory_limit;
    unsigned int listen_backlog;
    unsigned int per_ip_connection_limit; /* 0 = no limit */
    int portable;                /* poll(2) rather than Linux's epoll (Syscalls.portable) */
} larder_mhd_settings;

/* Decodes %XX escapes in place, except %00: a NUL would cut the path short
   (`/templates/gallery%00x` must not read as `/templates/gallery`), so it
   stays as the three characters it was. '+' is handled by libmicrohttpd. */
static inline size_t larder_mhd_unescape(void *cls, struct MHD_Connection *connection, char *s) {
    (void)cls; (void)connection;
    char *r = s, *w = s;
    while (*r) {
        if (r[0] == '%' && r[1] && r[2]) {
            int hi = r[1] <= '9' ? r[1] - '0' : (r[1] | 32) - 'a' + 10;
            int lo = r[2] <= '9' ? r[2] - '0' : (r[2] | 32) - 'a' + 10;
            if (hi >= 0 && hi < 16 && lo >= 0 && lo < 16 && (hi | lo) != 0) {
                *w++ = (char)(hi * 16 + lo);
                r += 3;
                continue;
            }
        }
        *w++ = *r++;
    }
    *w = 0;
    return (size_t)(w - s);
}

static inline struct MHD_Daemon *larder_mhd_start(const larder_mhd_settings *s,
                                                 MHD_AccessHandlerCallback handler, void *handler_cls,
                                                 MHD_RequestCompletedCallback completed, void *completed_cls,
                                                 MHD_NotifyConnectionCallback notify, void *notify_cls) {
    struct sockaddr_in v4;
    struct sockaddr_in6 v6;
    struct sockaddr *addr;
    /* No MHD_USE_ERROR_LOG: its lines (a client gone mid-answer, a bind that
       failed) reach standard error unformatted; the server says what matters. */
    unsigned int flags = (s->portable ? MHD_USE_POLL_INTERNAL_THREAD : MHD_USE_EPOLL_INTERNAL_THREAD)
                         | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_TURBO;
    memset(&v4, 0, sizeof v4);
    memset(&v6, 0, sizeof v6);
    if (inet_pton(AF_INET, s->host, &v4.sin_addr) == 1) {
        v4.sin_family = AF_INET;
        v4.sin_port = htons(s->port);
        addr = (struct sockaddr *)&v4;
    } else if (inet_pton(AF_INET6, s->host, &v6.sin6_addr) == 1) {
        v6.sin6_family = AF_INET6;
        v6.sin6_port = htons(s->port);
        addr = (struct sockaddr *)&v6;
        flags |= MHD_USE_IPv6;
    } else {
        return NULL;
    }
    return MHD_start_daemon(flags, s->port, NULL, NULL, handler, handler_cls,
                            MHD_OPTION_SOCK_ADDR, addr,
                            MHD_OPTION_THREAD_POOL_SIZE, s->threads,
                            MHD_OPTION_CONNECTION_LIMIT, s->connection_limit,
                            MHD_OPTION_CONNECTION_TIMEOUT, s->connection_timeout_seconds,
                            MHD_OPTION_CONNECTION_MEMORY_LIMIT, s->connection_memory_limit,
                            MHD_OPTION_LISTEN_BACKLOG_SIZE, s->listen_backlog,
                            MHD_OPTION_PER_IP_CONNECTION_LIMIT, s->per_ip_connection_limit,
                            MHD_OPTION_NOTIFY_COMPLETED, completed, completed_cls,
                            MHD_OPTION_NOTIFY_CONNECTION, notify, notify_cls,
                            MHD_OPTION_UNESCAPE_CALLBACK, larder_mhd_unescape, NULL,
                            MHD_OPTION_END);
}

/* Why the daemon could not listen on host:port: binds a socket there the
   same way and answers the errno (EINVAL for an address that is not numeric,
   0 when binding works now). */
static inline int larder_bind_error(const char *host, uint16_t port) {
    struct sockaddr_in v4;
    struct sockaddr_in6 v6;
    struct sockaddr *addr;
    socklen_t length;
    int family;
    memset(&v4, 0, sizeof v4);
    memset(&v6, 0, sizeof v6);
    if (inet_pton(AF_INET, host, &v4.sin_addr) == 1) {
        v4.sin_family = AF_INET; v4.sin_port = htons(port);
        addr = (struct sockaddr *)&v4; length = sizeof v4; family = AF_INET;
    } else if (inet_pton(AF_INET6, host, &v6.sin6_addr) == 1) {
        v6.sin6_family = AF_INET6; v6.sin6_port = htons(port);
        addr = (struct sockaddr *)&v6; length = sizeof v6; family = AF_INET6;
    } else {
        return EINVAL;
    }
    int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return errno;
    int on = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    int rc = bind(fd, addr, length) == 0 ? 0 : errno;
    close(fd);
    return rc;
}

static inline uint16_t larder_mhd_bound_port(struct MHD_Daemon *d) {
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    return info ? info->port : 0;
}

/* MHD_get_connection_info is variadic too. */
static inline int larder_mhd_connection_fd(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    return info ? info->connect_fd : -1;
}

static inline void *larder_mhd_socket_context(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return info ? info->socket_context : NULL;
}

#endif
