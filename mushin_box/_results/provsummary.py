# SPDX-License-Identifier: MIT
"""The provenance record of a cell in a few words: the report's provenance table and
``show``'s code line. Apart from :mod:`.report` (curves, heatmap, the page), which ``show``
does not need: its import was a tenth of ``show``'s start.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from mushin_box._core.layout import PROVENANCE_FILE
from mushin_box._sweepdir.board import SweepView

__all__ = ["code_line", "provenance_summary"]

_SHORT = 12  # hex digits of a hash shown


def _short(value: Any) -> str:
    text = "-" if value is None else str(value)
    if len(text) >= 40 and all(c in "0123456789abcdef" for c in text.split(":")[-1]):
        prefix, _, digest = text.rpartition(":")
        return f"{prefix}:{digest[:_SHORT]}" if prefix else digest[:_SHORT]
    return text


def provenance_summary(record: Mapping[str, Any] | None) -> dict[str, str]:
    """The fields of a provenance record a report shows, as text (``-`` where absent).

    Examples
    --------
    >>> rec = {"reproducibility": {"image": "no image", "code": {"git": {"commit": "ab" * 20,
    ...        "dirty": True}}, "package_set": {"sha256": "c" * 64, "count": 62},
    ...        "seed": {"base": 1234}}, "run": {"topology": {"num_nodes": 1, "world_size": 2}}}
    >>> provenance_summary(rec)["code"], provenance_summary(rec)["topology"]
    ('abababababab (dirty)', '1 node × 2 ranks')
    """
    if not isinstance(record, Mapping):
        return dict.fromkeys(
            ("experiment", "code", "image", "packages", "seed base", "topology"), "-"
        )
    from mushin_box._provenance.full import split_provenance

    try:
        full = split_provenance(dict(record))
    except Exception:  # a record of an unknown shape: show what is there
        full = dict(record)
    repro = full.get("reproducibility") or {}
    run = full.get("run") or {}
    image = repro.get("image")
    if isinstance(image, Mapping):
        image_text = _short(image.get("sif_sha256") or image.get("sif_uuid") or "?")
        if image.get("sif_uuid") and image.get("sif_sha256"):
            image_text += f" (uuid {image['sif_uuid']})"
    else:
        image_text = str(image) if image is not None else "-"
    code = repro.get("code")
    git = code.get("git") if isinstance(code, Mapping) else None
    if isinstance(git, Mapping) and git.get("commit"):
        code_text = _short(git["commit"]) + (" (dirty)" if git.get("dirty") else "")
    elif isinstance(code, Mapping):
        code_text = "no git; task " + _short(code.get("task_sha256"))
    else:
        code_text = _short(code)
    packages = repro.get("package_set")
    if isinstance(packages, Mapping):
        packages_text = f"{_short(packages.get('sha256'))} ({packages.get('count', '?')} pkgs)"
    else:
        packages_text = "-"
    seed = repro.get("seed")
    base = seed.get("base") if isinstance(seed, Mapping) else None
    topo: Mapping[str, Any] = run.get("topology") or {}
    if not isinstance(topo, Mapping):
        topo = {}
    nodes, world = topo.get("num_nodes"), topo.get("world_size")
    if nodes is None and world is None:
        topo_text = "-"
    else:
        topo_text = (
            f"{nodes} node{'s' if nodes != 1 else ''} × {world} rank{'s' if world != 1 else ''}"
        )
    experiment = run.get("experiment")
    file = experiment.get("file") if isinstance(experiment, Mapping) else None
    return {
        "experiment": str(file) if file else "-",
        "code": code_text,
        "image": image_text,
        "packages": packages_text,
        "seed base": "-" if base is None else str(base),
        "topology": topo_text,
    }


def code_line(sweep: SweepView) -> str | None:
    """One line naming the experiment and its repository's commit, from the first cell
    with a provenance record (``show``; ``report`` has a row per identity). None before
    any cell has one."""
    from mushin_box._core.sidecars import read_json

    for cell in sweep.cells:
        path = sweep.root / cell.dir / PROVENANCE_FILE if cell.dir else None
        if path is not None and os.path.lexists(path):  # a link is refused, and said so
            summary = provenance_summary(read_json(path))
            where = f"experiment {summary['experiment']}, " if summary["experiment"] != "-" else ""
            return f"{where}code {summary['code']}"
    return None
