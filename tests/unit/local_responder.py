"""A netslo responder in a thread of the test process, on loopback (unit tests of probes)."""

import contextlib
import threading


@contextlib.contextmanager
def serving(serve, port: int):
    """``serve(port, "127.0.0.1", ready=, stop=)`` in a daemon thread; yields ``port`` once it listens,
    stops it afterwards."""
    stopping, ready = threading.Event(), threading.Event()
    t = threading.Thread(target=serve, args=(port, "127.0.0.1"), kwargs={"ready": ready.set, "stop": stopping.is_set},
                         daemon=True)
    t.start()
    assert ready.wait(10)
    try:
        yield port
    finally:
        stopping.set()
        t.join(10)
