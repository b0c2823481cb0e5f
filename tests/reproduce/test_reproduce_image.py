# SPDX-License-Identifier: MIT
"""``reproduce`` of a cell that ran in an image: where its ranks take the task from.

A rank in an image imports the task from the image unless a host directory comes first on
its ``PYTHONPATH``. A re-run started from a checkout must not put that checkout there when
the cell's task came from the image, and a task that moved from the image to the host is
a difference that breaks reproducibility (the kit's own code is no user file, so the code
fingerprint does not see the move).
"""

from __future__ import annotations

import importlib
import shlex
import textwrap
import uuid
from pathlib import Path
from typing import Any

import pytest

from mushin_box import Workflow, multirun, reproduce
from mushin_box._core.layout import PROVENANCE_FILE
from mushin_box._core.sidecars import read_json, write_json_atomic
from mushin_box._provenance.compare import diff_records
from mushin_box._provenance.full import full_provenance
from mushin_box._provenance.task import in_image

TASK = """
def task(lr: float) -> dict:
    return {"loss": lr}
"""
IN_IMAGE = "/opt/venv/lib/python3.11/site-packages"


def _cell_in_image(code_dir: Path, root: Path, images: Path) -> Path:
    """A cell whose record says its rank ran on SLURM in the stand-in's test SIF and
    imported its task from the image (the module is importable here too, from
    ``code_dir``, as the kit is from its checkout)."""
    from conftest import standin_image

    from mushin_box._image.sif import file_sha256

    name = f"itask_{uuid.uuid4().hex[:8]}"
    (code_dir / f"{name}.py").write_text(textwrap.dedent(TASK))
    module = importlib.import_module(name)
    Workflow(module.task).run(working_dir=root, progress=False, lr=multirun([0.5]))
    cell = root / "lr=0.5"
    images.mkdir()
    image = standin_image(images)
    record = read_json(cell / PROVENANCE_FILE)
    record["reproducibility"]["image"] = {"sif_sha256": file_sha256(image)}
    record["run"]["image"] = {"path": str(image)}
    record["run"]["launcher"]["name"] = "mushin_slurm"
    record["run"]["container"] = {
        "rank_argv": ["apptainer", "exec", "--bind", f"{root}:{root}", "--pwd", str(root)]
        + [str(image), "python"]
    }
    record["run"]["task"]["task"]["file"] = f"{IN_IMAGE}/{name}.py"
    write_json_atomic(cell / PROVENANCE_FILE, record)
    return cell


