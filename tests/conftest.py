# SPDX-License-Identifier: MIT
from __future__ import annotations

import doctest
import inspect
import math
import os
import runpy
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

# Test modules live in one folder per room of mushin_box (tests/core/, tests/sweep/, ...), with
# no __init__.py: pytest ("prepend" import mode) imports each as a top-level module named by its
# file, so basenames are unique across folders. This file stays at tests/ top level: pytest puts
# tests/ on sys.path to import it, which is how every room imports this module (`from conftest
# import REPO`) and the helper modules beside it (workflow_tasks, ddp_helpers, secret_module,
# _slurm_cluster). Child processes get tests/ (and a room's folder, for callables pickled from a
# test module) on PYTHONPATH from the test that starts them, or from the slurm_cluster fixture.

# the local SLURM cluster fixture (tests marked `slurm`)
pytest_plugins = (
    ["_slurm_cluster"] if (Path(__file__).parent / "_slurm_cluster.py").exists() else []
)

TESTS = Path(__file__).resolve().parent  # tests/: the helper modules, golden/, standins/
REPO = TESTS.parent
GOLDEN = TESTS / "golden"  # generated text, reviewed like code (see the `golden` fixture)
STANDINS = TESTS / "standins"
APPTAINER_STANDIN = STANDINS / "apptainer-standin"  # a folder holding a stand-in `apptainer`

Golden = Callable[[str, str], None]


@pytest.fixture
def golden(request: pytest.FixtureRequest) -> Golden:
    """``golden(name, text)``: assert ``text`` is exactly ``tests/golden/<name>``.

    With ``MUSHIN_UPDATE_GOLDEN=1`` the file is first (re)written from ``text``; then review
    ``git diff tests/golden/``.
    """
    test_file = Path(request.path).resolve()
    rerun = f"MUSHIN_UPDATE_GOLDEN=1 pytest {test_file.relative_to(REPO)}"

    def check(name: str, text: str) -> None:
        path = GOLDEN / name
        if os.environ.get("MUSHIN_UPDATE_GOLDEN") == "1":
            path.write_text(text, encoding="utf-8")
        assert path.exists(), f"{path} missing: run with {rerun}"
        assert text == path.read_text(encoding="utf-8"), (
            f"{name} changed; if intended: {rerun} (then review git diff tests/golden/)"
        )

    return check


@pytest.fixture
def apptainer_standin(monkeypatch: pytest.MonkeyPatch) -> Path:
    """Put the Apptainer STAND-IN (``tests/standins/apptainer-standin/apptainer``, not
    Apptainer) first on PATH; return its folder."""
    monkeypatch.setenv("PATH", f"{APPTAINER_STANDIN}{os.pathsep}{os.environ['PATH']}")
    return APPTAINER_STANDIN


def standin_image(tmp_path: Path) -> Path:
    """``tmp_path/img.sif``: a file the stand-in runs as an image, with a matching manifest."""
    import json
    import sys

    from mushin_box._image.build import Manifest, manifest_path
    from mushin_box._image.sif import file_sha256

    image = tmp_path / "img.sif"
    # a real SIF header (pre-flight refuses what is not a SIF), written by the build stand-in
    write_sif = runpy.run_path(str(STANDINS / "apptainer-standin-build"))["write_sif"]
    write_sif(
        image,
        [{"datatype": 0x4001, "data": b"Bootstrap: docker\n"}],
        image_uuid=uuid.UUID(int=0),
        created=0,
    )
    manifest = Manifest(
        image=str(image),
        definition="Bootstrap: docker\n",
        definition_sha256="0" * 64,
        base_image="python:3.11",
        base_digest="sha256:" + "1" * 64,
        build_argv=[],
        mushin_box_version="0.1.0",
        sif_sha256=file_sha256(image),
        python_version=".".join(map(str, sys.version_info[:3])),
    )
    manifest_path(image).write_text(json.dumps(manifest.to_dict()))
    return image


# Hydra's default output folders, relative to the current directory (the checkout when pytest
# is run from it); .gitignore hides them, so a test that writes there would go unnoticed
HYDRA_DEFAULT_DIRS = ("multirun", "outputs")


@pytest.fixture(autouse=True, scope="session")
def _checkout_stays_clean() -> Iterator[None]:
    """Fail the session if a test wrote a run into the checkout: tests write under tmp_path
    (a run without ``working_dir`` goes to ``multirun/<timestamp>`` in the current directory)."""

    def entries() -> set[Path]:
        return {p for d in HYDRA_DEFAULT_DIRS if (REPO / d).is_dir() for p in (REPO / d).iterdir()}

    before = entries()
    yield
    new = sorted(str(p.relative_to(REPO)) for p in entries() - before)
    assert not new, f"tests wrote into the checkout: {new}; run them under tmp_path (cleandir)"


