# SPDX-License-Identifier: MIT
"""Compare the provenance (and metrics) of two cells or two sweeps, as found on disk.

A path may be a cell directory (its ``mushin_provenance.json`` and
``mushin_metrics.json``), a provenance JSON file, or a sweep directory. The records are
compared by :func:`mushin_box._provenance.compare.diff_records` (flattened paths, what
breaks reproducibility and what is expected to differ, metrics within ``atol``, changed
packages listed one by one from the ``mushin_packages.txt`` beside each record); this module
finds and reads them and collects the result in a :class:`Diff`.

Two sweeps are compared cell by cell, cells matched by their swept values (the ``combo``
in ``mushin_status.json``); a cell that only one sweep has breaks reproducibility.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import attrs

from mushin_box._core.layout import read_limit
from mushin_box._core.redact import redact
from mushin_box._core.safeio import read_bounded
from mushin_box._core.sidecars import loads, read_json

# The record comparison lives in _provenance_compare (one concept per module); its names
# are re-exported here so `from mushin_box._results.diff import diff_records` keeps working.
from mushin_box._provenance.compare import (
    CellDiff,
    FieldDiff,
    diff_records,
    record_problem,
)
from mushin_box._provenance.files import packages_beside
from mushin_box._provenance.full import split_provenance

__all__ = [
    "Diff",
    "DiffInputError",
    "diff_provenance",
    "input_kind",
]


class DiffInputError(ValueError):
    """A path given to :func:`diff_provenance` is not a cell, a sweep or a record, or a
    record it holds is damaged."""


_RECORD_FIX = "restore the file, or re-run the cell to write it again"


@attrs.frozen
class Diff:
    """What :func:`diff_provenance` found.

    Attributes
    ----------
    kind : str
        ``"cell"`` or ``"sweep"``.
    a, b : str
        The compared paths.
    atol, rtol : float
        The tolerances metrics were compared with (``|b - a| <= atol + rtol * |a|``).
    cells : tuple[CellDiff, ...]
        One entry per pair of cells (one for two cells).
    """

    kind: str
    a: str
    b: str
    atol: float
    cells: tuple[CellDiff, ...]
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
        ``diff`` and ``reproduce`` give their exit status by."""
        return self.reproducible and (self.metrics_match or not results)

    def verdict(self, *, results: bool = True) -> str:
        """The comparison in one line: what it found first, in words.

        Examples
        --------
        >>> from mushin_box._provenance.compare import CellDiff, MetricDiff
        >>> loss = MetricDiff("val_loss", 0.431014, 0.0793942, -0.35, False)
        >>> Diff("cell", "a", "b", 0.0, (CellDiff("c", None, "a", "b", (), (), (loss,)),)).verdict()
        'same experiment, results differ: val_loss 0.431014 vs 0.0793942'
        """
        if not self.reproducible:
            cell, first = next(((c, f) for c in self.cells for f in c.breaks), (None, None))
            more = len(self.breaks) - 1
            if first is None:
                said = "?"
            elif first.path == "<cell>":  # a cell of one sweep only
                said = f"cell {cell.name if cell else '?'} only in {first.change[-1].upper()}"
            else:
                said = f"{first.path} {_word(first.a)} vs {_word(first.b)}"
            return "different experiments: " + said + (f" (and {more} more)" if more > 0 else "")
        if not results:
            return "same experiment (results not compared)"
        differ = [m for c in self.cells for m in c.metrics if not m.match]
        if not differ:
            return "same experiment, same results"
        first, more = differ[0], len(differ) - 1
        said = f"{first.name} {_pair(first.a, first.b)}" + (f" (and {more} more)" if more else "")
        where = next((c.divergence for c in self.cells if c.divergence), None)
        return (
            "same experiment, results differ: "
            + said
            + (f"; first divergence: {where}" if where else "")
        )

    @property
    def breaks(self) -> tuple[FieldDiff, ...]:
        return tuple(f for c in self.cells for f in c.breaks)

    @property
    def expected(self) -> tuple[FieldDiff, ...]:
        return tuple(f for c in self.cells for f in c.expected)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (what ``mushin-box diff --json`` prints)."""
        return {
            "kind": self.kind,
            "a": self.a,
            "b": self.b,
            "atol": self.atol,
            "rtol": self.rtol,
            "reproducible": self.reproducible,
            "metrics_match": self.metrics_match,
            "same": self.same(),
            "verdict": self.verdict(),
            "cells": [c.to_dict() for c in self.cells],
        }


# ---------------------------------------------------------------------------- paths


def _files() -> tuple[str, str, str, str]:
    from mushin_box._core.layout import MANIFEST_FILE, METRICS_FILE, PROVENANCE_FILE, STATUS_FILE

    return PROVENANCE_FILE, STATUS_FILE, METRICS_FILE, MANIFEST_FILE


def input_kind(path: str | Path) -> str:
    """``"cell"``, ``"sweep"`` or ``"record"`` (a provenance JSON file); raises
    :class:`DiffInputError` for anything else."""
    prov, status, _, manifest = _files()
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


def _read_mapping(path: Path) -> dict[str, Any] | None:
    value = read_json(path)
    return value if isinstance(value, dict) else None


def _read_record(target: Path) -> dict[str, Any] | None:
    """The provenance record at ``target``; ``None`` when there is no such file.

    Stricter than the other sidecars: a record that exists but cannot be read, parsed or
    used raises :class:`DiffInputError` naming the file. A missing record is a difference
    (exit 1); a damaged one must not pass for one, nor crash the comparison.
    """
    try:  # a sidecar: bounded, no symlink, FIFO or device (safeio)
        data = read_bounded(target, read_limit(target.name))
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
        problem = record_problem(record)
    if problem:
        raise DiffInputError(f"{target}: corrupt provenance record: {problem}; {_RECORD_FIX}")
    return dict(record)


def _load_record(path: Path) -> dict[str, Any]:
    prov = _files()[0]
    target = path.resolve() if path.is_file() else path / prov  # a file given: the user's
    record = _read_record(target)
    if record is None:
        raise DiffInputError(f"{path}: no readable provenance record ({target.name})")
    return record


def _sweep_cells(root: Path) -> Iterator[tuple[str, dict[str, Any], Path]]:
    from mushin_box._sweepdir.manifest import cell_records, combo_id

    for cell_dir, status in cell_records(root):
        combo = dict(status["combo"])
        yield combo_id(combo), combo, cell_dir


def _display(combo: Mapping[str, Any]) -> str:
    """A cell's name in reports: its combo id, secrets redacted."""
    from mushin_box._sweepdir.manifest import combo_id

    return combo_id(redact(dict(combo)))


