"""A one-line progress display: cell, phase, time left in the phase and in the run."""

from __future__ import annotations

import sys
from typing import TextIO


def _clock(seconds: float) -> str:
    seconds = max(0, int(seconds + 0.5))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


class Progress:
    """Rewrites one line on a terminal; prints one line per phase change elsewhere (CI logs)."""

    def __init__(self, cells: int, stream: TextIO | None = None, enabled: bool = True) -> None:
        self.cells = cells
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled
        self.tty = self.stream.isatty()
        self._last: tuple[int, str] | None = None

    def show(self, index: int, label: str, phase: str, phase_left: float, run_left: float) -> None:
        if not self.enabled:
            return
        line = (
            f"[{index + 1}/{self.cells}] {label} | {phase} {_clock(phase_left)} left"
            f" | run {_clock(run_left)} left"
        )
        if self.tty:
            self.stream.write("\r\x1b[2K" + line)
            self.stream.flush()
        elif self._last != (index, phase):
            self.stream.write(line + "\n")
            self.stream.flush()
        self._last = (index, phase)

    def message(self, text: str) -> None:
        """A line of its own (preflight results, a saturated generator, the end of the run)."""
        if not self.enabled:
            return
        self.stream.write(("\r\x1b[2K" if self.tty else "") + text + "\n")
        self.stream.flush()
