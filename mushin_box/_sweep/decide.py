# SPDX-License-Identifier: MIT
"""Reuse, skip or run: what a sweep cell does, decided from what is known about it.

Design note: the decision is a pure function of plain values (the cell's previous status
record, its fingerprints now, the plan's ``resume`` flag and run id, whether the sweep was
aborted, the time budget, the rank layout, SLURM's or torchrun's restart count). It reads no
file, writes
none, and needs no Hydra: the cell runner gathers the facts, calls :func:`decide`, and acts
on the :class:`Decision` (returns the metrics, records a skip, or runs the task). That keeps
every branch testable in microseconds, and it keeps every rank of a multi-rank cell on the
same answer, since each rank computes it from the same facts.

A change of the world size alone (``trainer.devices``/``trainer.num_nodes``, the run shape
that ``launch --gpus``/``--nodes`` set) changes the config fingerprint, which hashes the
whole config, but not the experiment: the status also keeps the fingerprint of the config
without its run-shape keys (``config_without_shape``). When only that shape changed, a
completed cell is reused and an unfinished one continues from its checkpoints under
``resume``, at the new world size.

A change of a training limit alone (a Trainer's ``max_epochs``/``max_steps``/``max_time``)
extends the same fit: the status keeps the fingerprint of the config without its run-shape
and limit keys too (``config_without_limits``). When only those changed, a completed or
unfinished cell continues from its checkpoints under ``resume`` (``extends``), and trains
on to the new limit; any other change still starts afresh.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import attrs

__all__ = ["ABORTED", "EXTENDED", "LIMIT_FREE", "OUT_OF_TIME", "SHAPE_FREE", "Decision", "decide"]

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

_MULTI_RANK_DEADLINE = (
    "max_total_seconds is disabled for a cell launched on several ranks (a rank that stopped "
    "alone would hang the others at rendezvous); bound the job with the scheduler's "
    "timeout_min instead"
)


@attrs.frozen
class Decision:
    """What a cell does this time, and why.

    Attributes
    ----------
    action : "reuse" | "skip" | "run"
        ``reuse``: return the completed cell's metrics, run and rewrite nothing.
        ``skip``: record the cell as skipped (with ``reason``). ``run``: run the task.
    continue_from_checkpoint : bool
        For ``run``: does this attempt continue from the cell's checkpoints? When it does
        not, rank 0 sets the earlier checkpoints aside first.
    reason : str
        Why, in words; for ``skip`` the ``reason`` recorded in the status.
    rerun_reason : str | None
        For a completed cell that runs again because a fingerprint changed: the status's
        ``rerun_reason`` (e.g. ``"config fingerprint changed"``).
    warnings : tuple[str, ...]
        Messages the runner emits as ``UserWarning``, in order.
    previous_fingerprints : Any
        For ``run``: the fingerprints from before this run, recorded in the status so that
        a rank that reads it after rank 0 rewrote it compares with the same values.
    reused_despite : tuple[str, ...]
        For ``reuse``: the fingerprints that changed and were ignored on request
        (``reuse_stale_code``: ``("code",)``); the runner records them in the status.
    previous_shape_free : Any
        For ``run``: the config fingerprint without run-shape keys from before this run
        (the status's ``previous_config_without_shape``, as ``previous_fingerprints``).
    extends : bool
        For ``run``: only a training limit changed, so the attempt extends the cell's fit
        from its checkpoints (``continue_from_checkpoint`` is True).
    previous_limit_free : Any
        As ``previous_shape_free``, for the fingerprint without training limits.
    """

    action: Literal["reuse", "skip", "run"]
    continue_from_checkpoint: bool = False
    reason: str = ""
    rerun_reason: str | None = None
    warnings: tuple[str, ...] = ()
    previous_fingerprints: Any = None
    reused_despite: tuple[str, ...] = ()
    previous_shape_free: Any = None
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

    Parameters
    ----------
    previous : mapping | None
        The cell's status record as read from disk (``None`` or ``{}`` when there is none).
    fingerprints : mapping
        The cell's fingerprints now (``config``, ``code``, ``image`` when set).
    cell : str
        The cell's directory name (for the warnings).
    run_id : str
        This run's id (the plan's): a status with the same id was written by this run.
    resume : bool
        The plan's ``resume`` flag.
    aborted : bool (default: False)
        Is the sweep's abort file present (a cell failed under ``on_error="raise"``)?
    deadline, now : float | None, float
        The plan's absolute ``time.time()`` deadline, and the time now.
    multi_rank : bool (default: False)
        Is this process one of several ranks of the cell?
    restart_count : int (default: 0)
        ``SLURM_RESTART_COUNT`` or ``TORCHELASTIC_RESTART_COUNT``: above 0, a multi-rank
        cell is a requeue (or a restart of torchrun's worker group) and continues.
    restarted_by : str (default: "SLURM_RESTART_COUNT")
        The variable ``restart_count`` came from, named in the reason.
    metrics_readable : bool (default: True)
        ``False`` when a reusable cell's metrics sidecar turned out unreadable: it runs.
    reuse_stale_code : bool (default: False)
        Ignore a changed ``code`` fingerprint (the user's "I know, reuse anyway"): a
        completed cell is reused (``reused_despite``), another continues from its
        checkpoints. Every other fingerprint still counts.
    code_modules : mapping | None
        The modules the code fingerprint covers now (name -> short sha256): with the
        previous status's ``code_modules``, a changed code fingerprint names them.
    shape_free : str | None
        The config fingerprint without its run-shape keys now (:data:`SHAPE_FREE`): when
        the previous status holds the same, a changed ``config`` fingerprint is a change of
        world size only (the cell is reused, or continues, under ``resume``).
    limit_free : str | None
        The config fingerprint without its run-shape and training-limit keys now
        (:data:`LIMIT_FREE`): when the previous status holds the same, and not the same
        ``shape_free``, a training limit changed, and the cell continues under ``resume``.

    Examples
    --------
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
        old = before.get("fingerprints") or {}
        # a key present on one side only changed too (e.g. the image is no longer set)
        changed = sorted(k for k in {*old, *fingerprints} if old.get(k) != fingerprints.get(k))
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
            found.append(_MULTI_RANK_DEADLINE)
        elif now >= deadline:
            return Decision(
                "skip", reason=OUT_OF_TIME, rerun_reason=rerun_reason, warnings=tuple(found)
            )
    known = _before_this_run(before, run_id, "fingerprints")
    known_shape = _before_this_run(before, run_id, SHAPE_FREE)
    known_limits = _before_this_run(before, run_id, LIMIT_FREE)
    was = known if isinstance(known, Mapping) else {}
    differ = sorted(k for k in {*was, *fingerprints} if was.get(k) != fingerprints.get(k))
    reshaped = _reshaped(differ, ignored, known_shape, shape_free)
    extends = not reshaped and _reshaped(differ, ignored, known_limits, limit_free)
    continues, why = _continues(
        before,
        run_id=run_id,
        resume=resume,
        # a status without fingerprints (corrupt, or from an old version) proves nothing
        changed=bool(before)
        and not (reshaped or extends)
        and _without(known, ignored) != _without(fingerprints, ignored),
        multi_rank=multi_rank,
        restart_count=restart_count,
        restarted_by=restarted_by,
        reshaped=reshaped,
        extends=extends,
    )
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
    """Did only the run shape (the world size) change? The config fingerprint alone
    differs (besides those ignored), and the config without run-shape keys hashes alike."""
    return now is not None and before == now and set(changed) - set(ignored) == {"config"}


def _without(fingerprints: Any, keys: tuple[str, ...]) -> Any:
    if not keys or not isinstance(fingerprints, Mapping):
        return fingerprints
    return {k: v for k, v in fingerprints.items() if k not in keys}


def _modules(previous: Mapping[str, Any], code_modules: Mapping[str, str] | None) -> str:
    """`` (code: helpers, models)``: the modules whose content changed, when the previous
    status and this run both list them; else nothing."""
    old = previous.get("code_modules")
    if not isinstance(old, Mapping) or code_modules is None:
        return ""
    names = sorted(k for k in {*old, *code_modules} if old.get(k) != code_modules.get(k))
    if not names:
        return ""
    more = f" and {len(names) - 5} more" if len(names) > 5 else ""
    return f" (code: {', '.join(names[:5])}{more})"


def _before_this_run(previous: Mapping[str, Any], run_id: str, key: str) -> Any:
    """A status field (``fingerprints``...) as it was before this run: the status's, or,
    when this run's rank 0 rewrote the status already, the ``previous_<key>`` it kept
    there. So a rank that reads the status after another rewrote it compares with what was
    there before, as that rank did, and every rank decides the same."""
    if previous.get("run_id") == run_id and "previous_fingerprints" in previous:
        return previous.get(f"previous_{key}")
    return previous.get(key)


def _continues(
    previous: Mapping[str, Any],
    *,
    run_id: str,
    resume: bool,
    changed: bool,
    multi_rank: bool,
    restart_count: int,
    restarted_by: str = "SLURM_RESTART_COUNT",
    reshaped: bool = False,
    extends: bool = False,
) -> tuple[bool, str]:
    """Does this attempt continue from the cell's checkpoints, and why (or why not)?

    Only a requeue within this run, or ``resume=True`` with unchanged fingerprints; a new
    run without ``resume`` starts afresh.
    """
    if multi_rank:
        # every rank decides alone while rank 0 rewrites the status: the plan, SLURM's
        # restart count and the fingerprints from before this run
        if restart_count > 0:
            how = "restarted by torchrun" if "TORCHELASTIC" in restarted_by else "requeued"
            return True, f"{how} ({restarted_by} > 0): continuing"
    elif previous.get("run_id") == run_id:
        return True, "requeued within this run: continuing"
    if not resume:
        return False, "a new run without resume: starting afresh"
    if changed:
        return False, "fingerprints changed: starting afresh"
    if reshaped:
        return True, "resume at another world size (only the run shape changed): continuing"
    if extends:
        return True, EXTENDED
    return True, "resume with unchanged fingerprints: continuing"
