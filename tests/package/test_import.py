# SPDX-License-Identifier: MIT
from __future__ import annotations

import importlib.metadata
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import mushin_box


def test_import_loads_no_torch_or_lightning() -> None:
    code = (
        "import sys, mushin_box\n"
        "heavy = [m for m in ('torch', 'pytorch_lightning', 'lightning_fabric', 'submitit')"
        " if m in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_lazy_name_loads_lightning_on_use() -> None:
    code = (
        "import sys, mushin_box\n"
        "assert 'pytorch_lightning' not in sys.modules\n"
        "mushin_box.HydraDDP\n"
        "print('pytorch_lightning' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"


@pytest.mark.parametrize("name", mushin_box.__all__)
def test_every_public_name_resolves(name: str) -> None:
    assert getattr(mushin_box, name) is not None
    assert name in dir(mushin_box)


def test_unknown_attribute_is_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        mushin_box.nope  # noqa: B018


def test_no_top_level_mushin_package_shipped() -> None:
    # `mushin` belongs to another project on PyPI (mushin-py)
    files = importlib.metadata.files("mushin-box") or []
    tops = {str(f).split("/")[0] for f in files if not str(f).startswith(("..", "mushin_box-"))}
    assert not any(t == "mushin" or t.startswith("mushin.") for t in tops), tops
    from pathlib import Path

    assert not (Path(mushin_box.__file__).parents[1] / "mushin").exists()


def test_cli_help_loads_no_torch() -> None:
    code = (
        "import sys\n"
        "from mushin_box.cli.main import main\n"
        "try:\n"
        "    main(['--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "print([m for m in ('torch', 'pytorch_lightning') if m in sys.modules])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().endswith("[]"), out.stdout[-500:]
    assert "build" in out.stdout


_READER = """
import sys
from mushin_box.cli.main import main
try:
    code = main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
heavy = ("hydra", "hydra_zen", "omegaconf", "numpy", "xarray", "torch", "pytorch_lightning",
         "lightning", "submitit")
print(code, sorted({m.split(".")[0] for m in sys.modules} & set(heavy)))
"""


@pytest.mark.parametrize("command", ["status", "ls", "logs", "wait", "cancel"])
def test_the_commands_that_read_a_sweep_directory_import_nothing_heavy(
    command: str, tmp_path: Path
) -> None:
    # they run from any login node, many times a day: they read JSON and ask SLURM, no more
    # (scripts/check-imports bans these imports in _sweepdir; this checks what really loads)
    from conftest import GOLDEN

    shutil.copytree(GOLDEN / "rooms-ii" / "sweep", tmp_path / "sweep")
    target = str(tmp_path) if command == "ls" else str(tmp_path / "sweep")
    proc = subprocess.run(
        [sys.executable, "-c", _READER, command, target],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    code, loaded = proc.stdout.strip().splitlines()[-1].split(" ", 1)
    assert code in ("0", "None"), proc.stdout + proc.stderr  # it did its work on the sweep
    assert loaded == "[]", f"{command} imported {loaded}"
