"""Automatic checks for the workshop labs (``labs/``): one module per lab.

:mod:`~goodputlab.labs.checks` holds what every lab shares (:class:`CheckResult`,
:class:`Scoreboard`, reading an answer, :func:`lab_run`: a lab's run, real or
recorded); ``labNN`` the checks of the lab of chapter NN. A notebook calls
``gl.labs.labNN.check_...``; every check returns a :class:`CheckResult` and never
raises, whatever the answer.
"""

from __future__ import annotations

from . import lab01, lab02, lab03, lab04, lab05, lab06, lab07, lab08, lab09, lab10, lab11
from .checks import CheckResult, Scoreboard, lab_run

__all__ = [
    "CheckResult", "Scoreboard", "lab01", "lab02", "lab03", "lab04", "lab05", "lab06", "lab07", "lab08", "lab09", "lab10", "lab11",
    "lab_run",
]
