"""serve: addresses it cannot listen on are one line and exit 2 before the server starts (uvicorn logged the
failure over several lines and exited 3, after 'the page is at' had been printed); an empty --host listened on
every interface."""

from __future__ import annotations

import socket
from pathlib import Path

from corpus import add, argv

_HELD: list[socket.socket] = []  # the sockets that hold the ports, alive for the test session


def _busy_port(_root: Path) -> list[str]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    _HELD.append(sock)
    return ["serve", "--port", str(sock.getsockname()[1])]


add("serve-port-in-use", _busy_port, expect_in="cannot listen there")
for n, host in enumerate(["", " "]):
    argv(f"serve-host-empty-{n}", ["serve", "--host", host], expect_in="names no address")
argv("serve-host-unresolvable", ["serve", "--host", "nosuch.invalid"], expect_in="is not an address to listen on")
argv("serve-host-bad-ip", ["serve", "--host", "999.1.1.1"], expect_in="is not an address to listen on")
argv("serve-host-not-ours", ["serve", "--host", "192.0.2.1"], expect_in="cannot listen there")
