/* SPDX-License-Identifier: Apache-2.0 */
#ifndef LARDER_CPEERUSER_H
#define LARDER_CPEERUSER_H
#include <stdint.h>

/* The addresses of a TCP connection as the peer's own socket sees them: its
   local end (our peer) and its remote end (us). A v4-mapped IPv6 pair is
   given as IPv4, as the peer's socket is then an IPv4 one. */
typedef struct larder_tcp_ends {
    int family;
    uint32_t peer[4], local[4]; /* network order, as the kernel keeps them */
    uint16_t peer_port, local_port; /* host order */
} larder_tcp_ends;

/* The two ends of the TCP connection `fd`; 0, or -1 when it is none. */
int larder_tcp_ends_of(int fd, larder_tcp_ends *e);

/* The owner of the peer's socket through sock_diag (an exact lookup, no
   privilege needed): -1 when the kernel cannot say. */
long long larder_peer_uid_diag(const larder_tcp_ends *e);

/* The same from /proc/net/tcp or tcp6. */
long long larder_peer_uid_proc(const larder_tcp_ends *e);

#endif
