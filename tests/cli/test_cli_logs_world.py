# SPDX-License-Identifier: MIT
"""``mushin-box logs`` of a cell of many ranks on several nodes (an index of the nodes, then
the output that matters), of a cell that has not started yet (``-f`` waits for it), and a
rank's own output (each of submitit's lines once)."""

from __future__ import annotations

import json
import logging
import logging.config
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from omegaconf import DictConfig, OmegaConf

from mushin_box._core.layout import STATUS_FILE
from mushin_box._core.sidecars import SidecarWarning, write_json_atomic
from mushin_box._sweepdir.manifest import SweepLock
from mushin_box.cli.main import main

NODES, PER_NODE = 4, 4


def _world(
    root: Path, ended: Mapping[int, str | None] | None = None, state: str = "completed"
) -> Path:
    """A cell of 16 ranks on 4 nodes as a SLURM job leaves it: each rank's submitit files
    (listed in the status) and its record of the node it ran on and how it ended."""
    cell, slurm = root / "lr=0.1", root / ".submitit" / "7"
    slurm.mkdir(parents=True)
    (cell / ".mushin" / "ranks").mkdir(parents=True)
    logs = {}
    ended = dict(ended or {})
    for rank in range(NODES * PER_NODE):
        out, err = slurm / f"7_{rank}_log.out", slurm / f"7_{rank}_log.err"
        out.write_text(f"r{rank} starts\n" + ("r0 fit ends\n" if rank == 0 else ""))
        how = ended.get(rank, "completed")
        err.write_text(f"r{rank} raised {how}\n" if how not in (None, "completed") else "")
        logs |= {f"rank{rank}.out": str(out), f"rank{rank}.err": str(err)}
        node = rank // PER_NODE
        row = {"rank": rank, "attempt": 1, "host": f"gpu{node + 1}", "node_rank": node}
        row |= {"local_rank": rank % PER_NODE} | ({"ended": how} if how else {})
        write_json_atomic(cell / ".mushin" / "ranks" / f"rank{rank}.json", row)
    record = {"combo": {"lr": 0.1}, "status": state, "attempt": 1, "logs": logs}
    write_json_atomic(cell / STATUS_FILE, record | {"host": "x", "pid": 1})
    return cell


def _logs(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str], str]:
    code = main(["logs", *args])
    captured = capsys.readouterr()
    return code, captured.out.splitlines(), captured.err


