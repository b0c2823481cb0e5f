# SPDX-License-Identifier: MIT
"""``mushin-box resume DIR [CELL...]``: the recorded launch again, and what it will do per cell.

A resume replays the launch record (:mod:`.record`) and may change the scheduler's options
or, with ``--set``, an override: a new config for every cell, so setting an unfinished
cell's checkpoint aside is refused unless ``restart``. What each cell does is decided here
only to be shown and checked; the engine (:mod:`mushin_box._sweep.decide`) decides again
from the same facts. A live cell is never run. A change of Trainer limits alone extends
every cell from its checkpoint (a lower limit is refused). Named cells narrow the sweep's
overrides to their values; an unfinished cell of the narrowed grid not named is refused.
"""

from __future__ import annotations

import contextlib
import itertools
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from mushin_box._core.errors import MushinBoxError
from mushin_box._core.overrideparse import is_hydra_key, parse_overrides
from mushin_box._core.overrides import parse_override_value
from mushin_box._core.redact import REDACTED
from mushin_box._core.targets import public
from mushin_box._launch.loading import launch_code
from mushin_box._launch.options import SCHEDULER_FLAGS
from mushin_box._launch.record import FLAG_TYPES, RecordError, read_launch_record
from mushin_box._provenance.full import TRAINER_LIMIT_KEYS
from mushin_box._sweepdir.board import read_sweep
from mushin_box._sweepdir.cancel import cell_label
from mushin_box._sweepdir.manifest import (
    SweepBusyError,
    ran_experiment,
    read_status,
    read_sweep_manifest,
    write_grid,
)
from mushin_box._train.resume import find_last_checkpoint, refuse_shortened


@public
class ResumeError(MushinBoxError, ValueError):
    """A resume that cannot work as asked; the message names the cells and the fix."""


@attrs.frozen
class CellAction:
    """What a resume does with one cell: ``reuse``, ``continue``, ``extend``, ``restart``,
    ``run`` (never started), ``live`` (left alone) or ``left`` (not named)."""

    name: str
    state: str
    action: str
    why: str = ""
    checkpoint: str | None = None
    combo: Mapping[str, Any] = attrs.field(factory=dict)

    @property
    def runs(self) -> bool:
        return self.action in ("continue", "extend", "restart", "run")


def _key(text: str) -> str:
    return text.split("=", 1)[0].lstrip("+~")


def resume_settings(
    record: Mapping[str, Any], flags: Mapping[str, Any], sets: Sequence[str]
) -> tuple[list[str], dict[str, Any], list[str]]:
    """(overrides, flags, changed override keys): the record's, with ``flags`` (None: not
    given; ``sbatch`` adds to the recorded) and each ``--set`` replacing its key's override.
    A launch with scheduler flags recorded ran on SLURM: the resume submits there (where no
    controller answers, that is the error, not a dropped flag the user never typed).

    >>> rec = {"overrides": ["lr=0.1,1", "+tag=a"], "flags": {"nodes": 2, "time": 60}}
    >>> resume_settings(rec, {"time": 90}, ["tag=b"])
    (['lr=0.1,1', '+tag=b'], {'nodes': 2, 'time': 90, 'slurm': True}, ['tag'])
    """
    overrides = list(record["overrides"])
    changed: list[str] = []
    for text in sets:
        if "=" not in text:
            raise ResumeError(f"--set {text!r}: give KEY=VALUE")
        at = [i for i, o in enumerate(overrides) if _key(o) == _key(text)]
        if at:
            old = overrides[at[-1]]
            overrides[at[-1]] = old[: len(old) - len(old.lstrip("+~"))] + text.lstrip("+~")
            if overrides[at[-1]] != old:
                changed.append(_key(text))
        else:
            overrides.append(text)
            changed.append(_key(text))
    secret = [o for o in overrides if o.endswith(f"={REDACTED}")]
    if secret:
        key = _key(secret[0])
        raise ResumeError(
            f"override {key}'s value is a secret, which the launch did not record: give it "
            f"again with --set {key}=VALUE, or better --set '{key}=${{oc.env:NAME}}' with "
            "NAME set in the environment"
        )
    out = dict(record["flags"])
    for key, value in flags.items():
        if value is None or key not in FLAG_TYPES:
            continue
        if key == "sbatch":
            value = [*out.get("sbatch", []), *value]
        out[key] = list(value) if isinstance(value, tuple) else value
    if not out.get("local") and any(out.get(k) is not None for k in SCHEDULER_FLAGS):
        out["slurm"] = True
    return overrides, out, changed


