# SPDX-License-Identifier: MIT
"""``scripts/gpu-check`` on its no-GPU path (CI has no GPU), its flags, and the parts of it
that need no GPU: the runner's verdicts and its deadline, and the report it writes.

The GPU itself is never faked: the checks' CUDA, bf16 and NCCL paths run only on a machine
that has one (docs/gpu.md). ``CUDA_VISIBLE_DEVICES=""`` hides any GPU, so that this test
takes the no-GPU path everywhere, in seconds."""

from __future__ import annotations

import json
import os
import runpy
import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "gpu-check"
SIX = [
    "cuda_fit",
    "deterministic_repeat",
    "gpu_vs_cpu",
    "bf16_fingerprints",
    "nccl_one_rank",
    "provenance_devices",
]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    env["PATH"] = f"{REPO / '.venv' / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return subprocess.run(
        [str(SCRIPT), *args], capture_output=True, text=True, timeout=60, env=env, check=False
    )


def _module() -> SimpleNamespace:
    # the script has no .py suffix: run its definitions (not main) as a namespace
    return SimpleNamespace(**runpy.run_path(str(SCRIPT), run_name="gpu_check"))


def test_without_a_gpu_it_says_so_in_one_line_skips_all_six_and_exits_0(
    tmp_path: Path,
) -> None:
    out = tmp_path / "sub" / "report.json"
    proc = _run("--out", str(out))
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = (proc.stdout + proc.stderr).splitlines()
    assert len(lines) == 1, lines
    assert "no GPU found" in lines[0] and str(out) in lines[0]
    report = json.loads(out.read_text(encoding="utf-8"))
    assert [c["name"] for c in report["checks"]] == SIX
    for check in report["checks"]:
        assert check["status"] == "skipped", check
        assert "no GPU" in check["reason"], check
    assert report["summary"] == {"passed": 0, "failed": 0, "skipped": 6}
    assert report["machine"]["cuda_available"] is False
    assert report["machine"]["torch"]
    assert report["tolerance"]["gpu_vs_cpu"]["val_loss_atol"] == 1e-5


@pytest.mark.parametrize("args", [["--bogus"], ["--timeout", "0"], ["--timeout", "x"]])
def test_a_wrong_flag_exits_2_with_one_line(args: list[str]) -> None:
    proc = _run(*args)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert len(proc.stderr.splitlines()) == 1, proc.stderr
    assert proc.stderr.startswith("gpu-check: ")


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_runner_records_passed_failed_and_out_of_time(tmp_path: Path) -> None:
    gc = _module()
    clock = _Clock()

    def passes() -> dict[str, Any]:
        clock.now += 2.0
        return {"x": 1}

    def fails() -> dict[str, Any]:
        raise gc.Failed("weights differ", {"sha256": "ab"})

    def breaks() -> dict[str, Any]:
        clock.now += 10.0  # past the deadline: what follows is not started
        raise RuntimeError("CUDA error")

    names = ["a", "b", "c", "d", "e"]
    report = gc.Report(names, {"torch": "x"})
    checks = {"a": passes, "b": fails, "c": breaks, "d": passes, "e": passes}
    said: list[str] = []
    gc.run_checks(report, checks, deadline=10.0, clock=clock, say=said.append)
    got = {c["name"]: (c["status"], c["reason"], c["values"]) for c in report.checks}
    assert got["a"] == ("passed", None, {"x": 1})
    assert got["b"] == ("failed", "weights differ", {"sha256": "ab"})
    assert got["c"] == ("failed", "RuntimeError: CUDA error", {})
    assert got["d"] == got["e"] == ("skipped", "out of time", {})
    assert report.checks[0]["seconds"] == 2.0
    assert "gpu-check: b: failed (0.0 s)" in said
    out = tmp_path / "r.json"
    report.write(out)
    written = json.loads(out.read_text(encoding="utf-8"))
    assert written["summary"] == {"passed": 1, "failed": 2, "skipped": 2}


def test_a_check_caught_running_at_the_deadline_fails_and_nan_stays_strict_json(
    tmp_path: Path,
) -> None:
    gc = _module()
    report = gc.Report(["a", "b"], {})
    report.checks[0].update(status="running", values={"loss": gc._num(float("nan"))})
    report.finish("out of time")
    assert [c["status"] for c in report.checks] == ["failed", "skipped"]
    assert "time ran out" in report.checks[0]["reason"]
    report.write(tmp_path / "r.json")  # allow_nan=False: would raise on a bare NaN
    assert json.loads((tmp_path / "r.json").read_text())["checks"][0]["values"] == {"loss": "nan"}
