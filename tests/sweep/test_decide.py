# SPDX-License-Identifier: MIT
"""The cell's reuse/skip/run decision, branch by branch, without Hydra or a disk."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from mushin_box._sweep.decide import ABORTED, OUT_OF_TIME, Decision, decide

FP = {"config": "c1", "code": "k1"}
RUN = "run-now"


def _status(status: str, fingerprints: dict[str, str] | None = None, **extra: Any) -> dict:
    return {
        "status": status,
        "fingerprints": dict(FP if fingerprints is None else fingerprints),
        "run_id": "run-before",
        "attempt": 1,
        **extra,
    }


def _decide(previous: Any, fingerprints: dict[str, str] = FP, **facts: Any) -> Decision:
    facts = {"cell": "x=1", "run_id": RUN, "resume": True, **facts}
    return decide(previous, fingerprints, **facts)


# -- reuse -----------------------------------------------------------------------------------


def test_completed_with_the_same_fingerprints_and_resume_is_reused() -> None:
    d = _decide(_status("completed"))
    assert d.action == "reuse"
    assert d.warnings == () and d.rerun_reason is None


def test_completed_is_not_reused_without_resume_and_starts_afresh() -> None:
    d = _decide(_status("completed"), resume=False)
    assert (d.action, d.continue_from_checkpoint) == ("run", False)
    assert d.warnings == ()


def test_unreadable_metrics_of_a_reusable_cell_run_it_continuing() -> None:
    d = _decide(_status("completed"), metrics_readable=False)
    assert (d.action, d.continue_from_checkpoint) == ("run", True)
    assert d.warnings == () and d.rerun_reason is None


# -- a changed fingerprint -------------------------------------------------------------------


def test_completed_with_a_changed_config_runs_afresh_with_the_runners_warning() -> None:
    d = _decide(_status("completed"), {**FP, "config": "c2"})
    assert (d.action, d.continue_from_checkpoint) == ("run", False)
    assert d.warnings == (
        "cell x=1: config fingerprint changed since it completed; "
        "running it again instead of reusing it",
    )
    assert d.rerun_reason == "config fingerprint changed"
    assert d.previous_fingerprints == FP


def test_every_changed_fingerprint_is_named_in_order() -> None:
    d = _decide(_status("completed"), {"config": "c2", "code": "k2", "image": "sha"})
    assert d.warnings[0].startswith("cell x=1: code and config and image fingerprint changed")
    assert d.rerun_reason == "code/config/image fingerprint changed"


def test_a_fingerprint_that_is_gone_is_named_too() -> None:
    # the cell ran in an image before and runs without one now
    d = _decide(_status("completed", {**FP, "image": "sha"}))
    assert (d.action, d.continue_from_checkpoint) == ("run", False)
    assert d.warnings[0].startswith("cell x=1: image fingerprint changed")
    assert d.rerun_reason == "image fingerprint changed"


def test_a_status_without_fingerprints_runs_the_cell_again() -> None:
    d = _decide({**_status("completed"), "fingerprints": None})
    assert (d.action, d.continue_from_checkpoint) == ("run", False)
    assert d.rerun_reason == "code/config fingerprint changed"


def test_a_changed_fingerprint_of_a_failed_cell_runs_afresh_without_a_warning() -> None:
    d = _decide(_status("failed"), {**FP, "code": "k2"})
    assert (d.action, d.continue_from_checkpoint) == ("run", False)
    assert d.warnings == () and d.rerun_reason is None


# -- skip ------------------------------------------------------------------------------------


def test_an_aborted_sweep_skips_the_cell_before_anything_else() -> None:
    d = _decide(_status("completed"), aborted=True, deadline=0.0, now=1.0, multi_rank=True)
    assert (d.action, d.reason) == ("skip", ABORTED)
    assert d.reason == "sweep aborted (on_error='raise')"
    assert d.warnings == () and d.rerun_reason is None


def test_a_spent_time_budget_skips_the_cell() -> None:
    d = _decide(None, deadline=10.0, now=10.0)
    assert (d.action, d.reason) == ("skip", OUT_OF_TIME)
    assert d.reason == "max_total_seconds"
    assert _decide(None, deadline=10.0, now=9.9).action == "run"


def test_a_skip_for_time_keeps_the_changed_fingerprint_warning_and_reason() -> None:
    d = _decide(_status("completed"), {**FP, "config": "c2"}, deadline=1.0, now=2.0)
    assert (d.action, d.reason) == ("skip", OUT_OF_TIME)
    assert d.rerun_reason == "config fingerprint changed"
    assert len(d.warnings) == 1 and "config fingerprint changed" in d.warnings[0]


def test_a_multi_rank_cell_ignores_the_time_budget_with_a_warning() -> None:
    d = _decide(None, deadline=1.0, now=2.0, multi_rank=True)
    assert d.action == "run"
    assert d.warnings == (
        "max_total_seconds is disabled for a cell launched on several ranks (a rank that "
        "stopped alone would hang the others at rendezvous); bound the job with the "
        "scheduler's timeout_min instead",
    )


def test_a_reused_cell_is_not_warned_about_the_time_budget() -> None:
    d = _decide(_status("completed"), deadline=1.0, now=2.0, multi_rank=True)
    assert (d.action, d.warnings) == ("reuse", ())


# -- run: continue or start afresh -----------------------------------------------------------


@pytest.mark.parametrize("status", ["failed", "timeout", "skipped", "running", "pending"])
def test_an_unfinished_cell_with_resume_and_the_same_fingerprints_continues(status: str) -> None:
    d = _decide(_status(status))
    assert (d.action, d.continue_from_checkpoint) == ("run", True)


def test_a_new_run_without_resume_starts_afresh() -> None:
    d = _decide(_status("failed"), resume=False)
    assert (d.action, d.continue_from_checkpoint) == ("run", False)


@pytest.mark.parametrize("resume", [True, False])
def test_a_new_cell_continues_only_with_resume(resume: bool) -> None:
    # nothing to compare with: not "changed"; with no checkpoint there is nothing to load
    for previous in (None, {}):
        d = _decide(previous, resume=resume)
        assert (d.action, d.continue_from_checkpoint) == ("run", resume)
        assert d.previous_fingerprints is None


def test_a_requeue_within_this_run_continues_even_without_resume() -> None:
    previous = _status("running", run_id=RUN, previous_fingerprints=FP)
    d = _decide(previous, resume=False)
    assert (d.action, d.continue_from_checkpoint) == ("run", True)


def test_a_slurm_requeue_of_a_multi_rank_cell_continues() -> None:
    d = _decide(
        _status("running"), {**FP, "config": "c2"}, resume=False, multi_rank=True, restart_count=1
    )
    assert (d.action, d.continue_from_checkpoint) == ("run", True)


def test_a_multi_rank_cell_of_this_run_without_a_restart_starts_afresh_without_resume() -> None:
    # the run id alone does not make a requeue on several ranks: rank 0 may have rewritten it
    previous = _status("running", run_id=RUN, previous_fingerprints=FP)
    d = _decide(previous, resume=False, multi_rank=True, restart_count=0)
    assert (d.action, d.continue_from_checkpoint) == ("run", False)


def test_every_rank_compares_with_the_fingerprints_from_before_this_run() -> None:
    """A rank that reads the status rank 0 of this run already rewrote decides as rank 0 did."""
    new = {**FP, "config": "c2"}
    rank0 = _decide(_status("completed"), new, multi_rank=True)
    assert rank0.continue_from_checkpoint is False
    rewritten = _status("running", new, run_id=RUN, previous_fingerprints=FP)
    other = _decide(rewritten, new, multi_rank=True)
    assert other.continue_from_checkpoint is False
    assert other.previous_fingerprints == rank0.previous_fingerprints == FP
    # the same config: both continue
    same = _status("running", FP, run_id=RUN, previous_fingerprints=FP)
    assert _decide(same, multi_rank=True).continue_from_checkpoint is True


def test_previous_fingerprints_of_an_earlier_run_are_its_status_fingerprints() -> None:
    previous = _status("failed", previous_fingerprints={"config": "old", "code": "old"})
    d = _decide(previous)  # written by another run: its own fingerprints count
    assert d.previous_fingerprints == FP and d.continue_from_checkpoint is True


def test_a_decision_is_frozen() -> None:
    d = _decide(None)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        d.action = "skip"  # type: ignore[misc]
