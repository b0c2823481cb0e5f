# SPDX-License-Identifier: MIT
"""The HTML report of a sweep, as text (the browser test is tests/cli/test_report_browser.py):
its table, curves, errors, provenance summary and diff, and that it fetches nothing."""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path

import pytest
from sweep_files import lr_sweep, write_cell, write_manifest

from mushin_box._core.sidecars import read_json, write_json_atomic
from mushin_box._results.markup import Line, line_plot
from mushin_box._results.report import provenance_summary, render_report
from mushin_box._results.table import ResultsError


def curves(page: str) -> dict[str, list[str]]:
    """{metric: [data-cell of each curve]} of a report page, in the plot shown first (a
    plot with a log-axis toggle holds both axes; the figure names the one shown)."""
    out: dict[str, list[str]] = {}
    figures = r'<figure class="plot" data-metric="([^"]+)" data-scale="([^"]+)">(.*?)</figure>'
    for metric, scale, body in re.findall(figures, page):
        shown = re.findall(rf'<svg [^>]*data-scale="{scale}".*?</svg>', body)
        assert len(shown) == 1, metric
        out[metric] = re.findall(r'<path class="curve" data-cell="([^"]+)"', shown[0])
    return out


def test_the_report_has_every_cell_a_curve_per_cell_and_the_errors(tmp_path: Path) -> None:
    page = render_report(lr_sweep(tmp_path), best="val_loss")
    rows = re.findall(r'<tr class="(best cell|cell)"><td>[^<]*</td><td>([^<]+)</td>', page)
    assert [label for _, label in rows] == ["lr=0.01", "lr=0.1", "lr=1.0"]
    assert [label for cls, label in rows if cls == "best cell"] == ["lr=0.1"]
    # one plot per series metric, one curve per cell that has it (the failed cell has none)
    assert curves(page) == {
        "fit.train_loss": ["lr=0.01", "lr=0.1"],
        "fit.val_loss": ["lr=0.01", "lr=0.1"],
    }
    # the NaN of epoch 1 breaks lr=0.1's val_loss curve in two
    val = re.search(r'data-metric="fit.val_loss".*?data-cell="lr=0.1" d="([^"]+)"', page)
    assert val is not None and val.group(1).count("M") == 2
    assert '<span class="state-failed">failed</span>' in page
    assert "lr=1.0 diverged &lt;at&gt; epoch 1" in page  # the error, escaped
    assert "mushin_error.txt" in page


def test_the_report_fetches_nothing(tmp_path: Path) -> None:
    page = render_report(lr_sweep(tmp_path))
    for pattern in (r"\bsrc=", r"\bhref=", r"url\(", r"<script", r"@import", r"<link\b"):
        assert not re.search(pattern, page), pattern
    assert "default-src 'none'" in page  # and the browser is told so


def test_the_provenance_summary_is_short_and_grouped(tmp_path: Path) -> None:
    page = render_report(lr_sweep(tmp_path))
    assert "all 3 cells" in page and "Every cell has the same identity" in page
    for text in ("0123456789ab (dirty)", "ffffffffffff (62 pkgs)", "1234", "1 node × 1 rank"):
        assert text in page, text
    record = read_json(tmp_path / "lr=0.1" / "mushin_provenance.json")
    record["run"]["topology"] = {"num_nodes": 2, "world_size": 8}
    write_json_atomic(tmp_path / "lr=0.1" / "mushin_provenance.json", record)
    page = render_report(tmp_path)
    assert "The cells differ: 2 identities" in page and "2 nodes × 8 ranks" in page
    assert provenance_summary(None)["code"] == "-"


def test_a_sweep_without_series_says_how_to_get_curves(tmp_path: Path) -> None:
    cell = write_cell(tmp_path, {"x": 1}, metrics={"loss": 1.0})
    write_manifest(tmp_path, {"x": [1]}, [cell])
    page = render_report(tmp_path)
    assert curves(page) == {} and "MetricsCallback" in page


def test_against_adds_the_diff_breaks_first(tmp_path: Path) -> None:
    a = lr_sweep(tmp_path / "a")
    b = tmp_path / "b"
    shutil.copytree(a, b)
    record = read_json(b / "lr=0.1" / "mushin_provenance.json")
    record["reproducibility"]["seed"]["base"] = 7
    record["run"]["pid"] = 43
    write_json_atomic(b / "lr=0.1" / "mushin_provenance.json", record)
    page = render_report(a, against=b)
    section = page[page.index("Reproducibility diff") :]
    assert "different experiments: reproducibility.seed.base" in section
    assert section.index("Metrics") < section.index("Breaks reproducibility (1)")
    assert "reproducibility.seed.base" in section
    # brief (the report's default): the expected differences are one line, counted by kind
    assert "run.pid" not in section and "Expected to differ: 1 field(s): 1 scheduler" in section
    assert "run.pid" in render_report(a, against=b, brief=False)


