# SPDX-License-Identifier: MIT
"""Every reader against hostile sidecars: a sweep directory is untrusted input.

A finished 2-cell sweep is written file by file (no run). For each (sidecar, hostile kind),
one file of it is replaced, and each command that reads that file runs as a subprocess,
bounded in time (``_TIMEOUT_S``) and address space (``_MEMORY``, so that a read of
``/dev/zero`` fails fast instead of eating the machine). Each must end with 0, 1 or 2 and no
traceback, change nothing in the sweep directory, never show what a symlink points at, and
say in a line of its error output which file it refused.
"""

from __future__ import annotations

import json
import os
import re
import resource
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from sweep_files import write_cell, write_manifest

from mushin_box._core.sidecars import canonical_dumps, write_json_atomic

_TIMEOUT_S = 60
_MEMORY = 2 << 30
_HUGE = 2 << 30  # sparse: costs no disk
_SECRET = "OUTSIDE_SECRET_7f3a"
_OK, _FAILED = "lr=0.01", "lr=1.0"  # the completed cell, the failed one

# ---------------------------------------------------------------------------- the sweep


def _sweep(root: Path) -> Path:
    """Two cells (one completed, with metrics, series and rank logs; one failed, with its
    traceback), the manifest, and the jobs of a finished SLURM submission."""
    ok = write_cell(
        root,
        {"lr": 0.01},
        metrics={"val_loss": 0.9, "acc": 0.5},
        series={"train_loss": [2.0, 1.5, 1.2], "val_loss": [1.8, 1.2, 0.9]},
    )
    failed = write_cell(root, {"lr": 1.0}, status="failed", error="lr=1.0 diverged")
    (failed / "mushin_error.txt").write_text("ValueError: lr=1.0 diverged\n")
    (ok / "logs").mkdir()
    (ok / "logs" / "rank1.log").write_text("rank 1 says hello\n")
    (ok / "task.log").write_text("rank 0 says hello\n")
    write_manifest(root, {"lr": [0.01, 1.0]}, [ok, failed])
    jobs = [{"job_id": "999999990_0", "overrides": ["lr=0.01"]}]
    record = {"schema": 1, "cluster": "slurm", "host": socket.gethostname(), "jobs": jobs}
    write_json_atomic(root / "mushin_jobs.json", {**record, "detached": True})
    return root


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _sweep(tmp_path_factory.mktemp("pristine") / "sweep")


