"""A pytest plugin: the CPU time of each test, its own process's and its children's, the largest first.

On a shared machine a test's wall time says how busy the neighbours were; its CPU time says how
much work it is. Each test is charged ``getrusage(RUSAGE_SELF)`` plus ``getrusage(RUSAGE_CHILDREN)``
(the processes it started and waited for: workers, kernels, supervisors) over its setup, call and
teardown, so a session fixture's runs count for the first test that asks for them, as
``--durations`` counts them::

    GOODPUTLAB_CPU_PER_TEST=cpu.txt PYTHONPATH=tools .venv/bin/python -m pytest -p cpu_per_test tests/test_torture.py

writes the total and one line per test to ``cpu.txt`` (without the variable: the 15 largest are
printed at the end of the session).
"""

from __future__ import annotations

import os
import resource
import time

import pytest

_rows: list[tuple[float, float, str]] = []


def _cpu() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    cpu, wall = _cpu(), time.monotonic()
    yield
    _rows.append((_cpu() - cpu, time.monotonic() - wall, item.nodeid))


def pytest_terminal_summary(terminalreporter):
    rows = sorted(_rows, reverse=True)
    lines = [f"cpu {sum(r[0] for r in rows):.1f} s over {len(rows)} tests; load average {os.getloadavg()[0]:.2f}"]
    lines += [f"{cpu:8.1f} s cpu {wall:8.1f} s wall  {name}" for cpu, wall, name in rows]
    out = os.environ.get("GOODPUTLAB_CPU_PER_TEST")
    if out:
        with open(out, "w") as f:
            f.write("\n".join(lines) + "\n")
    else:
        terminalreporter.write_sep("=", "cpu per test (tools/cpu_per_test.py)")
        terminalreporter.write_line("\n".join(lines[:16]))
