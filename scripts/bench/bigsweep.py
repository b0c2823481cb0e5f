#!/usr/bin/env python
# SPDX-License-Identifier: MIT
"""A finished sweep of thousands of cells, with the files ``Workflow.run`` really writes.

Running 10,000 trivial cells takes over 20 minutes on a 2-core machine, so a real 2 x 2
sweep is run once (``Workflow.run`` of a trivial task, grid ``a`` x ``b``) and its cells'
files are replicated into an ``A x B`` grid: each copy's swept values are rewritten where
they appear (status record, metrics, provenance config, ``.hydra`` files, ``multirun.yaml``),
its metrics made distinct, its config fingerprints recomputed by the engine's own function
(so a re-run of the same script, :func:`resume`, finds every cell finished and reuses it),
and the manifest and the finished cells' index written by the engine's own functions
(``write_manifest``, ``refresh_index``), as ``Workflow.run`` writes them (the index leaves
out the cells written in its last second: the first resume reads those, as it would
after a real run). With ``--epochs N`` each cell also gets
a ``fit_metrics.json`` series of ``N`` epochs (``MetricsCallback``'s file), for the report's
curves. About 10 s per 1,000 cells.

    .venv/bin/python scripts/bench/bigsweep.py OUT --a 100 --b 100 --epochs 10
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any

#: the template sweep's values: distinct enough to be replaced as text in Hydra's YAML
_A0, _B0 = 0, 1


def task(a: int, b: int = 0) -> dict[str, float]:
    """The template sweep's task (its metrics are rewritten per copied cell)."""
    return {"loss": float(a + b), "acc": 0.5}


def _loss(a: int, b: int) -> float:
    # a bowl with its minimum inside the grid, so --best has one clear answer
    return round(((a - 37) / 50) ** 2 + ((b - 61) / 50) ** 2 + 0.01 * ((a * 7 + b * 13) % 11), 6)


def template(work: Path) -> Path:
    """Run the real 2 x 2 sweep under ``work`` and return one of its cells."""
    from hydra_zen import multirun

    from mushin_box import Workflow

    logging.disable(logging.CRITICAL)
    warnings.simplefilter("ignore")
    root = work / "template"
    Workflow(task).run(working_dir=root, progress=False, a=multirun([0, 1]), b=multirun([0, 1]))
    return root / f"a={_A0},b={_B0}"


def _series(a: int, b: int, epochs: int) -> dict[str, list[float]]:
    final = _loss(a, b)
    return {
        "epoch": list(range(epochs)),
        "train_loss": [round(final + 2.0 / (e + 1), 6) for e in range(epochs)],
        "val_loss": [round(final + 2.5 / (e + 1), 6) for e in range(epochs)],
    }


def _cell_files(cell: Path) -> dict[str, bytes]:
    out = {}
    for base, _, files in os.walk(cell):
        for name in files:
            path = Path(base) / name
            out[str(path.relative_to(cell))] = path.read_bytes()
    return out


def _rewrite(files: dict[str, bytes], a: int, b: int, name: str, epochs: int) -> dict[str, bytes]:
    from mushin_box._core.sidecars import canonical_dumps
    from mushin_box._sweep.cells import plain_fingerprint

    out = dict(files)
    combo = {"a": a, "b": b}
    status = json.loads(files["mushin_status.json"])
    status.update(combo=combo, cell=name)
    # the job's config is {a, b}: its fingerprint as the runner computes it (checked
    # against the template's in build)
    config = plain_fingerprint(combo)
    status["fingerprints"] = {**status["fingerprints"], "config": config}
    status["config_without_shape"] = config
    out["mushin_status.json"] = canonical_dumps(status)
    out["mushin_metrics.json"] = canonical_dumps(
        {"acc": round(1 - _loss(a, b) / 10, 6), "loss": _loss(a, b)}
    )
    prov = json.loads(files["mushin_provenance.json"])
    prov["reproducibility"]["config"] = combo
    out["mushin_provenance.json"] = canonical_dumps(prov)
    out[".hydra/config.yaml"] = f"a: {a}\nb: {b}\n".encode()
    out[".hydra/overrides.yaml"] = f"- a={a}\n- b={b}\n".encode()
    hydra = files[".hydra/hydra.yaml"].decode()
    old = f"a={_A0},b={_B0}"
    hydra = hydra.replace(f"- a={_A0}\n", f"- a={a}\n").replace(f"- b={_B0}\n", f"- b={b}\n")
    out[".hydra/hydra.yaml"] = hydra.replace(old, name).encode()
    if epochs:
        out["fit_metrics.json"] = canonical_dumps(_series(a, b, epochs))
    return out


