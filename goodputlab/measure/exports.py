"""A run's ledger for other tools: a pandas DataFrame, TensorBoard scalars, Prometheus's text format (pure).

* :func:`to_pandas`: rows (per step, or per window) as a DataFrame, a column per category; pandas is imported
  only here, and only when asked (the light install has none).
* :func:`write_tensorboard`: the rolling goodput, each category's share and the step times as TensorBoard
  scalars, written as TensorBoard's own event files (TFRecord framing, CRC32C, the ``Event`` protocol
  buffer encoded here), so TensorBoard reads them without goodputlab or TensorFlow installed beside it.
* :func:`prometheus_text` and :class:`MetricsServer`: a summary in Prometheus's text exposition format, served
  on ``/metrics`` (``goodputlab report DIR --follow --prometheus PORT``), on the loopback address unless asked.
"""

from __future__ import annotations

import http.server
import math
import os
import socket
import struct
import threading
import time
from pathlib import Path
from typing import Any, Iterable

from .. import categories as C


def to_pandas(rows: list[dict[str, Any]]):
    """``rows`` as a pandas DataFrame; a row's ``buckets`` become one column per category (``<category>_s``)."""
    try:
        import pandas as pd
    except ImportError:
        raise ImportError("to_pandas() needs pandas, which goodputlab does not install: pip install pandas") from None
    flat = []
    for r in rows:
        row = {k: v for k, v in r.items() if k != "buckets"}
        row.update({f"{c}_s": s for c, s in (r.get("buckets") or {}).items()})
        flat.append(row)
    return pd.DataFrame(flat)


# --- TensorBoard -----------------------------------------------------------------------------------------
def _crc32c_table() -> list[int]:
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_CRC_TABLE = _crc32c_table()


def crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli) of ``data``: what TFRecord framing checks."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _CRC_TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def _masked(crc: int) -> int:
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited protocol-buffer field (wire type 2)."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _event(wall_time: float, step: int, scalars: dict[str, float] | None = None, version: str | None = None) -> bytes:
    """A TensorBoard ``Event``: wall_time (1, double), step (2, int64), file_version (3) or summary (5) whose
    values (1) each hold a tag (1) and a simple_value (2, float)."""
    out = b"\x09" + struct.pack("<d", wall_time) + b"\x10" + _varint(step)
    if version is not None:
        out += _field(3, version.encode())
    if scalars:
        values = b"".join(_field(1, _field(1, tag.encode()) + b"\x15" + struct.pack("<f", value))
                          for tag, value in scalars.items())  # fmt: skip
        out += _field(5, values)
    return out


def _record(data: bytes) -> bytes:
    """TFRecord framing: length, its masked CRC, the data, its masked CRC."""
    head = struct.pack("<Q", len(data))
    return head + struct.pack("<I", _masked(crc32c(head))) + data + struct.pack("<I", _masked(crc32c(data)))


def tensorboard_scalars(summary: dict[str, Any], windows: list[dict[str, Any]]) -> Iterable[tuple[int, float, dict]]:
    """``(step, seconds from the run's start, {tag: value})`` for each window, then the whole run's: the window's
    goodput, each category's share of it, its median and p90 step time."""
    for i, w in enumerate(windows):
        span = w["end_s"] - w["start_s"]
        scalars = {"goodput/rolling": w["goodput"]}
        scalars.update({f"share/{c}": (w["buckets"].get(c, 0.0) / span if span > 0 else 0.0) for c in C.CATEGORIES})
        for key in ("median_step_s", "p90_step_s"):
            if w[key] is not None:
                scalars[f"step_time/{key[:-7]}_s"] = w[key]
        yield i, w["end_s"], scalars
    total = {"goodput/total": summary["goodput"]}
    total.update({f"seconds/{c}": summary["buckets"].get(c, 0.0) for c in C.CATEGORIES})
    yield len(windows), summary["wall_s"], total


