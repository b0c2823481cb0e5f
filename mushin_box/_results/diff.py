# SPDX-License-Identifier: MIT
"""Two cells or two sweeps compared (provenance and metrics, from disk), and the rows that
``diff``'s views and ``report`` share.

A path is a cell directory, a provenance JSON file, or a sweep directory (compared cell by
cell, matched by swept values; a cell only one sweep has breaks reproducibility). The rows
keep a 64-rank run against one rank to a screen: hashes cut to 12 hex digits, one row for
what several cells share, for paths that differ only in a list index, and for a large
expected family (``run.env.* (53 fields)``).
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from mushin_box._core import layout
from mushin_box._core.errors import MushinBoxError
from mushin_box._core.redact import redact
from mushin_box._core.safeio import read_bounded
from mushin_box._core.sidecars import loads, read_json
from mushin_box._core.targets import public
from mushin_box._core.version import __version__
from mushin_box._provenance import compare
from mushin_box._provenance.files import packages_beside
from mushin_box._provenance.full import split_provenance
from mushin_box._results.markup import esc, md_table, page, table
from mushin_box._results.table import cell_text
from mushin_box._sweepdir.board import read_metrics
from mushin_box._sweepdir.manifest import cell_records, combo_id


@public
class DiffInputError(MushinBoxError, ValueError):
    """A path given to :func:`diff_provenance` is not a cell, a sweep or a record, or a
    record it holds is damaged."""


@attrs.frozen
class Diff:
    """What :func:`diff_provenance` found: ``kind`` (``"cell"`` or ``"sweep"``), the compared
    paths, the metrics' tolerances, and a :class:`CellDiff` per pair of cells."""

    kind: str
    a: str
    b: str
    atol: float
    cells: tuple[compare.CellDiff, ...]
    rtol: float = 0.0

    @property
    def reproducible(self) -> bool:
        """Every pair of cells exists on both sides and has matching reproducibility parts."""
        return all(c.reproducible for c in self.cells)

    @property
    def metrics_match(self) -> bool:
        return all(c.metrics_match for c in self.cells)

    def same(self, *, results: bool = True) -> bool:
        """Same experiment and, unless ``results=False``, same results: the one rule
        ``diff`` and ``reproduce`` give their exit status by. A fit trained to another
        limit is the same experiment, but not the same run."""
        return self.reproducible and not self.extended and (self.metrics_match or not results)

    def verdict(self, *, results: bool = True) -> str:
        """The comparison in one line: what it found first, in words.

        >>> from mushin_box._provenance.compare import CellDiff, MetricDiff
        >>> loss = MetricDiff("val_loss", 0.431014, 0.0793942, -0.35, False)
        >>> Diff("cell", "a", "b", 0.0, (CellDiff("c", None, "a", "b", (), (), (loss,)),)).verdict()
        'same experiment, results differ: val_loss 0.431014 vs 0.0793942'
        """
        if not self.reproducible:
            return "different experiments: " + self._broken()
        same = "same experiment"
        if self.extended:  # a fit extended to a raised limit: named, never an accident
            first = self.extended[0]
            key = first.path.removeprefix("reproducibility.config.")
            same += f" trained to another limit ({key} {_number(first.a)} vs {_number(first.b)})"
        if not results:
            return f"{same} (results not compared)"
        differ = [m for c in self.cells for m in c.metrics if not m.match]
        if not differ:
            return f"{same}, same results"
        first, more = differ[0], len(differ) - 1
        x, y = _number(first.a), _number(first.b)
        if x == y and isinstance(first.a, float) and isinstance(first.b, float):
            x, y = repr(first.a), repr(first.b)  # every digit where 6 read the same
        said = f"{first.name} {x} vs {y}" + (f" (and {more} more)" if more else "")
        where = next((c.divergence for c in self.cells if c.divergence), None)
        return f"{same}, results differ: {said}" + (f"; first divergence: {where}" if where else "")

    def _broken(self) -> str:
        """The first break once, with how many cells share it, then the cells only one side
        has, counted per side."""
        shared: dict[tuple[str, str, str], list[compare.FieldDiff]] = {}
        for f in self.breaks:
            if f.path != "<cell>":  # raw values: equal as shown is not equal
                shared.setdefault((f.path, repr(f.a), repr(f.b)), []).append(f)
        said = [f"{_count(len(names))} {how}" for how, names in _whole_cells(self).items()]
        if shared:
            group, n = next(iter(shared.values())), _paired(self)
            first, more = group[0], len(shared) - 1
            where = [f"in all {n} cells" if len(group) == n else f"in {len(group)} of {n} cells"]
            where = (where if n > 1 else []) + ([f"and {more} more"] if more else [])
            said.insert(0, f"{first.path} {_number(first.a)} vs {_number(first.b)}")
            said[0] += f" ({'; '.join(where)})" if where else ""
        return "; ".join(said) or "?"

    @property
    def breaks(self) -> tuple[compare.FieldDiff, ...]:
        return tuple(f for c in self.cells for f in c.breaks)

    @property
    def expected(self) -> tuple[compare.FieldDiff, ...]:
        return tuple(f for c in self.cells for f in c.expected)

    @property
    def extended(self) -> tuple[compare.FieldDiff, ...]:
        """Training limits that differ: changed on purpose (see :class:`CellDiff`)."""
        return tuple(f for c in self.cells for f in c.extended)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (what ``mushin-box diff --json`` prints)."""
        keys = ("kind", "a", "b", "atol", "rtol", "reproducible", "metrics_match")
        return {
            **{key: getattr(self, key) for key in keys},
            "same": self.same(),
            "verdict": self.verdict(),
            "cells": [c.to_dict() for c in self.cells],
        }


def input_kind(path: str | Path) -> str:
    """``"cell"``, ``"sweep"`` or ``"record"`` (a provenance JSON file), else a DiffInputError."""
    prov, status, manifest = layout.PROVENANCE_FILE, layout.STATUS_FILE, layout.MANIFEST_FILE
    p = Path(path)
    if not p.exists():
        raise DiffInputError(f"{path}: no such file or directory")
    if p.is_file():
        if p.suffix != ".json":
            raise DiffInputError(f"{path}: not a cell or sweep directory, nor a provenance .json")
        return "record"
    if (p / prov).is_file() or (p / status).is_file():
        return "cell"
    if (p / manifest).is_file() or any(p.glob(f"*/{status}")) or any(p.glob(f"*/{prov}")):
        return "sweep"
    raise DiffInputError(
        f"{path}: not a cell directory (no {prov} or {status}) nor a sweep directory "
        f"(no {manifest} or cell sub-directories)"
    )


def _read_record(target: Path) -> dict[str, Any] | None:
    """The provenance record at ``target``; ``None`` when there is no such file. A missing
    record is a difference (exit 1); a damaged one raises :class:`DiffInputError`: it must
    not pass for one, nor crash the comparison."""
    try:  # a sidecar: bounded, no symlink, FIFO or device (safeio)
        data = read_bounded(target, layout.read_limit(target.name))
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise DiffInputError(f"{target}: cannot read the provenance record ({exc})") from None
    record: Any = None
    try:
        record = loads(data)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        problem: str | None = f"not valid JSON ({exc})"
    else:
        problem = compare.record_problem(record)
    if problem:
        raise DiffInputError(
            f"{target}: corrupt provenance record: {problem}; restore the file, or re-run the "
            "cell to write it again"
        )
    return dict(record)


def _load_record(path: Path) -> dict[str, Any]:
    # a file: the user's
    target = path.resolve() if path.is_file() else path / layout.PROVENANCE_FILE
    record = _read_record(target)
    if record is None:
        raise DiffInputError(f"{path}: no readable provenance record ({target.name})")
    return record


def _cell_diff(
    a: Path, b: Path, records: tuple[Any, Any], tols: tuple[float, float], cells: str, **kw: Any
) -> compare.CellDiff:
    """Two records compared, with the metrics of each side that is a cell directory
    (``cells``: ``"ab"``, ``"a"``, ...), and where two cells' fits first parted."""
    (ra, rb), (atol, rtol) = records, tols
    pa, pb = (
        None if r is None else packages_beside(p, split_provenance(r))
        for p, r in ((a, ra), (b, rb))
    )
    cell = compare.diff_records(
        ra, rb, atol=atol, rtol=rtol, path_a=str(a), path_b=str(b),
        metrics_a=read_metrics(a) if "a" in cells else None,
        metrics_b=read_metrics(b) if "b" in cells else None,
        packages_a=pa, packages_b=pb, **kw,
    )  # fmt: skip
    if cells != "ab" or cell.metrics_match:
        return cell
    where = compare.first_divergence(_prints(a, ra), _prints(b, rb))
    return attrs.evolve(cell, divergence=where)