def test_a_best_metric_the_sweep_lacks_is_an_error_naming_the_metrics(tmp_path: Path) -> None:
    with pytest.raises(ResultsError, match="the metrics are: acc, val_loss"):
        render_report(lr_sweep(tmp_path), best="loss")


def test_a_plot_spans_its_values() -> None:
    svg = line_plot([Line("a", "#000", [0, 1, 2], [0.25, 4.337, 1.0])], xlabel="epoch")
    labels = [float(t) for t in re.findall(r'text-anchor="end">([^<]+)<', svg)]
    assert min(labels) <= 0.25 and max(labels) >= 4.337  # no point outside the axes
    assert svg.count("<circle") == 3


def _fake_slurm_clients(bin_dir: Path, calls: Path) -> dict[str, str]:
    bin_dir.mkdir()
    for tool in ("squeue", "sacct"):
        script = bin_dir / tool
        script.write_text(f'#!/bin/sh\necho {tool} >> "{calls}"\n')
        script.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}


def test_the_report_of_a_finished_sweep_asks_no_scheduler(tmp_path: Path) -> None:
    # a finished sweep's files say all there is: its old job ids (which SLURM may have
    # reused) are not asked about, and the report works where no cluster answers
    import json
    import shutil
    import subprocess

    from conftest import GOLDEN

    from mushin_box._slurm.submitted import record_submission

    sweep = tmp_path / "sweep"
    shutil.copytree(GOLDEN / "rooms-ii" / "sweep", sweep)
    record_submission(sweep, "slurm", [("4242", ["module.lr=0.05"])])
    calls = tmp_path / "calls"
    env = _fake_slurm_clients(tmp_path / "bin", calls)
    cli = [sys.executable, "-m", "mushin_box"]
    out = tmp_path / "report.html"
    done = subprocess.run(
        [*cli, "report", str(sweep), "-o", str(out)], env=env, capture_output=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert out.is_file() and not calls.exists()
    # the same sweep with a cell still running asks: the fake clients are really on PATH
    status = json.loads((sweep / "cell" / "mushin_status.json").read_text())
    status.update(status="running", slurm_job_id="4242_0", host="elsewhere")
    (sweep / "cell" / "mushin_status.json").write_text(json.dumps(status))
    subprocess.run([*cli, "status", str(sweep)], env=env, capture_output=True, timeout=120)
    assert "squeue" in calls.read_text()


def test_a_cell_without_a_provenance_record_is_left_out_and_a_corrupt_one_counted(
    tmp_path: Path,
) -> None:
    import warnings

    lr_sweep(tmp_path)
    (tmp_path / "lr=0.01" / "mushin_provenance.json").unlink()  # none yet
    page = render_report(tmp_path)
    assert "all 2 cells" in page and "Every cell has the same identity" in page
    (tmp_path / "lr=0.1" / "mushin_provenance.json").write_text('{"trunc')
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        page = render_report(tmp_path)
    assert "The cells differ: 2 identities" in page  # lr=0.1 unreadable, lr=1.0 whole
    assert any("corrupt sidecar" in str(w.message) for w in said)


def test_against_names_the_config_keys_that_differ_from_the_other_sweep(tmp_path: Path) -> None:
    from workflow_tasks import two_config_sweeps

    a, b = two_config_sweeps(tmp_path)
    page = render_report(a, against=b)
    section = page.split("Config that differs from b (--against)</h2>")[1].split("<h2>")[0]
    keys = [row.split("</td>")[0].rsplit(">", 1)[-1] for row in section.split("<tr")[2:]]
    assert keys == ["module.depth", "trainer.max_epochs"]  # not lr (swept), not width
    assert ">40<" in section and ">800<" in section
    assert "Config that differs" not in render_report(a)


def test_a_filter_on_a_key_the_other_sweep_does_not_sweep_keeps_its_cell(tmp_path: Path) -> None:
    # `report A --against B --where lr=0.1`: B runs lr=0.1 without sweeping it; its cell
    # stays in the comparison, as `show A B --where lr=0.1` keeps it
    from workflow_tasks import two_config_sweeps

    a, b = two_config_sweeps(tmp_path)
    page = render_report(a, against=b, where=["lr=0.1"])
    assert "Config that differs from b (--against)</h2>" in page
    assert "1 cell only in B" in page  # in the diff (B sweeps no lr: it pairs with none)
    # a value B's config does not hold: B's cell is left out of both
    page = render_report(a, against=b, where=["lr=0.01"])
    assert "Config that differs from b" not in page and "only in B" not in page
