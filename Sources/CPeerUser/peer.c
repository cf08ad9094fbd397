/* SPDX-License-Identifier: Apache-2.0 */
/* Who owns the other end of a loopback TCP connection, as the kernel tells
   it. A C file of its own: the kernel's netlink headers, in a module's
   header, hide glibc's socket constants from Swift. */
#include "peer.h"
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <linux/inet_diag.h>

int larder_tcp_ends_of(int fd, larder_tcp_ends *e) {
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
long long larder_peer_uid_diag(const larder_tcp_ends *e) {
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
long long larder_peer_uid_proc(const larder_tcp_ends *e) {
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
