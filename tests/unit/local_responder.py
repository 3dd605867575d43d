"""A netslo responder in a thread of the test process, on loopback (unit tests of probes)."""

import contextlib
import socket
import threading

ATTEMPTS = 5


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
    """``serve`` in a daemon thread; (thread, stop event, exception list) once it is ready, or None
    if it ended before listening (e.g. its port was taken meanwhile)."""
    stopping, ready, failed = threading.Event(), threading.Event(), []

    def run():
        try:
            serve(port, "127.0.0.1", ready=ready.set, stop=stopping.is_set)
        except BaseException as e:  # reported by the caller: the thread's own exception would be lost
            failed.append(e)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    while not ready.wait(0.05):
        if not t.is_alive():
            return None, failed
    return (t, stopping), failed


@contextlib.contextmanager
def serving(serve, port: int | None = None):
    """``serve(port, "127.0.0.1", ready=, stop=)`` in a daemon thread; yields the port once it listens,
    stops it afterwards. Without ``port`` a free one is chosen, and another if the responder could not
    listen on it (a port free when asked can be taken by any process before the responder binds)."""
    for _ in range(1 if port is not None else ATTEMPTS):
        p = port if port is not None else free_port()
        started, failed = _start(serve, p)
        if started is not None:
            break
    else:
        raise AssertionError(f"the responder never listened (last port {p}): {failed[0] if failed else 'no error'}")
    t, stopping = started
    try:
        yield p
    finally:
        stopping.set()
        t.join(10)