@pytest.fixture(autouse=True, scope="session")
def _private_user_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The user's cache directory (the image digest cache) is the session's own, for this
    process and every child (local ranks, SLURM jobs): tests don't write into the real
    ``~/.cache``, nor read a digest another run left there."""
    real = Path.home() / ".cache" / "mushin-box"

    def stamp() -> list[tuple[str, int]]:
        return (
            sorted((p.name, p.stat().st_mtime_ns) for p in real.glob("*")) if real.is_dir() else []
        )

    before = stamp()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("xdg-cache")))
        # nor read the user's own launch profiles (~/.config/mushin-box/profiles.toml)
        patch.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.mktemp("xdg-config")))
        yield
    assert stamp() == before, f"tests wrote into the real cache {real}"


@pytest.fixture
def cleandir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Run the test inside a fresh temporary directory."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def rank_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A directory where every rank of mushin_box.testing.TinyModule logs what it did."""
    d = tmp_path / "rank-log"
    d.mkdir()
    monkeypatch.setenv("MUSHIN_TEST_RANK_LOG", str(d))
    return d


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch: pytest.MonkeyPatch) -> None:
    # a test must not inherit rank/seed state from another test in the same process
    for name in (
        "MUSHIN_SEED_BASE",
        "MUSHIN_SEED_WORKERS",
        "MUSHIN_JOB_DIR",
        "MUSHIN_GLOBAL_RANK",
        "PL_GLOBAL_SEED",
        "PL_SEED_WORKERS",
        "RANK",
        "LOCAL_RANK",
        "WORLD_SIZE",
        "SLURM_PROCID",
        "SLURM_NTASKS",
        "SLURM_JOB_ID",
    ):
        if name in os.environ:
            monkeypatch.delenv(name)


def read_rank_logs(directory: Path) -> dict[int, list[dict[str, str]]]:
    """rank -> list of {key: value} records written by TinyModule."""
    out: dict[int, list[dict[str, str]]] = {}
    for f in sorted(directory.glob("rank*.log")):
        rank = int(f.stem[4:])
        out[rank] = [
            dict(part.split("=", 1) for part in line.split()) for line in f.read_text().splitlines()
        ]
    return out


def assert_same(actual: Any, expected: Any, *, key_order: bool = True) -> None:
    """Exact equality: same types (tuples become lists), nan == nan, -0.0 != 0.0."""
    if isinstance(expected, tuple):
        expected = list(expected)
    if isinstance(expected, float):
        assert type(actual) is float, (actual, expected)
        if math.isnan(expected):
            assert math.isnan(actual)
        else:
            assert actual == expected
            assert math.copysign(1.0, actual) == math.copysign(1.0, expected)
    elif isinstance(expected, list):
        assert type(actual) is list, (actual, expected)
        assert len(actual) == len(expected)
        for a, e in zip(actual, expected, strict=True):
            assert_same(a, e, key_order=key_order)
    elif isinstance(expected, dict):
        assert type(actual) is dict, (actual, expected)
        if key_order:
            assert list(actual) == list(expected)
        else:
            assert sorted(actual) == sorted(expected)
        for k in expected:
            assert_same(actual[k], expected[k], key_order=key_order)
    else:
        assert type(actual) is type(expected), (actual, expected)
        assert actual == expected


# ---------------------------------------------------------------------------- doctests


class DoctestFinder(doctest.DocTestFinder):
    """Also finds public classes and functions: they say ``__module__ = "mushin_box"``
    (stable config targets), which doctest's own check reads as "defined elsewhere"."""

    def _from_module(self, module: ModuleType | None, object: Any) -> bool:
        if inspect.isfunction(object) and object.__module__ == "mushin_box" and module is not None:
            return object.__globals__ is vars(module)
        if inspect.isclass(object) and object.__module__ == "mushin_box" and module is not None:
            methods = [getattr(v, "__func__", v) for v in vars(object).values()]
            functions = [f for f in methods if inspect.isfunction(f)]
            if not functions:  # a mixin on a base (HydraDDP): where its module defines it
                return (
                    module.__name__ != "mushin_box" and vars(module).get(object.__name__) is object
                )
            return functions[0].__globals__ is vars(module)
        return super()._from_module(module, object)  # pyright: ignore[reportAttributeAccessIssue]


def run_doctests(module: ModuleType) -> doctest.TestResults:
    """Run every docstring example of ``module`` (ELLIPSIS on), public names included."""
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS, verbose=False)
    for test in DoctestFinder().find(module, module.__name__):
        runner.run(test)
    return runner.summarize(verbose=False)


def real_apptainer() -> str | None:
    """Why there is no real Apptainer to test with (None: there is one on PATH). A stand-in
    says so in its ``--version``; tests marked ``apptainer`` need the real binary."""
    import shutil
    import subprocess

    found = shutil.which("apptainer")
    if found is None:
        return "no apptainer on PATH (these tests run the real binary where it is installed)"
    try:
        version = subprocess.run(
            [found, "--version"], capture_output=True, text=True, timeout=30
        ).stdout
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{found} --version failed: {exc}"
    if "stand" in version.lower():
        return f"{found} is a stand-in ({version.strip()}), not Apptainer"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    marked = [item for item in items if item.get_closest_marker("apptainer")]
    why = real_apptainer() if marked else None
    for item in marked if why else ():
        item.add_marker(pytest.mark.skip(reason=why))
