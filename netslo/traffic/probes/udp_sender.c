/* netslo native UDP sender: the `udp` probe's open-loop schedule in a compiled loop.
 *
 * Sends request seq at START_NS + seq * INTERVAL_NS (CLOCK_MONOTONIC, ns) whatever happened to
 * earlier ones, records the actual send time, reads replies between sends (one recvmsg each, so
 * every reply gets its own receive time) and writes one row per request to stdout, in seq order,
 * once the row is final (sent WAIT_NS ago: later replies are "late"). A row is netslo.stats.samples.SAMPLE_DTYPE:
 * 89 bytes, packed, little-endian. Memory is a ring of rows covering WAIT_NS of requests, so a
 * run of any length holds a bounded number of rows. The last line on stderr is
 * "done late=L send_errors=E received=N timestamps=S server_kernel=K tx_missing=T rx_missing=R
 * clock_error_ns=C"
 * (L: replies to rows already written).
 *
 * Kernel timestamps as netslo/traffic/kstamps.py (the kernel's Documentation/networking/timestamping.rst):
 * SO_TIMESTAMPING with TX_SCHED | RX_SOFTWARE | SOFTWARE | OPT_ID | OPT_TSONLY, else RX only;
 * send_ns / recv_ns are the kernel's TX (error queue, OPT_ID key = count of successful sends) and
 * RX (control message) stamps mapped onto CLOCK_MONOTONIC, send_app_ns / recv_app_ns the loop's
 * own clock readings; a row without its stamp keeps the user-space time and is counted.
 *
 * Wire format: netslo/traffic/wire.py (52-byte big-endian header, magic "NSL1").
 *
 * HOST: an IPv4 or IPv6 address (IPv6 without brackets); the DSCP goes out as TOS or traffic class.
 * usage: udp_sender HOST PORT COUNT INTERVAL_NS SIZE RESP_BYTES TOS FLOW START_NS WAIT_NS CPU
 *        (CPU -1: not pinned)
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/errqueue.h>
#include <linux/net_tstamp.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "rows are written in the host's byte order, which SAMPLE_DTYPE requires to be little-endian"
#endif

struct __attribute__((packed)) row {
    int64_t seq, sched_ns, send_ns, recv_ns, srv_rx_ns, srv_tx_ns;
    uint32_t req_bytes, resp_bytes;
    int16_t tos_sent, tos_srv, tos_cli;
    int8_t srv_seen;
    int64_t arrival;
    uint16_t dups;
    int64_t send_app_ns, recv_app_ns;
};
_Static_assert(sizeof(struct row) == 89, "row must match netslo.stats.samples.SAMPLE_DTYPE");

#ifndef SO_TIMESTAMPING_OLD
#define SO_TIMESTAMPING_OLD 37
#endif
#ifndef SO_TIMESTAMPNS_OLD
#define SO_TIMESTAMPNS_OLD 35
#endif
enum { USER = 0, KERNEL_RX = 1, KERNEL = 2 };
static const char *SOURCE_NAME[] = {"user", "kernel-rx", "kernel"};

enum { HDR = 52, REQ = 1, REPLY = 2, MAX_DGRAM = 65536 };
#define SPIN_NS 200000LL        /* below this distance to the next send: spin (reading replies) */
#define OUT_BYTES (1 << 20)     /* rows buffered before a write to stdout */

static int64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static uint64_t get_be64(const unsigned char *p) { uint64_t v; memcpy(&v, p, 8); return be64toh(v); }
static void put_be64(unsigned char *p, uint64_t v) { v = htobe64(v); memcpy(p, &v, 8); }

static struct row *ring;
static int64_t ring_mask, lo_seq, n_total, arrivals, received, late;
static int source = USER;
static int64_t clock_offset, clock_error, keys, *seq_of_key, tx_used, tx_missing, rx_missing, server_kernel;

/* CLOCK_REALTIME - CLOCK_MONOTONIC from the tightest of 16 bracketings (as kstamps.Clock) */
static void read_offset(void) {
    int64_t best = -1;
    for (int i = 0; i < 16; i++) {
        struct timespec a, r, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        clock_gettime(CLOCK_REALTIME, &r);
        clock_gettime(CLOCK_MONOTONIC, &b);
        int64_t an = a.tv_sec * 1000000000LL + a.tv_nsec, bn = b.tv_sec * 1000000000LL + b.tv_nsec;
        if (best < 0 || bn - an < best) {
            best = bn - an;
            clock_offset = r.tv_sec * 1000000000LL + r.tv_nsec - (an + bn) / 2;
        }
    }
    clock_error = best / 2 + 1;
}