def _check_fingerprints(status: dict[str, Any]) -> None:
    """The template cell's config fingerprint is the one :func:`_rewrite` computes for it
    (else the copies would run again on resume)."""
    from mushin_box._sweep.cells import plain_fingerprint

    want = plain_fingerprint({"a": _A0, "b": _B0})
    if status["fingerprints"]["config"] != want or status.get("config_without_shape") != want:
        raise RuntimeError("bigsweep: the template's config fingerprint is not {a, b}'s")


def own_peak_mb() -> float:
    """This process's own peak resident memory (MB): its address space's high-water mark
    (``VmHWM``). Not ``ru_maxrss``: a process that ``subprocess`` starts from a bigger
    parent takes the parent's peak into it at ``exec``."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def resume(root: Path, a: int, b: int) -> Any:
    """Re-run the script that made the sweep at ``root`` (``Workflow(task).run`` of the same
    ``a x b`` grid, ``resume=True``); return ``load_experiment``'s result."""
    from hydra_zen import multirun

    from mushin_box import Workflow

    logging.disable(logging.CRITICAL)
    warnings.simplefilter("ignore")
    return Workflow(task).run(
        working_dir=root,
        progress=False,
        resume=True,
        a=multirun(list(range(a))),
        b=multirun(list(range(b))),
    )


def build(root: Path, a: int = 100, b: int = 100, epochs: int = 0) -> Path:
    """Write a finished ``a x b``-cell sweep at ``root`` (which must not exist)."""
    from mushin_box._core.sidecars import read_json
    from mushin_box._sweepdir.manifest import cell_records, write_manifest
    from mushin_box._sweepdir.settled import CellIndex, refresh_index

    work = Path(tempfile.mkdtemp(prefix="mushin-bigsweep-"))
    try:
        cell = template(work)
        files = _cell_files(cell)
        run_id = (read_json(work / "template" / "mushin_sweep.json") or {}).get("run_id")
        _check_fingerprints(json.loads(files["mushin_status.json"]))
        multirun = (work / "template" / "multirun.yaml").read_text()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    root.mkdir(parents=True)
    grid = {"a": list(range(a)), "b": list(range(b))}
    for i in grid["a"]:
        for j in grid["b"]:
            name = f"a={i},b={j}"
            for rel, data in _rewrite(files, i, j, name, epochs).items():
                path = root / name / rel
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(data)
    a_text, b_text = ",".join(map(str, grid["a"])), ",".join(map(str, grid["b"]))
    multirun = multirun.replace("- a=0,1\n", f"- a={a_text}\n").replace(
        "- b=0,1\n", f"- b={b_text}\n"
    )
    (root / "multirun.yaml").write_text(multirun.replace("a=0,1,b=0,1", f"a={a_text},b={b_text}"))
    records = list(cell_records(root))
    write_manifest(root, grid=grid, run_id=run_id or "bigsweep", records=records)
    refresh_index(root, records, CellIndex())  # as the end of a run writes it
    return root


def best_cell() -> dict[str, Any]:
    """The cell ``--best loss`` names in a full grid (for the tests and the benchmark)."""
    return {"a": 37, "b": 61}


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--a", type=int, default=100)
    parser.add_argument("--b", type=int, default=100)
    parser.add_argument("--epochs", type=int, default=0, help="fit_metrics.json epochs per cell")
    args = parser.parse_args()
    if args.out.exists():
        parser.error(f"{args.out} exists; give a new directory")
    build(args.out, args.a, args.b, args.epochs)
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
