"""The loopback responder helper of the unit tests tries another port when its first was taken
between asking and binding (the own-test run of 2026-11-27 failed once so: mosquitto 'Address already
in use' on a port a UDP probe had found free)."""

import socket
import time

import pytest

from netslo.traffic.responders import mqtt

from . import local_responder


def test_a_port_taken_before_the_responder_binds_is_replaced(monkeypatch):
    with socket.socket() as holder:          # bound like a client's local port, not listening
        holder.bind(("127.0.0.1", 0))
        taken = holder.getsockname()[1]
        offered = iter([taken])
        real = local_responder.free_port
        monkeypatch.setattr(local_responder, "free_port", lambda: next(offered, None) or real())
        with local_responder.serving(mqtt.serve) as port:
            assert port != taken
        with pytest.raises(AssertionError, match=f"never listened \\(last port {taken}\\)"):
            with local_responder.serving(mqtt.serve, taken):
                pass


def test_a_responder_that_never_listens_is_given_up_after_its_deadline(monkeypatch):
    monkeypatch.setattr(local_responder, "READY_S", 0.3)
    stopped = []

    def mute(port, bind, ready, stop):      # alive, never ready, ends when told to stop
        while not stop():
            time.sleep(0.01)
        stopped.append(port)

    with pytest.raises(AssertionError, match=r"did not listen on port \d+ within 0 s"):
        with local_responder.serving(mute):
            pass
    time.sleep(0.1)
    assert len(stopped) == 1                # told to stop, not left running