@pytest.fixture(scope="module")
def stand_ins(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """scancel, squeue and sacct that answer nothing (exit 0: a failing squeue means
    "unknown", not "ended"): no test here reaches a scheduler."""
    bin_dir = tmp_path_factory.mktemp("bin")
    for name in ("scancel", "squeue", "sacct", "sbatch"):
        (bin_dir / name).write_text("#!/bin/sh\nexit 0\n")
        (bin_dir / name).chmod(0o755)
    return bin_dir


# ---------------------------------------------------------------------------- hostile kinds


def _numbers_as_text(value: object) -> object:
    if isinstance(value, dict):
        return {k: _numbers_as_text(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_numbers_as_text(v) for v in value]
    if isinstance(value, bool | int | float):
        return f"{value}x"
    return value


def _outside(file: Path, original: bytes) -> None:
    """A link to a file elsewhere that looks right, with a secret in it."""
    target = Path(os.environ["HOSTILE_OUTSIDE"]) / f"target-{file.name}"
    if original.startswith(b"{"):
        target.write_bytes(original.rstrip(b"}\n") + f',"{_SECRET}":1}}\n'.encode())
    else:
        target.write_bytes(original + _SECRET.encode() + b"\n")
    file.symlink_to(target)


def _loop(file: Path, original: bytes) -> None:
    (file.parent / f".{file.name}.loop").symlink_to(file)
    file.symlink_to(file.parent / f".{file.name}.loop")


def _huge(file: Path, original: bytes) -> None:
    with open(file, "wb") as f:
        f.write(original)
        f.truncate(_HUGE)


HOSTILE: dict[str, Callable[[Path, bytes], object]] = {
    "symlink-to-dev-zero": lambda f, _: f.symlink_to("/dev/zero"),
    "symlink-outside": _outside,
    "symlink-loop": _loop,
    "fifo": lambda f, _: os.mkfifo(f),
    "huge": _huge,
    "binary": lambda f, _: f.write_bytes(bytes(range(256)) * 64),
    "truncated": lambda f, data: f.write_bytes(data[: len(data) // 2]),
    "list": lambda f, data: f.write_bytes(b"[" + data.rstrip(b"\n") + b",1]\n"),
    "numbers-as-text": lambda f, data: f.write_bytes(
        canonical_dumps(_numbers_as_text(json.loads(data)))
    ),
}
#: kinds that make no sense for a file of text (a log, a traceback)
_JSON_ONLY = ("truncated", "list", "numbers-as-text")

# ---------------------------------------------------------------------------- readers

_LOAD = (
    "import sys\n"
    "from mushin_box import load_experiment\n"
    "try:\n"
    "    print(load_experiment(sys.argv[1]))\n"
    "except (ValueError, OSError) as exc:\n"  # its documented refusals: one line, exit 2
    "    print(f'load_experiment: {exc}', file=sys.stderr)\n"
    "    sys.exit(2)\n"
)

READERS: dict[str, Callable[[Path, Path], list[str]]] = {
    "status": lambda d, out: ["-m", "mushin_box", "status", str(d)],
    "show": lambda d, out: ["-m", "mushin_box", "show", str(d)],
    "report": lambda d, out: ["-m", "mushin_box", "report", str(d), "-o", str(out / "r.html")],
    "wait": lambda d, out: [
        *("-m", "mushin_box", "wait", str(d)),
        *("--timeout", "20", "--interval", "1", "--no-progress"),
    ],
    "ls": lambda d, out: ["-m", "mushin_box", "ls", str(d.parent)],
    "logs": lambda d, out: ["-m", "mushin_box", "logs", str(d), _OK],
    "logs-tail": lambda d, out: ["-m", "mushin_box", "logs", str(d), _OK, "--tail", "5"],
    "diff": lambda d, out: ["-m", "mushin_box", "diff", str(d), str(d)],
    "cancel": lambda d, out: ["-m", "mushin_box", "cancel", str(d)],
    "load_experiment": lambda d, out: ["-c", _LOAD, str(d)],
}

# sidecar (its path in the sweep) -> the readers that read it
SIDECARS: dict[str, tuple[str, tuple[str, ...]]] = {
    "status": (f"{_OK}/mushin_status.json", ("status", "wait", "logs", "cancel")),
    "metrics": (f"{_OK}/mushin_metrics.json", ("show", "ls", "load_experiment")),
    "provenance": (f"{_OK}/mushin_provenance.json", ("show", "diff", "report")),
    "jobs": ("mushin_jobs.json", ("status", "wait", "cancel")),
    "manifest": ("mushin_sweep.json", ("status", "ls", "load_experiment", "show", "report")),
    "series": (f"{_OK}/fit_metrics.json", ("report", "load_experiment")),
    "series-pt": (f"{_OK}/fit_metrics.pt", ("load_experiment",)),
    "error": (f"{_FAILED}/mushin_error.txt", ("report", "show")),
    "rank-log": (f"{_OK}/logs/rank1.log", ("logs", "logs-tail")),
}
_TEXT = ("series-pt", "error", "rank-log")
#: (sidecar, kind) pairs where the reader may use the file without a word: a log or a
#: traceback is read from its end, whatever its size or bytes; text where a metric's number
#: was is a metric of text (an optimizer's name)
_QUIET = {("error", "huge"), ("error", "binary"), ("rank-log", "huge"), ("rank-log", "binary")}
_QUIET |= {("metrics", "numbers-as-text")}
#: a provenance record and a submission are shown as they are (text is text), not used
_QUIET |= {("provenance", "numbers-as-text"), ("jobs", "numbers-as-text")}
#: (sidecar, reader) pairs where the reader only names the file, never reads it: it must
#: survive, and say nothing of what it points at
_NAMES_ONLY = {("error", "show")}

CASES = [
    (sidecar, kind)
    for sidecar in SIDECARS
    for kind in HOSTILE
    # a .pt of garbage is torch's to refuse (tests/results), and torch is too big for _MEMORY
    if not (kind in _JSON_ONLY and sidecar in _TEXT) and (sidecar, kind) != ("series-pt", "binary")
]


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (_MEMORY, _MEMORY))


def _run(args: list[str], bin_dir: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    env["COLUMNS"] = "200"
    try:
        return subprocess.run(
            [sys.executable, *args],
            capture_output=True,
            text=True,
            timeout=_TIMEOUT_S,
            preexec_fn=_limit_memory,
            env=env,
            cwd=cwd,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"{' '.join(args[:4])} did not end within {_TIMEOUT_S} s")


def _snapshot(root: Path) -> dict[str, tuple[int, int, int]]:
    out = {}
    for current, dirs, files in os.walk(root):
        for name in [*dirs, *files]:
            st = os.lstat(os.path.join(current, name))
            out[os.path.relpath(os.path.join(current, name), root)] = (
                st.st_mode,
                st.st_size,
                st.st_mtime_ns,
            )
    return out


@pytest.mark.parametrize(("sidecar", "kind"), CASES, ids=[f"{s}-{k}" for s, k in CASES])
def test_a_hostile_sidecar_is_refused_in_one_line(
    sidecar: str,
    kind: str,
    pristine: Path,
    stand_ins: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    root = tmp_path / "parent" / "sweep"
    shutil.copytree(pristine, root, symlinks=True)
    relative, readers = SIDECARS[sidecar]
    file = root / relative
    original = file.read_bytes() if file.exists() else b"{}"
    if sidecar == "series-pt":
        (root / _OK / "fit_metrics.json").unlink()  # the .pt is read when no JSON twin is
    file.unlink(missing_ok=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    monkeypatch.setenv("HOSTILE_OUTSIDE", str(outside))
    HOSTILE[kind](file, original)
    out = tmp_path / "out"
    out.mkdir()
    before = _snapshot(root)
    with ThreadPoolExecutor(max_workers=2) as pool:
        done = list(
            pool.map(lambda r: (r, _run(READERS[r](root, out), stand_ins, tmp_path)), readers)
        )
    problems = []
    for reader, result in done:
        said = result.stdout + result.stderr
        report = out / "r.html"
        if reader == "report" and report.exists():
            said += report.read_text(errors="replace")
        if result.returncode not in (0, 1, 2) or "Traceback (most recent call last)" in (
            result.stderr
        ):
            problems.append(f"{reader}: exit {result.returncode}\n{result.stderr[-3000:]}")
        elif _SECRET in said:
            problems.append(f"{reader}: showed what the symlink {relative} points at")
        elif (
            (sidecar, kind) not in _QUIET
            and (sidecar, reader) not in _NAMES_ONLY
            and not any(file.name in line for line in result.stderr.splitlines())
        ):
            problems.append(f"{reader}: no line names {relative}\n{result.stderr[-2000:]}")
    assert not problems, "\n".join(problems)
    assert _snapshot(root) == before


def _readers(
    names: tuple[str, ...], root: Path, stand_ins: Path, tmp_path: Path
) -> dict[str, tuple[subprocess.CompletedProcess[str], str]]:
    """Each reader's result, and all it said (its output, and the report it wrote)."""
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    results = {}
    for name in names:
        result = _run(READERS[name](root, out), stand_ins, tmp_path)
        said = result.stdout + result.stderr
        if name == "report" and (out / "r.html").exists():
            said += (out / "r.html").read_text(errors="replace")
        assert result.returncode in (0, 1, 2), f"{name}: {result.stderr[-3000:]}"
        assert "Traceback (most recent call last)" not in result.stderr, result.stderr
        results[name] = (result, said)
    return results


def test_a_cell_linked_out_of_the_sweep_is_not_read(
    pristine: Path, stand_ins: Path, tmp_path: Path
) -> None:
    root = tmp_path / "parent" / "sweep"
    shutil.copytree(pristine, root, symlinks=True)
    elsewhere = write_cell(tmp_path / "elsewhere", {"lr": 0.5}, metrics={_SECRET: 1.0})
    (root / "lr=0.5").symlink_to(elsewhere, target_is_directory=True)
    before = _snapshot(root)
    readers = ("status", "show", "report", "diff", "load_experiment")
    for name, (result, said) in _readers(readers, root, stand_ins, tmp_path).items():
        assert _SECRET not in said, f"{name} read the cell the link leads to"
        assert any("lr=0.5" in line and "link" in line for line in result.stderr.splitlines())
    assert _snapshot(root) == before


def test_logs_read_no_file_a_status_names_outside_the_sweep(
    pristine: Path, stand_ins: Path, tmp_path: Path
) -> None:
    root = tmp_path / "parent" / "sweep"
    shutil.copytree(pristine, root, symlinks=True)
    outside = tmp_path / "outside"
    (outside / "7").mkdir(parents=True)
    for secret in (outside / "shadow", outside / "7" / "7_1_log.out"):
        secret.write_text(f"{_SECRET}\n")
    (root / ".submitit").symlink_to(outside, target_is_directory=True)  # a linked folder
    status = root / _OK / "mushin_status.json"
    record = json.loads(status.read_text())
    record["logs"] = {
        "rank0.out": str(outside / "shadow"),  # a file anywhere (/etc/shadow)
        "rank1.out": str(root / ".submitit" / "7" / "7_1_log.out"),
        "rank2.out": f"{root}/{_OK}/../../../outside/shadow",
    }
    write_json_atomic(status, record)
    before = _snapshot(root)
    for name, (result, said) in _readers(("logs", "logs-tail"), root, stand_ins, tmp_path).items():
        assert _SECRET not in said, f"{name} printed a file outside the sweep"
        refused = [line for line in result.stderr.splitlines() if "outside the sweep" in line]
        assert len(refused) == 3, result.stderr
        assert "rank 0 says hello" in result.stdout  # the cell's own log is still shown
    assert _snapshot(root) == before


def test_a_running_status_that_names_no_owner_ends(
    pristine: Path, stand_ins: Path, tmp_path: Path
) -> None:
    """A status that says ``running`` and names no process or job is not shown running
    forever, and ``wait`` does not wait for it."""
    root = tmp_path / "parent" / "sweep"
    shutil.copytree(pristine, root, symlinks=True)
    status = root / _OK / "mushin_status.json"
    write_json_atomic(status, {"combo": {"lr": 0.01}, "status": "running", "attempt": 1})
    before = _snapshot(root)
    results = _readers(("status", "wait"), root, stand_ins, tmp_path)
    for name, (result, _) in results.items():
        counts = [line for line in result.stdout.splitlines() if f"{root}: " in line]
        assert counts, f"{name}: {result.stdout}"
        assert "running" not in counts[0].split(f"{root}: ")[1], f"{name}: {counts[0]}"
        assert re.search(r"^\S+ +running\b", result.stdout, re.M) is None, result.stdout
    assert _snapshot(root) == before


def test_an_old_jobs_pt_series_is_read_only_when_it_is_a_regular_file(tmp_path: Path) -> None:
    """A job written before the JSON twin: its ``fit_metrics.pt`` loads (torch reads the
    file that was checked); a link to one, or garbage, is a ValueError naming it."""
    torch = pytest.importorskip("torch")
    from mushin_box import load_experiment

    job, elsewhere = tmp_path / "job", tmp_path / "elsewhere.pt"
    job.mkdir()
    torch.save({"epoch": [0, 1], "loss": [1.0, 0.5]}, job / "fit_metrics.pt")
    assert load_experiment(job)["fit.loss"].values.tolist() == [1.0, 0.5]
    (job / "fit_metrics.pt").rename(elsewhere)
    (job / "fit_metrics.pt").symlink_to(elsewhere)
    with pytest.raises(ValueError, match=r"fit_metrics\.pt is unreadable \(a symbolic link"):
        load_experiment(job)
    (job / "fit_metrics.pt").unlink()
    (job / "fit_metrics.pt").write_bytes(bytes(range(256)) * 4)
    with pytest.raises(ValueError, match=r"fit_metrics\.pt is not a MetricsCallback file"):
        load_experiment(job)