def _prints(cell: Path, record: Any) -> dict[str, Any] | None:
    """A cell's fit fingerprints, with its record's world size where they hold none (the
    likely cause of weights that differ)."""
    prints = read_json(cell / layout.FINGERPRINTS_FILE)
    if not isinstance(prints, dict):
        return None
    topology = ((record or {}).get("run") or {}).get("topology")
    if prints.get("world_size") is None and isinstance(topology, Mapping):
        prints["world_size"] = topology.get("world_size")
    return prints


def check_tolerances(atol: object, rtol: object) -> None:
    """Refuse a tolerance that is no finite number >= 0 (``bool``, NaN, inf, or an int too
    large for a float, which would fail only once the comparison runs)."""
    for name, value in (("atol", atol), ("rtol", rtol)):
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not 0 <= value <= sys.float_info.max
        ):
            raise DiffInputError(f"{name} must be a finite number >= 0, got {value!r}")


def diff_provenance(a: str | Path, b: str | Path, *, atol: float = 0.0, rtol: float = 0.0) -> Diff:
    """Compare two cells (cell directories or provenance files) or two sweeps.

    A metric matches when ``|b - a| <= atol + rtol * |a|`` (default: exactly). Raises
    :class:`DiffInputError` for a path that is not a cell, sweep or record, a cell without a
    provenance record, a damaged record (of any cell), a negative tolerance, or a cell
    compared with a sweep.

    >>> import tempfile
    >>> from pathlib import Path
    >>> from mushin_box._core.sidecars import write_json_atomic
    >>> root = Path(tempfile.mkdtemp())
    >>> for name, lr in (("x", 0.1), ("y", 0.2)):
    ...     write_json_atomic(root / name / "mushin_provenance.json",
    ...                       {"reproducibility": {"config": {"lr": lr}}, "run": {}})
    ...     write_json_atomic(root / name / "mushin_metrics.json", {"loss": lr})
    >>> d = diff_provenance(root / "x", root / "y", atol=0.5)
    >>> d.reproducible, [f.path for f in d.breaks], d.metrics_match
    (False, ['reproducibility.config.lr'], True)
    """
    check_tolerances(atol, rtol)
    pa, pb = Path(a), Path(b)
    ka, kb = input_kind(pa), input_kind(pb)
    cellish = {"cell", "record"}
    if (ka in cellish) != (kb in cellish):
        raise DiffInputError(
            f"cannot compare a {ka} ({a}) with a {kb} ({b}); give two cells or two sweeps"
        )
    tols = (float(atol), float(rtol))
    if ka in cellish:
        cells = ("a" if ka == "cell" else "") + ("b" if kb == "cell" else "")
        name = pa.name if ka == "cell" else pa.parent.name
        cell = _cell_diff(pa, pb, (_load_record(pa), _load_record(pb)), tols, cells, name=name)
        return Diff("cell", str(pa), str(pb), tols[0], (cell,), tols[1])

    cells_a, cells_b = (
        {combo_id(s["combo"]): (dict(s["combo"]), d) for d, s in cell_records(p)} for p in (pa, pb)
    )
    out: list[compare.CellDiff] = []
    for key in sorted(cells_a.keys() | cells_b.keys()):
        in_a = key in cells_a
        combo, d = cells_a[key] if in_a else cells_b[key]
        combo = redact(combo)
        if in_a and key in cells_b:
            db = cells_b[key][1]
            ra, rb = (_read_record(x / layout.PROVENANCE_FILE) for x in (d, db))
            out.append(_cell_diff(d, db, (ra, rb), tols, "ab", name=combo_id(combo), combo=combo))
            continue
        # the other side has the cell's directory and a status it could not read (refused,
        # unreadable, corrupt: warned): unreadable there, not missing
        side, other = ("a", "b") if in_a else ("b", "a")
        there = (pb if in_a else pa) / d.name / layout.STATUS_FILE
        lost = "unreadable" if os.path.lexists(there) else "missing"
        sides = ("present", lost) if in_a else (lost, "present")
        change = f"unreadable_{other}" if lost == "unreadable" else f"only_{side}"
        only = compare.FieldDiff("<cell>", *sides, change)
        paths = (str(d), None) if in_a else (None, str(d))
        out.append(compare.CellDiff(combo_id(combo), combo, *paths, breaks=(only,)))
    return Diff("sweep", str(pa), str(pb), tols[0], tuple(out), tols[1])


