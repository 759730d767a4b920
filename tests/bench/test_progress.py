"""The run's time-left estimate: planned phases plus per-cell overhead, learned as cells finish."""

from __future__ import annotations

import io

import pytest
from wirelab_bench.progress import Estimate, Progress


def test_before_any_cell_the_prior_overhead_is_added_to_every_cell() -> None:
    estimate = Estimate([2.0] * 16, prior_overhead_s=2.5)
    assert estimate.left() == pytest.approx(16 * 4.5)


def test_the_estimate_corrects_itself_from_the_cells_done() -> None:
    # Guards against: smoke promised 1:12 (16 x (2 s + 2.5 s)) and took 4:48, 18 s a cell.
    estimate = Estimate([2.0] * 16, prior_overhead_s=2.5)
    estimate.cell_done(18.0)
    assert estimate.overhead_s() == pytest.approx(16.0)
    assert estimate.left() == pytest.approx(15 * 18.0)
    estimate.cell_done(20.0)
    assert estimate.overhead_s() == pytest.approx(17.0)
    assert estimate.left() == pytest.approx(14 * 19.0)


def test_cells_of_different_lengths_keep_their_own_planned_phases() -> None:
    # A 120 s window after short cells must not be estimated at the short cells' wall time.
    estimate = Estimate([2.0, 2.0, 120.0], prior_overhead_s=0.0)
    estimate.cell_done(12.0)
    estimate.cell_done(12.0)
    assert estimate.left() == pytest.approx(130.0)


def test_time_in_the_current_cell_counts_down_but_never_into_later_cells() -> None:
    estimate = Estimate([2.0, 2.0, 2.0], prior_overhead_s=8.0)
    assert estimate.left(in_cell_s=4.0) == pytest.approx(6.0 + 2 * 10.0)
    # Running late: the current cell is about to end; the two after it still take 10 s each.
    assert estimate.left(in_cell_s=60.0) == pytest.approx(2 * 10.0)


def test_nothing_is_left_after_the_last_cell() -> None:
    estimate = Estimate([1.0], prior_overhead_s=5.0)
    estimate.cell_done(3.0)
    assert estimate.left() == 0.0


def test_progress_line_shows_the_run_time_left() -> None:
    out = io.StringIO()
    Progress(16, stream=out).show(1, "grpc unary smoke rep 0", "measure", 1.2, 270.0)
    assert out.getvalue() == (
        "[2/16] grpc unary smoke rep 0 | measure 0:00:01 left | run 0:04:30 left\n"
    )