def read_resume_record(root: str) -> tuple[dict[str, Any], tuple[str, str] | None]:
    """The launch record, and ``(cell, experiment file)`` the cells ran (None: unknown),
    refused when the record names another file (a module is found only by importing it)."""
    record = read_launch_record(root)
    ran = ran_experiment(Path(root))
    recorded = record["experiment"].split(":", 1)[0]
    if ran is not None and recorded.endswith(".py"):
        cell, file = ran
        if os.path.realpath(recorded) != os.path.realpath(file):
            raise RecordError(
                f"{root}: the launch record names the experiment {recorded}, but the sweep's "
                f"cells ran {file} (cell {cell}); a resume would run them again with another "
                f"experiment and replace their results: put {file} back in the record, or "
                f"launch {recorded} into a new directory"
            )
    return record, ran


def plan_cells(
    root: str | Path,
    chosen: Sequence[str] = (),
    *,
    changed: Sequence[str] = (),
    code: str | None = None,
    restart: bool = False,
    overrides: Sequence[str] = (),
) -> list[CellAction]:
    """What a resume of the sweep at ``root`` does with each cell; ``chosen``: the cells
    named (none: every cell); ``code``: the code fingerprint now (None: not compared)."""
    sweep = read_sweep(root)
    names = {cell_label(c.dir, c.combo): c for c in sweep.cells}
    wanted = [n.rstrip("/").rsplit("/", 1)[-1] for n in chosen]
    unknown = [n for n in wanted if n not in names]
    if unknown:
        raise ResumeError(
            f"no cell {', '.join(unknown)} in {root}; its cells: {', '.join(names) or 'none'}"
        )
    limits = _limit_values(changed, overrides)
    out: list[CellAction] = []
    for name, cell in names.items():
        record = read_status(Path(root) / cell.dir) if cell.dir else None
        fingerprints = (record or {}).get("fingerprints")
        was = fingerprints.get("code") if isinstance(fingerprints, dict) else None
        recorded = (record or {}).get("limits")
        extends = bool(limits) and isinstance(recorded, dict) and set(limits) <= set(recorded)
        code_changed = code is not None and was is not None and was != code
        why = "its code changed" if code_changed else ""
        if not why and changed and not extends:
            why = f"override {', '.join(changed)} changed"
        action = _action(name, cell, sweep.active, why, wanted, root)
        if extends and cell.dir and action.action == "reuse" and action.state == "completed":
            said = ", ".join(f"{k}={v}" for k, v in limits.items())
            checkpoint = find_last_checkpoint(Path(root) / cell.dir)
            kind = "extend" if checkpoint else "restart"
            why = (
                f"to {said}"
                if checkpoint
                else f"{said}, but no checkpoint to extend: from the start"
            )
            action = attrs.evolve(action, action=kind, why=why, checkpoint=checkpoint)
        out.append(action)
    live = [a.name for a in out if a.action == "live" and a.name in wanted]
    if live:
        raise ResumeError(
            f"cell(s) {', '.join(live)} still run or are queued: a resume never runs a cell "
            "twice; wait for them (mushin-box wait DIR) or cancel them first"
        )
    lost = [a for a in out if a.action == "restart" and a.checkpoint and a.state != "completed"]
    if lost and not restart:
        raise ResumeError(
            f"this resume would start cell(s) {', '.join(a.name for a in lost)} again from "
            f"scratch ({lost[0].why}) and set their checkpoints aside: drop the change to "
            "continue them from their checkpoints, or pass --restart"
        )
    for a in out:  # a limit below what a cell that continues its fit already trained
        if a.action in ("extend", "continue") and (directory := names[a.name].dir):
            refuse_shortened(Path(root) / directory, limits)
    return out


