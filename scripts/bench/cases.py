#!/usr/bin/env python
# SPDX-License-Identifier: MIT
"""One benchmark case, in a fresh process: ``python cases.py CASE JSON-ARGS``.

``scripts/bench/run`` starts each case with the project's Python (``box``, ``zen``) or with
the benchmark venv's (``mpy``: mushin-py, installed there only) and reads the last line of
its output: ``{"name": [seconds, ...], ...}``. Imports happen before any clock starts, and a
warm-up sweep runs first, so the times are the sweep's own cost, not Python's start-up.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def trivial(a: int, b: int = 0) -> dict[str, float]:
    return {"s": float(a + b)}


def _runner(tool: str) -> Any:
    """``run(directory, a_values, resume)`` for ``tool``: a sweep of ``trivial`` over a x b."""
    from hydra_zen import make_config, multirun

    if tool == "box":
        from mushin_box import Workflow

        def run(d: Path, a: list[int], resume: bool = False) -> None:
            Workflow(trivial).run(
                working_dir=d, progress=False, resume=resume, a=multirun(a), b=multirun([0, 1])
            )

    elif tool == "zen":
        from hydra_zen import launch, zen

        cfg = make_config(a=0, b=0)

        def run(d: Path, a: list[int], resume: bool = False) -> None:
            overrides = [f"hydra.sweep.dir={d}", f"a={','.join(map(str, a))}", "b=0,1"]
            launch(cfg, zen(trivial), overrides=overrides, multirun=True, version_base="1.3")

    else:
        from mushin import MultiRunMetricsWorkflow  # pyright: ignore[reportMissingImports]

        class W(MultiRunMetricsWorkflow):
            @staticmethod
            def task(a: int, b: int) -> dict[str, float]:
                return trivial(a, b)

        def run(d: Path, a: list[int], resume: bool = False) -> None:
            W(make_config(a=0, b=0)).run(
                working_dir=str(d), resume=resume, a=multirun(a), b=multirun([0, 1])
            )

    return run


def _quiet() -> None:
    import logging
    import warnings

    logging.disable(logging.CRITICAL)  # Hydra logs every job: not what is measured
    warnings.simplefilter("ignore")


def sweep(
    tool: str, cells: int, repeat: int, resumes: int = 1, left: int = 0
) -> dict[str, list[float]]:
    """First run of a ``cells``-cell sweep, ``repeat`` times, each followed by ``resumes``
    resumes of it; with ``left``, then ``resumes`` times: the resume of the sweep with
    ``left`` cells deleted, and a fresh sweep of ``left`` cells."""
    _quiet()
    run = _runner(tool)
    out: dict[str, list[float]] = {"first": [], "resume": [], "left": [], "fresh": []}
    tmp = Path(tempfile.mkdtemp(prefix="mushin-bench-"))

    def timed(*a: Any, **k: Any) -> float:
        t0 = time.perf_counter()
        run(*a, **k)
        return time.perf_counter() - t0

    try:
        run(tmp / "warm", [0])  # imports and caches
        a = list(range(cells // 2))
        for r in range(repeat):
            d = tmp / f"s{r}"
            out["first"].append(timed(d, a))
            if tool != "zen":
                out["resume"] += [timed(d, a, resume=True) for _ in range(resumes)]
            for k in range(resumes if left else 0):
                for cell in sorted(p for p in d.iterdir() if p.name.startswith("a="))[:left]:
                    shutil.rmtree(cell)
                out["left"].append(timed(d, a, resume=True))
                out["fresh"].append(timed(tmp / f"f{r}-{k}", list(range(left // 2))))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def _hydra_loop() -> Any:
    """``run(directory, a_values)``: the same grid of ``trivial`` through Hydra's in-process
    job loop and mushin-box's sweeper (each job composed once, as in ``Workflow.run``), with
    no cell runner: what Hydra costs a cell before mushin-box does anything."""
    from hydra_zen import launch, make_config, multirun, zen

    from mushin_box._core.jobskip import skipping
    from mushin_box._sweep.jobconfig import job_configs
    from mushin_box._sweep.prefilter import SWEEPER_TARGET

    cfg = make_config(a=0, b=0)

    def run(d: Path, a: list[int]) -> None:
        overrides = [
            f"hydra.sweep.dir={d}",
            "hydra.sweep.subdir=${mushin_cell:}",  # the subdir job_configs composes over
            f"hydra.sweeper._target_={SWEEPER_TARGET}",
        ]
        with skipping(frozenset(), job_configs):
            launch(
                cfg,
                zen(trivial),
                overrides=overrides,
                multirun=True,
                version_base="1.3",
                a=multirun(a),
                b=multirun([0, 1]),
            )

    return run


def first(cells: int) -> dict[str, list[float]]:
    """One first run of a ``cells``-cell sweep of ``trivial``: seconds a cell, those of the
    floor (:func:`_hydra_loop`, run first: ``Workflow.run`` then replaces Hydra's writer of
    the ``.hydra`` files), each after its warm-up sweep, and the driver's peak resident
    memory in MB (the process's own)."""
    sys.path.insert(0, str(Path(__file__).parent))
    from bigsweep import own_peak_mb  # type: ignore[import-not-found]

    _quiet()
    out: dict[str, list[float]] = {}
    tmp = Path(tempfile.mkdtemp(prefix="mushin-bench-"))
    try:
        for name, run in (("floor", _hydra_loop()), ("per_cell", _runner("box"))):
            run(tmp / f"{name}-warm", [0])
            t0 = time.perf_counter()
            run(tmp / name, list(range(cells // 2)))
            out[name] = [(time.perf_counter() - t0) / (cells // 2 * 2)]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return {**out, "rss_mb": [own_peak_mb()]}


def image(size_mb: int, repeat: int) -> dict[str, list[float]]:
    """``image_sha256`` of a ``size_mb`` file: first (no cache) and again (cached); and
    ``sha256sum`` of the same file."""
    import os
    import subprocess

    from mushin_box._image.digest import image_sha256

    out: dict[str, list[float]] = {"first": [], "again": [], "sha256sum": []}
    tmp = Path(tempfile.mkdtemp(prefix="mushin-bench-"))
    try:
        os.environ["XDG_CACHE_HOME"] = str(tmp / "cache")
        path = tmp / "image.sif"
        with open(path, "wb") as handle:
            block = os.urandom(1 << 20)
            for _ in range(size_mb):
                handle.write(block)
        subprocess.run(["sha256sum", str(path)], check=True, capture_output=True)  # cached
        for _ in range(repeat):
            shutil.rmtree(tmp / "cache", ignore_errors=True)
            t0 = time.perf_counter()
            image_sha256(path, progress=False)
            t1 = time.perf_counter()
            image_sha256(path, progress=False)
            t2 = time.perf_counter()
            subprocess.run(["sha256sum", str(path)], check=True, capture_output=True)
            t3 = time.perf_counter()
            out["first"].append(t1 - t0)
            out["again"].append(t2 - t1)
            out["sha256sum"].append(t3 - t2)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def provenance(nodes: int, gpus: int, sample: int) -> dict[str, list[float]]:
    """Seconds per rank of topology + full provenance + write, for ``sample`` ranks of a
    ``nodes x gpus`` world (scripts/bench/provenance_scale.py's steps)."""
    sys.path.insert(0, str(Path(__file__).parent))
    import provenance_scale as ps  # type: ignore[import-not-found]

    world = nodes * gpus
    ranks = sorted({round(i * (world - 1) / max(sample - 1, 1)) for i in range(sample)})
    basic = ps.basic_provenance(
        task=ps.task, config=ps.CONFIG, fingerprints=ps.FINGERPRINTS, seed_base=1234
    )
    with tempfile.TemporaryDirectory(prefix="mushin-bench-") as tmp:
        launch = ps.launch_env(Path(tmp) / "work")
        ps.one_rank(nodes, gpus, 0, basic, Path(tmp), launch)
        rows = [ps.one_rank(nodes, gpus, r, basic, Path(tmp), launch)[0] for r in ranks]
    return {"per_rank": [row["total"] / 1000 for row in rows]}


def load(tool: str, root: str, repeat: int) -> dict[str, list[float]]:
    """``load_experiment`` of ``root`` (a warm call after a first one), ``repeat`` times."""
    if tool == "box":
        from mushin_box import load_experiment
    else:
        from mushin import load_experiment  # pyright: ignore[reportMissingImports]
    _quiet()
    load_experiment(root)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        load_experiment(root)
        times.append(time.perf_counter() - t0)
    return {"load": times}


def main() -> None:
    case, args = sys.argv[1], json.loads(sys.argv[2])
    cases = {"sweep": sweep, "first": first, "image": image, "provenance": provenance, "load": load}
    result = cases[case](**args)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
