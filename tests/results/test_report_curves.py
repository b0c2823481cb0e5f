# SPDX-License-Identifier: MIT
"""The report's pictures, as text (issue 31, item 5): a log axis when a plot spans more than
100×, with a toggle; the best cell bold and the others faded; short labels; hover values;
``--against`` overlaid dashed; a heatmap of a 2-parameter grid; the page written into the
sweep directory by default. The browser test is tests/cli/test_cli_report_browser.py."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from sweep_files import grid_sweep, lr_sweep, write_cell, write_manifest

from mushin_box._results.report import render_report
from mushin_box.cli.main import main


def figure(page: str, metric: str) -> str:
    found = re.search(rf'<figure class="plot" data-metric="{re.escape(metric)}".*?</figure>', page)
    assert found is not None, metric
    return found.group(0)


def shown_svg(fig: str) -> str:
    scale = re.search(r'data-scale="(\w+)"', fig)
    assert scale is not None
    (svg,) = re.findall(rf'<svg [^>]*data-scale="{scale.group(1)}".*?</svg>', fig)
    return svg


def test_a_plot_spanning_over_100x_opens_on_a_log_axis_with_a_toggle(tmp_path: Path) -> None:
    page = render_report(grid_sweep(tmp_path / "g"))
    val = figure(page, "fit.val_loss")
    assert 'data-scale="log"' in val.split(">", 1)[0]
    assert re.search(r'<input type="checkbox" class="logy" id="[^"]+" checked>', val)
    assert val.count("<svg ") == 2  # the linear axis is one click away
    ticks = re.findall(r'text-anchor="end">([^<]+)<', shown_svg(val))
    assert ticks == ["0.01", "0.1", "1", "10", "100", "1000", "10000"]
    # the README-sized sweep spans 10×: linear, the toggle unchecked
    small = figure(render_report(lr_sweep(tmp_path / "lr")), "fit.val_loss")
    assert 'data-scale="linear"' in small.split(">", 1)[0]
    assert re.search(r'class="logy" id="[^"]+">', small)


def test_a_plot_with_a_value_at_or_below_zero_has_no_log_toggle(tmp_path: Path) -> None:
    root = tmp_path / "z"
    cells = [
        write_cell(root, {"lr": lr}, metrics={}, series={"delta": [-1.0, 0.0, 500.0 * lr]})
        for lr in (0.1, 1.0)
    ]
    write_manifest(root, {"lr": [0.1, 1.0]}, cells)
    fig = figure(render_report(root), "fit.delta")
    assert "logy" not in fig and fig.count("<svg ") == 1


def test_the_best_cell_is_bold_the_others_faded_with_short_labels(tmp_path: Path) -> None:
    page = render_report(grid_sweep(tmp_path / "g"), best="val_loss@min")
    paths = re.findall(r'<path class="curve" ([^>]*)>', shown_svg(figure(page, "fit.val_loss")))
    styles = {
        re.search(r'data-cell="([^"]+)"', p).group(1): (  # type: ignore[union-attr]
            re.search(r'stroke-width="([^"]+)"', p).group(1),  # type: ignore[union-attr]
            re.search(r'stroke-opacity="([^"]+)"', p).group(1),  # type: ignore[union-attr]
        )
        for p in paths
    }
    # short labels: only the parameters that vary, as a person writes them
    assert sorted(styles) == [f"hidden={h} lr={lr}" for h in (16, 64) for lr in (0.1, 1.0)]
    assert styles.pop("hidden=64 lr=0.1") == ("3.5", "1")
    assert set(styles.values()) == {("1.5", "0.3")}
    # drawn last, over the others
    assert 'data-cell="hidden=64 lr=0.1"' in paths[-1]
    # hover: every point holds its value
    assert "<title>hidden=64 lr=0.1 · epoch 3: 0.05</title>" in page
    # without --best nothing is faded
    plain = render_report(tmp_path / "g")
    assert 'stroke-opacity="0.3"' not in plain and 'stroke-width="3.5"' not in plain


def test_against_overlays_the_other_sweep_dashed_in_matching_colours(tmp_path: Path) -> None:
    mine, other = grid_sweep(tmp_path / "mine"), grid_sweep(tmp_path / "other", shift=0.02)
    page = render_report(mine, against=other)
    svg = shown_svg(figure(page, "fit.val_loss"))
    own = dict(re.findall(r'<path class="curve" data-cell="([^"]+)"[^>]* stroke="([^"]+)"', svg))
    theirs = re.findall(
        r'<path class="curve against" data-cell="([^"]+)"[^>]*data-sweep="other"[^>]* '
        r'stroke="([^"]+)"[^>]*stroke-dasharray',
        svg,
    )
    assert len(theirs) == 4 and dict(theirs) == own  # same values, same colour
    assert "Reproducibility diff" in page  # the diff is still there
    assert "curve against" not in render_report(mine)


def test_a_two_parameter_grid_gets_a_heatmap(tmp_path: Path) -> None:
    page = render_report(grid_sweep(tmp_path / "g"), best="val_loss@min")
    heat = re.search(r'<figure class="heatmap" data-metric="val_loss@min">.*?</figure>', page)
    assert heat is not None
    squares = re.findall(
        r'<rect class="heat" [^>]*data-row="([^"]+)" data-column="([^"]+)" '
        r'data-value="([^"]+)"( data-best="1")?',
        heat.group(0),
    )
    assert sorted((r, c, v, bool(b)) for r, c, v, b in squares) == [
        ("16", "0.1", "0.45", False),
        ("16", "1.0", "10", False),
        ("64", "0.1", "0.05", True),
        ("64", "1.0", "1.1", False),
    ]
    assert ">0.05</text>" in heat.group(0)  # the value printed in its square
    # colour-scaled: the four squares have four colours
    assert len(set(re.findall(r'class="heat" [^>]*fill="(#[0-9a-f]{6})"', heat.group(0)))) == 4
    # one swept parameter: no heatmap
    assert 'class="heatmap"' not in render_report(lr_sweep(tmp_path / "lr"))


def test_report_writes_into_the_sweep_directory_by_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    sweep = grid_sweep(tmp_path / "g")
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert main(["report", str(sweep)]) == 0
    assert (sweep / "report.html").read_text().startswith("<!DOCTYPE html>")
    assert list(elsewhere.iterdir()) == []
    assert f"wrote {sweep / 'report.html'}" in capsys.readouterr().err
    # again: the earlier page is replaced; a file of the user's there is not
    assert main(["report", str(sweep)]) == 0
    (sweep / "report.html").write_text("my notes")
    assert main(["report", str(sweep)]) == 2
    assert (sweep / "report.html").read_text() == "my notes"
    assert "is not a report mushin-box wrote" in capsys.readouterr().err