def _word(value: Any) -> str:
    """A value in a verdict, as the tables show it: numbers to 6 significant digits,
    hashes cut to 12 hex digits, long text cut."""
    from mushin_box._results.diffview import short

    return f"{value:.6g}" if isinstance(value, float) else short(value)


def _pair(a: Any, b: Any) -> str:
    """``a vs b``, with every digit where 6 significant ones would read the same."""
    x, y = _word(a), _word(b)
    if x == y and isinstance(a, float) and isinstance(b, float):
        x, y = repr(a), repr(b)
    return f"{x} vs {y}"


def _packages(path: Path, record: Mapping[str, Any] | None) -> list[str] | None:
    """The package list beside a record, if it is the record's (see ``packages_beside``)."""
    if record is None:
        return None
    return packages_beside(path, split_provenance(record))


def _diverged(cell: CellDiff, a: Path | None, b: Path | None) -> CellDiff:
    """``cell`` with where its two fits first parted, when their results differ."""
    if cell.metrics_match or a is None or b is None:
        return cell
    from mushin_box._core.layout import FINGERPRINTS_FILE
    from mushin_box._results.divergence import first_divergence

    where = first_divergence(
        _read_mapping(a / FINGERPRINTS_FILE), _read_mapping(b / FINGERPRINTS_FILE)
    )
    return attrs.evolve(cell, divergence=where)


def _cell_pair(a: Path, b: Path, atol: float, rtol: float, combo: dict[str, Any]) -> CellDiff:
    prov, _, metrics, _ = _files()
    ra, rb = _read_record(a / prov), _read_record(b / prov)
    return _diverged(_pair_records(a, b, ra, rb, metrics, atol, rtol, combo), a, b)


