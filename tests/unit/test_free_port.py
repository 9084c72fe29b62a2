"""`free_port`: the port a test hands a process it starts must still be free when that process binds it."""

from __future__ import annotations

import socket

import pytest

from app import controlplane
from app.controlplane import _ephemeral_ports, free_port


def test_ports_are_free_on_every_address_outside_the_ephemeral_range_and_never_handed_out_twice() -> None:
    ephemeral = _ephemeral_ports()
    ports = [free_port() for _ in range(200)]
    assert len(set(ports)) == len(ports)
    # An outgoing connection takes its local port from the ephemeral range: none can take one of these meanwhile.
    assert not [port for port in ports if port in ephemeral]
    for port in ports[:20]:
        with socket.socket() as sock:
            sock.bind(("", port))  # every address


def test_a_port_something_listens_on_is_passed_over(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        taken = listening.getsockname()[1]
        spare = next(port for port in range(20_000, 30_000) if port not in controlplane._handed_out and _free(port))
        offered = iter([taken, spare])
        monkeypatch.setattr(controlplane._pick, "choice", lambda _: next(offered))
        assert free_port() == spare


def _free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("", port))
        except OSError:
            return False
        return True
