# SPDX-License-Identifier: MIT
"""``mushin-box logs`` of a cell of many ranks on several nodes (an index of the nodes, then
the output that matters), of a cell that has not started yet (``-f`` waits for it), and a
rank's own output (each of submitit's lines once)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from omegaconf import DictConfig, OmegaConf


@pytest.fixture
def restored_logging() -> Iterator[None]:
    """The root logger and submitit's as they were: a rank's job configures both."""
    root, submitit = logging.getLogger(), logging.getLogger("submitit")
    handlers, level, propagate = list(root.handlers), root.level, submitit.propagate
    yield
    for handler in root.handlers:
        if handler not in handlers:
            handler.close()
    root.handlers[:], submitit.propagate = handlers, propagate
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
    from hydra.core.singleton import Singleton
    from hydra.core.utils import JobReturn, JobStatus
    from submitit.core.logger import get_logger

    from mushin_box._slurm.launcher import CellJob

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

    monkeypatch.setattr(hydra.core.utils, "run_job", run_job)
    monkeypatch.setattr(hydra.core.utils, "setup_globals", lambda: None)
    monkeypatch.setattr(submitit, "JobEnvironment", Environment)
    job = CellJob(Context(), OmegaConf.create({}), lambda cfg: None, ignore_signal=None)
    job([], "hydra.sweep.dir", 0, Singleton.get_state())
    get_logger().info("Job completed successfully")  # as submitit, once the job returned
    out = capfd.readouterr().out
    assert out.count("the task ran") == 1
    assert out.count("Job completed successfully") == 1, out