_MAX_VALUE = 60  # characters of a value shown in a table cell
_GROUP_OVER = 3  # more rows than this with the same [*] path are shown as one row
_FAMILY_OVER = 8  # expected fields: a family of more paths than this is one row
_HASH = re.compile(r"(?<![0-9A-Za-z])([0-9a-f]{12})[0-9a-f]{28,52}(?![0-9A-Za-z])")


@attrs.frozen
class FieldRow:
    cell: str
    path: str
    a: str
    b: str


@attrs.frozen
class MetricRow:
    cell: str
    name: str
    a: str
    b: str
    delta: str
    match: bool


#: what a run-part field is about, for --brief's one line (the first kind whose prefix
#: matches); the scheduler's bookkeeping differs between any two runs
_KINDS = {
    "times": "run.started run.ended run.duration_s",
    "scheduler": "run.pid run.env.SLURM_ run.env.SUBMITIT run.env.MASTER_PORT "
    "run.env.MASTER_ADDR run.env.MUSHIN_MASTER_PORT run.env.TORCHELASTIC "
    "run.env.CUDA_VISIBLE_DEVICES run.topology.slurm run.launcher.config.submitit_folder "
    "run.env.APPTAINERENV_",
    "topology": "run.topology run.launcher run.config",
    "host": "run.host run.platform",
    "container": "run.container run.image run.rank_runtime",
    "devices": "run.devices",
    "fingerprints": "run.fingerprints",
    "reproduction": "run.reproduction run.task",
}