def write_tensorboard(logdir: Path | str, summary: dict[str, Any], windows: list[dict[str, Any]],
                      t0_unix: float | None = None) -> Path:
    """Write the run's scalars (:func:`tensorboard_scalars`) as a TensorBoard event file in ``logdir`` (created
    if needed); ``t0_unix``: the run's start on the wall clock (default: now less its wall time). Returns it."""
    logdir = Path(logdir)
    logdir.mkdir(parents=True, exist_ok=True)
    t0 = time.time() - summary["wall_s"] if t0_unix is None else t0_unix
    path = logdir / f"events.out.tfevents.{int(time.time())}.{socket.gethostname()}.{os.getpid()}.goodputlab"
    with open(path, "xb") as f:
        f.write(_record(_event(t0, 0, version="brain.Event:2")))
        for step, at, scalars in tensorboard_scalars(summary, windows):
            f.write(_record(_event(t0 + at, step, scalars)))
    return path


# --- Prometheus ---------------------------------------------------------------------------------------------
def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def prometheus_text(summary: dict[str, Any], run: str) -> str:
    """``summary`` in Prometheus's text exposition format (version 0.0.4), every sample labelled ``run``."""
    r = f'run="{_label(run)}"'
    out = []

    def metric(name: str, kind: str, help_text: str, samples: list[tuple[str, float]]) -> None:
        out.append(f"# HELP {name} {help_text}")
        out.append(f"# TYPE {name} {kind}")
        for labels, value in samples:
            out.append(f"{name}{{{r}{labels}}} {_number(value)}")

    metric("goodputlab_goodput", "gauge", "Productive share of the wall time (0 to 1).", [("", summary["goodput"])])
    metric("goodputlab_wall_seconds", "gauge", "Wall time of the run so far.", [("", summary["wall_s"])])
    metric("goodputlab_category_seconds", "gauge", "Seconds of the wall time booked to each category.",
           [(f',category="{c}"', summary["buckets"].get(c, 0.0)) for c in C.CATEGORIES])
    metric("goodputlab_custom_seconds", "gauge", "Seconds of custom badput, by name (a part of other).",
           [(f',name="{_label(n)}"', s) for n, s in sorted((summary.get("custom") or {}).items())])
    metric("goodputlab_failures_total", "counter", "Failures the run has had.", [("", summary["failures"])])
    metric("goodputlab_checkpoints_total", "counter", "Checkpoints committed.", [("", summary["checkpoints"])])
    metric("goodputlab_steps_completed", "gauge", "Steps the run has completed.", [("", summary["steps_completed"])])
    metric("goodputlab_completed", "gauge", "1 once the run has completed.", [("", 1.0 if summary["completed"] else 0.0)])
    return "\n".join(out) + "\n"


def _number(value: float) -> str:
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("+Inf" if value > 0 else "-Inf")
    return repr(float(value)) if isinstance(value, float) else str(value)


class MetricsServer:
    """Serves the latest text of :meth:`publish` on ``http://ADDRESS:PORT/metrics`` from a thread (port 0: any free
    port; :attr:`port` says which). ``address``: the loopback address unless a caller asks for another."""

    def __init__(self, port: int, address: str = "127.0.0.1"):
        self.text = "# no update yet\n"
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server's name)
                if self.path.split("?")[0] != "/metrics":
                    self.send_error(404, "only /metrics is served")
                    return
                body = server.text.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):  # no line per scrape on stderr
                pass

        class Server(http.server.ThreadingHTTPServer):
            address_family = socket.AF_INET6 if ":" in address else socket.AF_INET
            daemon_threads = True

        self.httpd = Server((address, port), Handler)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, name="goodputlab-metrics", daemon=True)
        self.thread.start()

    def publish(self, text: str) -> None:
        """Serve ``text`` (the text format) from now on."""
        self.text = text

    def close(self) -> None:
        """Stop serving and free the port."""
        self.httpd.shutdown()
        self.httpd.server_close()
