# SPDX-License-Identifier: MIT
"""``mushin-box show`` and ``report`` on the README's example sweep (examples/sweep.py, one
rank per cell in this process), the report opened in headless Chromium, and the read-only
commands with torch unimportable."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
from browser import ReportPage, browse, chromium
from conftest import REPO

from mushin_box import Workflow, multirun
from mushin_box._core.sidecars import read_json
from mushin_box.cli.main import main

CELLS = ("module.lr=0.01", "module.lr=0.1")


@pytest.fixture(scope="module")
def readme_sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The README's sweep (2 cells, 3 epochs, MetricsCallback), each cell 1 rank here."""
    spec = importlib.util.spec_from_file_location("example_sweep", REPO / "examples/sweep.py")
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    sys.modules["example_sweep"] = example
    spec.loader.exec_module(example)
    root = tmp_path_factory.mktemp("readme-sweep")
    Workflow(example.train, example.Config, pre_call=example.seed_ranks).run(
        working_dir=root,
        progress=False,
        **{"trainer.devices": 1, "module.lr": multirun([0.01, 0.1])},
    )
    return root


def _lowest(root: Path, metric: str) -> str:
    values = {c: read_json(root / c / "mushin_metrics.json")[metric] for c in CELLS}
    return min(values, key=values.__getitem__)


def test_show_best_val_loss_marks_the_right_cell(
    readme_sweep: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    best = _lowest(readme_sweep, "val_loss")
    assert main(["show", str(readme_sweep), "--best", "val_loss", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["best"]["dir"] == best and data["best"]["goal"] == "min"
    assert [c["dir"] for c in data["cells"] if c["best"]] == [best]
    assert main(["show", str(readme_sweep), "--best", "val_loss"]) == 0
    text = capsys.readouterr().out
    assert f"★ best val_loss (lowest): {best} =" in text
    marked = [line for line in text.splitlines() if "★" in line and "completed" in line]
    assert len(marked) == 1 and best.split("=")[1] in marked[0]
    worst = next(c for c in CELLS if c != best)
    assert main(["show", str(readme_sweep), "--best", "val_loss:max", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["best"]["dir"] == worst


# ---------------------------------------------------------------------------- no torch

GUARD = """
import sys
class _NoTorch:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("torch", "pytorch_lightning", "lightning_fabric"):
            raise ImportError(f"{name} is blocked in this test")
sys.meta_path.insert(0, _NoTorch())
from mushin_box.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize(
    "args",
    [
        ["show", "{sweep}", "--best", "val_loss"],
        ["report", "{sweep}", "--against", "{sweep}", "-o", "{tmp}/r.html"],
        ["diff", "{sweep}", "{sweep}", "--md"],
    ],
    ids=["show", "report", "diff"],
)
def test_read_only_commands_run_with_torch_unimportable(
    readme_sweep: Path, tmp_path: Path, args: list[str]
) -> None:
    argv = [a.format(sweep=readme_sweep, tmp=tmp_path) for a in args]
    proc = subprocess.run(
        [sys.executable, "-c", GUARD, *argv], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-2000:]


# ---------------------------------------------------------------------------- browser


@pytest.mark.slow
def test_the_report_renders_in_headless_chromium(readme_sweep: Path, tmp_path: Path) -> None:
    chromium()
    report = readme_sweep / "report.html"  # kept, with its screenshot, beside the sweep
    assert main(["report", str(readme_sweep), "--best", "val_loss", "-o", str(report)]) == 0
    dom, requested = browse(report, tmp_path, "--dump-dom")
    assert requested == [], requested
    page = ReportPage()
    page.feed(dom)
    # one plot per series, one curve per cell, each through its 3 epochs
    assert sorted(page.plots) == ["fit.train_loss", "fit.val_loss"]
    for metric, drawn in page.plots.items():
        assert sorted(cell for cell, _ in drawn) == list(CELLS), metric
        for cell, d in drawn:
            assert d.startswith("M") and d.count("L") == 2, (metric, cell, d)
    # the table lists every cell, the best one marked
    assert [row[1] for _, row in page.rows] == list(CELLS)
    best = _lowest(readme_sweep, "val_loss")
    assert [row[1] for cls, row in page.rows if "best" in cls.split()] == [best]
    shot = readme_sweep / "report.png"
    _, requested = browse(report, tmp_path, f"--screenshot={shot}", "--window-size=1200,1600")
    assert requested == []
    png = shot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20_000  # not a blank page
    # the check above can fail: a page that fetches an image is caught
    leaky = tmp_path / "leaky.html"
    leaky.write_text('<html><body><img src="http://198.51.100.7/curve.png"></body></html>')
    _, requested = browse(leaky, tmp_path, "--dump-dom")
    assert requested == ["http://198.51.100.7/curve.png"]