static int64_t mono_of(const struct timespec *ts) { return ts->tv_sec * 1000000000LL + ts->tv_nsec - clock_offset; }

static void enable_stamps(int fd) {
    int all = SOF_TIMESTAMPING_TX_SCHED | SOF_TIMESTAMPING_RX_SOFTWARE | SOF_TIMESTAMPING_SOFTWARE |
              SOF_TIMESTAMPING_OPT_ID | SOF_TIMESTAMPING_OPT_TSONLY;
    int rx = SOF_TIMESTAMPING_RX_SOFTWARE | SOF_TIMESTAMPING_SOFTWARE, one = 1;
    if (setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPING_OLD, &all, sizeof all) == 0) source = KERNEL;
    else if (setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPING_OLD, &rx, sizeof rx) == 0 ||
             setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS_OLD, &one, sizeof one) == 0) source = KERNEL_RX;
    if (source != USER) read_offset();
}

/* every TX stamp waiting on the error queue into its row's send_ns */
static void drain_tx(int fd) {
    char cbuf[512];
    for (;;) {
        struct msghdr m = {0};
        m.msg_control = cbuf; m.msg_controllen = sizeof cbuf;
        if (recvmsg(fd, &m, MSG_ERRQUEUE | MSG_DONTWAIT) < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) return;
            continue;
        }
        int64_t stamp = -1, key = -1;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
            if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SO_TIMESTAMPING_OLD) {
                struct timespec ts[3];
                memcpy(ts, CMSG_DATA(c), sizeof ts);
                stamp = mono_of(&ts[0]);
            } else if (c->cmsg_level == IPPROTO_IP || c->cmsg_level == IPPROTO_IPV6) {
                struct sock_extended_err e;
                memcpy(&e, CMSG_DATA(c), sizeof e);
                if (e.ee_errno == ENOMSG && e.ee_origin == SO_EE_ORIGIN_TIMESTAMPING && e.ee_info == SCM_TSTAMP_SCHED)
                    key = e.ee_data;
            }
        }
        if (key < 0 || stamp < 0 || key >= keys || keys - key > ring_mask) continue;
        int64_t seq = seq_of_key[key & ring_mask];
        if (seq < lo_seq) continue;                 /* its row is already written */
        struct row *r = &ring[seq & ring_mask];
        if (r->seq == seq && stamp >= r->send_app_ns && !(r->recv_ns >= 0 && stamp >= r->recv_ns)) {
            r->send_ns = stamp;         /* else not this request's packet: its user-space time stays */
            tx_used++;
        }
    }
}
static unsigned char out[OUT_BYTES];
static size_t out_len;

static void flush_out(void) {
    size_t done = 0;
    while (done < out_len) {
        ssize_t w = write(1, out + done, out_len - done);
        if (w < 0) {
            if (errno == EINTR) continue;
            perror("udp_sender: write");
            exit(3);
        }
        done += (size_t)w;
    }
    out_len = 0;
}

static void emit_until(int64_t hi) {  /* write rows lo_seq..hi-1 (all final) */
    for (; lo_seq < hi; lo_seq++) {
        if (out_len + sizeof(struct row) > OUT_BYTES) flush_out();
        memcpy(out + out_len, &ring[lo_seq & ring_mask], sizeof(struct row));
        out_len += sizeof(struct row);
    }
}

