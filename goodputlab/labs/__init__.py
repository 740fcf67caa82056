"""Automatic checks for the workshop labs (``labs/``): one module per lab.

:mod:`~goodputlab.labs.checks` holds what every lab shares (:class:`CheckResult`,
:class:`Scoreboard`); :mod:`~goodputlab.labs.lab01` the checks of Lab 1, "Where did
the time go?". A new lab adds ``labN.py`` beside them, and its notebook calls
``gl.labs.labN.check_...``.
"""

from __future__ import annotations

from . import lab01
from .checks import CheckResult, Scoreboard

__all__ = ["CheckResult", "Scoreboard", "lab01"]
