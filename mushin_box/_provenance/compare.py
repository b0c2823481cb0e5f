# SPDX-License-Identifier: MIT
"""Two provenance records (and their metrics) compared, field by field.

Both records are split canonically and flattened to dotted paths
(``run.topology.ranks[3].hostname``). A difference under ``reproducibility`` breaks
reproducibility, one under ``run`` is expected, except: training limits are changed on
purpose (``extended``), and another git state of the same code fingerprint is expected.
A field computed from others is shown only when they show no difference.

:func:`first_divergence` names where two fits' fingerprints (``fit_fingerprints.json``)
first part, and the likely cause: initial weights (built before seeding), an epoch's
first batch at one world size (data order), weights by under :data:`DRIFT` of their norm
(floating-point reduction order), else a real difference (at another world size, most
likely the per-rank batch).

>>> w = {"sha256": "a", "norm": 2.0}
>>> one = {"world_size": 1, "fit_start": w, "epochs": [{"epoch": 0, "weights": w}]}
>>> drift = {**one, "epochs": [{"epoch": 0, "weights": {"sha256": "b", "norm": 2.000000002}}]}
>>> first_divergence(one, drift)
'weights part at epoch 0, by 1e-09 of their norm (floating-point reduction order)'
>>> first_divergence(one, {**one, "fit_start": {"sha256": "c", "norm": 3.0}})[:22]
'initial weights differ'
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from mushin_box._core.sidecars import canonical_dumps
from mushin_box._provenance.full import split_provenance, training_limits
from mushin_box._provenance.record import package_versions

REPRO = "reproducibility"
RUN = "run"
#: one row per changed package: ``reproducibility.package_set[<name>]``
PACKAGE_ROW = f"{REPRO}.package_set["
_PACKAGE_SHA = f"{REPRO}.package_set.sha256"
_KEY_VERSION = f"{REPRO}.packages."

#: present on one side only (an older record lacks them): no difference
_RANKS = f"{REPRO}.ranks"
_TASK_FROM = f"{REPRO}.code.task_from"
#: expected to differ when the code fingerprints are the same
_GIT = f"{REPRO}.code.git"


def _under(path: str, source: str) -> bool:
    return path == source or path.startswith((f"{source}.", f"{source}["))


#: fields computed from others: shown only when no path they summarize differs
_DERIVED: dict[str, Callable[[str], bool]] = {
    f"{REPRO}.config_sha256": lambda p: _under(p, f"{REPRO}.config"),
    _PACKAGE_SHA: lambda p: p.startswith(PACKAGE_ROW),
    f"{REPRO}.package_set.count": lambda p: p == _PACKAGE_SHA or p.startswith(PACKAGE_ROW),
}
_INDEX = re.compile(r"\[\d+\]")
#: parts of a record that must be JSON objects when present (``null`` counts as absent):
#: the comparison walks into them, so another type is a damaged file, not a difference
_OBJECT_PARTS = ((REPRO,), (RUN,), (REPRO, "config"), (RUN, "config"), (RUN, "fingerprints"))


@attrs.frozen
class FieldDiff:
    """One flattened path whose value differs (``change``: changed, only_a, only_b)."""

    path: str
    a: Any
    b: Any
    change: str = "changed"


@attrs.frozen
class MetricDiff:
    """One metric of both sides; ``delta`` is ``b - a`` (max ``|b - a|`` for lists)."""

    name: str
    a: Any
    b: Any
    delta: float | None
    match: bool
    in_a: bool = True
    in_b: bool = True


@attrs.frozen
class CellDiff:
    """The comparison of one pair of cells (``a``/``b``: their paths, ``None`` if absent)."""

    name: str
    combo: dict[str, Any] | None
    a: str | None
    b: str | None
    breaks: tuple[FieldDiff, ...] = ()
    expected: tuple[FieldDiff, ...] = ()
    metrics: tuple[MetricDiff, ...] = ()
    #: where the two fits first parted, in words (None: they did not, or unrecorded)
    divergence: str | None = None
    #: training limits that differ: changed on purpose (a fit extended), not an accident
    extended: tuple[FieldDiff, ...] = ()

    @property
    def reproducible(self) -> bool:
        """Both cells exist and their reproducibility parts match."""
        return self.a is not None and self.b is not None and not self.breaks

    @property
    def metrics_match(self) -> bool:
        return all(m.match for m in self.metrics)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "combo": self.combo,
            "a": self.a,
            "b": self.b,
            "reproducible": self.reproducible,
            "metrics_match": self.metrics_match,
            "breaks_reproducibility": [attrs.asdict(f, recurse=False) for f in self.breaks],
            "expected_to_differ": [attrs.asdict(f, recurse=False) for f in self.expected],
            "training_limits": [attrs.asdict(f, recurse=False) for f in self.extended],
            "metrics": [attrs.asdict(m, recurse=False) for m in self.metrics],
            "first_divergence": self.divergence,
        }


def _json_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple):
        return "a list"
    return "null" if value is None else type(value).__name__


def record_problem(record: Any) -> str | None:
    """What makes ``record`` unusable as a provenance record; ``None`` when nothing does.

    >>> record_problem({"reproducibility": {"config": {"lr": 0.1}}, "run": {}}) is None
    True
    >>> record_problem({"reproducibility": [1, 2]})
    '`reproducibility` is a list, expected an object'
    >>> record_problem([1, 2])
    'not a JSON object (it is a list)'
    """
    if not isinstance(record, Mapping):
        return f"not a JSON object (it is {_json_kind(record)})"
    for path in _OBJECT_PARTS:
        node: Any = record
        for step in path:  # parents come first in _OBJECT_PARTS, so they are objects
            node = node.get(step) if isinstance(node, Mapping) else None
        if node is not None and not isinstance(node, Mapping):
            return f"`{'.'.join(path)}` is {_json_kind(node)}, expected an object"
    return None


def _same(a: Any, b: Any) -> bool:
    if type(a) is type(b) and not isinstance(a, float | list | dict) and a == b:
        return True
    try:
        return canonical_dumps(a) == canonical_dumps(b)
    except (TypeError, ValueError):
        return a == b


def _has_containers(value: Any) -> bool:
    return isinstance(value, list) and any(isinstance(x, Mapping | list) for x in value)


def _field_diffs(a: Any, b: Any, path: str) -> list[FieldDiff]:
    """Differences between two nested values, as flattened paths; a key or element only
    one side has is one entry with its whole value, not one per leaf."""
    out: list[FieldDiff] = []

    def walk(x: Any, y: Any, where: str) -> None:
        if isinstance(x, Mapping) and isinstance(y, Mapping) and (x or y):
            keys: list[Any] = sorted(x.keys() | y.keys(), key=str)
            subs = [f"{where}.{key}" if where else str(key) for key in keys]
        elif isinstance(x, list) and isinstance(y, list) and _has_containers(x + y):
            keys = list(range(max(len(x), len(y))))
            subs = [f"{where}[{i}]" for i in keys]
            x, y = dict(enumerate(x)), dict(enumerate(y))
        else:
            if not _same(x, y):
                out.append(FieldDiff(where, x, y))
            return
        for key, sub in zip(keys, subs, strict=True):
            if key not in y:
                out.append(FieldDiff(sub, x[key], None, "only_a"))
            elif key not in x:
                out.append(FieldDiff(sub, None, y[key], "only_b"))
            else:
                walk(x[key], y[key], sub)

    walk(a, b, path)
    return out


def _drop_derived(diffs: list[FieldDiff]) -> list[FieldDiff]:
    paths = {d.path for d in diffs}
    keep: list[FieldDiff] = []
    for d in diffs:
        summarizes = _DERIVED.get(d.path)
        if summarizes is not None and any(summarizes(p) for p in paths if p != d.path):
            continue
        if d.path.startswith(_KEY_VERSION):  # a key package's version, listed as a package
            if f"{PACKAGE_ROW}{d.path[len(_KEY_VERSION) :]}]" in paths:
                continue
        keep.append(d)
    return keep


def package_diffs(a: Sequence[str], b: Sequence[str]) -> list[FieldDiff]:
    """One :class:`FieldDiff` per package whose version differs between two lists.

    >>> [(f.path, f.a, f.b, f.change) for f in package_diffs(
    ...     ["attrs==1", "numpy==2.4"], ["numpy==2.5", "torch==2.6"])]
    ... # doctest: +NORMALIZE_WHITESPACE
    [('reproducibility.package_set[attrs]', '1', None, 'only_a'),
     ('reproducibility.package_set[numpy]', '2.4', '2.5', 'changed'),
     ('reproducibility.package_set[torch]', None, '2.6', 'only_b')]
    """
    va, vb = package_versions(a), package_versions(b)
    out: list[FieldDiff] = []
    for name in sorted(va.keys() | vb.keys()):
        x, y = va.get(name), vb.get(name)
        if x == y:
            continue
        change = "only_a" if name not in vb else "only_b" if name not in va else "changed"
        out.append(FieldDiff(f"{PACKAGE_ROW}{name}]", x, y, change))
    return out


def _numeric(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


def _close(a: Any, b: Any, atol: float, rtol: float = 0.0) -> tuple[bool, float | None]:
    """(equal within ``atol + rtol * |a|``, as numpy's ``isclose`` with ``a`` the reference;
    |b - a| or its max over list elements; None if not numeric)."""
    if _numeric(a) and _numeric(b):
        fa, fb = float(a), float(b)
        if math.isnan(fa) or math.isnan(fb):
            return math.isnan(fa) and math.isnan(fb), None
        if fa == fb:
            return True, 0.0
        d = abs(fb - fa)
        return d <= atol + rtol * abs(fa), d
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return False, None
        pairs = [_close(x, y, atol, rtol) for x, y in zip(a, b, strict=True)]
        ok = all(same for same, _ in pairs)
        if any(d is None and not same for same, d in pairs):  # a non-numeric difference
            return ok, None
        return ok, max((d for _, d in pairs if d is not None), default=0.0)
    return _same(a, b), None


def _metric_diffs(
    a: Mapping[str, Any] | None, b: Mapping[str, Any] | None, atol: float, rtol: float = 0.0
) -> list[MetricDiff]:
    ma, mb = dict(a or {}), dict(b or {})
    out: list[MetricDiff] = []
    for name in sorted(ma.keys() | mb.keys()):
        if name not in ma or name not in mb:
            out.append(
                MetricDiff(name, ma.get(name), mb.get(name), None, False, name in ma, name in mb)
            )
            continue
        x, y = ma[name], mb[name]
        ok, d = _close(x, y, atol, rtol)
        if _numeric(x) and _numeric(y) and d is not None:
            d = float(y) - float(x)
        out.append(MetricDiff(name, x, y, d, ok))
    return out


def diff_records(
    a: Mapping[str, Any] | None,
    b: Mapping[str, Any] | None,
    *,
    metrics_a: Mapping[str, Any] | None = None,
    metrics_b: Mapping[str, Any] | None = None,
    atol: float = 0.0,
    rtol: float = 0.0,
    name: str = "",
    combo: dict[str, Any] | None = None,
    path_a: str | None = "a",
    path_b: str | None = "b",
    packages_a: Sequence[str] | None = None,
    packages_b: Sequence[str] | None = None,
) -> CellDiff:
    """Compare two provenance records (any schema) and two metric dicts.

    A missing record breaks as the path ``<provenance>``; a missing cell is a ``path_a`` or
    ``path_b`` of ``None``. A record of the wrong shape raises ``ValueError``.

    >>> one = {"reproducibility": {"config": {"lr": 0.1}}, "run": {"host": "a"}}
    >>> two = {"reproducibility": {"config": {"lr": 0.2}}, "run": {"host": "b"}}
    >>> d = diff_records(one, two)
    >>> [f.path for f in d.breaks], [f.path for f in d.expected]
    (['reproducibility.config.lr'], ['run.host'])
    """
    for side, record in (("a", a), ("b", b)):
        problem = None if record is None else record_problem(record)
        if problem:
            raise ValueError(f"record {side}: {problem}")
    breaks: list[FieldDiff] = []
    expected: list[FieldDiff] = []
    extended: list[FieldDiff] = []
    if a is None or b is None:
        if a is not None:
            breaks.append(FieldDiff("<provenance>", "present", "missing", "only_a"))
        elif b is not None:
            breaks.append(FieldDiff("<provenance>", "missing", "present", "only_b"))
    else:
        ca, cb = split_provenance(a), split_provenance(b)
        limits = {
            f"{REPRO}.config.{path}"
            for side in (ca, cb)
            for path in training_limits((side.get(REPRO) or {}).get("config"))
        }
        code = [(side.get(REPRO) or {}).get("code") or {} for side in (ca, cb)]
        fingerprint = code[0].get("task_sha256") if isinstance(code[0], Mapping) else None
        same_code = fingerprint is not None and all(
            isinstance(c, Mapping) and c.get("task_sha256") == fingerprint for c in code
        )
        for part, sink in ((REPRO, breaks), (RUN, expected)):
            diffs = _field_diffs(ca.get(part) or {}, cb.get(part) or {}, part)
            if part == REPRO and packages_a is not None and packages_b is not None:
                diffs += package_diffs(packages_a, packages_b)
            for diff in _drop_derived(diffs):
                unrecorded = diff.change in ("only_a", "only_b") and (
                    _under(diff.path, _RANKS) or diff.path == _TASK_FROM
                )
                # another commit, the experiment's code the same (its fingerprint): no break
                unrecorded |= same_code and _under(diff.path, _GIT)
                group = extended if diff.path in limits else sink
                (expected if unrecorded else group).append(diff)
    return CellDiff(
        name=name,
        combo=combo,
        a=path_a,
        b=path_b,
        breaks=tuple(breaks),
        expected=tuple(expected),
        metrics=tuple(_metric_diffs(metrics_a, metrics_b, atol, rtol)),
        extended=tuple(extended),
    )


def collapse_key(path: str) -> str:
    """A path with list indices replaced by ``[*]`` (for grouping rank rows).

    >>> collapse_key("run.topology.ranks[12].hostname")
    'run.topology.ranks[*].hostname'
    """
    return _INDEX.sub("[*]", path)


def family_key(path: str) -> str:
    """The family a path belongs to, its parent with ``.*``: a big world's many scheduler
    variables (``run.env.*``) or launcher settings are then one row.

    >>> family_key("run.env.SLURM_JOB_ID"), family_key("run.launcher.config.nodes")
    ('run.env.*', 'run.launcher.config.*')
    """
    head = path.rpartition(".")[0]
    return f"{head}.*" if head else path


_SEED_FIX = "Seed in pre_call (docs/reproducibility.md)"
#: weights whose norms agree to this relative difference part by float drift
DRIFT = 1e-6


def _epochs(record: Mapping[str, Any]) -> dict[int, Mapping[str, Any]]:
    """A fit's epochs by number, each with its world size (its own, else the fit's)."""
    rows, world = record.get("epochs"), record.get("world_size")
    out: dict[int, Mapping[str, Any]] = {}
    for row in rows if isinstance(rows, list) else []:
        if isinstance(row, Mapping) and isinstance(row.get("epoch"), int):
            out[int(row["epoch"])] = {"world_size": world, **row}
    return out


def _sha(value: Any) -> str | None:
    return value.get("sha256") if isinstance(value, Mapping) else None


def _norm(weights: Mapping[str, Any]) -> float | None:
    value = weights.get("norm")
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def first_divergence(a: Any, b: Any) -> str | None:
    """Where two fits' fingerprints first part, in words (module doc); None: they do not."""
    if not isinstance(a, Mapping) or not isinstance(b, Mapping):
        return None
    start_a, start_b = _sha(a.get("fit_start")), _sha(b.get("fit_start"))
    if start_a and start_b and start_a != start_b:
        return "initial weights differ: the module is built before seeding. " + _SEED_FIX
    ea, eb = _epochs(a), _epochs(b)
    for epoch in sorted(ea.keys() & eb.keys()):
        x, y = ea[epoch], eb[epoch]
        worlds = (x.get("world_size"), y.get("world_size"))
        batch_a, batch_b = x.get("first_batch"), y.get("first_batch")
        if worlds[0] == worlds[1] and batch_a and batch_b and batch_a != batch_b:
            return f"data order differs at epoch {epoch}"
        wa, wb = x.get("weights"), y.get("weights")
        if isinstance(wa, Mapping) and isinstance(wb, Mapping) and _sha(wa) != _sha(wb):
            return _weights_part(epoch, wa, wb, worlds)
    return None


#: why weights differ between fits at two world sizes, most often
PER_RANK_BATCH = (
    "each rank's batch is per-rank, so the global batch changed; use a world-size-invariant "
    "sampler, e.g. a global batch size"
)


def _weights_part(epoch: int, wa: Mapping[str, Any], wb: Mapping[str, Any], worlds: Any) -> str:
    """Weights that differ after ``epoch``, in words: float drift, or a real difference."""
    na, nb = _norm(wa), _norm(wb)
    gap = abs(na - nb) / max(abs(na), abs(nb), 1e-300) if na is not None and nb is not None else 1
    if gap < DRIFT:
        return (
            f"weights part at epoch {epoch}, by {gap:.1g} of their norm "
            "(floating-point reduction order)"
        )
    why = [f"norm {na:.6g} vs {nb:.6g}"] if na is not None and nb is not None else []
    if None not in worlds and worlds[0] != worlds[1]:
        why.append(f"world size {worlds[0]} vs {worlds[1]}: {PER_RANK_BATCH}")
    return f"weights differ at epoch {epoch}" + (f" ({'; '.join(why)})" if why else "")