def _limit_values(changed: Sequence[str], overrides: Sequence[str]) -> dict[str, Any]:
    """``{key: new value}`` when every changed key is one training limit's value; else {}."""
    given = {_key(o): o for o in overrides}
    out: dict[str, Any] = {}
    for key in changed:
        text = given.get(key)
        if text is None or key.rsplit(".", 1)[-1] not in TRAINER_LIMIT_KEYS:
            return {}
        if parse_overrides([text])[0].is_sweep_override():
            return {}
        out[key] = parse_override_value(text.split("=", 1)[1])
    return out


def _action(
    name: str, cell: Any, active: bool, why: str, wanted: Sequence[str], root: str | Path
) -> CellAction:
    state, combo = cell.state, dict(cell.combo)
    if state in ("running", "unknown") or (state == "pending" and active):
        return CellAction(name, state, "live", "still runs or is queued", combo=combo)
    if wanted and name not in wanted:
        if state == "completed":
            return CellAction(name, state, "reuse", "completed", combo=combo)
        return CellAction(name, state, "left", "not named", combo=combo)
    if state == "completed":
        if why:
            return CellAction(name, state, "restart", why, combo=combo)
        return CellAction(name, state, "reuse", "completed, unchanged", combo=combo)
    checkpoint = find_last_checkpoint(Path(root) / cell.dir) if cell.dir else None
    if why:
        return CellAction(name, state, "restart", why, checkpoint, combo)
    if checkpoint:
        return CellAction(name, state, "continue", "from its checkpoint", checkpoint, combo)
    if cell.dir:
        return CellAction(name, state, "restart", "no checkpoint", combo=combo)
    return CellAction(name, state, "run", "never started", combo=combo)


def narrow_overrides(overrides: Sequence[str], actions: Sequence[CellAction]) -> list[str]:
    """The overrides with each sweep cut down to the values of the cells that run.

    >>> a = CellAction("lr=0.1", "cancelled", "continue", combo={"lr": 0.1})
    >>> b = CellAction("lr=1", "cancelled", "left", combo={"lr": 1})
    >>> narrow_overrides(["lr=0.1,1", "+tag=x"], [a, b])
    ['lr=choice(0.1)', '+tag=x']
    """
    running = [a for a in actions if a.runs]
    parsed = parse_overrides(overrides)
    out: list[str] = []
    kept: dict[str, list[Any]] = {}
    for text, o in zip(overrides, parsed, strict=True):
        key = o.key_or_group
        if not o.is_sweep_override() or is_hydra_key(key):
            out.append(text)
            continue
        wanted = [a.combo.get(key) for a in running]
        items = [s for s in o.sweep_string_iterator() if parse_override_value(s) in wanted]
        if not items:
            raise ResumeError(
                f"override {text!r} holds no value of the cells to resume; resume the whole "
                "sweep (no CELL), or name cells of this sweep"
            )
        kept[key] = [parse_override_value(s) for s in items]
        # choice(): a sweep even of one value, so that the cell keeps its swept key (and
        # its directory) as the launch's sweep gave it
        out.append(f"{text.split('=', 1)[0]}=choice({','.join(items)})")
    swept = {k for a in actions for k in a.combo}
    if swept - set(kept):
        raise ResumeError(
            f"the sweep over {', '.join(sorted(swept - set(kept)))} is not in the launch's "
            "overrides (it is in the experiment file), so named cells cannot be picked out: "
            "resume the whole sweep (no CELL)"
        )
    by_combo = {tuple(sorted(a.combo.items())): a for a in actions}
    extra = []
    for values in itertools.product(*kept.values()):
        other = by_combo.get(tuple(sorted(zip(kept, values, strict=True))))
        if other is not None and other.action in ("left", "live"):
            extra.append(other.name)
    if extra:
        raise ResumeError(
            f"the named cells would also run {', '.join(extra)} (a grid's cells are the "
            "product of their values): name them too, or resume the cells one at a time"
        )
    return out


