"""A netslo responder in a thread of the test process, on loopback (unit tests of probes)."""

import contextlib
import socket
import threading
import time

ATTEMPTS = 5
READY_S = 10.0    # how long a responder may take to listen


def free_port() -> int:
    """A loopback port that is free for TCP and UDP at the moment of asking (another process may
    still take it before the responder binds: ``serving`` then tries another)."""
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as t:
            t.bind(("127.0.0.1", 0))
            port = t.getsockname()[1]
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
                try:
                    u.bind(("127.0.0.1", port))
                except OSError:
                    continue
                return port


def _start(serve, port: int):
    """``serve`` in a daemon thread: (thread, its stop event, None) once it listens, or (None, None,
    what it raised) if it ended before (e.g. its port was taken meanwhile). AssertionError if it
    neither listens nor ends within READY_S."""
    stopping, ready, failed = threading.Event(), threading.Event(), []

    def run():
        try:
            serve(port, "127.0.0.1", ready=ready.set, stop=stopping.is_set)
        except BaseException as e:  # reported by the caller: the thread's own exception would be lost
            failed.append(e)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    deadline = time.monotonic() + READY_S
    while not ready.wait(0.05):
        if not t.is_alive():
            return None, None, failed[0] if failed else "it ended without an error"
        if time.monotonic() > deadline:
            stopping.set()
            raise AssertionError(f"the responder did not listen on port {port} within {READY_S:.0f} s")
    return t, stopping, None


@contextlib.contextmanager
def serving(serve, port: int | None = None):
    """``serve(port, "127.0.0.1", ready=, stop=)`` in a daemon thread; yields the port once it listens,
    stops it afterwards. Without ``port`` a free one is chosen, and another if the responder could not
    listen on it (a port free when asked can be taken by any process before the responder binds)."""
    for _ in range(1 if port is not None else ATTEMPTS):
        p = port if port is not None else free_port()
        t, stopping, why = _start(serve, p)
        if t is not None:
            break
    else:
        raise AssertionError(f"the responder never listened (last port {p}): {why}")
    try:
        yield p
    finally:
        stopping.set()
        t.join(10)
