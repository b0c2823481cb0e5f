# SPDX-License-Identifier: MIT
"""``mushin-box diff``: exit codes, --json, one changed field at a time, sweeps."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from workflow_tasks import grid_task

from mushin_box import Workflow, multirun
from mushin_box._core.layout import PACKAGES_FILE
from mushin_box._core.sidecars import write_json_atomic
from mushin_box._provenance.compare import diff_records
from mushin_box._provenance.files import write_provenance
from mushin_box._provenance.full import full_provenance
from mushin_box._provenance.ranks import rank_runtime, record_with_rank_runtime
from mushin_box._results.diff import DiffInputError, diff_provenance
from mushin_box.testing import simulated_slurm_env


def task(lr: float, seed: int = 0) -> dict[str, float]:
    return {"loss": lr}


IMAGE = {
    "sif_sha256": "a" * 64,
    "sif_uuid": "5b2b8c4e-0000-4000-8000-000000000001",
    "definition_sha256": "d" * 64,
    "base_digest": "sha256:" + "b" * 64,
}
BASE: dict[str, Any] = {
    "image": IMAGE,
    "code": "code-1",
    "lr": 0.1,
    "seed": 1,
    "nodes": 1,
    "gpus": 1,
    "metrics": {"loss": 0.5, "acc": [0.9, 0.8]},
    "packages": None,  # None: this process's installed packages
    "env": {},
    "devices": {"torch": "2.6.0", "cuda": None, "count": 0, "names": []},
}
PACKAGES = ["attrs==26.1.0", "numpy==2.4.6", "torch==2.6.0"]


def make_cell(path: Path, **changes: Any) -> Path:
    """A cell dir written by hand: provenance (with its package list) and metrics."""
    p = {**BASE, **changes}
    env = simulated_slurm_env(p["nodes"], p["gpus"], 0) if p["nodes"] * p["gpus"] > 1 else {}
    env = {**env, **p["env"]}
    cfg = {
        "lr": p["lr"],
        "seed": p["seed"],
        "trainer": {
            "_target_": "pytorch_lightning.Trainer",
            "devices": p["gpus"],
            "num_nodes": p["nodes"],
        },
    }
    record = full_provenance(
        task=task,
        config=cfg,
        fingerprints={"config": f"{p['lr']}-{p['gpus']}", "code": p["code"]},
        seed_base=p["seed"],
        environ=env,
        image=p["image"],
        packages=p["packages"],
        devices=p["devices"],
    )
    world = p["nodes"] * p["gpus"]  # every rank records its own placement, as real ranks do
    ranks = [
        simulated_slurm_env(p["nodes"], p["gpus"], r) if world > 1 else {} for r in range(world)
    ]
    rows = [{"rank": r, **rank_runtime({**e, **p["env"]})} for r, e in enumerate(ranks)]
    record = record_with_rank_runtime(record, rows)
    write_provenance(path, record, packages=p["packages"])
    write_json_atomic(path / "mushin_metrics.json", p["metrics"])
    return path


def cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mushin_box", "diff", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "200"},
    )


def as_json(*args: str | Path) -> tuple[int, dict[str, Any]]:
    proc = cli(*args, "--json")
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def break_paths(out: dict[str, Any]) -> list[str]:
    return [f["path"] for c in out["cells"] for f in c["breaks_reproducibility"]]


# ---------------------------------------------------------------------------- one change


@pytest.mark.parametrize(
    ("change", "path"),
    [
        ({"image": {**IMAGE, "sif_sha256": "b" * 64}}, "reproducibility.image.sif_sha256"),
        ({"image": {**IMAGE, "sif_uuid": "other-uuid"}}, "reproducibility.image.sif_uuid"),
        (
            {"image": {**IMAGE, "base_digest": "sha256:" + "c" * 64}},
            "reproducibility.image.base_digest",
        ),
        (
            {"image": {**IMAGE, "definition_sha256": "e" * 64}},
            "reproducibility.image.definition_sha256",
        ),
        ({"image": None}, "reproducibility.image"),
        ({"code": "code-2"}, "reproducibility.code.task_sha256"),
        ({"lr": 0.2}, "reproducibility.config.lr"),
        ({"seed": 2}, "reproducibility.seed.base"),
    ],
    ids=["image", "sif-uuid", "base-digest", "definition", "no-image", "code", "config", "seed"],
)
def test_changing_exactly_one_thing_shows_exactly_that_field(
    tmp_path: Path, change: dict[str, Any], path: str
) -> None:
    a = make_cell(tmp_path / "a")
    b = make_cell(tmp_path / "b", **change)
    code, out = as_json(a, b)
    assert code == 1
    assert out["reproducible"] is False
    assert break_paths(out) == [path]
    text = cli(a, b)
    assert text.returncode == 1
    assert path in text.stdout and "Breaks reproducibility" in text.stdout


# ---------------------------------------------------------------------------- packages


def test_changed_package_set_lists_the_packages_that_changed(tmp_path: Path) -> None:
    a = make_cell(tmp_path / "a", packages=PACKAGES)
    b = make_cell(
        tmp_path / "b", packages=["attrs==26.2.0", "numpy==2.4.6", "rich==15.0", "torch==2.6.0"]
    )
    code, out = as_json(a, b)
    assert code == 1
    rows = {
        f["path"]: (f["a"], f["b"], f["change"])
        for c in out["cells"]
        for f in c["breaks_reproducibility"]
    }
    assert rows == {
        "reproducibility.package_set[attrs]": ("26.1.0", "26.2.0", "changed"),
        "reproducibility.package_set[rich]": (None, "15.0", "only_b"),
    }
    text = cli(a, b)
    assert text.returncode == 1
    assert "reproducibility.package_set[attrs]" in text.stdout and "26.2.0" in text.stdout
    # without both lists, the fingerprint says that the sets differ
    (b / PACKAGES_FILE).unlink()
    code, out = as_json(a, b)
    assert code == 1 and break_paths(out) == ["reproducibility.package_set.sha256"]


def test_changed_key_package_is_listed_once(tmp_path: Path) -> None:
    a = make_cell(tmp_path / "a", packages=PACKAGES)
    b = make_cell(tmp_path / "b", packages=["attrs==26.1.0", "numpy==2.4.6", "torch==2.7.0"])
    _, out = as_json(a, b)
    assert break_paths(out) == ["reproducibility.package_set[torch]"]
    (a / PACKAGES_FILE).write_text("attrs==0\n")  # not the list a's record names: not used
    _, out = as_json(a, b)
    assert break_paths(out) == [
        "reproducibility.package_set.sha256",
        "reproducibility.packages.torch",
    ]


# ---------------------------------------------------------------------------- run facts


def test_container_and_devices_are_expected_to_differ(tmp_path: Path) -> None:
    def launch(name: str, version: str, flags: str) -> dict[str, str]:
        env_file = tmp_path / f"{name}.env"
        env_file.write_text(f"MASTER_PORT={len(flags)}\n")
        return {
            "MUSHIN_APPTAINER_VERSION": version,
            "MUSHIN_ENV_FILE": str(env_file),
            "MUSHIN_RANK_COMMAND": f"apptainer exec {flags} /i.sif python",
        }

    a = make_cell(tmp_path / "a", env=launch("a", "1.3.4", "--nv"))
    gpus = {
        "torch": "2.6.0",
        "cuda": "12.4",
        "count": 2,
        "names": ["NVIDIA H200"] * 2,
        "driver": "550.54.15",
    }
    b = make_cell(tmp_path / "b", env=launch("b", "1.4.0", "--nv --cleanenv"), devices=gpus)
    code, out = as_json(a, b)
    assert code == 0 and break_paths(out) == []
    expected = {f["path"] for f in out["cells"][0]["expected_to_differ"]}
    assert {
        "run.container.apptainer_version",
        "run.container.rank_command",
        "run.container.rank_argv",
        "run.container.env_file.path",
        "run.container.env_file.sha256",
        "run.container.env_file.text",
        "run.devices.count",
        "run.devices.names",
        "run.devices.cuda",
        "run.devices.driver",
    } <= expected
    text = cli(a, b)
    assert text.returncode == 0 and "run.container.apptainer_version" in text.stdout


def test_same_experiment_at_world_size_1_and_4_matches(tmp_path: Path) -> None:
    a = make_cell(tmp_path / "a")
    b = make_cell(tmp_path / "b", nodes=2, gpus=2)
    code, out = as_json(a, b)
    assert code == 0 and out["reproducible"] is True
    (cell,) = out["cells"]
    assert cell["breaks_reproducibility"] == []
    expected = {f["path"] for f in cell["expected_to_differ"]}
    assert {
        "run.topology.world_size",
        "run.config.trainer.devices",
        "run.config.trainer.num_nodes",
        "run.launcher.tasks",
    } <= expected
    assert "run.topology.ranks[3]" in expected
    text = cli(a, b)
    assert text.returncode == 0
    assert text.stdout.startswith("same experiment, same results\n")
    assert "Expected to differ (" in text.stdout and "run.topology.world_size" in text.stdout


def test_identical_cells_exit_0(tmp_path: Path) -> None:
    a = make_cell(tmp_path / "a")
    code, out = as_json(a, a)
    assert code == 0 and out["cells"][0]["expected_to_differ"] == []
    assert out["metrics_match"] is True


# ---------------------------------------------------------------------------- metrics


def test_metrics_side_by_side_with_atol(tmp_path: Path) -> None:
    a = make_cell(tmp_path / "a")
    b = make_cell(tmp_path / "b", metrics={"loss": 0.5004, "acc": [0.9, 0.8001], "new": 1})
    code, out = as_json(a, b)
    assert code == 1  # the same experiment, but results differ: the verdict counts them
    metrics = {m["name"]: m for m in out["cells"][0]["metrics"]}
    assert metrics["loss"]["match"] is False
    assert metrics["loss"]["delta"] == pytest.approx(0.0004)
    assert metrics["new"]["in_a"] is False and metrics["new"]["match"] is False
    _, loose = as_json(a, b, "--atol", "1e-3")
    loose_m = {m["name"]: m["match"] for m in loose["cells"][0]["metrics"]}
    assert loose_m == {"acc": True, "loss": True, "new": False}
    text = cli(a, b, "--atol", "0.001")
    assert "Metrics (atol=0.001, rtol=0)" in text.stdout and "0.5004" in text.stdout
    assert text.returncode == 1  # `new` is in B only: still a difference in the results


def test_nan_metrics_match_each_other(tmp_path: Path) -> None:
    a = make_cell(tmp_path / "a", metrics={"loss": float("nan")})
    b = make_cell(tmp_path / "b", metrics={"loss": float("nan")})
    _, out = as_json(a, b)
    (m,) = out["cells"][0]["metrics"]
    assert m["match"] is True and m["a"] == "nan"  # strict JSON: nan as a string


# ---------------------------------------------------------------------------- bad input


def test_bad_input_exits_2(tmp_path: Path) -> None:
    a = make_cell(tmp_path / "a")
    empty = tmp_path / "empty"
    empty.mkdir()
    text_file = tmp_path / "notes.txt"
    text_file.write_text("x")
    sweep = tmp_path / "sweep"
    make_cell(sweep / "lr=0.1")
    write_json_atomic(sweep / "lr=0.1" / "mushin_status.json", {"combo": {"lr": 0.1}})
    for args, message in (
        ((a, tmp_path / "missing"), "no such file or directory"),
        ((a, empty), "not a cell directory"),
        ((a, text_file), "not a cell or sweep"),
        ((a, sweep), "cannot compare a cell"),
        ((a, a, "--atol", "-1"), "atol must be"),
        ((a, a, "--atol", "nan"), "atol must be"),
    ):
        proc = cli(*args)
        assert proc.returncode == 2, (args, proc.stdout, proc.stderr)
        assert message in proc.stderr and "Traceback" not in proc.stderr
    proc = cli(a)  # argparse: missing B
    assert proc.returncode == 2


def test_cell_without_provenance_is_bad_input(tmp_path: Path) -> None:
    a = make_cell(tmp_path / "a")
    b = tmp_path / "b"
    write_json_atomic(b / "mushin_status.json", {"combo": {}, "status": "skipped"})
    with pytest.raises(DiffInputError, match="no readable provenance"):
        diff_provenance(a, b)
    assert cli(a, b).returncode == 2


def test_provenance_files_can_be_compared_directly(tmp_path: Path) -> None:
    a = make_cell(tmp_path / "a") / "mushin_provenance.json"
    b = make_cell(tmp_path / "b", lr=0.3) / "mushin_provenance.json"
    code, out = as_json(a, b)
    assert code == 1 and break_paths(out) == ["reproducibility.config.lr"]


# ---------------------------------------------------------------------------- sweeps


@pytest.mark.slow
def test_sweeps_are_matched_by_combo(tmp_path: Path) -> None:
    one = tmp_path / "one"
    same = tmp_path / "same"
    other = tmp_path / "other"
    bigger = tmp_path / "bigger"
    Workflow(grid_task).run(working_dir=one, progress=False, lr=multirun([0.1, 0.2]))
    Workflow(grid_task).run(working_dir=same, progress=False, lr=multirun([0.1, 0.2]))
    Workflow(grid_task).run(
        working_dir=other, progress=False, fail_at=-2.0, lr=multirun([0.1, 0.2])
    )
    Workflow(grid_task).run(working_dir=bigger, progress=False, lr=multirun([0.1, 0.2, 0.3]))

    code, out = as_json(one, same)
    assert code == 0 and out["kind"] == "sweep" and len(out["cells"]) == 2
    assert {json.dumps(c["combo"]) for c in out["cells"]} == {'{"lr": 0.1}', '{"lr": 0.2}'}

    code, out = as_json(one, other)
    assert code == 1
    assert break_paths(out) == ["reproducibility.config.fail_at"] * 2

    code, out = as_json(one, bigger)
    assert code == 1
    only = [c for c in out["cells"] if c["a"] is None]
    assert len(only) == 1 and only[0]["combo"] == {"lr": 0.3}
    assert only[0]["breaks_reproducibility"][0]["path"] == "<cell>"

    text = cli(one, other)
    assert text.returncode == 1
    assert "2 cell(s) compared" in text.stdout and "fail_at" in text.stdout


def test_diff_records_reports_derived_hash_only_without_its_source() -> None:
    a = {"reproducibility": {"config": {"x": 1}, "config_sha256": "h1"}, "run": {}}
    b = {"reproducibility": {"config": {"x": 2}, "config_sha256": "h2"}, "run": {}}
    assert [f.path for f in diff_records(a, b).breaks] == ["reproducibility.config.x"]


# ---------------------------------------------------------------------------- no torch


def test_diff_imports_no_torch(tmp_path: Path) -> None:
    a = make_cell(tmp_path / "a")
    code = (
        "import sys\n"
        "from mushin_box.cli.main import main\n"
        "rc = main(sys.argv[1:])\n"
        "heavy = [m for m in ('torch', 'pytorch_lightning', 'lightning_fabric') "
        "if m in sys.modules]\n"
        "print('HEAVY=' + ','.join(heavy), file=sys.stderr)\n"
        "sys.exit(rc)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, "diff", str(a), str(a)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "HEAVY=\n" in proc.stderr


# ---------------------------------------------------------------------------- corrupt records


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('{"reproducibility": [1, 2], "run": {}}', "`reproducibility` is a list"),
        ('{"reproducibility": "x", "run": {}}', "`reproducibility` is a string"),
        ('{"reproducibility": {"config": {"lr": 0.1}}, "run": "abc"}', "`run` is a string"),
        ('{"reproducibility": {"config": "lr=0.1"}, "run": {}}', "`reproducibility.config`"),
        ("[1, 2]", "not a JSON object"),
        ('{"trunc', "not valid JSON"),
    ],
)
def test_record_with_wrong_types_is_bad_input_not_a_difference(
    tmp_path: Path, text: str, problem: str
) -> None:
    a = make_cell(tmp_path / "a")
    b = tmp_path / "b"
    b.mkdir()
    bad = b / "mushin_provenance.json"
    bad.write_text(text)
    for args in ((a, b), (a / "mushin_provenance.json", bad)):
        proc = cli(*args)
        assert proc.returncode == 2, (text, proc.stdout, proc.stderr)
        assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
        assert str(bad) in proc.stderr and problem in proc.stderr, proc.stderr
    assert bad.read_text() == text  # a reader: nothing rewritten


@pytest.mark.parametrize("text", ['{"reproducibility": [1], "run": {}}', '{"trunc'])
def test_sweep_cell_with_corrupt_record_is_bad_input(tmp_path: Path, text: str) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    for sweep in (one, two):
        for lr in (0.1, 0.2):
            cell = make_cell(sweep / f"lr={lr}", lr=lr)
            write_json_atomic(cell / "mushin_status.json", {"combo": {"lr": lr}})
    bad = two / "lr=0.2" / "mushin_provenance.json"
    bad.write_text(text)
    proc = cli(one, two)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
    assert str(bad) in proc.stderr
    # a cell that simply has no record yet is a difference (exit 1), not bad input
    bad.unlink()
    assert cli(one, two).returncode == 1


# ---------------------------------------------------------------------------- the verdict


def _first_line(*args: str | Path) -> tuple[int, str]:
    proc = cli(*args)
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode, proc.stdout.splitlines()[0]


def test_same_experiment_with_other_results_is_a_difference_said_first(tmp_path: Path) -> None:
    # the README's own case: 2 ranks vs 1 without world-size-invariant batches
    a = make_cell(tmp_path / "a", metrics={"train_loss": 0.576712, "val_loss": 0.431014})
    b = make_cell(
        tmp_path / "b", nodes=1, gpus=2, metrics={"train_loss": 0.164916, "val_loss": 0.0793942}
    )
    code, line = _first_line(a, b)
    assert code == 1
    assert line == "same experiment, results differ: train_loss 0.576712 vs 0.164916 (and 1 more)"
    code, line = _first_line(a, b, "--provenance-only")  # the old meaning, asked for
    assert (code, line) == (0, "same experiment (results not compared)")
    code, out = as_json(a, b)
    assert (code, out["same"], out["reproducible"]) == (1, False, True)
    assert out["verdict"].startswith("same experiment, results differ")


def test_results_within_rtol_are_the_same(tmp_path: Path) -> None:
    a = make_cell(tmp_path / "a", metrics={"loss": 0.5, "acc": [0.9, 0.8]})
    b = make_cell(tmp_path / "b", metrics={"loss": 0.5 * (1 + 1e-7), "acc": [0.9, 0.8]})
    assert _first_line(a, b)[0] == 1  # exact by default
    assert _first_line(a, b, "--rtol", "1e-6") == (0, "same experiment, same results")
    assert _first_line(a, b, "--rtol", "1e-8")[0] == 1


def test_different_experiments_name_the_first_field(tmp_path: Path) -> None:
    a = make_cell(tmp_path / "a")
    b = make_cell(tmp_path / "b", lr=0.2)
    code, line = _first_line(a, b)
    assert (code, line) == (1, "different experiments: reproducibility.config.lr 0.1 vs 0.2")
    md = cli(a, b, "--md").stdout
    assert md.startswith("## mushin-box diff: ❌ different experiments")
    assert md.index("### Metrics") < md.index("### Breaks reproducibility")  # results first


def test_a_negative_rtol_is_bad_input(tmp_path: Path) -> None:
    a = make_cell(tmp_path / "a")
    proc = cli(a, a, "--rtol", "-1")
    assert proc.returncode == 2 and "rtol must be a finite number >= 0" in proc.stderr


def test_brief_of_a_slurm_run_against_a_local_run_shows_no_scheduler_bookkeeping(
    tmp_path: Path,
) -> None:
    local = make_cell(tmp_path / "local")
    env = {"SLURM_JOB_ID": "4242", "SLURM_STEP_ID": "0", "MASTER_PORT": "15042"}
    slurm = make_cell(tmp_path / "slurm", nodes=1, gpus=2, env=env)
    full = cli(local, slurm).stdout
    assert "run.env." in full  # there to hide: the full view lists it (or its family)
    brief = cli(local, slurm, "--brief")
    assert brief.returncode == 0
    out = brief.stdout
    for bookkeeping in ("SLURM_", "4242", "MASTER_PORT", "15042", "run.pid", "submitit"):
        assert bookkeeping not in out, bookkeeping
    counts = [line for line in out.splitlines() if line.startswith("Expected to differ: ")]
    assert len(counts) == 1 and "scheduler" in counts[0] and "topology" in counts[0]


def test_piped_output_never_folds_a_row(tmp_path: Path) -> None:
    # piped or narrow: a line per row, never a path or hash cut in the middle
    a = make_cell(tmp_path / "a")
    b = make_cell(tmp_path / "b", nodes=2, gpus=2, lr=0.2)
    proc = subprocess.run(
        [sys.executable, "-m", "mushin_box", "diff", str(a), str(b)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "60"},
    )
    lines = proc.stdout.splitlines()
    assert "  reproducibility.config.lr: 0.1 -> 0.2" in lines
    assert "  run.topology.world_size: 1 -> 4" in lines
    assert not any(set(line) & set("┃│━") for line in lines)  # no table to fold


@pytest.mark.parametrize("atol", [True, math.nan, math.inf, 10**400])
def test_a_tolerance_that_is_no_finite_number_is_refused_before_reading(
    tmp_path: Path, atol: object
) -> None:
    a = make_cell(tmp_path / "a")
    with pytest.raises(DiffInputError, match="atol must be a finite number >= 0"):
        diff_provenance(a, a, atol=atol)  # type: ignore[arg-type]