static void drain(int fd, uint64_t flow, int64_t sent) {
    static unsigned char buf[MAX_DGRAM];
    char cbuf[CMSG_SPACE(sizeof(int)) * 2 + CMSG_SPACE(3 * sizeof(struct timespec))];
    if (source == KERNEL) drain_tx(fd);
    for (;;) {
        struct iovec iov = {buf, sizeof buf};
        struct msghdr m = {0};
        m.msg_iov = &iov; m.msg_iovlen = 1; m.msg_control = cbuf; m.msg_controllen = sizeof cbuf;
        ssize_t len = recvmsg(fd, &m, MSG_DONTWAIT);
        if (len < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) return;
            continue;  /* e.g. ECONNREFUSED from an ICMP error: counted as loss */
        }
        int64_t t = now_ns();
        if (len < HDR || memcmp(buf, "NSL1", 4) != 0 || buf[4] != REPLY || get_be64(buf + 8) != flow) continue;
        int64_t seq = (int64_t)get_be64(buf + 16);
        if (seq < 0 || seq >= sent) continue;
        if (seq < lo_seq) { late++; continue; }
        struct row *r = &ring[seq & ring_mask];
        if (r->recv_ns >= 0) { r->dups++; continue; }
        r->recv_ns = r->recv_app_ns = t;
        int stamped = 0;
        r->srv_rx_ns = (int64_t)get_be64(buf + 32);
        r->srv_tx_ns = (int64_t)get_be64(buf + 40);
        r->resp_bytes = (uint32_t)len;
        r->tos_srv = buf[6] == 255 ? -1 : buf[6];
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
            if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TOS) r->tos_cli = *(unsigned char *)CMSG_DATA(c);
            else if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_TCLASS) {
                int tclass;
                memcpy(&tclass, CMSG_DATA(c), sizeof tclass);
                r->tos_cli = (int16_t)(tclass & 0xff);
            }
            else if (source != USER && c->cmsg_level == SOL_SOCKET &&
                     (c->cmsg_type == SO_TIMESTAMPING_OLD || c->cmsg_type == SO_TIMESTAMPNS_OLD)) {
                struct timespec ts;
                memcpy(&ts, CMSG_DATA(c), sizeof ts);
                if (ts.tv_sec || ts.tv_nsec) { r->recv_ns = mono_of(&ts); stamped = 1; }
            }
        if (source != USER && !stamped) rx_missing++;
        if (source == KERNEL && r->send_ns == r->send_app_ns) tx_missing++;
        if (buf[5] & 1) server_kernel++;
        r->arrival = arrivals++;
        received++;
    }
}

/* Write the rows that are final at time t: sent at least wait_ns ago. */
static void retire(int64_t t, int64_t wait_ns, int64_t sent) {
    int64_t hi = lo_seq;
    while (hi < sent && t - ring[hi & ring_mask].send_ns >= wait_ns) hi++;
    emit_until(hi);
}

