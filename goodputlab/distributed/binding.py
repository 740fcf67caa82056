"""Where a distributed run's sockets listen (pure: no torch).

PyTorch's stores and transports authenticate nobody, and torchrun's rendezvous state is a
pickle its agent loads: whoever can reach a job's ports can join its rendezvous, and whoever
can write that state runs code in the agent. So a run on one machine keeps every one of them
off the network (``docs/SECURITY.md`` holds the evidence, ``tests/test_listen_loopback.py``
the check):

* **the agent's rendezvous store** is a :class:`torch.distributed.FileStore`, a file only this
  user can read and write (``--rdzv-conf store_type=file``): it has no port at all;
* **the ranks' store** (``MASTER_ADDR:MASTER_PORT``, hosted by rank 0) listens on the bind
  address: rank 0 binds the socket itself and hands it to ``TCPStore`` (``master_listen_fd``),
  because ``TCPStore`` binds every interface whatever host it is given. On one machine rank 0
  binds a free port of its own choosing and tells the other ranks in a private file
  (:func:`publish_port`, :data:`PORT_FILE_ENV`) instead of binding torchrun's ``MASTER_PORT``:
  torchrun picks that port by binding and closing a socket, and on a busy machine another
  process can take the port before rank 0 binds it (rank 0 then fails to start);
* **gloo and NCCL** listen on the interface that holds the bind address
  (``GLOO_SOCKET_IFNAME``, ``NCCL_SOCKET_IFNAME``): left alone they pick the address the
  machine's name resolves to, or its first network interface.

:func:`bind_address` decides the address: ``launch.bind_host`` when a launch names one (a
node in a network namespace of its own, say), loopback for a job on one machine, and ``None``
(torch's own choice: every interface) for a job on several machines, which is then warned
about (:func:`exposure_warning`): its rendezvous port must be reachable only from the job's
own machines.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import struct
import time

LOOPBACK = "127.0.0.1"
#: The environment that tells rank 0 of a job where its store listens (read by ``distributed.ranks``).
BIND_ENV = "GOODPUTLAB_BIND_HOST"
#: The environment that names a one-machine job's private port file (:func:`publish_port`, :func:`await_port`).
PORT_FILE_ENV = "GOODPUTLAB_STORE_PORT_FILE"
_IFF_LOOPBACK = 0x8
_SIOCGIFADDR = 0x8915


def bind_address(launch) -> str | None:
    """The address this machine's listening sockets of ``launch`` (a :class:`~goodputlab.distributed.launch.TorchrunLaunch`)
    bind to: its ``bind_host`` if it names one, loopback on one machine, else ``None`` (torch's default, every interface)."""
    if launch.bind_host is not None:
        return launch.bind_host
    return LOOPBACK if launch.nnodes == 1 else None


def is_bindable_address(text) -> bool:
    """Is ``text`` a numeric IPv4 or IPv6 address a socket can be bound to (not ``0.0.0.0`` / ``::``, which mean every interface)?"""
    try:
        addr = ipaddress.ip_address(text)
    except (TypeError, ValueError):
        return False
    return not addr.is_unspecified and not addr.is_multicast


def _interfaces() -> list[str]:
    return [name for _, name in socket.if_nameindex()]


def _flags(interface: str) -> int:
    try:
        with open(f"/sys/class/net/{interface}/flags") as f:
            return int(f.read().strip(), 16)
    except (OSError, ValueError):
        return 0


def _ipv4_of(interface: str) -> str | None:
    import fcntl

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            packed = fcntl.ioctl(s.fileno(), _SIOCGIFADDR, struct.pack("256s", interface.encode()[:15]))
        except OSError:
            return None
    return socket.inet_ntoa(packed[20:24])


def _ipv6_holders(address: ipaddress.IPv6Address) -> list[str]:
    try:
        with open("/proc/net/if_inet6") as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    return [parts[5] for parts in (line.split() for line in lines) if len(parts) >= 6 and int(parts[0], 16) == int(address)]


def interface_of(address: str) -> str:
    """The network interface that holds ``address`` (``lo`` for loopback); ``ValueError`` when none does."""
    addr = ipaddress.ip_address(address)
    if addr.is_loopback:
        found = [name for name in _interfaces() if _flags(name) & _IFF_LOOPBACK]
    elif addr.version == 4:
        found = [name for name in _interfaces() if _ipv4_of(name) == str(addr)]
    else:
        found = _ipv6_holders(addr)
    if not found:
        raise ValueError(f"no network interface of this machine holds {address}")
    return found[0]


def listen_env(address: str) -> dict[str, str]:
    """The environment that keeps torchrun's ranks listening on ``address`` only: rank 0's store
    (:data:`BIND_ENV`), gloo's and NCCL's sockets (the interface that holds it)."""
    interface = interface_of(address)
    return {BIND_ENV: address, "GLOO_SOCKET_IFNAME": interface, "NCCL_SOCKET_IFNAME": "=" + interface}


def listening_socket(address: str, port: int) -> socket.socket:
    """A TCP socket bound to ``address:port`` and listening (``port`` 0: any free one)."""
    family = socket.AF_INET6 if ipaddress.ip_address(address).version == 6 else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((address, port))
        sock.listen(socket.SOMAXCONN)
    except BaseException:
        sock.close()
        raise
    return sock


def publish_port(path: str, attempt: int, port: int) -> None:
    """Rank 0 of attempt ``attempt``: its store listens on ``port`` (a line in the private file ``path``,
    which the launch created, mode ``0o600``; a later attempt's line replaces it)."""
    fd = os.open(path, os.O_WRONLY | os.O_TRUNC | os.O_NOFOLLOW)
    with os.fdopen(fd, "w") as f:
        f.write(f"{attempt} {port}\n")


def await_port(path: str, attempt: int, timeout_s: float) -> int:
    """The port rank 0 of attempt ``attempt`` published in ``path`` (:func:`publish_port`), waiting for it
    at most ``timeout_s`` seconds (``TimeoutError``)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with open(path) as f:
                line = f.read()
        except FileNotFoundError:
            line = ""
        fields = line.split()
        if line.endswith("\n") and len(fields) == 2 and fields[0] == str(attempt) and fields[1].isdigit():
            return int(fields[1])
        if time.monotonic() > deadline:
            raise TimeoutError(f"rank 0 of attempt {attempt} did not publish its store's port in {path} within {timeout_s:.0f} s")
        time.sleep(0.01)


def exposure_warning(launch) -> str | None:
    """The one-line warning a launch on several machines gets: its ports accept anyone who reaches them."""
    if bind_address(launch) is not None and launch.nnodes == 1:
        return None
    if launch.bind_host is None:
        where = "the rendezvous port {0} and the ranks' ports listen on every interface".format(launch.rdzv_endpoint)
    else:  # torch's rendezvous store still binds every interface (docs/SECURITY.md)
        where = (f"the rendezvous port {launch.rdzv_endpoint} listens on every interface, the ranks' ports on "
                 f"{launch.bind_host},")
    return (
        f"--nnodes {launch.nnodes}: {where} and they authenticate nobody (whoever reaches them can run code in this "
        "job): make them reachable only from the job's own machines (docs/SECURITY.md)"
    )
