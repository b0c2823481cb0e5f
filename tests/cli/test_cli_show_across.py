# SPDX-License-Identifier: MIT
"""``mushin-box show`` across sweeps (``show DIR1 DIR2``, ``show PARENT --all``: one table,
a sweep column, sorted and filtered across them) and ``--best``/``--sort`` from the
``MetricsCallback`` series when no cell returned the metric (issue 31, item 5)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from sweep_files import lr_sweep, write_cell, write_manifest

from mushin_box.cli.main import main


def _show(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    code = main(["show", *map(str, args)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _other(root: Path) -> Path:
    """A second lr sweep, other values: val_loss 0.05 (lr=0.3) and 0.5 (lr=3.0)."""
    cells = [
        write_cell(root, {"lr": 0.3}, metrics={"val_loss": 0.05, "acc": 0.9}),
        write_cell(root, {"lr": 3.0}, metrics={"val_loss": 0.5, "acc": 0.6}),
    ]
    write_manifest(root, {"lr": [0.3, 3.0]}, cells)
    return root


@pytest.fixture
def two(tmp_path: Path) -> tuple[Path, Path]:
    return lr_sweep(tmp_path / "runs" / "a"), _other(tmp_path / "runs" / "b")


def test_two_sweeps_are_one_table_sorted_across_both(
    two: tuple[Path, Path], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = two
    code, out, _ = _show(capsys, a, b, "--sort", "val_loss", "--best", "val_loss", "--json")
    assert code == 0
    data = json.loads(out)
    rows = [(c["sweep"], c["dir"], c["val_loss"]) for c in data["cells"]]
    # both sweeps' cells interleaved by val_loss, the failed cell (no value) last
    assert rows == [
        ("b", "lr=0.3", 0.05),
        ("a", "lr=0.1", 0.2),
        ("b", "lr=3.0", 0.5),
        ("a", "lr=0.01", 0.9),
        ("a", "lr=1.0", None),
    ]
    assert data["best"]["sweep"] == "b" and data["best"]["dir"] == "lr=0.3"
    assert [s["name"] for s in data["sweeps"]] == ["a", "b"]
    # the terminal table: a sweep column, a row per cell of both, in that order
    monkeypatch.setenv("COLUMNS", "160")
    code, out, _ = _show(capsys, a, b, "--sort", "val_loss:desc", "--best", "val_loss")
    assert code == 0
    lines = [line for line in out.splitlines() if "completed" in line or "failed" in line]
    order = ["a", "b", "a", "b", "a"]  # 0.9, 0.5, 0.2, 0.05, none
    assert [line.split("│")[2].strip() for line in lines if "│" in line] == order
    assert "★ best val_loss (lowest): b/lr=0.3 = 0.05" in out
    assert out.splitlines()[0].startswith("a ") and "2 completed, 1 failed" in out
    # too narrow for the table (or piped into one): a line per cell, never folded
    monkeypatch.setenv("COLUMNS", "60")
    _, out, _ = _show(capsys, a, b, "--sort", "val_loss:desc", "--best", "val_loss")
    lines = [line for line in out.splitlines() if " completed " in line or " failed " in line]
    assert [line.lstrip(" ★").split()[0] for line in lines] == order
    assert "lr=1.0 diverged <at> epoch 1" in lines[-1]


def test_where_filters_across_sweeps_and_md_csv_keep_working(
    two: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = two
    _, out, _ = _show(capsys, a, b, "--where", "sweep=b", "--json")
    assert [c["dir"] for c in json.loads(out)["cells"]] == ["lr=0.3", "lr=3.0"]
    _, out, _ = _show(capsys, a, b, "--where", "lr=0.1,3.0", "--md")
    assert out.splitlines()[0] == "|   | sweep | lr | state | acc | val\\_loss |"
    assert "| a | 0.1 | completed | 0.8 | 0.2 |" in out and "| b | 3.0 |" in out
    _, out, _ = _show(capsys, a, b, "--csv")
    assert out.splitlines()[0] == "sweep,dir,lr,state,acc,val_loss,error,best"
    assert len(out.splitlines()) == 1 + 5


def test_all_finds_every_sweep_under_a_directory(
    two: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _show(capsys, tmp_path / "runs", "--all", "--json")
    assert code == 0
    data = json.loads(out)
    assert [s["name"] for s in data["sweeps"]] == ["a", "b"]
    assert len(data["cells"]) == 5


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["{tmp}/runs"], "holds 2 sweep(s); show them in one table: mushin-box show"),
        (["{tmp}/runs/a", "{tmp}"], "is not a sweep directory"),
        (["{tmp}/empty", "--all"], "no sweep under"),
        (["{tmp}/runs/a", "{tmp}/nope"], "is not a directory"),
        (["{tmp}/runs/a", "{tmp}/runs/b", "--where", "sweep"], "expected KEY=VALUE"),
    ],
)
def test_a_directory_that_is_not_a_sweep_is_one_line_and_exit_2(
    two: tuple[Path, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    message: str,
) -> None:
    (tmp_path / "empty").mkdir()
    code, out, err = _show(capsys, *(a.format(tmp=tmp_path) for a in args))
    assert code == 2 and out == ""
    assert message in err and len(err.strip().splitlines()) == 1, err


# ---------------------------------------------------------------------------- series


@pytest.fixture
def series_only(tmp_path: Path) -> Path:
    """Cells that returned no metric but ``done``; their val_loss lives in the series only.
    lr=0.1 reaches the lowest val_loss (0.1) but ends high (0.9); lr=0.01 ends lowest."""
    root = tmp_path / "s"
    cells = [
        write_cell(
            root,
            {"lr": 0.01},
            metrics={"done": 1.0},
            series={"val_loss": [0.8, 0.6, 0.5], "acc": [0.5, 0.6, 0.7]},
        ),
        write_cell(
            root,
            {"lr": 0.1},
            metrics={"done": 1.0},
            series={"val_loss": [1.0, 0.1, 0.9], "acc": [0.4, 0.9, 0.5]},
        ),
        write_cell(root, {"lr": 1.0}, status="failed", error="diverged"),
    ]
    write_manifest(root, {"lr": [0.01, 0.1, 1.0]}, cells)
    return root


@pytest.mark.parametrize(
    ("best", "column", "goal", "expected"),
    [
        ("val_loss", "val_loss@last", "min", "lr=0.01"),  # the last epoch by default
        ("val_loss@min", "val_loss@min", "min", "lr=0.1"),  # the lowest over epochs
        ("val_loss@last:max", "val_loss@last", "max", "lr=0.1"),
        ("acc@max", "acc@max", "max", "lr=0.1"),  # @max implies the highest is best
        ("acc", "acc@last", "min", "lr=0.1"),  # 0.5 < 0.7: lowest, as asked
        ("fit.acc@max:min", "fit.acc@max", "min", "lr=0.01"),
    ],
)
def test_best_reads_the_series_when_no_cell_returned_the_metric(
    series_only: Path,
    capsys: pytest.CaptureFixture[str],
    best: str,
    column: str,
    goal: str,
    expected: str,
) -> None:
    code, out, err = _show(capsys, series_only, "--best", best, "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["best"]["metric"] == column and data["best"]["goal"] == goal
    assert data["best"]["dir"] == expected
    assert column in data["metrics"]
    assert [c[column] for c in data["cells"]][2] is None  # the failed cell has no series


def test_sort_reads_the_series_too(series_only: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = _show(capsys, series_only, "--sort", "val_loss@min", "--json")
    assert [c["dir"] for c in json.loads(out)["cells"]] == ["lr=0.1", "lr=0.01", "lr=1.0"]
    _, out, _ = _show(capsys, series_only, "--sort", "val_loss", "--json")
    assert [c["dir"] for c in json.loads(out)["cells"]] == ["lr=0.01", "lr=0.1", "lr=1.0"]
    code, out, _ = _show(capsys, series_only, "--sort", "val_loss@max:desc", "--best", "val_loss")
    assert code == 0
    assert "val_loss@max" in out and "val_loss@last" in out
    assert "★ best val_loss@last (lowest): lr=0.01 = 0.5" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--best", "val_loss@median"], "'median' is not a reduction of a series"),
        (["--best", "loss"], "nor a MetricsCallback series of that name; the series are: "),
        (["--sort", "done@min"], "no cell has a MetricsCallback series 'done'"),
    ],
)
def test_a_series_that_is_not_there_is_one_line_naming_the_series(
    series_only: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    code, out, err = _show(capsys, series_only, *args)
    assert code == 2 and out == ""
    assert message in err and len(err.strip().splitlines()) == 1, err
    if "loss" in args:
        assert "fit.acc, fit.val_loss" in err


def test_a_scalar_the_task_returned_wins_over_its_series(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # lr_sweep's cells return val_loss and log a series of it whose last value agrees,
    # except the scalar is what the task decided: the scalar is used
    sweep = lr_sweep(tmp_path)
    _, out, _ = _show(capsys, sweep, "--best", "val_loss", "--json")
    assert json.loads(out)["best"]["metric"] == "val_loss"


_READER = """
import sys
from mushin_box.cli.main import main
code = main(sys.argv[1:])
heavy = ("hydra", "omegaconf", "numpy", "xarray", "torch", "pytorch_lightning", "lightning")
print(code, sorted({m.split(".")[0] for m in sys.modules} & set(heavy)))
"""


@pytest.mark.parametrize("command", ["show", "report"])
def test_show_and_report_across_series_import_nothing_heavy(
    series_only: Path, two: tuple[Path, Path], tmp_path: Path, command: str
) -> None:
    # read from login nodes many times a day: JSON only (the series too), no numpy/xarray
    a, b = two
    args = {
        "show": ["show", str(series_only), str(a), str(b), "--best", "val_loss@min"],
        "report": ["report", str(series_only), "--best", "val_loss@min", "--against", str(a)],
    }[command]
    proc = subprocess.run(
        [sys.executable, "-c", _READER, *args], capture_output=True, text=True, timeout=120
    )
    assert proc.stdout.strip().splitlines()[-1] == "0 []", proc.stdout + proc.stderr


def test_across_sweeps_every_config_key_that_differs_is_a_column_with_its_values(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # two sweeps that differ by values neither sweeps: the cell that trained 800 epochs
    # must not look like it won by its learning rate, nor B's lr read "-"
    from workflow_tasks import two_config_sweeps

    a, b = two_config_sweeps(tmp_path)
    capsys.readouterr()  # what the runs printed
    code, out, _ = _show(capsys, a, b, "--json")
    assert code == 0
    rows = {(c["sweep"], c["dir"]): c for c in json.loads(out)["cells"]}
    wanted = {"lr", "module.depth", "trainer.max_epochs"}  # module.width is the same
    assert wanted <= set(rows["b", "cell"]) and "module.width" not in rows["b", "cell"]
    assert rows["b", "cell"]["lr"] == 0.1  # its default, as its record holds it
    assert (rows["b", "cell"]["trainer.max_epochs"], rows["b", "cell"]["module.depth"]) == (800, 3)
    assert [rows["a", d]["trainer.max_epochs"] for d in ("lr=0.1", "lr=0.01")] == [40, 40]
    # --json: the whole config each row ran; --params all: every key a column
    assert rows["b", "cell"]["config"]["module.width"] == 8
    assert rows["a", "lr=0.01"]["config"]["lr"] == 0.01
    _, out, _ = _show(capsys, a, "--params", "all", "--json")
    assert {"module.width", "trainer.max_epochs"} <= set(json.loads(out)["cells"][0])
    monkeypatch.setenv("COLUMNS", "200")
    _, out, _ = _show(capsys, a, b, "--best", "val_loss", "--where", "trainer.max_epochs=800")
    assert "max_epochs" in out and "800" in out and "40" not in out.split("★")[0]


def test_where_takes_a_parameter_by_the_short_name_status_shows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cells = [
        write_cell(tmp_path / "s", {"module.lr": lr}, metrics={"val_loss": lr})
        for lr in (0.1, 0.01)
    ]
    write_manifest(tmp_path / "s", {"module.lr": [0.1, 0.01]}, cells)
    code, out, err = _show(capsys, tmp_path / "s", "--where", "lr=0.01", "--json")
    assert code == 0, err
    assert [c["dir"] for c in json.loads(out)["cells"]] == ["module.lr=0.01"]


def test_a_limit_a_resume_raised_for_some_cells_is_a_column_with_each_cells_value(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # `resume DIR --set trainer.max_epochs=900`, cancelled after its first cell: that cell's
    # status and record hold 900, its sibling's 40. The winner must not look like it won
    # by its lr
    from mushin_box._core.sidecars import read_json, write_json_atomic
    from mushin_box._sweepdir.manifest import cell_records, rebuild_manifest

    root = tmp_path / "s"
    cells = [
        write_cell(root, {"lr": lr}, metrics={"val_loss": loss})
        for lr, loss in ((0.01, 0.5), (0.1, 0.2))
    ]
    for cell, epochs in zip(cells, (40, 900), strict=True):
        status = read_json(cell / "mushin_status.json")
        write_json_atomic(
            cell / "mushin_status.json", {**status, "limits": {"trainer.max_epochs": epochs}}
        )
        record = read_json(cell / "mushin_provenance.json")
        record["reproducibility"]["config"]["trainer"] = {"max_epochs": epochs}
        write_json_atomic(cell / "mushin_provenance.json", record)
    monkeypatch.setenv("COLUMNS", "160")
    for read in ("the status files", "the manifest of the finished sweep"):
        if read != "the status files":
            rebuild_manifest(root, list(cell_records(root)))
        code, out, err = _show(capsys, root, "--json")
        assert code == 0, err
        assert [(c["dir"], c.get("trainer.max_epochs")) for c in json.loads(out)["cells"]] == [
            ("lr=0.01", 40),
            ("lr=0.1", 900),
        ], read
        _, out, _ = _show(capsys, root, "--best", "val_loss")
        winner = next(line for line in out.splitlines() if "│ ★" in line)  # the best row
        assert "max_epochs" in out and "900" in winner, out
    # the same limit in every cell is no column: nothing differs
    _, out, _ = _show(capsys, lr_sweep(tmp_path / "plain"), "--json")
    assert "trainer.max_epochs" not in json.loads(out)["cells"][0]


def test_a_cell_of_an_earlier_grid_keeps_its_swept_values_in_the_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # `launch --resume` with other swept keys: the grid has none now, the old cells their lr
    root = tmp_path / "s"
    cells = [write_cell(root, {"lr": lr}, metrics={"val_loss": lr}) for lr in (0.1, 0.01)]
    cells.append(write_cell(root, {}, metrics={"val_loss": 0.5}))
    write_manifest(root, {}, cells)
    code, out, err = _show(capsys, root, "--json")
    assert code == 0, err
    rows = {c["dir"]: c.get("lr") for c in json.loads(out)["cells"]}
    assert rows == {"lr=0.1": 0.1, "lr=0.01": 0.01, "cell": None}
