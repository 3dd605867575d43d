"""A ptrace shim that lets an older user-mode-linux kernel run on hosts with a large XSAVE area.

User-mode-linux saves and restores its processes' FPU state with ``PTRACE_GETREGSET`` /
``PTRACE_SETREGSET`` (``NT_X86_XSTATE``) in a buffer sized when it was built. Since Linux 5.14 the
host accepts a set only of exactly its whole user XSAVE size (``xstateregs_set``: ``count !=
fpu_user_cfg.max_size`` → EFAULT). On a CPU with AMX (Sapphire Rapids and later) that size is
11 008 bytes, larger than Debian 12's and 13's UML kernels (6.1, 6.12) allocate (2 696), so every
process start in the guest dies with "userspace - ptrace set fp regs failed, errno = 14" and the
kernel panics on init. Debian's 7.2 UML kernel sizes the buffer from the host and boots.

The shim, preloaded into the UML binary (``LD_PRELOAD``), passes every ptrace call through except a
``SETREGSET NT_X86_XSTATE`` shorter than the host's size: the first one the host refuses with EFAULT
teaches it that size (a ``GETREGSET`` reports it), and from then on such a set goes to the host
padded with zeros to it. The header's XSTATE_BV stays UML's, so the components beyond UML's buffer
(AMX tile state, which a guest process cannot enable: that needs ``arch_prctl(ARCH_REQ_XCOMP_PERM)``
from the host) are set to their initial state, as they were. Where the sizes match it never acts.
"""

from __future__ import annotations

from pathlib import Path

from netslo.core import native

CACHE = Path("/var/cache/netslo/uml")   # built once per source; a cold cache builds it (cc, < 1 s)

SOURCE = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <stdarg.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/types.h>
#include <sys/uio.h>

typedef long (*ptrace_fn)(int, pid_t, void *, void *);

static unsigned char padded[1 << 16] __attribute__((aligned(64)));
static size_t host_size;                     /* the host's whole XSAVE size, 0 until learnt */
static volatile int busy;                    /* padded[] in use */

static long set_padded(ptrace_fn real, pid_t pid, void *addr, const struct iovec *iov)
{
    while (__sync_lock_test_and_set(&busy, 1))
        ;
    memcpy(padded, iov->iov_base, iov->iov_len);
    memset(padded + iov->iov_len, 0, host_size - iov->iov_len);
    struct iovec full = { padded, host_size };
    long r = real(PTRACE_SETREGSET, pid, addr, &full);
    __sync_lock_release(&busy);
    return r;
}

long ptrace(enum __ptrace_request request, ...)
{
    static ptrace_fn real;
    va_list ap;
    va_start(ap, request);
    pid_t pid = va_arg(ap, pid_t);
    void *addr = va_arg(ap, void *);
    void *data = va_arg(ap, void *);
    va_end(ap);
    if (!real && !(real = (ptrace_fn)dlsym(RTLD_NEXT, "ptrace"))) {
        errno = ENOSYS;
        return -1;
    }
    int xstate_set = request == PTRACE_SETREGSET && (long)addr == NT_X86_XSTATE && data;
    struct iovec *iov = data;
    if (xstate_set && host_size && iov->iov_len < host_size)   /* known short: pad at once */
        return set_padded(real, pid, addr, iov);
    long r = real(request, pid, addr, data);
    if (r != -1 || errno != EFAULT || !xstate_set || host_size)
        return r;
    struct iovec probe = { padded, sizeof padded };               /* learn the host's size once */
    if (real(PTRACE_GETREGSET, pid, addr, &probe) == -1)
        return -1;
    if (probe.iov_len <= iov->iov_len || probe.iov_len >= sizeof padded) {
        errno = EFAULT;
        return -1;
    }
    host_size = probe.iov_len;
    return set_padded(real, pid, addr, iov);
}
"""


def library() -> tuple[Path | None, str]:
    """(path of the compiled shim, "") or (None, why not). Built once per source into the cache."""
    return native.build(CACHE, "xstate-pad", ".so", SOURCE, ["-shared", "-fPIC", "-O2"], ["-ldl"],
                        "the XSAVE-size ptrace shim")
