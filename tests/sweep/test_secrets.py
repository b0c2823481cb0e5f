# SPDX-License-Identifier: MIT
"""Secret values never reach a file: not mushin-box's sidecars, not Hydra's ``.hydra/*.yaml``
or ``multirun.yaml``, not submitit's pickles and logs, not the env file or batch script.

Each end-to-end test plants secrets everywhere a user puts them (config defaults, nested,
in a URL, a number; ``run()`` keyword arguments; raw overrides; the environment), checks
that the task (every rank of it) received the real values, then searches the bytes of
every file under the test's directory and everything printed.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, TESTS
from workflow_tasks import _h, ddp_secret_task, secret_task

from mushin_box._core.layout import SECRET_ENV_PREFIX
from mushin_box._core.overrides import format_value, parse_override_value
from mushin_box._core.redact import redact_text as redact_secret_values
from mushin_box._core.secrets import SecretVault

TOKEN = "PLANTED-token-5f2b9c"
PASSWORD = "PLANTED-password-a71e"
URL = "https://alice:PLANTED-urlpass-0c3d@db.example/x"
NUMBER = 7_654_321_987
OVERRIDE = "PLANTED-override-93aa"
ENV_SECRET = "PLANTED-env-77d1"
PLANTED = (TOKEN, PASSWORD, "PLANTED-urlpass-0c3d", str(NUMBER), OVERRIDE, ENV_SECRET)
EXPECTED = {
    "api_token": _h(TOKEN),
    "db.password": _h(PASSWORD),
    "db.url": _h(URL),
    "port_key": _h(NUMBER),
}


def _leaks(root: Path, outputs: Iterable[str] = ()) -> list[str]:
    found = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        data = path.read_bytes()
        found += [f"{path}: {s}" for s in PLANTED if s.encode() in data]
    for text in outputs:
        found += [f"output: {s}" for s in PLANTED if s in text]
    return found


def _config() -> Any:
    from hydra_zen import make_config

    # defaults hold secrets too: a password in a nested node, credentials in a URL, a number
    return make_config(
        lr=0.0, api_token="", port_key=NUMBER, db={"host": "h", "password": PASSWORD, "url": URL}
    )


# ---------------------------------------------------------------------------- unit


def test_vault_hides_secret_leaves_by_path_and_keeps_the_rest() -> None:
    vault = SecretVault()
    value = {
        "host": "h",
        "password": "pw",
        "options": {"user": "u", "mode": "p"},
        "url": "postgres://u:pw@h/db",
        "timeout": 3,
        "key_id": None,
        "use_token": True,
    }
    hidden = vault.hide("db", value)
    assert hidden["host"] == "h" and hidden["timeout"] == 3
    assert hidden["key_id"] is None and hidden["use_token"] is True  # not values to hide
    assert hidden["options"] == {"user": "u", "mode": "p"}
    assert hidden["password"] == f"${{oc.env:{vault.env_name('db.password')}}}"
    assert hidden["url"] == f"${{oc.env:{vault.env_name('db.url')}}}"  # URL credentials
    assert sorted(vault.values.values()) == ["postgres://u:pw@h/db", "pw"]
    assert all(name.startswith(SECRET_ENV_PREFIX) for name in vault.values)
    # a whole subtree under a secret-looking key is secret; numbers keep their type
    nested = vault.hide("credentials", {"user": "u", "pin": 1234})
    assert nested["pin"] == f"${{oc.decode:${{oc.env:{vault.env_name('credentials.pin')}}}}}"


def test_references_parse_back_and_resolve_to_the_values(monkeypatch: pytest.MonkeyPatch) -> None:
    from omegaconf import OmegaConf

    vault = SecretVault()
    hidden = vault.hide("x", {"api_key": "it's, a $ {secret}", "n": {"token": 12}, "lr": 0.1})
    text = format_value(hidden)
    assert "secret}" not in text and "12" not in text.replace("0.1", "")
    parsed = parse_override_value(text, keep_interpolations=True)
    with vault.exported():
        cfg = OmegaConf.create({"x": parsed})
        assert OmegaConf.to_container(cfg, resolve=True) == {
            "x": {"api_key": "it's, a $ {secret}", "n": {"token": 12}, "lr": 0.1}
        }
    assert not any(name in os.environ for name in vault.values)


def test_hide_in_overrides() -> None:
    vault = SecretVault()
    out = vault.hide_in_overrides(
        [
            "lr=0.1",
            "+api_token=abc",
            "db.password='x y'",
            "db={password:p,host:h}",
            "auth=prod",
            "wandb_key=${oc.env:WANDB_API_KEY}",
            "~old_token",
        ],
        is_config_key=lambda key: key != "auth",  # "auth" is a config group here
    )
    assert out[0] == "lr=0.1" and out[4] == "auth=prod"  # group choices are option names
    assert out[1] == f"+api_token='${{oc.env:{vault.env_name('api_token')}}}'"
    assert out[2] == f"db.password='${{oc.env:{vault.env_name('db.password')}}}'"
    assert out[3] == f"db={{password:'${{oc.env:{vault.env_name('db.password')}}}',host:'h'}}"
    assert out[5:] == ["wandb_key=${oc.env:WANDB_API_KEY}", "~old_token"]  # already a reference
    assert sorted(vault.values.values()) == ["abc", "p"]  # the later db.password wins
    with pytest.raises(ValueError, match="cannot sweep over 'api_token'"):
        vault.hide_in_overrides(["api_token=a,b"])


def test_a_task_key_that_starts_with_hydra_is_hidden_and_hydras_own_is_kept() -> None:
    vault = SecretVault()
    out = vault.hide_in_overrides(["hydra_token=abc", "hydra.job.env_set.X_TOKEN=def"])
    assert out == [
        f"hydra_token='${{oc.env:{vault.env_name('hydra_token')}}}'",
        "hydra.job.env_set.X_TOKEN=def",  # Hydra's own: hidden where Hydra's config is
    ]


def test_hide_in_config_keeps_struct_mode() -> None:
    from omegaconf import OmegaConf
    from omegaconf.errors import ConfigAttributeError

    for plain in (False, True):  # structured (in-process) or plain (pickling launchers)
        cfg = SecretVault().hide_in_config(_config(), plain=plain)
        assert OmegaConf.to_container(cfg)["db"]["password"].startswith(
            "${oc.env:" + SECRET_ENV_PREFIX
        )
        assert OmegaConf.to_container(cfg)["port_key"].startswith("${oc.decode:")
        with pytest.raises(ConfigAttributeError):
            cfg.not_a_field = 1  # unknown keys still need '+'
    assert OmegaConf.get_type(SecretVault().hide_in_config(_config(), plain=True)) is dict
    assert SecretVault().hide_in_config(int) is int  # nothing to hide: the config as given


def test_scrub_secret_values_in_free_text() -> None:
    env = {"API_TOKEN": "tok-123", "PWD": "/home/me", "DB_PASSWORD": "abc", "LR": "0.1"}
    text = "cwd /home/me: token tok-123 rejected at lr 0.1; pw abc"
    # PWD is the working directory; values shorter than 6 characters are not searched for
    assert (
        redact_secret_values(text, env)
        == "cwd /home/me: token <redacted> rejected at lr 0.1; pw abc"
    )


# ---------------------------------------------------------------------------- end to end


def _run(tmp_path: Path, launcher: str | None, **kw: Any) -> Any:
    from mushin_box import Workflow, multirun

    return Workflow(secret_task, _config()).run(
        working_dir=tmp_path / "sweep",
        launcher=launcher,
        progress=False,
        on_error="nan",
        lr=multirun([0.1, -1.0]),
        api_token=TOKEN,
        overrides=[f"+extra_token={OVERRIDE}"],
        **kw,
    )


@pytest.mark.parametrize("launcher", [None, pytest.param("submitit_local", marks=pytest.mark.slow)])
def test_secrets_reach_the_task_but_no_file(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    launcher: str | None,
) -> None:
    monkeypatch.setenv("MUSHIN_TEST_EXPECTED", json.dumps(EXPECTED))
    monkeypatch.setenv("MY_SERVICE_TOKEN", ENV_SECRET)
    # submitit's workers import the task by reference (workflow_tasks, beside conftest.py)
    here = Path(__file__).resolve().parent
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(here), str(TESTS), str(REPO)]))
    ds = _run(tmp_path, launcher)
    assert ds["ok"].sel(lr=0.1).item() == 1.0  # the task got every real value
    assert ds.attrs["failures"]  # lr=-1 raised an error quoting the token
    error = (tmp_path / "sweep" / "lr=-1.0" / "mushin_error.txt").read_text()
    assert "rejected token <redacted>" in error
    assert not [k for k in os.environ if SECRET_ENV_PREFIX in k]  # the references' values are gone
    assert (tmp_path / "sweep" / "lr=0.1" / ".hydra" / "config.yaml").is_file()
    out, err = capfd.readouterr()
    assert _leaks(tmp_path, [out, err]) == []

    # a second run finds the same fingerprints: the completed cell is reused
    status = tmp_path / "sweep" / "lr=0.1" / "mushin_status.json"
    first = status.read_bytes()
    _run(tmp_path, launcher, resume=True)
    assert status.read_bytes() == first


def test_a_sweep_over_a_secret_is_refused_before_anything_runs(tmp_path: Path) -> None:
    from mushin_box import Workflow, multirun

    with pytest.raises(ValueError, match="cannot sweep over 'api_token'.*Fix"):
        Workflow(secret_task, _config()).run(
            working_dir=tmp_path / "sweep", progress=False, lr=0.1, api_token=multirun(["a", "b"])
        )
    assert not list((tmp_path / "sweep").glob("*/mushin_status.json"))


@pytest.mark.slow
def test_hydraddp_ranks_rebuild_the_job_with_the_secret(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    rank_log: Path,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """HydraDDP's rank 1 rebuilds the module from ``.hydra/config.yaml``, which holds only
    the reference: it resolves it from the environment it inherited."""
    import pytorch_lightning as pl
    from conftest import read_rank_logs
    from hydra_zen import builds, make_config
    from secret_module import SecretTinyModule

    from mushin_box import HydraDDP, Workflow
    from mushin_box.testing import TinyDataModule

    monkeypatch.setenv("MUSHIN_TEST_TOKEN_HASH", _h(TOKEN))
    config = make_config(
        trainer=builds(
            pl.Trainer,
            accelerator="cpu",
            devices=2,
            max_epochs=1,
            strategy=builds(HydraDDP),
            logger=False,
            enable_checkpointing=False,
            enable_progress_bar=False,
            enable_model_summary=False,
        ),
        module=builds(SecretTinyModule, api_token=TOKEN),
        datamodule=builds(TinyDataModule),
    )
    ds = Workflow(ddp_secret_task, config).run(working_dir=tmp_path / "sweep", progress=False)
    assert float(ds["world_size"]) == 2.0
    assert sorted(read_rank_logs(rank_log)) == [0, 1]  # both ranks fitted (right token)
    out, err = capfd.readouterr()
    assert _leaks(tmp_path, [out, err]) == []


@pytest.mark.slurm
def test_slurm_ranks_in_the_standin_image_get_the_secret(
    slurm_cluster: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    apptainer_standin: Path,
) -> None:
    """Two SLURM tasks per cell, each in ``apptainer exec --cleanenv`` (the STAND-IN script
    in tests/standins, not Apptainer): the value reaches them as ``APPTAINERENV_...``."""
    from mushin_box import submitit_slurm_config
    from mushin_box._container.launchspec import ContainerLaunch
    from mushin_box._container.rankwrap import container_launcher_fields

    monkeypatch.setenv("MUSHIN_TEST_EXPECTED", json.dumps(EXPECTED))
    image = tmp_path / "img.sif"
    image.touch()
    tests_dirs = os.pathsep.join([str(Path(__file__).resolve().parent), str(TESTS)])
    spec = ContainerLaunch(
        image=str(image),
        project_dir=str(REPO),
        python=sys.executable,
        env={"PYTHONPATH": tests_dirs, "MUSHIN_TEST_EXPECTED": json.dumps(EXPECTED)},
    )
    config = submitit_slurm_config(
        nodes=1, gpus_per_node=2, partition=slurm_cluster.partition, timeout_min=5
    )
    config |= container_launcher_fields(spec, working_dir=tmp_path)
    config |= {
        "submitit_folder": str(tmp_path / "submitit" / "%j"),
        "poll_interval_s": 0.5,
        "max_wait_s": 150.0,
    }
    ranks = tmp_path / "ranks"
    ranks.mkdir()
    ds = _run(tmp_path, "mushin_slurm", launcher_config=config, out_dir=str(ranks))
    assert ds["ok"].sel(lr=0.1).item() == 1.0
    for rank in (0, 1):  # every srun task (inside the stand-in's --cleanenv) got the values
        assert json.loads((ranks / f"lr=0.1_rank{rank}.json").read_text()) == EXPECTED
    out, err = capfd.readouterr()
    assert _leaks(tmp_path, [out, err]) == []


def test_a_required_secret_field_set_by_override_is_hidden(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from workflow_tasks import token_task

    from mushin_box import Workflow

    monkeypatch.setenv("MUSHIN_TEST_TOKEN_HASH", _h(TOKEN))
    ds = Workflow(token_task).run(
        working_dir=tmp_path / "sweep", progress=False, overrides=[f"api_token={TOKEN}"]
    )
    assert float(ds["ok"]) == 1.0 and _leaks(tmp_path) == []


def test_hyperparameters_named_like_secrets_stay_plain_values(tmp_path: Path) -> None:
    """key_dim, pad_token_id: the last word says what the value is, not a secret."""
    from workflow_tasks import hyper_task

    from mushin_box import Workflow, multirun

    wf = Workflow(hyper_task)
    ds = wf.run(working_dir=tmp_path, progress=False, key_dim=multirun([8, 16]), pad_token_id=3)
    assert ds["key_dim"].values.tolist() == [8.0, 16.0]
    assert "pad_token_id: 3" in (tmp_path / "key_dim=8" / ".hydra" / "config.yaml").read_text()
    again = wf.run(
        working_dir=tmp_path, progress=False, resume=True, key_dim=multirun([8, 16]), pad_token_id=7
    )
    assert ds["pad"].values.tolist() == [3.0, 3.0] and again["pad"].values.tolist() == [7.0, 7.0]


def test_literal_url_credentials_beside_an_interpolation_are_refused(tmp_path: Path) -> None:
    from mushin_box import Workflow

    with pytest.raises(ValueError, match=r"db.url: a URL with literal credentials.*oc.env"):
        Workflow(secret_task, _config()).run(
            working_dir=tmp_path,
            progress=False,
            lr=0.1,
            api_token=TOKEN,
            db={"password": "x", "url": "postgres://me:pw@${host}/db"},
        )


@dataclass
class TypedConfig:
    lr: float = 0.1
    api_token: str = TOKEN  # a literal secret default


def typed_task(lr: float, api_token: str) -> dict[str, float]:
    return {"lr": lr, "ok": float(_h(api_token) == _h(TOKEN))}


def test_typed_configs_keep_their_schema_in_process(tmp_path: Path) -> None:
    """With a secret default, the in-process launcher still checks the config's types."""
    from hydra.errors import ConfigCompositionException

    from mushin_box import Workflow

    ds = Workflow(typed_task, TypedConfig).run(working_dir=tmp_path / "ok", progress=False)
    assert float(ds["ok"]) == 1.0 and _leaks(tmp_path) == []
    with pytest.raises(ConfigCompositionException):
        Workflow(typed_task, TypedConfig).run(
            working_dir=tmp_path / "bad", progress=False, lr="not-a-float"
        )
    assert not (tmp_path / "bad").exists()  # refused before anything was written
