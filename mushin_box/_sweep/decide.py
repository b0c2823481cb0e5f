# SPDX-License-Identifier: MIT
"""Reuse, skip or run: what a sweep cell does, decided from what is known about it.

The decision is a pure function of plain values (no file, no Hydra), so every rank of a
multi-rank cell reaches the same answer from the same facts. A change of the world size
alone (``trainer.devices``/``num_nodes``) is no new experiment: with the fingerprint without
run-shape keys (``config_without_shape``) equal, a completed cell is reused and an
unfinished one continues. A change of a training limit alone (``max_epochs``...) extends
the fit: with ``config_without_limits`` equal, the cell continues from its checkpoints.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import attrs

#: the ``reason`` of a cell skipped because another cell failed under ``on_error="raise"``
ABORTED = "sweep aborted (on_error='raise')"
#: the ``reason`` of a cell skipped because ``max_total_seconds`` ran out before it started
OUT_OF_TIME = "max_total_seconds"
#: the status field holding the config fingerprint without the run-shape keys
SHAPE_FREE = "config_without_shape"
#: the status field holding the config fingerprint without run-shape and training-limit keys
LIMIT_FREE = "config_without_limits"
#: the ``reason`` of a cell that continues because only a training limit changed
EXTENDED = "extended (only a training limit changed): continuing from its checkpoint"


@attrs.frozen
class Decision:
    """What a cell does this time, and why. The ``previous_*`` fields go into the running
    status, so that a rank reading it after rank 0 rewrote it compares the same values."""

    action: Literal["reuse", "skip", "run"]
    #: for ``run``: continue from the checkpoints (else rank 0 sets them aside first)
    continue_from_checkpoint: bool = False
    reason: str = ""
    #: for a completed cell run again: e.g. ``"config fingerprint changed"``
    rerun_reason: str | None = None
    #: emitted by the runner as ``UserWarning``, in order
    warnings: tuple[str, ...] = ()
    previous_fingerprints: Any = None
    #: for ``reuse``: the changed fingerprints ignored on request (``("code",)``)
    reused_despite: tuple[str, ...] = ()
    previous_shape_free: Any = None
    #: for ``run``: only a training limit changed; the fit is extended
    extends: bool = False
    previous_limit_free: Any = None


def decide(
    previous: Mapping[str, Any] | None,
    fingerprints: Mapping[str, str],
    *,
    cell: str,
    run_id: str,
    resume: bool,
    aborted: bool = False,
    deadline: float | None = None,
    now: float = 0.0,
    multi_rank: bool = False,
    restart_count: int = 0,
    restarted_by: str = "SLURM_RESTART_COUNT",
    metrics_readable: bool = True,
    reuse_stale_code: bool = False,
    code_modules: Mapping[str, str] | None = None,
    shape_free: str | None = None,
    limit_free: str | None = None,
) -> Decision:
    """Decide whether a cell is reused, skipped or run, and whether a run continues.

    A status with this ``run_id`` was written by this run. ``restart_count`` above 0 makes
    a multi-rank cell a requeue, which continues. ``reuse_stale_code`` ignores a changed
    ``code`` fingerprint only; ``code_modules`` names the changed modules in the warning.

    >>> fp = {"config": "c1", "code": "k1"}
    >>> done = {"status": "completed", "fingerprints": fp, "run_id": "old", "attempt": 1}
    >>> decide(done, fp, cell="x=1", run_id="new", resume=True).action
    'reuse'
    >>> d = decide(done, {**fp, "config": "c2"}, cell="x=1", run_id="new", resume=True)
    >>> d.action, d.continue_from_checkpoint, d.rerun_reason
    ('run', False, 'config fingerprint changed')
    >>> decide(done, fp, cell="x=1", run_id="new", resume=True, aborted=True).reason
    "sweep aborted (on_error='raise')"
    >>> stopped = {**done, "status": "failed", SHAPE_FREE: "e1"}
    >>> d = decide(stopped, {**fp, "config": "c2"}, cell="x=1", run_id="new", resume=True,
    ...            shape_free="e1")  # relaunched with fewer GPUs
    >>> d.action, d.continue_from_checkpoint, d.reason
    ('run', True, 'resume at another world size (only the run shape changed): continuing')
    >>> longer = {**done, LIMIT_FREE: "l1"}  # then resumed with trainer.max_epochs raised
    >>> d = decide(longer, {**fp, "config": "c2"}, cell="x=1", run_id="new", resume=True,
    ...            limit_free="l1")
    >>> d.action, d.continue_from_checkpoint, d.extends
    ('run', True, True)
    """
    before: Mapping[str, Any] = previous or {}
    if aborted:
        return Decision("skip", reason=ABORTED)
    found: list[str] = []
    rerun_reason = None
    ignored = ("code",) if reuse_stale_code else ()
    if resume and before.get("status") == "completed":
        changed = _changed(before.get("fingerprints") or {}, fingerprints)
        if _reshaped(changed, ignored, before.get(SHAPE_FREE), shape_free):
            return Decision("reuse", reason="completed at another world size: reused")
        if not set(changed) - set(ignored):
            if metrics_readable:
                despite = tuple(changed)
                if not despite:
                    return Decision("reuse", reason="completed with the same fingerprints")
                return Decision(
                    "reuse",
                    reason="completed; its code changed since: reused as asked",
                    reused_despite=despite,
                    warnings=(
                        f"cell {cell}: code fingerprint changed{_modules(before, code_modules)}"
                        " since it completed; reusing it anyway (reuse_stale_code=True)",
                    ),
                )
        elif not _reshaped(changed, ignored, before.get(LIMIT_FREE), limit_free):
            detail = _modules(before, code_modules) if "code" in changed else ""
            found.append(
                f"cell {cell}: {' and '.join(changed)} fingerprint changed{detail} since it "
                "completed; running it again instead of reusing it"
            )
            rerun_reason = f"{'/'.join(changed)} fingerprint changed"
    if deadline is not None:
        if multi_rank:
            found.append(
                "max_total_seconds is disabled for a cell launched on several ranks (a rank "
                "that stopped alone would hang the others at rendezvous); bound the job with "
                "the scheduler's timeout_min instead"
            )
        elif now >= deadline:
            return Decision(
                "skip", reason=OUT_OF_TIME, rerun_reason=rerun_reason, warnings=tuple(found)
            )
    known = _before_this_run(before, run_id, "fingerprints")
    known_shape = _before_this_run(before, run_id, SHAPE_FREE)
    known_limits = _before_this_run(before, run_id, LIMIT_FREE)
    differ = _changed(known if isinstance(known, Mapping) else {}, fingerprints)
    reshaped = _reshaped(differ, ignored, known_shape, shape_free)
    extends = not reshaped and _reshaped(differ, ignored, known_limits, limit_free)
    # continue only on a requeue within this run, or a resume with unchanged fingerprints
    if multi_rank and restart_count > 0:  # each rank decides alone while rank 0 writes
        how = "restarted by torchrun" if "TORCHELASTIC" in restarted_by else "requeued"
        continues, why = True, f"{how} ({restarted_by} > 0): continuing"
    elif not multi_rank and before.get("run_id") == run_id:
        continues, why = True, "requeued within this run: continuing"
    elif not resume:
        continues, why = False, "a new run without resume: starting afresh"
    # a status without fingerprints (corrupt, or from an old version) proves nothing
    elif before and not (reshaped or extends) and set(differ) - set(ignored):
        continues, why = False, "fingerprints changed: starting afresh"
    elif reshaped:
        continues = True
        why = "resume at another world size (only the run shape changed): continuing"
    else:
        continues = True
        why = EXTENDED if extends else "resume with unchanged fingerprints: continuing"
    return Decision(
        "run",
        continue_from_checkpoint=continues,
        reason=rerun_reason or why,
        rerun_reason=rerun_reason,
        warnings=tuple(found),
        previous_fingerprints=known,
        previous_shape_free=known_shape,
        extends=extends and continues,
        previous_limit_free=known_limits,
    )


def _reshaped(changed: list[str], ignored: tuple[str, ...], before: Any, now: str | None) -> bool:
    """Only the config fingerprint differs (besides ``ignored``), and ``before == now``."""
    return now is not None and before == now and set(changed) - set(ignored) == {"config"}


def _changed(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """The keys whose values differ: one on one side only changed too (an image unset)."""
    return sorted(k for k in {*old, *new} if old.get(k) != new.get(k))


def _modules(previous: Mapping[str, Any], code_modules: Mapping[str, str] | None) -> str:
    """`` (code: helpers, models)`` when the previous status and this run both list them."""
    old = previous.get("code_modules")
    if not isinstance(old, Mapping) or code_modules is None:
        return ""
    names = _changed(old, code_modules)
    if not names:
        return ""
    more = f" and {len(names) - 5} more" if len(names) > 5 else ""
    return f" (code: {', '.join(names[:5])}{more})"


def _before_this_run(previous: Mapping[str, Any], run_id: str, key: str) -> Any:
    """A status field as it was before this run: its ``previous_<key>`` once this run's rank
    0 rewrote the status, so that every rank decides the same."""
    if previous.get("run_id") == run_id and "previous_fingerprints" in previous:
        return previous.get(f"previous_{key}")
    return previous.get(key)
