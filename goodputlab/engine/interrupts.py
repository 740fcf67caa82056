"""Stopping a run from outside: Ctrl-C, SIGTERM and SIGHUP all end it the same clean way.

While a :class:`StopSignals` block is active (in the main thread), the first of
SIGINT, SIGTERM or SIGHUP raises :class:`RunInterrupted` (a ``KeyboardInterrupt``,
so code that handles Ctrl-C handles all three). Every later one is *ignored*
until the outermost block exits: a second Ctrl-C pressed while the run cleans up
(kills its worker, removes the RAM tier, writes the summary) cannot cut that
cleanup short. A signal whose disposition was "ignore" when the block began (a
run started under ``nohup``) stays ignored.
"""

from __future__ import annotations

import signal
import threading

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class RunInterrupted(KeyboardInterrupt):
    """A stop signal arrived; ``signum`` says which. ``exit_code`` is the shell's 128 + signal number."""

    def __init__(self, signum: int):
        self.signum = signum
        super().__init__(self.signal_name)

    @property
    def signal_name(self) -> str:
        return signal.Signals(self.signum).name

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


class StopSignals:
    """Turn SIGINT, SIGTERM and SIGHUP into one :class:`RunInterrupted`; ignore the rest until exit.

    Nestable: only the outermost block installs and restores the handlers. Outside the
    main thread (where Python cannot set handlers) it does nothing. ``linger`` (for a
    program about to exit, such as the CLI): once a stop signal has fired, the outermost
    block leaves further ones ignored instead of restoring the old handlers, so a second
    Ctrl-C cannot turn a clean exit code into a death by signal.
    """

    _depth = 0
    _fired: int | None = None
    _saved: dict[int, object] = {}

    def __init__(self, linger: bool = False):
        self.linger = linger

    def __enter__(self) -> StopSignals:
        self._active = threading.current_thread() is threading.main_thread()
        if not self._active:
            return self
        if StopSignals._depth == 0:
            StopSignals._fired = None
            saved = {}
            for s in STOP_SIGNALS:
                previous = signal.getsignal(s)
                if previous is signal.SIG_IGN:
                    continue
                saved[s] = signal.signal(s, _on_stop_signal)
            StopSignals._saved = saved
        StopSignals._depth += 1
        return self

    def __exit__(self, *exc) -> None:
        if not self._active:
            return
        StopSignals._depth -= 1
        if StopSignals._depth == 0:
            keep_ignoring = self.linger and StopSignals._fired is not None
            for s, previous in StopSignals._saved.items():
                if keep_ignoring:
                    signal.signal(s, signal.SIG_IGN)
                else:
                    signal.signal(s, previous if previous is not None else signal.SIG_DFL)
            StopSignals._saved = {}

    @staticmethod
    def fired() -> int | None:
        """The signal that stopped the run, if one did."""
        return StopSignals._fired


def _on_stop_signal(signum: int, frame) -> None:
    if StopSignals._fired is not None:
        return  # already stopping: let the cleanup finish
    StopSignals._fired = signum
    raise RunInterrupted(signum)
