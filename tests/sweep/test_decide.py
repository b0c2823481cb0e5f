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


# -- reuse_stale_code and the changed modules (issue 19: mutants that survived) ----------------

OLD_MODULES = {"pkg.helpers": "aa", "pkg.tasks": "bb", "pkg.gone": "cc"}


def test_reuse_stale_code_reuses_a_completed_cell_whose_code_alone_changed() -> None:
    previous = _status("completed", code_modules=OLD_MODULES)
    now = {"pkg.helpers": "a2", "pkg.tasks": "bb", "pkg.new": "dd"}
    d = _decide(previous, {**FP, "code": "k2"}, reuse_stale_code=True, code_modules=now)
    assert (d.action, d.reused_despite, d.rerun_reason) == ("reuse", ("code",), None)
    # the modules that changed, were added or went away, sorted; the unchanged one is not
    assert d.warnings == (
        "cell x=1: code fingerprint changed (code: pkg.gone, pkg.helpers, pkg.new) since it "
        "completed; reusing it anyway (reuse_stale_code=True)",
    )
    # nothing changed: a plain reuse, nothing reused despite anything, no warning
    same = _decide(previous, reuse_stale_code=True, code_modules=now)
    assert (same.action, same.reused_despite, same.warnings) == ("reuse", (), ())


def test_reuse_stale_code_still_runs_a_cell_whose_metrics_are_unreadable() -> None:
    d = _decide(
        _status("completed"), {**FP, "code": "k2"}, reuse_stale_code=True, metrics_readable=False
    )
    assert (d.action, d.continue_from_checkpoint) == ("run", True)
    assert d.warnings == () and d.rerun_reason is None


def test_reuse_stale_code_lets_an_unfinished_cell_continue_but_not_past_another_change() -> None:
    code = _decide(_status("failed"), {**FP, "code": "k2"}, reuse_stale_code=True)
    assert (code.action, code.continue_from_checkpoint) == ("run", True)
    config = _decide(_status("failed"), {"config": "c2", "code": "k2"}, reuse_stale_code=True)
    assert (config.action, config.continue_from_checkpoint) == ("run", False)
    # a corrupt status (fingerprints not a mapping) proves nothing: it starts afresh
    corrupt = _decide(
        _status("failed", code_modules=None) | {"fingerprints": "x"}, reuse_stale_code=True
    )
    assert (corrupt.action, corrupt.continue_from_checkpoint) == ("run", False)


def test_a_changed_code_fingerprint_names_at_most_five_modules() -> None:
    old = {f"m{i}": "a" for i in range(8)}
    new = {f"m{i}": "b" for i in range(8)}
    d = _decide(_status("completed", code_modules=old), {**FP, "code": "k2"}, code_modules=new)
    assert d.warnings[0].startswith(
        "cell x=1: code fingerprint changed (code: m0, m1, m2, m3, m4 and 3 more) since it"
    )
    five = {f"m{i}": "b" for i in range(5)}
    d5 = _decide(
        _status("completed", code_modules=old), {**FP, "code": "k2"}, code_modules={**old, **five}
    )
    assert "(code: m0, m1, m2, m3, m4) since" in d5.warnings[0]


@pytest.mark.parametrize(
    ("before", "now"),
    [
        (None, {"m": "b"}),  # the previous status lists no modules
        ("not a mapping", {"m": "b"}),
        ({"m": "a"}, None),  # this run does not list them
        ({"m": "a"}, {"m": "a"}),  # same modules: the code changed elsewhere
    ],
)
def test_modules_are_named_only_when_both_sides_list_a_difference(before: Any, now: Any) -> None:
    d = _decide(_status("completed", code_modules=before), {**FP, "code": "k2"}, code_modules=now)
    assert d.warnings[0].startswith("cell x=1: code fingerprint changed since it completed")


def test_modules_are_named_only_when_the_code_fingerprint_changed() -> None:
    previous = _status("completed", code_modules={"m": "a"})
    d = _decide(previous, {**FP, "config": "c2"}, code_modules={"m": "b"})
    assert d.warnings[0].startswith("cell x=1: config fingerprint changed since it completed")


def test_six_changed_modules_are_five_and_one_more() -> None:
    old = {f"m{i}": "a" for i in range(6)}
    new = {f"m{i}": "b" for i in range(6)}
    d = _decide(_status("completed", code_modules=old), {**FP, "code": "k2"}, code_modules=new)
    assert "(code: m0, m1, m2, m3, m4 and 1 more) since" in d.warnings[0]


def test_every_decision_says_why() -> None:
    """``reason`` is read back only for a skip, but every decision carries one in words; a
    completed cell run again says the changed fingerprint."""
    cases = [
        _decide(_status("completed")),
        _decide(_status("completed"), {**FP, "code": "k2"}, reuse_stale_code=True),
        _decide(None),
        _decide(_status("failed"), resume=False),
        _decide(_status("failed"), {**FP, "code": "k2"}),
        _decide(_status("running", run_id=RUN)),
        _decide(_status("running"), multi_rank=True, restart_count=1),
    ]
    for d in cases:
        assert isinstance(d.reason, str) and d.reason, d
    rerun = _decide(_status("completed"), {**FP, "config": "c2"})
    assert rerun.reason == rerun.rerun_reason == "config fingerprint changed"
