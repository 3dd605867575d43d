/* Minimal C reference for the probe-floor benchmark (not part of netslo).
 *   udp_echo_ref server PORT                      echo every datagram back
 *   udp_echo_ref client IP PORT COUNT INTERVAL_US SIZE
 *      sends COUNT datagrams of SIZE bytes, one every INTERVAL_US (absolute schedule), waits for each
 *      echo (1 s timeout) and prints one RTT in nanoseconds per line (-1 = lost). CLOCK_MONOTONIC. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static int64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000LL + t.tv_nsec;
}

int main(int argc, char **argv) {
    char buf[65536];
    int s = socket(AF_INET, SOCK_DGRAM, 0);
    if (argc == 3 && strcmp(argv[1], "server") == 0) {
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(atoi(argv[2]))};
        if (bind(s, (struct sockaddr *)&a, sizeof a) < 0) { perror("bind"); return 1; }
        for (;;) {
            struct sockaddr_in from; socklen_t fl = sizeof from;
            ssize_t n = recvfrom(s, buf, sizeof buf, 0, (struct sockaddr *)&from, &fl);
            if (n > 0) sendto(s, buf, n, 0, (struct sockaddr *)&from, fl);
        }
    }
    if (argc != 7 || strcmp(argv[1], "client") != 0) {
        fprintf(stderr, "usage: server PORT | client IP PORT COUNT INTERVAL_US SIZE\n");
        return 2;
    }
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(atoi(argv[3]))};
    inet_pton(AF_INET, argv[2], &a.sin_addr);
    connect(s, (struct sockaddr *)&a, sizeof a);
    long count = atol(argv[4]), interval = atol(argv[5]) * 1000L;
    size_t size = (size_t)atol(argv[6]);
    memset(buf, 0, sizeof buf);
    struct timespec next;
    clock_gettime(CLOCK_MONOTONIC, &next);
    for (long i = 0; i < count; i++) {
        next.tv_nsec += interval;
        while (next.tv_nsec >= 1000000000L) { next.tv_nsec -= 1000000000L; next.tv_sec++; }
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
        memcpy(buf, &i, sizeof i);
        int64_t t0 = now_ns();
        send(s, buf, size, 0);
        struct pollfd p = {.fd = s, .events = POLLIN};
        int64_t rtt = -1;
        while (poll(&p, 1, 1000) > 0) {
            long seq;
            ssize_t n = recv(s, buf, sizeof buf, 0);
            memcpy(&seq, buf, sizeof seq);
            if (n >= (ssize_t)sizeof seq && seq == i) { rtt = now_ns() - t0; break; }
        }
        printf("%lld\n", (long long)rtt);
    }
    return 0;
}