def _pair_records(
    a: Path, b: Path, ra: Any, rb: Any, metrics: str, atol: float, rtol: float, combo: Any
) -> CellDiff:
    return diff_records(
        ra,
        rb,
        metrics_a=_read_mapping(a / metrics),
        metrics_b=_read_mapping(b / metrics),
        atol=atol,
        rtol=rtol,
        name=_display(combo),
        combo=redact(combo),
        path_a=str(a),
        path_b=str(b),
        packages_a=_packages(a, ra),
        packages_b=_packages(b, rb),
    )


def diff_provenance(a: str | Path, b: str | Path, *, atol: float = 0.0, rtol: float = 0.0) -> Diff:
    """Compare two cells (cell directories or provenance files) or two sweeps.

    Parameters
    ----------
    a, b : path
        Two cell directories (holding ``mushin_provenance.json``), two provenance JSON
        files, or two sweep directories.
    atol, rtol : float
        Absolute and relative tolerance for metrics (default 0: exact): a metric matches
        when ``|b - a| <= atol + rtol * |a|``.

    Returns
    -------
    Diff
        ``diff.same()`` is True when the reproducibility parts match and so do the metrics;
        ``diff.verdict()`` says it in words.

    Raises
    ------
    DiffInputError
        A path is missing, is not a cell/sweep/record, a cell has no provenance record,
        a record (of any cell, in a sweep too) is not valid JSON or has the wrong shape
        (:func:`~mushin_box._provenance.compare.record_problem`), ``atol`` is negative,
        or a cell is compared with a sweep.

    Examples
    --------
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
    for name, value in (("atol", atol), ("rtol", rtol)):
        if not (isinstance(value, int | float) and value >= 0 and math.isfinite(value)):
            raise DiffInputError(f"{name} must be a finite number >= 0, got {value!r}")
    pa, pb = Path(a), Path(b)
    ka, kb = input_kind(pa), input_kind(pb)
    cellish = {"cell", "record"}
    if (ka in cellish) != (kb in cellish):
        raise DiffInputError(
            f"cannot compare a {ka} ({a}) with a {kb} ({b}); give two cells or two sweeps"
        )
    if ka in cellish:
        metrics = _files()[2]
        ra, rb = _load_record(pa), _load_record(pb)

        def _metrics(p: Path, kind: str) -> dict[str, Any] | None:
            return _read_mapping(p / metrics) if kind == "cell" else None

        cell = diff_records(
            ra,
            rb,
            metrics_a=_metrics(pa, ka),
            metrics_b=_metrics(pb, kb),
            atol=float(atol),
            rtol=float(rtol),
            name=pa.name if ka == "cell" else pa.parent.name,
            path_a=str(pa),
            path_b=str(pb),
            packages_a=_packages(pa, ra),
            packages_b=_packages(pb, rb),
        )
        if ka == "cell" and kb == "cell":
            cell = _diverged(cell, pa, pb)
        return Diff("cell", str(pa), str(pb), float(atol), (cell,), float(rtol))

    cells_a = {key: (combo, d) for key, combo, d in _sweep_cells(pa)}
    cells_b = {key: (combo, d) for key, combo, d in _sweep_cells(pb)}
    out: list[CellDiff] = []
    for key in sorted(cells_a.keys() | cells_b.keys()):
        if key in cells_a and key in cells_b:
            combo, da = cells_a[key]
            out.append(_cell_pair(da, cells_b[key][1], float(atol), float(rtol), combo))
            continue
        combo, d = cells_a[key] if key in cells_a else cells_b[key]
        only = "only_a" if key in cells_a else "only_b"
        present, missing = "present", "missing"
        out.append(
            CellDiff(
                name=_display(combo),
                combo=redact(combo),
                a=str(d) if key in cells_a else None,
                b=str(d) if key in cells_b else None,
                breaks=(
                    FieldDiff(
                        "<cell>",
                        present if key in cells_a else missing,
                        present if key in cells_b else missing,
                        only,
                    ),
                ),
            )
        )
    return Diff("sweep", str(pa), str(pb), float(atol), tuple(out), float(rtol))
