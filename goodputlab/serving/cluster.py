"""The server's worker processes, one measured rate, and the goodput search over rates.

Two modes on the same number of worker processes, each with one torch thread, so both use
the same cores:

* ``colocated``: two identical workers, each runs prefill and decode
  (:class:`~goodputlab.serving.engine.ColocatedEngine`); requests alternate between them.
* ``disaggregated``: a prefill worker and a decode worker
  (:class:`~goodputlab.serving.engine.PrefillEngine`, :class:`~goodputlab.serving.engine.DecodeEngine`);
  each request's keys and values cross from one to the other through a transfer buffer in
  shared memory.

The KV capacity (``max_batch``, sequences decoding at once) is the same in total: the
colocated workers get half each. Workers are started once (``python -m
goodputlab.serving.worker``: a fresh interpreter that imports torch, about two seconds) and
serve any number of measurements. They cannot outlive the process that started them: each
runs in its own session, so a Ctrl-C at the terminal reaches only the parent, which kills
them; the kernel kills them if the parent dies (``PR_SET_PDEATHSIG``); and :meth:`close`,
the context manager and interpreter exit all kill whatever is left.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import weakref
from dataclasses import asdict
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, Callable

from .config import MODES, WORKERS, ServerConfig  # noqa: F401 (part of this module's API: ServingCluster(mode=...))
from .search import GoodputSearch, search_goodput
from .slo import SLO, RateMeasurement, RequestRecord, drain_s, measure_records
from .workload import LengthMix, Workload, parse_mix, poisson_workload

MIN_REQUESTS = 10  # a measured rate sees at least this many requests (its window stretches at low rates)


class ServerError(RuntimeError):
    """A worker process failed or stopped answering."""


def _kill(procs) -> None:
    """SIGKILL every worker still running and reap it."""
    for p in procs:
        if p.poll() is None:
            try:
                p.kill()
            except ProcessLookupError:
                pass
    for p in procs:
        try:
            p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass


def _tail(log, lines: int = 12) -> str:
    try:
        log.seek(0)
        return "\n".join(log.read().decode(errors="replace").splitlines()[-lines:])
    except (OSError, ValueError):
        return ""


# --- the parent side ------------------------------------------------------------------------

class ServingCluster:
    """The server's worker processes; measure rates with :meth:`measure_rate` or search with :meth:`search`.

    Use as a context manager (or call :meth:`close`): ``with ServingCluster(mode="disaggregated") as s: ...``.
    """

    def __init__(self, config: ServerConfig | None = None, **settings: Any):
        self.config = config if config is not None else ServerConfig(**settings)
        self.workers: list[dict[str, Any]] = []
        self._procs: list = []
        self._conns: list = []
        self._probe = 0
        self._finalizer = None

    # lifecycle ---------------------------------------------------------------------------------
    def start(self, timeout_s: float = 300.0) -> ServingCluster:
        """Start the worker processes and wait until each has built and warmed up its model."""
        return self.launch().wait_ready(timeout_s)

    def wait_ready(self, timeout_s: float = 300.0) -> ServingCluster:
        """Wait until every launched worker has built and warmed up its model."""
        try:
            deadline = time.monotonic() + timeout_s
            while len(self.workers) < len(self._procs):
                self.workers.append(self._receive(len(self.workers), "ready", deadline)[1])
        except BaseException:
            self.close(graceful=False)
            raise
        return self

    def launch(self) -> ServingCluster:
        """Start the worker processes without waiting for them (start several servers at once,
        then :meth:`wait_ready` on each)."""
        if self._procs:
            return self
        from .kv import cache_shape

        c = self.config
        env = dict(os.environ)
        package_root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = package_root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        env["OMP_NUM_THREADS"] = str(c.threads)
        to_close: list[int] = []
        peers: dict[str, socket.socket] = {}
        transfer_fd = None
        if c.mode == "disaggregated":
            peers["prefill"], peers["decode"] = socket.socketpair()
            transfer_fd = os.memfd_create("goodputlab-kv-transfer")
            nbytes = 4
            for n in cache_shape(c.preset, c.transfer_rows):
                nbytes *= n
            os.ftruncate(transfer_fd, nbytes)  # zero-filled
            to_close.append(transfer_fd)
        self._finalizer = weakref.finalize(self, _kill, self._procs)  # also at interpreter exit
        try:
            for role, name in c.worker_roles():
                ours, theirs = socket.socketpair()
                fds = [theirs.fileno()]
                cmd = [sys.executable, "-m", "goodputlab.serving.worker", "--role", role, "--name", name,
                       "--conn-fd", str(theirs.fileno()), "--parent", str(os.getpid()), "--config", json.dumps(asdict(c))]
                if role in peers:
                    fds += [peers[role].fileno(), transfer_fd]
                    cmd += ["--peer-fd", str(peers[role].fileno()), "--transfer-fd", str(transfer_fd)]
                log = tempfile.TemporaryFile(prefix=f"goodputlab-serve-{name}-")
                # its own session: a Ctrl-C at the terminal reaches the parent only, which then kills it
                proc = subprocess.Popen(cmd, pass_fds=fds, env=env, stdin=subprocess.DEVNULL, stdout=log,
                                        stderr=subprocess.STDOUT, start_new_session=True)
                proc.name, proc.log = name, log
                theirs.close()
                self._procs.append(proc)
                self._conns.append(Connection(ours.detach()))
        except BaseException:
            self.close(graceful=False)
            raise
        finally:
            for sock in peers.values():
                sock.close()
            for fd in to_close:
                os.close(fd)
        return self

    def close(self, graceful: bool = True) -> None:
        """Stop the workers: ask them to exit, then SIGKILL what is left (at once with ``graceful=False``).

        Safe to call twice."""
        if graceful:
            for conn in self._conns:
                try:
                    conn.send(("stop",))
                except OSError:
                    pass
            for p in self._procs:
                try:
                    p.wait(timeout=2)
                except subprocess.TimeoutExpired:
                    pass
        _kill(self._procs)
        for conn in self._conns:
            conn.close()
        for p in self._procs:
            p.log.close()
        self._procs.clear()
        self._conns.clear()
        self.workers = []

    def __enter__(self) -> ServingCluster:
        return self.start()

    def __exit__(self, exc_type, *exc) -> None:
        self.close(graceful=exc_type is None)  # an error or Ctrl-C mid-measurement: no waiting

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self._procs]

    def _receive(self, i: int, kind: str, deadline: float, probe: int | None = None):
        """The next ``kind`` message from worker ``i``; with ``probe``, results of earlier
        measurements (one abandoned by a KeyboardInterrupt, say) are skipped."""
        conn, proc = self._conns[i], self._procs[i]
        while True:
            while not conn.poll(0.2):
                if proc.poll() is not None:
                    raise ServerError(f"serving worker {proc.name} exited with code {proc.returncode}:\n{_tail(proc.log)}")
                if time.monotonic() > deadline:
                    raise ServerError(f"serving worker {proc.name} did not answer in time")
            try:
                msg = conn.recv()
            except (EOFError, OSError):
                proc.wait(timeout=5)
                raise ServerError(f"serving worker {proc.name} exited with code {proc.returncode}:\n{_tail(proc.log)}") from None
            if msg[0] == "error":
                raise ServerError(msg[1])
            if msg[0] != kind:
                raise ServerError(f"serving worker {proc.name} sent {msg[0]!r}, expected {kind!r}")
            if probe is None or msg[1] == probe:
                return msg

    # measuring ---------------------------------------------------------------------------------
    def measure(self, workload: Workload, slo: SLO) -> RateMeasurement:
        """Serve ``workload`` for real and account for it against ``slo``.

        Arrivals span ``workload.duration_s``; the measurement then runs until every request
        finished, or until the last request that could still meet ``slo`` has had its time
        (:func:`~goodputlab.serving.slo.drain_s`); anything unfinished then counts as a miss.
        """
        if not self._procs:
            self.start()
        self.config.check_mix(workload.mix)
        self._probe += 1
        probe = self._probe
        reqs = [(r.id, r.arrival_s, r.prompt, r.output_len) for r in workload.requests]
        t0 = time.monotonic() + 0.05  # time for the messages to arrive
        horizon = t0 + workload.duration_s + drain_s(slo, max(1, workload.max_output))
        if self.config.mode == "colocated":
            for k, conn in enumerate(self._conns):
                conn.send(("run", probe, t0, horizon, reqs[k :: len(self._conns)]))
        else:
            self._conns[0].send(("run", probe, t0, horizon, reqs))
            self._conns[1].send(("run", probe, t0, horizon, len(reqs)))
        deadline = horizon + 60.0
        results = {}
        for i, w in enumerate(self.workers):
            _, _, records, spans, extra = self._receive(i, "done", deadline, probe)
            results[w["name"]] = (records, spans, extra)
        by_id: dict[int, dict] = {}
        for records, _, _ in results.values():
            for r in records:
                by_id[r["id"]] = r
        out = []
        for req in workload.requests:  # requests nobody got to: no tokens
            r = by_id.get(req.id)
            out.append(RequestRecord(req.id, req.arrival_s, req.prompt_len, req.output_len,
                                     tuple(r["token_times_s"]) if r else (), tuple(r["tokens"]) if r else (),
                                     r["worker"] if r else ""))
        extra = {k: v for _, _, e in results.values() for k, v in e.items()}
        return measure_records(
            out, slo, workload.rate_rps, workload.duration_s, horizon - t0, self.config.mode,
            mix=workload.mix.name, seed=workload.seed, model=self.config.model,
            traces={name: spans for name, (_, spans, _) in results.items()},
            joined_running={r["id"]: r.get("joined_running", 0) for r in by_id.values()},
            **extra,
        )

    def measure_rate(self, rate_rps: float, duration_s: float, slo: SLO, mix: LengthMix | str = "chat", seed: int = 0,
                     min_requests: int = MIN_REQUESTS) -> RateMeasurement:
        """One rate: a seeded Poisson workload of ``rate_rps`` for ``duration_s`` seconds (longer if
        fewer than ``min_requests`` would arrive), served and scored."""
        mix = parse_mix(mix)
        self.config.check_mix(mix)
        workload = poisson_workload(rate_rps, duration_s, mix, seed, vocab=self.config.preset.vocab, min_requests=min_requests)
        return self.measure(workload, slo)

    def search(self, slo: SLO, duration_s: float, mix: LengthMix | str = "chat", seed: int = 0, target: float = 0.9,
               start_rps: float = 4.0, min_rps: float = 0.25, max_rps: float = 256.0, rel_tol: float = 0.1,
               max_probes: int = 12, min_requests: int = MIN_REQUESTS,
               on_probe: Callable[[RateMeasurement], None] | None = None) -> GoodputSearch:
        """The goodput: the highest rate whose measured attainment is at least ``target``.

        Every probe is a real :meth:`measure_rate` of ``duration_s`` seconds with the same seed
        (so the same requests, arriving faster or slower); see :func:`~goodputlab.serving.search.search_goodput`.
        """
        mix = parse_mix(mix)
        self.config.check_mix(mix)
        return search_goodput(lambda r: self.measure_rate(r, duration_s, slo, mix, seed, min_requests), target=target,
                              start_rps=start_rps, min_rps=min_rps, max_rps=max_rps, rel_tol=rel_tol,
                              max_probes=max_probes, on_probe=on_probe)

    def describe(self) -> str:
        c, p = self.config, self.config.preset
        params = self.workers[0]["params"] if self.workers else p.n_params
        roles = "two workers, each prefill and decode" if c.mode == "colocated" else "a prefill worker and a decode worker"
        return (f"{c.mode}: {roles}, {c.threads} torch thread{'s' if c.threads > 1 else ''} each; model {c.model} "
                f"({p.n_layer} layers x {p.d_model}, {params / 1e6:.1f}M params); up to {c.max_batch} sequences decoding")
