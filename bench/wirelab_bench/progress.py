"""A one-line progress display: cell, phase, time left in the phase and in the run."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TextIO


def clock(seconds: float) -> str:
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
            f"[{index + 1}/{self.cells}] {label} | {phase} {clock(phase_left)} left"
            f" | run {clock(run_left)} left"
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


class Estimate:
    """Time left in a run: every cell's planned phases plus a per-cell overhead (Locust start and
    stop, health and parity checks, Prometheus exports). The overhead starts as a prior and, once
    cells are done, is their measured mean, so the figure corrects itself as the run goes."""

    def __init__(self, planned: Sequence[float], prior_overhead_s: float) -> None:
        self.planned = list(planned)
        self.prior_overhead_s = prior_overhead_s
        self.spent: list[float] = []  # wall seconds of each cell done, in order

    def cell_done(self, wall_s: float) -> None:
        self.spent.append(wall_s)

    def overhead_s(self) -> float:
        done = len(self.spent)
        if not done:
            return self.prior_overhead_s
        return max(0.0, (sum(self.spent) - sum(self.planned[:done])) / done)

    def left(self, in_cell_s: float = 0.0) -> float:
        """Seconds left in the run, ``in_cell_s`` into the first cell not done. A cell running
        late counts as about to finish; it never eats into the time of the cells after it."""
        done = len(self.spent)
        if done == len(self.planned):
            return 0.0
        each = self.overhead_s()
        current = max(0.0, self.planned[done] + each - in_cell_s)
        return current + sum(self.planned[done + 1 :]) + each * (len(self.planned) - done - 1)