def changed_keys(recorded: Sequence[str], now: Sequence[str]) -> list[str]:
    """The override keys added, removed or changed between two launches, in order.

    >>> changed_keys(["lr=0.1,1", "+tag=a"], ["lr=0.1,1", "seed=2"])
    ['tag', 'seed']
    """
    old = {_key(o): o for o in recorded}
    new = {_key(o): o for o in now}
    secret = {k for k, o in old.items() if o.endswith(f"={REDACTED}") and k in new}
    return [k for k in {**old, **new} if old.get(k) != new.get(k) and k not in secret]


def gpu_hours(actions: Sequence[CellAction], nodes: int, gpus: int, minutes: int) -> float:
    """The GPU-hours a resume may take at most: only its cells that run.

    >>> done = CellAction("a", "completed", "reuse")
    >>> stopped = CellAction("b", "cancelled", "continue")
    >>> gpu_hours([done, stopped], 2, 4, 60)
    8.0
    """
    return round(sum(a.runs for a in actions) * nodes * gpus * minutes / 60, 2)


@contextlib.contextmanager
def grid_kept(root: str, narrowed: bool) -> Iterator[None]:
    """Give the manifest the whole sweep's grid again after a ``narrowed`` resume (of named
    cells, which writes only theirs) returns."""
    manifest = read_sweep_manifest(Path(root))
    yield
    if narrowed and manifest is not None and manifest["grid"]:
        with contextlib.suppress(SweepBusyError, OSError):
            write_grid(Path(root), dict(manifest["grid"]))


def launch_argv(flags: Mapping[str, Any]) -> list[str]:
    """The recorded flags as ``launch`` flags again, for launch's own parser to check.

    >>> " ".join(launch_argv({"nodes": 2, "min_nodes": 1, "local": True, "time": 90,
    ...     "mem": 2048, "sbatch": ["mail-type=END"], "slurm": False, "on_error": "nan"}))
    '--nodes 1:2 --local --time 90 --mem 2048M --sbatch mail-type=END --on-error nan'
    """
    out: list[str] = []
    for key, value in flags.items():
        flag = "--" + key.replace("_", "-")
        if key == "min_nodes":
            continue
        if key == "nodes" and flags.get("min_nodes", value) != value:
            out += [flag, f"{flags['min_nodes']}:{value}"]
        elif isinstance(value, bool):
            out += [flag] if value else []
        elif isinstance(value, list):
            out += [word for item in value for word in (flag, str(item))]
        elif key == "mem":
            out += [flag, f"{value}M"]
        else:
            out += [flag, str(value)]
    return out


def resume_actions(
    working_dir: str,
    target: Any,
    source: str | None,
    overrides: Sequence[str],
    *,
    cells: Sequence[str] = (),
    changed: Sequence[str] | None = None,
    restart: bool = True,
) -> list[CellAction] | None:
    """:func:`plan_cells` of ``target`` resumed into ``working_dir`` (None: no sweep
    there yet); ``changed`` None: the keys that differ from the launch record's."""
    if changed is None:
        try:
            changed = changed_keys(read_launch_record(working_dir)["overrides"], overrides)
        except RecordError:
            changed = []
    try:
        return plan_cells(
            working_dir,
            cells,
            changed=changed,
            code=launch_code(target, source).fingerprint,
            restart=restart,
            overrides=overrides,
        )
    except FileNotFoundError:  # not a sweep yet: every cell runs
        return None


def review_resume(review: dict[str, Any], plan: Any, actions: Sequence[CellAction]) -> None:
    """Add what each cell does to the dry run's review, and the GPU-hours of those that run."""
    review["resume"] = [
        {"cell": a.name, "state": a.state, "action": a.action, "why": a.why}
        | ({"checkpoint": a.checkpoint} if a.checkpoint else {})
        for a in actions
    ]
    runs = sum(a.runs for a in actions)
    review["cells_to_run"] = runs
    if review.get("gpu_hours_formula") is not None:
        minutes = int((plan.launcher_config or {}).get("timeout_min", 60))
        review["gpu_hours"] = gpu_hours(actions, plan.nodes, plan.gpus, minutes)
        rest = review["gpu_hours_formula"].split(" x ", 1)[1]
        review["gpu_hours_formula"] = f"{runs} cell(s) to run of {len(actions)} x {rest}"
