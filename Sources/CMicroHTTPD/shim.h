#ifndef LARDER_CMICROHTTPD_SHIM_H
#define LARDER_CMICROHTTPD_SHIM_H
#include <stdint.h>
#include <string.h>
#include <sys/types.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <microhttpd.h>

/* Swift cannot call variadic C functions: MHD_start_daemon and MHD_get_daemon_info
   are wrapped here with fixed arguments. */

typedef struct larder_mhd_settings {
    const char *host;            /* numeric IPv4 or IPv6 address */
    uint16_t port;               /* 0 = any free port */
    unsigned int threads;        /* epoll thread pool size */
    unsigned int connection_limit;
    unsigned int connection_timeout_seconds;
    size_t connection_memory_limit;
    unsigned int listen_backlog;
} larder_mhd_settings;

static inline struct MHD_Daemon *larder_mhd_start(const larder_mhd_settings *s,
                                                 MHD_AccessHandlerCallback handler, void *handler_cls,
                                                 MHD_RequestCompletedCallback completed, void *completed_cls) {
    struct sockaddr_in v4;
    struct sockaddr_in6 v6;
    struct sockaddr *addr;
    unsigned int flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_TURBO | MHD_USE_ERROR_LOG;
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
                            MHD_OPTION_NOTIFY_COMPLETED, completed, completed_cls,
                            MHD_OPTION_END);
}

static inline uint16_t larder_mhd_bound_port(struct MHD_Daemon *d) {
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    return info ? info->port : 0;
}

#endif
