"""An emulated node's torchrun agent: ``torch.distributed.run``, with the c10d rendezvous store bound to one address.

torch's ``TCPStore`` binds every interface, whatever host it is given (docs/SECURITY.md). The
agent that hosts an emulated cluster's rendezvous (node 0's: ``--rdzv-conf ...,is_host=true`` with
``--local-addr``) would so listen on its node's loopback and on every address the namespace has,
and the rendezvous state it serves is a pickle that every agent loads. So, before torchrun starts,
:func:`hold_rendezvous_store` binds a socket to the endpoint's address itself and starts the store's
server on it (``master_listen_fd``). torch's c10d backend then asks for a *multi-tenant* store on the
same port, and torch hands it the server already running in this process instead of starting one on
every interface: the store listens on the node's own address only. Any other agent is plain torchrun.

    python -m goodputlab.distributed.node_agent TORCHRUN-ARGS...
"""

from __future__ import annotations

import ipaddress
import socket
import sys
from datetime import timedelta


def hold_rendezvous_store(args: list[str]):
    """For the agent that hosts a c10d rendezvous at a numeric address: its store, serving on a socket
    bound to that address (keep the returned object alive as long as torchrun runs); else ``None``."""
    import torch.distributed as dist
    from torch.distributed.elastic.rendezvous.utils import parse_rendezvous_endpoint
    from torch.distributed.run import parse_args

    options = parse_args(args)
    conf = dict(item.split("=", 1) for item in options.rdzv_conf.split(",") if "=" in item)
    if options.rdzv_backend != "c10d" or conf.get("is_host") != "true" or not options.local_addr:
        return None
    host, port = parse_rendezvous_endpoint(options.rdzv_endpoint, default_port=29400)
    family = socket.AF_INET6 if ipaddress.ip_address(host).version == 6 else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a relaunch binds the port of the attempt before
    sock.bind((host, port))
    sock.listen(128)
    seconds = int(conf.get("read_timeout", 60))
    store = dist.TCPStore(host, port, None, True, timedelta(seconds=seconds), wait_for_workers=False,
                          multi_tenant=True, master_listen_fd=sock.fileno())
    return sock, store


def run(args: list[str]) -> None:
    """torchrun's ``main`` with ``args`` (what follows ``python -m torch.distributed.run``), the rendezvous
    store bound first when this agent hosts it."""
    import torch.distributed.run as torchrun

    held = hold_rendezvous_store(args)
    try:
        torchrun.main(args)
    finally:
        del held


if __name__ == "__main__":
    sys.argv[0] = "torchrun"
    run(sys.argv[1:])
