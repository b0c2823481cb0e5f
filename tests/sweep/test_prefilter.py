# SPDX-License-Identifier: MIT
"""Resume decides finished cells before Hydra launches anything, as strictly as the runner.

A finished sweep resumed launches nothing and touches no cell; every cell the runner would
run again (failed, cancelled, skipped, a corrupt sidecar, a changed config or code) still
goes through the launcher; and the shortcut that computes a job's config without composing
it gives the same directory and fingerprint as Hydra's full compose.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import json
import pathlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import hydra_zen
import pytest
from hydra_zen import make_config
from workflow_tasks import marker_sweep as _sweep
from workflow_tasks import marker_task
from workflow_tasks import markers_ran as _ran

from mushin_box import Workflow, multirun
from mushin_box._core.layout import METRICS_FILE, PROVENANCE_FILE, STATUS_FILE
from mushin_box._core.overrideparse import parse_overrides
from mushin_box._sweep import prefilter as pf
from mushin_box._sweep.cells import CellPlan, config_fingerprint
from mushin_box._sweep.compose import hydra_state_kept
from mushin_box._sweep.jobconfig import PlainFingerprints, SweptValues, element_overrides
from mushin_box._sweepdir.manifest import cell_records
from mushin_box._upstream.hydra import sweep_jobs


def _snapshot(root: Path, *, cells_only: bool = True) -> dict[str, tuple[bytes, int]]:
    """Every file's bytes and mtime: a file rewritten, even with the same bytes, shows."""
    return {
        str(p.relative_to(root)): (p.read_bytes(), p.stat().st_mtime_ns)
        for p in sorted(root.rglob("*"))
        # the sweep's own files (manifest, multirun.yaml) are rewritten by every run
        if p.is_file() and not (cells_only and p.parent == root)
    }