def test_a_cell_on_many_nodes_prints_an_index_then_rank_0(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _world(tmp_path)
    assert _logs([str(tmp_path)], capsys)[:2] == (
        0,
        [
            "lr=0.1 (completed): 16 ranks on 4 nodes",
            "  gpu1  ranks 0-3    completed  8 files, 5 lines, 52 bytes",
            "  gpu2  ranks 4-7    completed  8 files, 4 lines, 40 bytes",
            "  gpu3  ranks 8-11   completed  8 files, 4 lines, 42 bytes",
            "  gpu4  ranks 12-15  completed  8 files, 4 lines, 44 bytes",
            "below: the output of rank 0; a node's: --node NAME, a rank's: --rank R, "
            "every rank's: --all",
            "",
            "r0 starts",
            "r0 fit ends",
        ],
    )


def test_the_index_names_the_ranks_that_failed_and_prints_their_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _world(tmp_path, ended={9: "RuntimeError", 13: None}, state="failed")
    code, out, _ = _logs([str(tmp_path), "lr=0.1", "--tail", "1"], capsys)
    assert code == 0
    assert out[3:] == [
        "  gpu3  ranks 8-11   rank 9 RuntimeError; ranks 8,10-11 completed       "
        "8 files, 5 lines, 65 bytes",
        "  gpu4  ranks 12-15  ranks 12,14-15 completed; rank 13 no end recorded  "
        "8 files, 4 lines, 44 bytes",
        "below: the output of rank 0 and rank 9 (RuntimeError); a node's: --node NAME, "
        "a rank's: --rank R, every rank's: --all",
        "",
        "[rank 0] r0 fit ends",
        "[rank 9] r9 starts",
        "[rank 9] r9 raised RuntimeError",
    ]


def test_one_node_every_rank_and_an_unknown_node(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _world(tmp_path)
    code, out, _ = _logs([str(tmp_path), "--node", "gpu2"], capsys)
    assert (code, out) == (0, [f"[rank {r}] r{r} starts" for r in range(4, 8)])
    code, out, _ = _logs([str(tmp_path), "--all"], capsys)
    assert code == 0 and out == [
        line
        for r in range(16)
        for line in [f"[rank {r}] r{r} starts"] + (["[rank 0] r0 fit ends"] if r == 0 else [])
    ]
    code, out, err = _logs([str(tmp_path), "--node", "gpu22"], capsys)
    assert code == 2 and out == []
    assert err.strip().endswith(
        "no node gpu22 in " + str(tmp_path / "lr=0.1") + " (did you mean 'gpu2'?); give one of "
        "its nodes: gpu1, gpu2, gpu3, gpu4"
    )
    assert len(err.strip().splitlines()) == 1


def test_a_few_ranks_on_one_node_print_as_every_rank(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cell = _world(tmp_path)
    for rank in range(4, 16):  # ranks 0-3 on gpu1 alone
        (cell / ".mushin" / "ranks" / f"rank{rank}.json").unlink()
    status = cell / STATUS_FILE
    record = json.loads(status.read_text())
    record["logs"] = {k: v for k, v in record["logs"].items() if int(k[4:].split(".")[0]) < 4}
    write_json_atomic(status, record)
    code, out, _ = _logs([str(tmp_path)], capsys)
    assert (code, out) == (
        0,
        ["[rank 0] r0 starts", "[rank 0] r0 fit ends"]
        + [f"[rank {r}] r{r} starts" for r in (1, 2, 3)],
    )


def test_rank_records_through_a_symlink_are_not_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A cell's ``.mushin`` that leads out of it is not followed: its records (a host named
    by someone else) are not shown, and the ranks count as of no recorded node."""
    cell = _world(tmp_path / "sweep")
    (cell / ".mushin").rename(tmp_path / "elsewhere")
    for row in (tmp_path / "elsewhere" / "ranks").iterdir():
        write_json_atomic(row, {"rank": int(row.stem[4:]), "attempt": 1, "host": "planted"})
    (cell / ".mushin").symlink_to(tmp_path / "elsewhere")
    with pytest.warns(SidecarWarning, match="symbolic link, not followed"):
        code, out, _ = _logs([str(tmp_path / "sweep")], capsys)
    assert code == 0 and not any("planted" in line for line in out)
    assert out[1].split()[:3] == ["unrecorded", "ranks", "0-15"]


@pytest.fixture
def restored_logging() -> Iterator[None]:
    """The root logger and submitit's as they were: a rank's job configures both."""
    root, submitit = logging.getLogger(), logging.getLogger("submitit")
    handlers, level, propagate = list(root.handlers), root.level, submitit.propagate
    own = list(submitit.handlers)
    yield
    for handler in root.handlers:
        if handler not in handlers:
            handler.close()
    root.handlers[:], submitit.propagate = handlers, propagate
    submitit.handlers[:] = own
    root.setLevel(level)


def test_a_rank_prints_each_of_submitits_lines_once(
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    restored_logging: None,
) -> None:
    """A rank's job configures Hydra's job logging (a console handler on the root logger);
    submitit's end lines, logged after the job returns, reach stdout once, not once through
    submitit's own handler and again through the root's."""
    import hydra.core.utils
    import submitit
    from hydra.core.plugins import Plugins
    from hydra.core.singleton import Singleton
    from hydra.core.utils import JobReturn, JobStatus
    from submitit.core.logger import CONFIG, get_logger

    from mushin_box._slurm.launcher import CellJob

    # submitit's handlers as a rank's fresh process has them: on this test's stdout (an
    # earlier test's import bound them to the stream captured then)
    logging.config.dictConfig(CONFIG)

    conf = Path(hydra.__file__).parent / "conf" / "hydra" / "job_logging" / "default.yaml"
    job_logging = OmegaConf.load(conf)
    assert isinstance(job_logging, DictConfig)
    job_logging.handlers.file.filename = str(tmp_path / "job.log")

    def run_job(**_: Any) -> JobReturn:  # Hydra's: configure the job's logging, run the task
        hydra.core.utils.configure_log(job_logging)
        logging.getLogger("exp").info("the task ran")
        return JobReturn(status=JobStatus.COMPLETED, _return_value="ret")

    class Loader:
        def load_sweep_config(self, config: Any, overrides: list[str]) -> Any:
            return OmegaConf.create({"hydra": {"job": {}}})

    class Context:
        config_loader = Loader()

    class Environment:
        job_id = "7_0"
        global_rank = 0

    # Hydra's plugins import run_job by name, and a rescan of them (set_state's) runs them
    # again: scanned before run_job is replaced, and not again while it is
    Plugins.instance()
    monkeypatch.setattr(Singleton, "set_state", staticmethod(lambda state: None))
    monkeypatch.setattr(hydra.core.utils, "run_job", run_job)
    monkeypatch.setattr(submitit, "JobEnvironment", Environment)
    job = CellJob(Context(), OmegaConf.create({}), lambda cfg: None, ignore_signal=None)
    job([], "hydra.sweep.dir", 0, None)
    get_logger().info("Job completed successfully")  # as submitit, once the job returned
    out = capfd.readouterr().out
    assert out.count("the task ran") == 1
    assert out.count("Job completed successfully") == 1, out


def test_follow_waits_for_a_queued_cell_to_start_writing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``logs -f`` right after a launch: the cell is in the grid but has no status and no
    output yet (queued), while its driver holds the sweep; it waits, says so once, and
    prints what the cell writes once it starts, until the cell ends."""
    import mushin_box.cli.logs as cli_logs

    monkeypatch.setattr(cli_logs, "_POLL_S", 0.05)
    monkeypatch.setattr(cli_logs, "_LIVENESS_EVERY_S", 0.2)
    write_json_atomic(tmp_path / "mushin_sweep.json", {"grid": {"lr": [0.1]}, "cells": {}})
    driver = SweepLock(tmp_path).__enter__()
    cell = tmp_path / "lr=0.1"

    def the_cell_starts() -> None:
        time.sleep(0.6)
        running = {"combo": {"lr": 0.1}, "status": "running", "host": "x", "pid": 1}
        write_json_atomic(cell / STATUS_FILE, running)
        time.sleep(0.6)  # started, nothing written yet
        (cell / "job.log").write_text("first\n")
        time.sleep(0.6)
        with open(cell / "job.log", "a") as f:
            f.write("second\n")
        time.sleep(0.3)
        write_json_atomic(cell / STATUS_FILE, {**running, "status": "completed"})
        driver.__exit__()

    codes: list[int] = []
    starts = threading.Thread(target=the_cell_starts)
    follows = threading.Thread(
        target=lambda: codes.append(main(["logs", str(tmp_path), "lr=0.1", "-f"])), daemon=True
    )
    starts.start()
    follows.start()
    follows.join(timeout=60)
    starts.join()
    assert not follows.is_alive(), "logs -f did not end once the cell had ended"
    captured = capsys.readouterr()
    assert (codes, captured.out.splitlines()) == ([0], ["first", "second"])
    assert captured.err.count("waiting for it to start writing") == 1


def test_follow_does_not_wait_for_a_cell_nothing_will_start(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A cell not started in a sweep that no driver or job runs: the usual error, at once."""
    write_json_atomic(tmp_path / "mushin_sweep.json", {"grid": {"lr": [0.1]}, "cells": {}})
    code, out, err = _logs([str(tmp_path), "lr=0.1", "-f"], capsys)
    assert (code, out) == (2, [])
    assert "no started cell lr=0.1" in err and "waiting" not in err


def test_a_node_name_from_a_rank_record_is_shown_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A rank record is written by whoever can write in the cell: its host and its end
    cannot colour the terminal or forge a line of the index."""
    cell = _world(tmp_path)
    row = cell / ".mushin" / "ranks" / "rank5.json"
    hostile = {"host": "gpu\x1b[31m2", "ended": "E\nFAKE line", "node_rank": 1, "local_rank": 1}
    write_json_atomic(row, {"rank": 5, "attempt": 1, **hostile})
    code, out, _ = _logs([str(tmp_path)], capsys)
    assert code == 0 and not any("\x1b" in line or line.startswith("FAKE") for line in out)
    assert any(
        line.startswith("  gpu\\x1b[31m2  rank 5 ") and "E\\nFAKE line" in line for line in out
    )


def test_a_torchrun_cell_prints_the_node_file_that_holds_a_failed_rank(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Under SLURM torchrun a node's workers share one file, listed under the node's first
    rank: a rank that raised is shown through that file, and says so."""
    cell = _world(tmp_path, ended={9: "RuntimeError"}, state="failed")
    status = cell / STATUS_FILE
    record = json.loads(status.read_text())
    firsts = {f"rank{r}.out" for r in range(0, NODES * PER_NODE, PER_NODE)}
    record["logs"] = {k: v for k, v in record["logs"].items() if k in firsts}
    write_json_atomic(status, record)
    code, out, _ = _logs([str(tmp_path)], capsys)
    assert code == 0
    assert (
        out[3] == "  gpu3  ranks 8-11   rank 9 RuntimeError; ranks 8,10-11 completed  "
        "1 file, 1 line, 10 bytes"
    )
    assert out[5].startswith(
        "below: the output of rank 0 and rank 8 (holds rank 9's: RuntimeError); "
    )
    assert out[7:] == ["[rank 0] r0 starts", "[rank 0] r0 fit ends", "[rank 8] r8 starts"]