def kind_of(path: str) -> str:
    """What a run-part field is about: a key of :data:`_KINDS`, or ``other``.

    >>> kind_of("run.env.SLURM_JOB_ID"), kind_of("run.topology.ranks[3]"), kind_of("run.x")
    ('scheduler', 'topology', 'other')
    """
    return next((k for k, p in _KINDS.items() if path.startswith(tuple(p.split()))), "other")


def expected_counts(diff: Any) -> str:
    """``--brief``'s one line about the expected differences: how many, by kind.

    >>> from types import SimpleNamespace as N
    >>> f = [N(path="run.pid"), N(path="run.env.SLURM_JOB_ID"), N(path="run.ended")]
    >>> expected_counts(N(expected=f))
    'Expected to differ: 3 field(s): 2 scheduler, 1 times'
    """
    counts = Counter(kind_of(f.path) for f in diff.expected)
    if not counts:
        return "Expected to differ: nothing"
    text = ", ".join(
        f"{n} {kind}" for kind, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    )
    return f"Expected to differ: {len(diff.expected)} field(s): {text}"


def short(value: Any) -> str:
    """A value as table text: hashes cut to 12 hex digits, at most 60 characters.

    >>> short("sha256:" + "ab" * 32)
    'sha256:abababababab'
    >>> short(None), short([1, "x"])
    ('-', '[1, "x"]')
    """
    if value is None:
        return "-"
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    text = _HASH.sub(r"\1", text)
    return text if len(text) <= _MAX_VALUE else text[: _MAX_VALUE - 1] + "…"


def _number(value: Any) -> str:
    """A value as the tables and verdicts show it (floats to 6 significant digits)."""
    return cell_text(value) if isinstance(value, float) else short(value)


def compared_label(cell: Any) -> str:
    """A compared cell's name as its sweep spells it: its directory."""
    where = cell.a or cell.b
    return Path(where).name if where else str(cell.name)


def _paired(diff: Any) -> int:
    """How many cells both sides have."""
    return sum(1 for c in diff.cells if c.a is not None and c.b is not None)


def _count(n: int) -> str:
    return f"{n} cell" if n == 1 else f"{n} cells"


def _named(labels: list[str], most: int = 4) -> str:
    """Cells' names in one line, ``most`` of them named and the rest counted.

    >>> _named(["lr=0.1", "lr=0.2"]), _named([f"a={i},b=0" for i in range(6)])
    ('lr=0.1, lr=0.2', 'a=0,b=0; a=1,b=0; a=2,b=0; a=3,b=0 (and 2 more)')
    """
    sep = "; " if any("," in label for label in labels) else ", "
    more = len(labels) - most
    return sep.join(labels[:most]) + (f" (and {more} more)" if more > 0 else "")