def test_a_task_from_the_image_puts_no_checkout_on_the_ranks_pythonpath(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code_dir = tmp_path / "checkout"
    code_dir.mkdir()
    monkeypatch.syspath_prepend(str(code_dir))
    cell = _cell_in_image(code_dir, tmp_path / "sweep", tmp_path / "images")
    monkeypatch.chdir(code_dir)  # reproduce run from the checkout that also holds the task
    result = reproduce(cell, into=tmp_path / "again", dry_run=True)
    launch = result.plan.launch
    assert launch["pythonpath"] is None
    assert "PYTHONPATH" not in str(launch["launcher_config"])

    # the same cell, its task taken from the checkout (bound into the image): it stays
    record = read_json(cell / PROVENANCE_FILE)
    record["run"]["task"]["task"]["file"] = str(
        code_dir / Path(record["run"]["task"]["task"]["file"]).name
    )
    record["run"]["container"]["rank_argv"][2:4] = ["--bind", f"{code_dir}:{code_dir}"]
    write_json_atomic(cell / PROVENANCE_FILE, record)
    again = reproduce(cell, into=tmp_path / "again", dry_run=True)
    assert again.plan.launch["pythonpath"] == str(code_dir)


def test_a_task_that_moved_from_the_image_to_the_host_breaks_reproducibility() -> None:
    from mushin_box import fit_task  # the kit's own task: no user file, no fingerprint of it

    here = str(Path(importlib.import_module("mushin_box").__file__ or "").parent.parent)
    if not in_image(here, None, "/h"):  # the kit's file stands for one in the image
        pytest.skip(f"this checkout ({here}) lies under a directory Apptainer mounts by default")
    image = {"MUSHIN_SIF_SHA256": "ab" * 32, "APPTAINER_CONTAINER": "/i/x.sif", "HOME": "/h"}
    project = "apptainer exec --bind /p:/p --pwd /w /i/x.sif python"

    def record(rank_command: str) -> dict[str, Any]:
        env = {**image, "MUSHIN_RANK_COMMAND": rank_command}
        return full_provenance(
            task=fit_task, config={"lr": 0.1}, fingerprints={}, seed_base=0, environ=env
        )

    from_image = record(project)  # the kit's file lies under no host mount: the image's
    from_host = record(project.replace("--bind /p:/p", f"--bind {here}:{here}"))
    assert from_image["reproducibility"]["code"]["task_from"] == "image"
    assert from_host["reproducibility"]["code"]["task_from"] == "host"
    diff = diff_records(from_image, from_host)
    assert [f.path for f in diff.breaks] == ["reproducibility.code.task_from"]
    assert "reproducibility.code.task_from" not in [f.path for f in diff.expected]
    # a record written before it was recorded: not a difference
    older = {**from_image, "reproducibility": dict(from_image["reproducibility"])}
    older["reproducibility"]["code"] = {
        k: v for k, v in older["reproducibility"]["code"].items() if k != "task_from"
    }
    assert diff_records(older, from_image).breaks == ()
    # outside an image nothing is recorded
    plain = full_provenance(task=fit_task, config={"lr": 0.1}, fingerprints={}, seed_base=0,
                            environ={})  # fmt: skip
    assert "task_from" not in plain["reproducibility"]["code"]


def test_the_images_recipe_reaches_the_record_beside_its_identity() -> None:
    from mushin_box._container.launchspec import ImageIdentity

    recipe = {
        "backend": "native",
        "spec": "containers/tiny.py:IMAGE",
        "context_commit": "c" * 40,
        "recipe_sha256": "d" * 64,
    }
    env = ImageIdentity(sif_sha256="ab" * 32, **recipe).to_env()  # the rank's env file
    rec = full_provenance(
        task=_a_task,
        config={"lr": 0.1},
        fingerprints={},
        seed_base=0,
        environ={**env, "APPTAINER_CONTAINER": "/i/x.sif"},
    )
    assert rec["reproducibility"]["image"] == {"sif_sha256": "ab" * 32}  # identity only
    assert rec["run"]["image"] == {"path": "/i/x.sif", **recipe}  # where to rebuild it from
    assert not set(env) & set(rec["run"]["env"])


def _a_task(lr: float) -> dict[str, float]:
    return {"loss": lr}


def test_preflight_hands_the_manifests_recipe_to_the_ranks(tmp_path: Path) -> None:
    import json

    from conftest import standin_image

    from mushin_box._container.launchspec import ContainerLaunch
    from mushin_box._container.preflight import preflight
    from mushin_box._container.rankwrap import plan_env_file
    from mushin_box._image.build import manifest_path

    image = standin_image(tmp_path)
    recipe = {
        "backend": "native",
        "spec": "containers/tiny.py:IMAGE",
        "context_commit": "c" * 40,
        "recipe_sha256": "d" * 64,
    }
    manifest = json.loads(manifest_path(image).read_text())
    manifest_path(image).write_text(json.dumps({**manifest, **recipe}))
    # the env file every rank reads, as Apptainer exports its assignments
    launch = ContainerLaunch(image=str(image), project_dir=str(tmp_path), infiniband=False)
    planned = plan_env_file(launch, working_dir=tmp_path / "w", identity=preflight(image).identity)
    env = dict(
        shlex.split(line)[0].split("=", 1)
        for line in planned.text.splitlines()
        if line.startswith("MUSHIN_IMAGE_") or line.startswith("MUSHIN_SIF_")
    )
    assert env["MUSHIN_IMAGE_SPEC"] == "containers/tiny.py:IMAGE"
    rec = full_provenance(
        task=_a_task, config={"lr": 0.1}, fingerprints={}, seed_base=0, environ=env
    )
    assert {k: rec["run"]["image"][k] for k in recipe} == recipe