int main(int argc, char **argv) {
    if (argc != 12) {
        fprintf(stderr, "usage: %s HOST PORT COUNT INTERVAL_NS SIZE RESP_BYTES TOS FLOW START_NS WAIT_NS CPU\n", argv[0]);
        return 2;
    }
    const char *host = argv[1];
    int port = atoi(argv[2]);
    n_total = atoll(argv[3]);
    int64_t interval = atoll(argv[4]), size = atoll(argv[5]), resp = atoll(argv[6]);
    int tos = atoi(argv[7]);
    uint64_t flow = strtoull(argv[8], NULL, 10);
    int64_t start = atoll(argv[9]), wait_ns = atoll(argv[10]);
    int cpu = atoi(argv[11]);
    if (size < HDR) size = HDR;
    if (n_total < 0 || interval <= 0 || size > MAX_DGRAM - 8 - 20 - 1) {
        fprintf(stderr, "udp_sender: bad arguments\n");
        return 2;
    }
    if (cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        sched_setaffinity(0, sizeof set, &set);
    }
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);

    /* the ring holds every row that can still change: wait_ns of requests, plus slack */
    int64_t need = wait_ns / interval + 4096, cap = 1;
    while (cap < need && cap < n_total) cap <<= 1;
    ring = calloc((size_t)cap, sizeof(struct row));
    if (!ring) { perror("udp_sender: ring"); return 3; }
    ring_mask = cap - 1;
    seq_of_key = calloc((size_t)cap, sizeof *seq_of_key);
    if (!seq_of_key) { perror("udp_sender: keys"); return 3; }

    /* HOST is an IPv4 or an IPv6 address (no brackets): the socket takes its family */
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    struct sockaddr_in6 a6 = {.sin6_family = AF_INET6, .sin6_port = htons((uint16_t)port)};
    int v6 = strchr(host, ':') != NULL;
    int fd = socket(v6 ? AF_INET6 : AF_INET, SOCK_DGRAM, 0);
    int parsed = v6 ? inet_pton(AF_INET6, host, &a6.sin6_addr) : inet_pton(AF_INET, host, &a.sin_addr);
    if (fd < 0 || parsed != 1 ||
        (v6 ? connect(fd, (struct sockaddr *)&a6, sizeof a6) : connect(fd, (struct sockaddr *)&a, sizeof a)) != 0) {
        fprintf(stderr, "udp_sender: cannot connect a UDP socket to %s port %d: %s\n", host, port, strerror(errno));
        return 3;
    }
    int one = 1, rcvbuf = 4 * 1024 * 1024;
    setsockopt(fd, IPPROTO_IP, IP_RECVTOS, &one, sizeof one);
    setsockopt(fd, IPPROTO_IP, IP_TOS, &tos, sizeof tos);
    if (v6) {   /* IPv6: the traffic class carries the DSCP (netslo/traffic/sockopts.py) */
        setsockopt(fd, IPPROTO_IPV6, IPV6_RECVTCLASS, &one, sizeof one);
        setsockopt(fd, IPPROTO_IPV6, IPV6_TCLASS, &tos, sizeof tos);
    }
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    fcntl(1, F_SETPIPE_SZ, 1 << 20);  /* where stdout is a pipe: room for a second of rows */
    enable_stamps(fd);

    unsigned char *pkt = calloc(1, (size_t)size);
    memcpy(pkt, "NSL1", 4);
    pkt[4] = REQ; pkt[6] = 255;
    put_be64(pkt + 8, flow);
    uint32_t rb = htobe32((uint32_t)resp);
    memcpy(pkt + 48, &rb, 4);

    int64_t send_errors = 0;
    struct pollfd p = {fd, POLLIN, 0};
    for (int64_t seq = 0; seq < n_total; seq++) {
        int64_t sched = start + seq * interval, t;
        if (seq - lo_seq >= cap) emit_until(seq - cap + 1);  /* older than the ring: final by construction */
        while ((t = now_ns()) < sched) {
            if (sched - t > SPIN_NS) {
                int64_t ns = sched - t - SPIN_NS;
                struct timespec to = {ns / 1000000000LL, ns % 1000000000LL};
                if (ppoll(&p, 1, &to, NULL) > 0) drain(fd, flow, seq);
                retire(now_ns(), wait_ns, seq);
            } else {
                drain(fd, flow, seq);
            }
        }
        t = now_ns();
        struct row *r = &ring[seq & ring_mask];
        *r = (struct row){.seq = seq, .sched_ns = sched, .send_ns = t, .recv_ns = -1, .srv_rx_ns = -1,
                          .srv_tx_ns = -1, .req_bytes = (uint32_t)size, .tos_sent = (int16_t)tos, .tos_srv = -1,
                          .tos_cli = -1, .srv_seen = -1, .arrival = -1, .send_app_ns = t, .recv_app_ns = -1};
        put_be64(pkt + 16, (uint64_t)seq);
        put_be64(pkt + 24, (uint64_t)t);
        if (send(fd, pkt, (size_t)size, 0) < 0) send_errors++;
        else seq_of_key[keys++ & ring_mask] = seq;   /* the kernel's OPT_ID key of this datagram */
        if ((seq & 1023) == 1023) retire(t, wait_ns, seq + 1);
    }
    int64_t deadline = now_ns() + wait_ns, t;
    while (received < n_total && (t = now_ns()) < deadline) {  /* every answer in, or wait over */
        int64_t ns = deadline - t;
        struct timespec to = {ns / 1000000000LL, ns % 1000000000LL};
        if (ppoll(&p, 1, &to, NULL) > 0) drain(fd, flow, n_total);
        retire(now_ns(), wait_ns, n_total);
    }
    if (source == KERNEL) drain_tx(fd);
    emit_until(n_total);
    flush_out();
    if (source == KERNEL && received && !tx_used) source = KERNEL_RX;   /* no TX stamp came: the rows kept their own */
    fprintf(stderr, "done late=%lld send_errors=%lld received=%lld timestamps=%s server_kernel=%lld tx_missing=%lld "
            "rx_missing=%lld clock_error_ns=%lld\n", (long long)late, (long long)send_errors, (long long)received,
            SOURCE_NAME[source],
            (long long)server_kernel, (long long)(source == KERNEL ? tx_missing : 0), (long long)rx_missing,
            (long long)(source == USER ? 0 : clock_error));
    return 0;
}