def _whole_cells(diff: Any) -> dict[str, list[str]]:
    """The cells only one side has (or can read), by what is wrong (``only in B``)."""
    out: dict[str, list[str]] = {}
    for cell in diff.cells:
        for f in cell.breaks:
            if f.path == "<cell>":
                how, side = f.change.split("_")  # only_b, unreadable_a
                out.setdefault(f"{how} in {side.upper()}", []).append(compared_label(cell))
    return dict(sorted(out.items()))  # only in A, only in B, unreadable in A, ...


def cell_notes(diff: Any) -> list[str]:
    """:func:`_whole_cells` as lines: ``9 cells only in B: lr=0.2, lr=0.3, ...``."""
    return [
        f"{_count(len(names))} {how}: {_named(names)}" for how, names in _whole_cells(diff).items()
    ]


def _side(f: Any, side: str) -> str:
    absent = (side == "a" and f.change == "only_b") or (side == "b" and f.change == "only_a")
    return "(absent)" if absent else short(getattr(f, side))


def field_rows(diff: Any, attr: str) -> list[FieldRow]:
    """The rows of ``breaks``, ``extended`` or ``expected`` over all cells but those only one
    side has; a row several cells share is one row (``all 9 cells``, or their names)."""
    shared: dict[tuple[str, str, str], list[str]] = {}
    for cell in diff.cells:
        for row in _cell_rows(getattr(cell, attr), families=attr == "expected"):
            shared.setdefault(row, []).append(compared_label(cell))
    total = _paired(diff)
    return [
        FieldRow(f"all {total} cells" if 1 < total == len(names) else _named(names), *row)
        for row, names in shared.items()
    ]


def _cell_rows(fields: Any, families: bool = False) -> list[tuple[str, str, str]]:
    """One cell's fields as (path, A, B) text, many paths that differ only in a list index
    as one row; ``families``: a family of many paths too (never what breaks)."""
    groups: dict[str, dict[str, list[Any]]] = {}
    for f in fields:
        if f.path != "<cell>":
            key = compare.collapse_key(f.path)
            family = groups.setdefault(compare.family_key(key) if families else key, {})
            family.setdefault(key, []).append(f)
    rows: list[tuple[str, str, str]] = []
    for name, keys in groups.items():
        items = [f for key in keys.values() for f in key]
        if len(keys) > _FAMILY_OVER:
            rows.append((f"{name} ({len(items)} fields)", _count_side(items, "a"),
                         _count_side(items, "b")))  # fmt: skip
            continue
        for key, same in keys.items():
            if len(same) > _GROUP_OVER:
                rows.append((f"{key} ({len(same)} rows)", "…", "…"))
            else:
                rows += [(f.path, _side(f, "a"), _side(f, "b")) for f in same]
    return rows


def _count_side(fields: list[Any], side: str) -> str:
    absent = sum(_side(f, side) == "(absent)" for f in fields)
    if absent == len(fields):
        return "(absent)"
    return f"{len(fields) - absent} set" + (f", {absent} absent" if absent else "")


def _delta(m: Any) -> str:
    if m.delta is None:
        return ""
    return f"max {m.delta:.3g}" if isinstance(m.a, list) else f"{m.delta:+.3g}"


def metric_rows(diff: Any) -> list[MetricRow]:
    """Every cell's metrics, both sides (``(absent)`` where a side has none)."""
    return [
        MetricRow(compared_label(c), m.name, _number(m.a) if m.in_a else "(absent)",
                  _number(m.b) if m.in_b else "(absent)", _delta(m), bool(m.match))
        for c in diff.cells for m in c.metrics
    ]  # fmt: skip


#: the groups of differing fields, as every view titles them, in order
_FIELD_GROUPS = (
    ("breaks", "Breaks reproducibility"),
    ("extended", "Training limits, changed on purpose"),
    ("expected", "Expected to differ"),
)


