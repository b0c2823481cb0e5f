# SPDX-License-Identifier: MIT
"""``reproduce --rebuild-image``: the cell's image rebuilt from the recipe its record holds.

The refusals come from the record alone, before anything is built; the rebuild itself is
given a stand-in ``build`` (a real native build takes minutes, root and a mirror), except in
the one slow test, which builds a tiny image for real.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import runpy
import shutil
import subprocess
import uuid
from pathlib import Path
from typing import Any

import attrs
import pytest

from mushin_box import Workflow, multirun, reproduce
from mushin_box._core.layout import PROVENANCE_FILE
from mushin_box._core.sidecars import read_json, write_json_atomic
from mushin_box._image.build import manifest_path
from mushin_box._reproduce.checks import ReproduceError, read_original
from mushin_box._reproduce.rebuild import image_recipe, rebuild_image
from mushin_box.cli.main import main

SPEC = """
from mushin_box._image.bases import Debootstrap
from mushin_box._image.spec import ImageSpec
IMAGE = ImageSpec(base=Debootstrap(suite="bookworm"))
"""
GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]


def _repository(path: Path) -> str:
    """A git repository holding ``image.py`` (the spec); its commit."""
    path.mkdir()
    (path / "image.py").write_text(SPEC)
    for argv in (["init", "-q"], ["add", "."], ["commit", "-qm", "spec"]):
        subprocess.run([*GIT, *argv], cwd=path, check=True, capture_output=True)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=path, capture_output=True, text=True)
    return head.stdout.strip()


def _cell(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **image: Any) -> Path:
    """A completed cell whose record says it ran on SLURM in the image ``image`` describes
    (``run.image``), of sha256 ``"ab" * 32``."""
    code = tmp_path / "code"
    code.mkdir()
    monkeypatch.syspath_prepend(str(code))
    name = f"rbtask_{uuid.uuid4().hex[:8]}"
    (code / f"{name}.py").write_text("def task(lr: float) -> dict:\n    return {'loss': lr}\n")
    module = importlib.import_module(name)
    Workflow(module.task).run(working_dir=tmp_path / "sweep", progress=False, lr=multirun([1.0]))
    cell = tmp_path / "sweep" / "lr=1.0"
    record = read_json(cell / PROVENANCE_FILE)
    record["reproducibility"]["image"] = {"sif_sha256": "ab" * 32}
    record["run"]["image"] = {"path": str(tmp_path / "images" / "gone.sif"), **image}
    record["run"]["launcher"]["name"] = "mushin_slurm"
    write_json_atomic(cell / PROVENANCE_FILE, record)
    return cell


NATIVE = {"backend": "native", "spec": "image.py:IMAGE", "context_commit": "c" * 40}


@pytest.mark.parametrize(
    ("image", "says"),
    [
        ({}, "holds no recipe of its image"),
        ({"backend": "native"}, "holds no recipe of its image"),
        ({**NATIVE, "backend": "apptainer"}, "built by the apptainer backend"),
        ({**NATIVE, "context_commit": None}, "a recipe with uncommitted inputs"),
        (NATIVE, f"commit {'c' * 40}, which no repository here holds"),
        ({**NATIVE, "spec": "pkg.images:IMAGE"}, "names no file of its build context"),
        ({**NATIVE, "context_commit": "--upload-pack=x"}, "not a git commit"),
        ({**NATIVE, "context_dir": "../up"}, "build context '../up', which is no directory"),
        ({**NATIVE, "context_dir": "/abs"}, "build context '/abs', which is no directory"),
    ],
)
def test_a_record_that_cannot_be_rebuilt_is_refused_in_one_line_building_nothing(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    image: dict[str, Any],
    says: str,
) -> None:
    cell = _cell(tmp_path, monkeypatch, **image)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ReproduceError, match=says):
        reproduce(cell, into=tmp_path / "again", rebuild_image=True)
    capsys.readouterr()
    assert main(["reproduce", str(cell), "--into", str(tmp_path / "again"), "--rebuild-image"]) == 2
    err = capsys.readouterr().err
    assert says in err and len(err.strip().splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["code", "sweep"]


def test_a_rebuild_is_refused_with_another_image_or_as_a_dry_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cell = _cell(tmp_path, monkeypatch, **NATIVE)
    with pytest.raises(ReproduceError, match="drop image="):
        reproduce(cell, rebuild_image=True, image=str(tmp_path / "x.sif"))
    with pytest.raises(ReproduceError, match="drop dry_run=True"):
        reproduce(cell, rebuild_image=True, dry_run=True)


@attrs.frozen
class _Built:
    sif_sha256: str


def _builder(data: bytes, calls: list[dict[str, Any]]) -> Any:
    """A stand-in for build_image: writes ``data`` as the image, and its manifest."""

    def build(spec: Any, out: Path, **kwargs: Any) -> _Built:
        calls.append({"spec": spec, "out": out, **kwargs})
        out.write_bytes(data)
        manifest_path(out).write_text("{}")
        return _Built(hashlib.sha256(data).hexdigest())

    return build


def _rebuildable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, data: bytes) -> Path:
    """A cell whose image (of ``data``'s sha256) is gone but whose recipe is committed in
    ``tmp_path/project``, the current directory."""
    commit = _repository(tmp_path / "project")
    cell = _cell(tmp_path, monkeypatch, **{**NATIVE, "context_commit": commit})
    record = read_json(cell / PROVENANCE_FILE)
    record["reproducibility"]["image"]["sif_sha256"] = hashlib.sha256(data).hexdigest()
    write_json_atomic(cell / PROVENANCE_FILE, record)
    (tmp_path / "images").mkdir()
    monkeypatch.chdir(tmp_path / "project")
    return cell


def test_the_rebuilt_image_is_kept_only_when_its_sha256_is_the_recorded_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = b"the image's bytes"
    want = hashlib.sha256(data).hexdigest()
    cell = _rebuildable(tmp_path, monkeypatch, data)
    recipe = image_recipe(read_original(cell))
    assert recipe.path == tmp_path / "images" / "gone.sif"  # where the record says it was

    calls: list[dict[str, Any]] = []
    other = hashlib.sha256(b"other bytes").hexdigest()
    with pytest.raises(
        ReproduceError, match=f"has sha256 {other}, but the cell ran in sha256 {want}"
    ):
        rebuild_image(recipe, build=_builder(b"other bytes", calls))
    assert list((tmp_path / "images").iterdir()) == []  # nothing kept
    (call,) = calls
    assert call["backend"] == "native" and call["spec"].base.suite == "bookworm"
    assert str(call["spec_ref"]).endswith("/image.py:IMAGE")  # from the commit's tree

    placed = rebuild_image(recipe, build=_builder(data, calls))
    assert placed == recipe.path and placed.read_bytes() == data
    assert manifest_path(placed).is_file()
    # the recorded path is taken now: a second rebuild goes to the current directory
    again = image_recipe(read_original(cell)).path
    assert again == tmp_path / "project" / f"gone-{want[:12]}.sif"
    (tmp_path / "project" / "image.py").write_text("IMAGE = None\n")  # the work tree moved on
    assert rebuild_image(image_recipe(read_original(cell)), build=_builder(data, [])) == again


def test_the_rebuild_builds_in_the_recorded_context_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = b"the image's bytes"
    project = tmp_path / "project"
    (project / "containers").mkdir(parents=True)
    (project / "containers" / "image.py").write_text(SPEC)
    for argv in (["init", "-q"], ["add", "."], ["commit", "-qm", "spec"]):
        subprocess.run([*GIT, *argv], cwd=project, check=True, capture_output=True)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=project, capture_output=True, text=True)
    recorded = {**NATIVE, "context_commit": head.stdout.strip(), "context_dir": "containers"}
    cell = _cell(tmp_path, monkeypatch, **recorded)
    record = read_json(cell / PROVENANCE_FILE)
    record["reproducibility"]["image"]["sif_sha256"] = hashlib.sha256(data).hexdigest()
    write_json_atomic(cell / PROVENANCE_FILE, record)
    (tmp_path / "images").mkdir()
    monkeypatch.chdir(project)
    calls: list[dict[str, Any]] = []
    rebuild_image(image_recipe(read_original(cell)), build=_builder(data, calls))
    (call,) = calls
    assert Path(call["context"]).name == "containers"  # the clone's, not its top
    assert str(call["spec_ref"]).endswith("/containers/image.py:IMAGE")


def test_a_failed_rebuild_is_one_line_and_exit_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from mushin_box._image.build import BuildError
    from mushin_box._reproduce import rerun

    commit = _repository(tmp_path / "project")
    cell = _cell(tmp_path, monkeypatch, **{**NATIVE, "context_commit": commit})
    monkeypatch.chdir(tmp_path / "project")

    def fails(recipe: Any) -> Path:
        raise BuildError("mmdebstrap failed (exit 1): E: cannot reach the mirror")

    monkeypatch.setattr(rerun, "rebuild_image", fails)
    capsys.readouterr()
    assert main(["reproduce", str(cell), "--into", str(tmp_path / "again"), "--rebuild-image"]) == 1
    err = capsys.readouterr().err
    assert err == (
        "mushin-box reproduce: error: the image's rebuild failed: mmdebstrap failed (exit 1): "
        "E: cannot reach the mirror\n"
    )
    assert not (tmp_path / "again").exists()


@pytest.mark.slow
@pytest.mark.timeout(1200)  # two native builds of a tiny image, on a loaded machine
@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("mmdebstrap") is None,
    reason="a real native build: root and mmdebstrap (and the Debian mirror)",
)
def test_an_image_that_is_gone_is_rebuilt_to_its_recorded_sha256(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from image.test_native import _project  # its tiny spec and lock, committed

    from mushin_box._image.build import build_image
    from mushin_box._image.spec import ImageSpec

    project = _project(tmp_path)
    (tmp_path / "images").mkdir()
    original = tmp_path / "images" / "gone.sif"
    spec = runpy.run_path(str(project / "image.py"))["IMAGE"]
    assert isinstance(spec, ImageSpec)
    built = build_image(
        spec,
        original,
        context=project,
        backend="native",
        spec_ref=f"{project / 'image.py'}:IMAGE",
    )
    assert built.context_commit and built.spec == "image.py:IMAGE"
    recipe = {k: getattr(built, k) for k in ("backend", "spec", "context_commit", "recipe_sha256")}
    cell = _cell(tmp_path, monkeypatch, **recipe)
    for made in (original, manifest_path(original), original.with_suffix(".def")):
        made.unlink()  # the image is gone
    record = read_json(cell / PROVENANCE_FILE)
    record["reproducibility"]["image"]["sif_sha256"] = "0" * 64  # a record that lies
    write_json_atomic(cell / PROVENANCE_FILE, record)
    monkeypatch.chdir(project)

    # the rebuild gives the original's bytes: they are not the tampered record's
    want = f"has sha256 {built.sif_sha256}, but the cell ran in sha256 {'0' * 64}"
    with pytest.raises(ReproduceError, match=want):
        rebuild_image(image_recipe(read_original(cell)))
    assert list((tmp_path / "images").iterdir()) == []


def test_a_refusal_that_needs_no_image_comes_before_the_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mushin_box._reproduce import rerun

    data = b"the image's bytes"
    cell = _rebuildable(tmp_path, monkeypatch, data)
    calls: list[dict[str, Any]] = []
    built = _builder(data, calls)
    monkeypatch.setattr(rerun, "rebuild_image", lambda recipe: rebuild_image(recipe, build=built))
    with pytest.raises(ReproduceError, match="only a SLURM launch runs ranks in one"):
        reproduce(cell, into=tmp_path / "again", rebuild_image=True, local=True)
    assert calls == [] and list((tmp_path / "images").iterdir()) == []


def test_the_rebuilt_image_is_the_one_the_rerun_is_checked_against(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mushin_box._reproduce import rerun

    data = b"the image's bytes"
    cell = _rebuildable(tmp_path, monkeypatch, data)
    want, other = (hashlib.sha256(d).hexdigest() for d in (data, b"other bytes"))

    def lies(spec: Any, out: Path, **kwargs: Any) -> _Built:
        """Writes other bytes than its manifest's sha256 says."""
        _builder(b"other bytes", [])(spec, out, **kwargs)
        return _Built(want)

    monkeypatch.setattr(rerun, "rebuild_image", lambda recipe: rebuild_image(recipe, build=lies))
    rebuilt = tmp_path / "images" / "gone.sif"
    with pytest.raises(
        ReproduceError, match=f"the image {rebuilt} has sha256 {other}, but the cell ran in"
    ):
        reproduce(cell, into=tmp_path / "again", rebuild_image=True)
    assert not (tmp_path / "again").exists()