def test_a_finished_sweep_resumed_launches_nothing_and_touches_no_cell(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, markers = tmp_path / "sweep", tmp_path / "markers"
    _sweep(root, markers)
    before = _snapshot(root)  # statuses, metrics, provenance, .hydra/*.yaml of every cell

    def no_launch(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("Hydra launched a job of a finished sweep")

    monkeypatch.setattr(hydra_zen, "launch", no_launch)
    ds = _sweep(root, markers, resume=True)
    assert list(ds["x2"].values) == [2, 4, 6, 8, 10, 12]
    assert _snapshot(root) == before
    assert _ran(markers) == [f"x={x}" for x in range(1, 7)]  # the first run only


def test_after_a_resume_that_ran_nothing_the_manifest_still_answers_the_readers(
    tmp_path: Path,
) -> None:
    from mushin_box._results.table import read_finished

    root, markers = tmp_path / "sweep", tmp_path / "markers"
    _sweep(root, markers)
    _sweep(root, markers, resume=True)
    view = read_finished(root)  # None: the manifest is not trusted, every status is read
    assert view is not None
    assert [(c.dir, c.state, c.metrics) for c in view.cells] == [
        (f"x={x}", "completed", {"x2": 2.0 * x}) for x in range(1, 7)
    ]
    (root / "x=3" / "mushin_status.json").unlink()  # a cell to run again
    _sweep(root, markers, resume=True)
    assert _ran(markers).count("x=3") == 2
    assert read_finished(root) is not None


def test_every_cell_the_runner_would_run_again_still_runs(tmp_path: Path) -> None:
    root, markers = tmp_path / "sweep", tmp_path / "markers"
    _sweep(root, markers)

    def edit_status(cell: str, **fields: Any) -> None:
        path = root / cell / STATUS_FILE
        path.write_text(json.dumps({**json.loads(path.read_text()), **fields}))

    edit_status("x=1", status="failed")
    edit_status("x=2", status="cancelled")
    edit_status("x=3", status="skipped")
    (root / "x=4" / METRICS_FILE).write_text("{")  # a corrupt metrics sidecar
    (root / "x=5" / PROVENANCE_FILE).write_text('{"run": ')  # a corrupt provenance record
    kept = _snapshot(root / "x=6", cells_only=False)  # its sidecars and .hydra/*.yaml: not launched
    with pytest.warns(UserWarning, match="unreadable"):
        ds = _sweep(root, markers, resume=True)
    assert list(ds["x2"].values) == [2, 4, 6, 8, 10, 12]
    assert _ran(markers) == sorted(
        [f"x={x}" for x in range(1, 7)] + [f"x={x}" for x in range(1, 6)]
    )
    assert _snapshot(root / "x=6", cells_only=False) == kept  # reused, untouched
    for x in range(1, 6):
        assert json.loads((root / f"x={x}" / STATUS_FILE).read_text())["status"] == "completed"


def test_a_changed_config_runs_every_cell_again(tmp_path: Path) -> None:
    root, markers = tmp_path / "sweep", tmp_path / "markers"
    _sweep(root, markers)
    with pytest.warns(UserWarning, match="config fingerprint changed"):
        _sweep(root, markers, resume=True, sleep_s=0.001)  # a constant changed
    assert _ran(markers) == sorted(2 * [f"x={x}" for x in range(1, 7)])
    status = json.loads((root / "x=3" / STATUS_FILE).read_text())
    assert status["rerun_reason"] == "config fingerprint changed"


def test_a_plain_shortcut_blind_to_a_changed_config_is_not_trusted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, markers = tmp_path / "sweep", tmp_path / "markers"
    _sweep(root, markers)
    stored = {
        d.name: json.loads((d / STATUS_FILE).read_text())["fingerprints"]["config"]
        for d in root.glob("x=*")
    }

    def blind(self: Any, job: list[str]) -> str:  # the fingerprint the cell had before
        return stored[next(text for text in job if text.startswith("x="))]

    monkeypatch.setattr(PlainFingerprints, "fingerprint", blind)
    with pytest.warns(UserWarning, match="config fingerprint changed"):
        _sweep(root, markers, resume=True, sleep_s=0.001)  # a constant changed
    assert _ran(markers) == sorted(2 * [f"x={x}" for x in range(1, 7)])  # none reused


def _plan(root: Path, **fields: Any) -> CellPlan:
    return CellPlan(
        **{"working_dir": str(root), "swept": ("x",), "resume": True, "run_id": "new", **fields}
    )


def _overrides(root: Path, markers: Path) -> list[str]:
    return [
        f"hydra.sweep.dir={root}",
        "hydra.sweep.subdir='${mushin_cell:}'",
        "hydra.job.config.override_dirname.exclude_keys=[markers]",
        "x=1,2,3,4,5,6",
        f"markers={markers}",
    ]


def _prefilter(config: Any, root: Path, markers: Path, plan: CellPlan) -> pf.Prefiltered:
    """The shortcut's answer for the sweep at ``root``, run as ``launch_cells`` runs it."""
    with hydra_state_kept():
        return pf.prefilter(
            config,
            _overrides(root, markers),
            plan,
            launcher=None,
            launcher_config=None,
            records=list(cell_records(root)),
        )


def test_a_changed_code_fingerprint_or_a_stale_code_reuse_goes_through_the_runner(
    tmp_path: Path,
) -> None:
    root, markers = tmp_path / "sweep", tmp_path / "markers"
    _sweep(root, markers)
    status = json.loads((root / "x=1" / STATUS_FILE).read_text())
    code = status["fingerprints"]["code"]
    config = Workflow(marker_task).config

    def reused(plan: CellPlan) -> int:
        return len(_prefilter(config, root, markers, plan).reused)

    assert reused(_plan(root, code_fingerprint=code)) == 6
    assert reused(_plan(root, code_fingerprint="other")) == 0
    # reused despite the change: the runner writes that down, so it goes through it
    assert reused(_plan(root, code_fingerprint="other", reuse_stale_code=True)) == 0
    assert reused(_plan(root, code_fingerprint=code, resume=False)) == 0


@contextlib.contextmanager
def _composing(name: str, config: Any) -> Iterator[None]:
    """Hydra's compose of ``name`` (``config``) possible, and the config store as it was
    after: a config of this module left there would be pickled into a later submitit job
    of the same process, which can't import this module."""
    from hydra import initialize
    from hydra.core.config_store import ConfigStore

    ConfigStore.instance().store(name=name, node=config)
    try:
        with hydra_state_kept(), initialize(version_base="1.3", config_path=None):
            yield
    finally:
        ConfigStore.instance().repo.pop(f"{name}.yaml", None)


def _through_compose(
    config: Any, overrides: list[str], *, plain: bool = False
) -> list[tuple[Path, str]]:
    """Every job's directory and config fingerprint: by the shortcut, and by a full compose;
    with ``plain``, by the shortcut's plain data too (which must take the grid)."""
    from hydra import compose

    jobs = sweep_jobs(parse_overrides(overrides))
    assert jobs
    out = []
    with _composing("prefilter_test", config):
        first = compose("prefilter_test", overrides=list(jobs[0]), return_hydra_config=True)
        fast = SweptValues(first, jobs, element_overrides(parse_overrides(overrides)))
        slow = SweptValues(first, jobs)  # each job's overrides parsed by Hydra
        prints = PlainFingerprints(fast, jobs) if plain else None
        for job in jobs:
            full = pf._cell_of(
                compose("prefilter_test", overrides=list(job), return_hydra_config=True)
            )
            expected = config_fingerprint(full[1])
            quick = fast.cell(job)
            assert quick[0] == full[0] == fast.directory(job) == slow.cell(job)[0], job
            assert config_fingerprint(quick[1]) == expected, job
            assert config_fingerprint(slow.cell(job)[1]) == expected, job
            if prints is not None:
                assert prints.fingerprint(job) == expected, job
            out.append((quick[0], config_fingerprint(quick[1])))
    return out


class _Colour(enum.Enum):
    RED = 1
    BLUE = 2


@dataclasses.dataclass
class _Opt:
    momentum: float = 0.9
    nesterov: bool = False
    colour: _Colour = _Colour.RED


@dataclasses.dataclass
class _Leaves:
    lr: float = 0.1
    steps: int = 3
    name: str = "a"
    width: int | None = None
    anything: Any = None
    opt: _Opt = dataclasses.field(default_factory=_Opt)
    db_password: str = "hunter2"  # redacted: the fingerprint never holds it
    home: str = "${oc.env:HOME}"  # the environment's value, the same in every job


@pytest.mark.parametrize(
    "sweeps",
    [
        # an int into a float field and a number into a str field: converted, as by Hydra
        ["lr=1,1e-05,inf", "name=5,'a b',null_"],
        ["width=null,4", "anything=1,'1',2.5", "opt.nesterov=true,false"],  # untyped: kept
        ["opt.colour=BLUE,RED", "+extra=1,x", "steps=2,7"],
    ],
)
def test_the_plain_shortcut_gives_each_job_the_fingerprint_of_its_composed_config(
    tmp_path: Path, sweeps: list[str]
) -> None:
    overrides = [f"hydra.sweep.dir={tmp_path}", "hydra.sweep.subdir='${mushin_cell:}'", *sweeps]
    cells = _through_compose(_Leaves, overrides, plain=True)
    assert len({fp for _, fp in cells}) == len(cells) > 6


@dataclasses.dataclass
class _Creds:
    user: str = "u"


@dataclasses.dataclass
class _Secrets:
    lr: float = 0.1
    db_password: str = "hunter2"
    credentials: _Creds = dataclasses.field(default_factory=_Creds)
    url: str = "https://h/y"


def test_swept_secrets_are_redacted_in_the_plain_shortcut_as_in_the_composed_config(
    tmp_path: Path,
) -> None:
    # a secret key swept, a key under a secret mapping, a URL with credentials: the
    # shortcut redacts each value alone at its path, as the whole config is redacted
    sweeps = [
        "db_password=a,b",
        "credentials.user=x,y",
        "url='postgres://me:pw@db/x','postgres://you:pw@db/x'",
        "lr=0.1,0.2",
    ]
    overrides = [f"hydra.sweep.dir={tmp_path}", "hydra.sweep.subdir='${mushin_cell:}'", *sweeps]
    cells = _through_compose(_Secrets, overrides, plain=True)
    assert len(cells) == 16
    assert len({fp for _, fp in cells}) == 2  # only lr tells them apart


@pytest.mark.parametrize(
    ("config", "sweep"),
    [
        (make_config(lr=0.1, tag="${lr}"), "lr=0.1,0.2"),  # another key's value follows it
        (make_config(lr=0.1, tag="${oc.env:A,${lr}}"), "lr=0.1,0.2"),
        (make_config(lr=0.1), "lr=0.1,'${oc.env:HOME}'"),  # a value holding an interpolation
        (make_config(lr=0.1), "lr=[1],[2]"),  # a list value
        (make_config(layers=[make_config(n=1)]), "layers.0.n=1,2"),  # a key under a list
    ],
)
def test_the_plain_shortcut_refuses_a_config_where_a_value_reaches_other_keys(
    config: Any, sweep: str
) -> None:
    from hydra import compose

    jobs = sweep_jobs(
        parse_overrides(["hydra.sweep.dir=/tmp/x", "hydra.sweep.subdir='${mushin_cell:}'", sweep])
    )
    assert jobs
    with _composing("plain_refused", config):
        first = compose("plain_refused", overrides=list(jobs[0]), return_hydra_config=True)
        values = SweptValues(first, jobs)
        with pytest.raises(ValueError):
            PlainFingerprints(values, jobs)


@dataclasses.dataclass
class _WithPath:
    out: pathlib.Path = pathlib.Path("a")
    lr: float = 0.1


def test_a_value_without_canonical_json_is_fingerprinted_from_its_config(tmp_path: Path) -> None:
    from hydra import compose

    jobs = sweep_jobs(
        parse_overrides(
            [
                f"hydra.sweep.dir={tmp_path}",
                "hydra.sweep.subdir='${mushin_cell:}'",
                "out=b,c",
                "lr=1,2",
            ]
        )
    )
    assert jobs
    with _composing("plain_path", _WithPath):
        first = compose("plain_path", overrides=list(jobs[0]), return_hydra_config=True)
        values = SweptValues(first, jobs)
        prints = PlainFingerprints(values, jobs)
        for job in jobs:
            assert prints.fingerprint(job) is None  # a Path: the config's YAML is hashed
            full = compose("plain_path", overrides=list(job), return_hydra_config=True)
            assert pf._fast_print(values, prints, job) == config_fingerprint(pf._cell_of(full)[1])


def test_the_shortcut_composes_every_job_as_hydra_does(tmp_path: Path) -> None:
    config = make_config(
        lr=0.1,
        name="a",
        opt=make_config(momentum=0.9, betas=[0.9, 0.99]),
        tag="${name}-${opt.momentum}",
        empty=None,
    )
    overrides = [
        f"hydra.sweep.dir={tmp_path}",
        "hydra.sweep.subdir='${mushin_cell:}'",
        "hydra.job.config.override_dirname.exclude_keys=[lr]",
        "lr=0.5",
        "name='a b','c,d',\"e'f\"",
        "opt.momentum=0.1,0.2",
        "opt.betas=[0.5,0.6],[0.1]",
        "+extra=1,null,true",
        "empty=3,x",
    ]
    cells = _through_compose(config, overrides)
    assert len(cells) == 3 * 2 * 2 * 3 * 2
    assert len({d for d, _ in cells}) == len(cells)  # distinct directories and configs
    assert len({fp for _, fp in cells}) == len(cells)


def test_the_shortcut_is_refused_where_a_job_differs_by_more_than_its_values() -> None:
    from hydra import compose

    config = make_config(opt=make_config(momentum=0.9), lr=0.1)
    for overrides in (
        ["opt={momentum:0.1},{momentum:0.2}"],  # a mapping value merges
        ["opt.momentum=0.1,0.2", "opt={momentum:0.3}"],  # a key nested in another's
        ["hydra.job.name=a,b"],  # Hydra's own
    ):
        jobs = sweep_jobs(
            parse_overrides(
                ["hydra.sweep.dir=/tmp/x", "hydra.sweep.subdir='${mushin_cell:}'", *overrides]
            )
        )
        assert jobs
        with _composing("prefilter_refused", config):
            first = compose("prefilter_refused", overrides=list(jobs[0]), return_hydra_config=True)
            with pytest.raises(ValueError):
                SweptValues(first, jobs)


def test_a_config_whose_value_depends_on_the_job_is_decided_by_the_runner(
    tmp_path: Path,
) -> None:
    root, markers = tmp_path / "sweep", tmp_path / "markers"
    _sweep(root, markers)
    config = make_config(x=0, markers="", sleep_s="${oc.select:nothing,0.0}", when="${now:%H}")
    status = json.loads((root / "x=1" / STATUS_FILE).read_text())
    plan = _plan(root, code_fingerprint=status["fingerprints"]["code"])
    done = _prefilter(config, root, markers, plan)
    assert done.jobs == 6 and not done.reused


@dataclasses.dataclass
class _Typed:
    x: int = 0
    markers: str = ""
    sleep_s: float = 0.0


def test_a_bad_value_in_a_later_job_is_still_refused_before_any_cell_runs(
    tmp_path: Path,
) -> None:
    from hydra.errors import ConfigCompositionException

    root, markers = tmp_path / "sweep", tmp_path / "markers"
    with pytest.raises(ConfigCompositionException, match="abc"):
        Workflow(marker_task, config=_Typed).run(
            working_dir=root, progress=False, x=multirun([1, 2, "abc"]), markers=str(markers)
        )
    assert _ran(markers) == []