def _parts(diff: Any, brief: bool, heading: Any, note: Any, render: Any) -> list[str]:
    """The sections under the verdict, in the markup that ``heading(text)``,
    ``note(text, kind)`` and ``render(kind, headers, rows)`` write (rows as plain text)."""
    cell = ["cell"] if diff.kind == "sweep" else []

    def row(r: Any, *rest: str) -> list[str]:
        return [*([r.cell] if cell else []), *rest]

    metrics = metric_rows(diff)
    out = [heading(f"Metrics (atol={diff.atol:g}, rtol={diff.rtol:g})")]
    headers = [*cell, "metric", "A", "B", "Δ (B-A)", "match"]
    body = [row(m, m.name, m.a, m.b, m.delta, "yes" if m.match else "no") for m in metrics]
    out.append(render("metrics", headers, body) if metrics else note("None recorded.", ""))
    for attr, title in _FIELD_GROUPS:
        if attr == "extended" and not diff.extended:
            continue
        if attr == "expected" and brief:
            return [*out, note(expected_counts(diff) + ".", "meta")]
        rows, notes = field_rows(diff, attr), cell_notes(diff) if attr == "breaks" else []
        out.append(heading(f"{title} ({len(rows) + len(notes)})"))
        out += [note(text, "cells") for text in notes]
        body = [row(r, r.path, r.a, r.b) for r in rows]
        out += [render(attr, [*cell, "path", "A", "B"], body)] if rows else []
        out += [] if rows or notes else [note("Nothing.", "")]
    return out


def diff_markdown(diff: Any, *, brief: bool = False, results: bool = True) -> str:
    """The diff as Markdown (``results=False``: the verdict leaves the metrics out)."""
    mark = "✅" if diff.same(results=results) else "❌"
    out = [
        f"## mushin-box diff: {mark} {diff.verdict(results=results)}",
        "",
        f"- **A** `{diff.a}`",
        f"- **B** `{diff.b}`",
    ]
    if diff.kind == "sweep":
        out.append(f"- {len(diff.cells)} cell(s) compared, matched by their swept values")
    out += _parts(
        diff,
        brief,
        heading=lambda text: f"\n### {text}\n",
        note=_md_note,
        render=lambda kind, headers, rows: md_table(headers, rows),
    )
    return "\n".join(out) + "\n"


def _md_note(text: str, kind: str) -> str:
    """A line under a heading; the cells' lines with Markdown's markup escaped."""
    if kind == "cells":
        return re.sub(r"([\\`*_<>\[\]|])", r"\\\1", text) + "\n"
    return f"\n{text}" if kind else text


def _html_table(kind: str, headers: list[str], rows: list[list[str]]) -> str:
    """A section's rows as an HTML table, a metric that does not match in red."""
    if kind == "metrics":
        body = [
            [*map(esc, r[:-1]), r[-1] if r[-1] == "yes" else '<b class="verdict-bad">no</b>']
            for r in rows
        ]
        return table(headers, body, numeric=[False] * (len(headers) - 4) + [True] * 3 + [False])
    body = [[*map(esc, r[:-3]), f"<code>{esc(r[-3])}</code>", *map(esc, r[-2:])] for r in rows]
    return table(headers, body, cls=kind)


def diff_html_section(diff: Any, *, brief: bool = False, results: bool = True) -> str:
    """The diff as an HTML fragment, under an ``<h2>`` (its sections: ``<h3>``)."""
    ok = diff.same(results=results)
    out = [
        f'<p class="{"verdict-ok" if ok else "verdict-bad"}">'
        f"{esc(diff.verdict(results=results))}</p>",
        f"<p><b>A</b> <code>{esc(diff.a)}</code><br><b>B</b> <code>{esc(diff.b)}</code></p>",
    ]
    out += _parts(
        diff,
        brief,
        heading=lambda text: f"<h3>{text}</h3>",
        note=lambda text, kind: f'<p class="{kind}">{esc(text)}</p>' if kind else f"<p>{text}</p>",
        render=_html_table,
    )
    return "\n".join(out)


def diff_html(diff: Any, *, brief: bool = False, results: bool = True) -> str:
    """The diff as a self-contained HTML page (nothing fetched)."""
    body = (
        f"<h1>mushin-box diff</h1>\n"
        f'<p class="meta">written by mushin-box {esc(__version__)}</p>\n'
        + diff_html_section(diff, brief=brief, results=results)
    )
    return page(f"mushin-box diff: {Path(diff.a).name} vs {Path(diff.b).name}", body)
