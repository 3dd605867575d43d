"""Run-scoped CA: TLS 1.3 handshakes verify against it and only it; the broker config text."""

import socket
import ssl
import threading

import pytest

from netslo.core.errors import SpecError
from netslo.traffic import tlsca
from netslo.traffic.responders import mqtt


def _handshake(server_dir, client_dir, name=tlsca.SERVER_NAME):
    srv_ctx, cli_ctx = tlsca.server_context(server_dir), tlsca.client_context(client_dir)
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen()

    def serve():
        conn, _ = lsock.accept()
        try:
            with srv_ctx.wrap_socket(conn, server_side=True) as t:
                t.sendall(t.recv(16))
        except (ssl.SSLError, OSError):
            pass

    th = threading.Thread(target=serve, daemon=True)
    th.start()
    try:
        with cli_ctx.wrap_socket(socket.create_connection(lsock.getsockname()), server_hostname=name) as t:
            t.sendall(b"ping")
            return t.recv(16), t.version()
    finally:
        th.join(5)
        lsock.close()


def test_tls13_handshake_with_the_run_ca(tmp_path):
    tlsca.make(tmp_path)
    assert _handshake(tmp_path, tmp_path) == (b"ping", "TLSv1.3")
    assert (tmp_path / "server.key").stat().st_mode & 0o077 == 0


def test_another_ca_or_name_is_refused(tmp_path):
    tlsca.make(tmp_path / "a")
    tlsca.make(tmp_path / "b")
    with pytest.raises(ssl.SSLCertVerificationError):
        _handshake(tmp_path / "a", tmp_path / "b")
    with pytest.raises(ssl.SSLCertVerificationError):
        _handshake(tmp_path / "a", tmp_path / "a", name="other.netslo.test")


def test_missing_directory_is_one_line(tmp_path, monkeypatch):
    monkeypatch.delenv(tlsca.ENV, raising=False)
    with pytest.raises(SpecError, match="--tls-dir"):
        tlsca.locate()
    with pytest.raises(SpecError, match="missing ca.pem"):
        tlsca.locate(tmp_path)


def test_broker_config_sets_nagle_as_asked():
    assert "set_tcp_nodelay true" in mqtt.config(1883, "0.0.0.0", True)
    text = mqtt.config(1884, "10.0.0.1", False)
    assert "set_tcp_nodelay false" in text and "listener 1884 10.0.0.1" in text
