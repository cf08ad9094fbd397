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
#include <stdio.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <linux/inet_diag.h>
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
    unsigned int per_ip_connection_limit; /* 0 = no limit */
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
    unsigned int flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_TURBO;
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

/* The addresses of a TCP connection as the peer's own socket sees them: its
   local end (our peer) and its remote end (us). A v4-mapped IPv6 pair is
   given as IPv4, as the peer's socket is then an IPv4 one. */
typedef struct larder_tcp_ends {
    int family;
    uint32_t peer[4], local[4]; /* network order, as the kernel keeps them */
    uint16_t peer_port, local_port; /* host order */
} larder_tcp_ends;

static inline int larder_tcp_ends_of(int fd, larder_tcp_ends *e) {
    struct sockaddr_storage local, peer;
    socklen_t ll = sizeof local, pl = sizeof peer;
    memset(e, 0, sizeof *e);
    if (getsockname(fd, (struct sockaddr *)&local, &ll) != 0 || getpeername(fd, (struct sockaddr *)&peer, &pl) != 0) return -1;
    if (local.ss_family != peer.ss_family) return -1;
    if (local.ss_family == AF_INET) {
        const struct sockaddr_in *l = (const struct sockaddr_in *)&local, *p = (const struct sockaddr_in *)&peer;
        e->family = AF_INET;
        e->local[0] = l->sin_addr.s_addr; e->peer[0] = p->sin_addr.s_addr;
        e->local_port = ntohs(l->sin_port); e->peer_port = ntohs(p->sin_port);
        return 0;
    }
    if (local.ss_family != AF_INET6) return -1;
    const struct sockaddr_in6 *l = (const struct sockaddr_in6 *)&local, *p = (const struct sockaddr_in6 *)&peer;
    e->local_port = ntohs(l->sin6_port); e->peer_port = ntohs(p->sin6_port);
    if (IN6_IS_ADDR_V4MAPPED(&l->sin6_addr) && IN6_IS_ADDR_V4MAPPED(&p->sin6_addr)) {
        e->family = AF_INET;
        memcpy(&e->local[0], &l->sin6_addr.s6_addr[12], 4);
        memcpy(&e->peer[0], &p->sin6_addr.s6_addr[12], 4);
    } else {
        e->family = AF_INET6;
        memcpy(e->local, &l->sin6_addr, 16);
        memcpy(e->peer, &p->sin6_addr, 16);
    }
    return 0;
}

/* The owner of the peer's socket through sock_diag (an exact lookup, no
   privilege needed): -1 when the kernel cannot say (no such socket here: the
   peer is on another host; or no inet_diag). */
static inline long long larder_peer_uid_diag(const larder_tcp_ends *e) {
    struct { struct nlmsghdr header; struct inet_diag_req_v2 request; } ask;
    memset(&ask, 0, sizeof ask);
    ask.header.nlmsg_len = sizeof ask;
    ask.header.nlmsg_type = SOCK_DIAG_BY_FAMILY;
    ask.header.nlmsg_flags = NLM_F_REQUEST;
    ask.request.sdiag_family = (uint8_t)e->family;
    ask.request.sdiag_protocol = IPPROTO_TCP;
    ask.request.idiag_states = ~0u;
    /* The peer's socket: its source is the peer's end, its destination ours. */
    ask.request.id.idiag_sport = htons(e->peer_port);
    ask.request.id.idiag_dport = htons(e->local_port);
    memcpy(ask.request.id.idiag_src, e->peer, sizeof e->peer);
    memcpy(ask.request.id.idiag_dst, e->local, sizeof e->local);
    ask.request.id.idiag_cookie[0] = ask.request.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
    int s = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
    if (s < 0) return -1;
    long long uid = -1;
    union { struct nlmsghdr header; char bytes[8192]; } answer;
    if (send(s, &ask, sizeof ask, 0) == (ssize_t)sizeof ask) {
        ssize_t n = recv(s, &answer, sizeof answer, 0);
        struct nlmsghdr *h = &answer.header;
        if (n > 0 && NLMSG_OK(h, (unsigned)n) && h->nlmsg_type == SOCK_DIAG_BY_FAMILY
            && h->nlmsg_len >= NLMSG_LENGTH(sizeof(struct inet_diag_msg))) {
            const struct inet_diag_msg *m = (const struct inet_diag_msg *)NLMSG_DATA(h);
            if (m->id.idiag_sport == htons(e->peer_port) && m->id.idiag_dport == htons(e->local_port)) uid = m->idiag_uid;
        }
    }
    close(s);
    return uid;
}

/* The same from /proc/net/tcp or tcp6 (where sock_diag is not there): the
   line whose local end is the peer's and remote end ours. */
static inline long long larder_peer_uid_proc(const larder_tcp_ends *e) {
    FILE *f = fopen(e->family == AF_INET ? "/proc/net/tcp" : "/proc/net/tcp6", "re");
    if (!f) return -1;
    char line[512];
    long long uid = -1;
    int words = e->family == AF_INET ? 1 : 4;
    while (uid < 0 && fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (!colon) continue;
        char *at = colon + 1;
        uint32_t address[2][4];
        unsigned int port[2];
        int ok = 1;
        for (int end = 0; end < 2 && ok; end++) {
            while (*at == ' ') at++;
            for (int w = 0; w < words && ok; w++) {
                unsigned int value;
                if (sscanf(at, "%8X", &value) != 1) ok = 0;
                address[end][w] = value;
                at += 8;
            }
            if (ok && sscanf(at, ":%X", &port[end]) != 1) ok = 0;
            while (ok && *at && *at != ' ') at++;
        }
        if (!ok || port[0] != e->peer_port || port[1] != e->local_port
            || memcmp(address[0], e->peer, (size_t)words * 4) != 0 || memcmp(address[1], e->local, (size_t)words * 4) != 0) continue;
        unsigned int state, uid_value;
        /* st tx_queue:rx_queue tr:tm->when retrnsmt uid */
        if (sscanf(at, " %X %*X:%*X %*X:%*X %*X %u", &state, &uid_value) == 2) uid = uid_value;
    }
    fclose(f);
    return uid;
}

/* Who owns the other end of the TCP connection `fd`, when it is a socket of
   this machine: its uid, or -1 when that cannot be told. */
static inline long long larder_peer_uid(int fd) {
    larder_tcp_ends e;
    if (larder_tcp_ends_of(fd, &e) != 0) return -1;
    long long uid = larder_peer_uid_diag(&e);
    return uid >= 0 ? uid : larder_peer_uid_proc(&e);
}

#endif
