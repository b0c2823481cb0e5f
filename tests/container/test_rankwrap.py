# SPDX-License-Identifier: MIT
"""The rank wrapper (mushin_box._container.rankwrap): env file, argv, sbatch fragment, secrets
(pre-flight: tests/container/test_preflight.py).

Golden files (``tests/golden/rankwrap-2x4.*``) hold the 2-node x 4-GPU reference of the
Apptainer notes §7, rendered by the kit; they are reviewed like code. After an intended
change::

    MUSHIN_UPDATE_GOLDEN=1 .venv/bin/pytest tests/container/test_rankwrap.py -p no:cacheprovider
    git diff tests/golden/

Apptainer itself is NOT exercised here: ``tests/standins/apptainer-standin/apptainer`` is a
STAND-IN that applies the documented ``--cleanenv``/``--env-file`` rules and runs the command
on the host. It evaluates env files by Apptainer's rules (``tests/standins/envfile.py``:
only what bash and Apptainer's embedded interpreter read alike, the rest refused), not with
bash. Passing these tests does not verify Apptainer support.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from conftest import APPTAINER_STANDIN, REPO, Golden, run_doctests
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mushin_box._container import rankwrap as _rankwrap
from mushin_box._container.launchspec import (
    APPTAINER_ALWAYS_PASS,
    OPTIONAL_SLURM_VARS,
    REQUIRED_SLURM_VARS,
    Bind,
    ContainerLaunch,
    ImageIdentity,
    MasterPort,
    NcclProfile,
)
from mushin_box._container.rankwrap import (
    SELF_REFERENCE_MARKER,
    container_launcher_fields,
    env_file_path,
    plan_env_file,
    rank_argv,
    rank_command,
    render_env_file,
    render_sbatch_fragment,
    setup_lines,
    srun_argv,
)
from mushin_box._core.layout import SECRET_NAMES_ENV
from mushin_box._core.redact import is_secret_name

STANDIN_DIR = APPTAINER_STANDIN
STANDIN = STANDIN_DIR / "apptainer"

# -- the notes' §7 reference: 2 nodes x 4 GPUs --------------------------------------------------

RUN_DIR = "/scratch/alice/runs/r1"
SIF = "/shared/images/mushin-train-0123456789ab.sif"
SIF_SHA256 = "0123456789ab" + "cd" * 26
# the whole identity pre-flight hands to the ranks (manifest fields + the host's Apptainer)
IDENTITY = ImageIdentity(
    sif_sha256=SIF_SHA256,
    sif_uuid="5b0e6a43-51b7-4d4e-9c2f-2a8f1c3d9e70",
    definition_sha256="de" * 32,
    base_digest="sha256:" + "ba" * 32,
    apptainer_version="1.3.4",
)
IDENTITY_ENV = {
    "MUSHIN_SIF_SHA256": SIF_SHA256,
    "MUSHIN_SIF_UUID": "5b0e6a43-51b7-4d4e-9c2f-2a8f1c3d9e70",
    "MUSHIN_IMAGE_DEFINITION_SHA256": "de" * 32,
    "MUSHIN_IMAGE_BASE_DIGEST": "sha256:" + "ba" * 32,
    "MUSHIN_APPTAINER_VERSION": "1.3.4",
}
PYTHON_ARGS = ["-u", "-m", "mushin_box.train", "--config", f"{RUN_DIR}/config.yaml"]
REFERENCE = ContainerLaunch(
    image=SIF,
    project_dir="/home/alice/mushin-project",
    binds=["/datasets/imagenet:/data:ro"],
    nccl=NcclProfile(socket_ifname="ib0", ib_hca="mlx5_0,mlx5_1"),
)
# §7.2, the lines that do not depend on the site (MASTER_PORT is checked separately)
SECTION_7_ENV_LINES = """\
SLURM_JOB_ID="${SLURM_JOB_ID:?}"
SLURM_JOB_NAME="${SLURM_JOB_NAME:?}"
SLURM_NNODES="${SLURM_NNODES:?}"
SLURM_NODELIST="${SLURM_NODELIST:?}"
SLURM_NTASKS="${SLURM_NTASKS:?}"
SLURM_NTASKS_PER_NODE="${SLURM_NTASKS_PER_NODE:?}"
SLURM_NODEID="${SLURM_NODEID:?}"
SLURM_PROCID="${SLURM_PROCID:?}"
SLURM_LOCALID="${SLURM_LOCALID:?}"
SLURM_CPUS_PER_TASK="${SLURM_CPUS_PER_TASK:-1}"
CUDA_VISIBLE_DEVICES="${CUDA_VISIBLE_DEVICES:?}"
NCCL_SOCKET_IFNAME=ib0
NCCL_IB_HCA=mlx5_0,mlx5_1
NCCL_DEBUG=WARN
TORCH_NCCL_ASYNC_ERROR_HANDLING=3
PYTHONNOUSERSITE=1
PYTHONUNBUFFERED=1
OMP_NUM_THREADS="${SLURM_CPUS_PER_TASK:-1}"
MUSHIN_RUN_ID=r1
""".splitlines()
# what rank 5 (node 1, local rank 1) of the 2x4 job has in its environment (§7.2)
RANK5 = {
    "SLURM_JOB_ID": "4242",
    "SLURM_JOB_NAME": "mushin-r1",
    "SLURM_NNODES": "2",
    "SLURM_JOB_NUM_NODES": "2",
    "SLURM_NODELIST": "gpu[07-08]",
    "SLURM_JOB_NODELIST": "gpu[07-08]",
    "SLURM_NTASKS": "8",
    "SLURM_NTASKS_PER_NODE": "4",
    "SLURM_NODEID": "1",
    "SLURM_PROCID": "5",
    "SLURM_LOCALID": "1",
    "SLURM_CPUS_PER_TASK": "8",
    "CUDA_VISIBLE_DEVICES": "0,1,2,3",
    "MUSHIN_MASTER_PORT": "19242",
    "HOME": "/home/alice",
    "PATH": "/usr/bin:/bin",
}
# Apptainer's documented --cleanenv environment (notes §1.2), besides the env file's variables
CLEANENV_RUNTIME = {
    "HOME",
    "LANG",
    "LD_LIBRARY_PATH",
    "PATH",
    "PS1",
    "PROMPT_COMMAND",
    "PWD",
    "APPTAINER_COMMAND",
    "APPTAINER_CONTAINER",
    "APPTAINER_ENVIRONMENT",
    "APPTAINER_NAME",
}
PRINT_ENV = (
    "import json; raw = open('/proc/self/environ', 'rb').read(); "
    "print(json.dumps(dict(i.decode().split('=', 1) for i in raw.split(b'\\0') if i)))"
)


def _load_standin() -> ModuleType:
    loader = importlib.machinery.SourceFileLoader("apptainer_standin", str(STANDIN))
    spec = importlib.util.spec_from_loader("apptainer_standin", loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


standin = _load_standin()


@pytest.fixture
def no_infiniband(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_rankwrap, "_infiniband_present", lambda: False)


def _env_names(text: str, **host: str) -> list[str]:
    """The variables an env file sets (evaluated for rank 5 of the reference job)."""
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "a.env").write_text(text)
        return list(standin.evaluate_env_file(str(Path(tmp) / "a.env"), RANK5 | host, []))


def _binds_of(argv: list[str]) -> list[tuple[str, str, tuple[str, ...]]]:
    values = [argv[i + 1] for i, a in enumerate(argv) if a == "--bind"]
    return [b for v in values for b in standin.parse_binds(v)]


# -- golden files --------------------------------------------------------------------------------


def test_golden_env_file(no_infiniband: None, golden: Golden) -> None:
    env = plan_env_file(REFERENCE, working_dir=RUN_DIR, run_id="r1", identity=IDENTITY)
    golden("rankwrap-2x4.env", env.text)


def test_golden_srun_argv_and_launcher_fields(no_infiniband: None, golden: Golden) -> None:
    env_file = plan_env_file(REFERENCE, working_dir=RUN_DIR, run_id="r1", identity=IDENTITY).path
    argv = srun_argv(REFERENCE, env_file, PYTHON_ARGS, ntasks_per_node=4, working_dir=RUN_DIR)
    fields = container_launcher_fields(
        REFERENCE, working_dir=RUN_DIR, run_id="r1", identity=IDENTITY
    )
    data = {"srun_argv": argv, "launcher_fields": fields}
    golden("rankwrap-2x4.argv.json", json.dumps(data, indent=1, ensure_ascii=False) + "\n")


def test_golden_sbatch_fragment(no_infiniband: None, golden: Golden) -> None:
    text = render_sbatch_fragment(
        REFERENCE,
        working_dir=RUN_DIR,
        python_args=PYTHON_ARGS,
        ntasks_per_node=4,
        run_id="r1",
        identity=IDENTITY,
    )
    golden("rankwrap-2x4.sbatch", text)
    assert subprocess.run(["bash", "-n"], input=text, text=True).returncode == 0


def test_sbatch_fragment_writes_the_env_file_and_starts_srun(tmp_path: Path) -> None:
    spec = ContainerLaunch(image="/i.sif", project_dir=str(tmp_path), env={"E": "x\nMUSHIN_ENV"})
    text = render_sbatch_fragment(
        spec, working_dir=tmp_path, python_args=["-u", "t.py"], ntasks_per_node=2
    )
    stub = 'srun() { printf "%s\\n" "$@" > srun.args; }\nSLURM_CPUS_PER_TASK=3\n'
    proc = subprocess.run(
        ["bash", "-c", stub + text],
        cwd=tmp_path,
        env={"SLURM_JOB_ID": "9"},
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    args = (tmp_path / "srun.args").read_text().splitlines()
    assert args[:3] == ["--kill-on-bad-exit=1", "--ntasks-per-node=2", "--cpus-per-task=3"]
    env_file = Path(args[args.index("--env-file") + 1])
    assert env_file.read_text() == plan_env_file(spec, working_dir=tmp_path).text
    assert f"MUSHIN_ENV_FILE={env_file}" in env_file.read_text().splitlines()


# -- conformance with the notes' §7 reference ----------------------------------------------------


def test_env_file_has_every_line_of_the_reference_in_order() -> None:
    lines = render_env_file(REFERENCE, run_id="r1", sif_sha256=SIF_SHA256).splitlines()
    for line in SECTION_7_ENV_LINES:
        assert line in lines, line
    slurm = [line for line in lines if line in SECTION_7_ENV_LINES[:11]]
    assert slurm == SECTION_7_ENV_LINES[:11]
    assert f"MUSHIN_SIF_SHA256={SIF_SHA256}" in lines
    assert 'MASTER_PORT="${MUSHIN_MASTER_PORT:?}"' in lines


def test_argv_matches_the_reference_srun_line(no_infiniband: None) -> None:
    argv = srun_argv(REFERENCE, "/x/a.env", PYTHON_ARGS, ntasks_per_node=4, working_dir=RUN_DIR)
    assert argv[:5] == ["srun", "--kill-on-bad-exit=1", "--ntasks-per-node=4", "apptainer", "exec"]
    image_at = argv.index(SIF)
    assert argv[image_at + 1 :] == ["python", *PYTHON_ARGS]
    options = argv[5:image_at]
    assert options[:4] == ["--nv", "--cleanenv", "--env-file", "/x/a.env"]
    assert options[-2:] == ["--pwd", RUN_DIR]
    assert set(_binds_of(argv)) == {
        (RUN_DIR, RUN_DIR, ()),
        ("/datasets/imagenet", "/data", ("ro",)),
        ("/home/alice/mushin-project", "/home/alice/mushin-project", ()),
    }
    absent = ("--contain", "--containall", "--writable-tmpfs", "--fakeroot", "--net", "--nvccli")
    assert not set(absent + ("--env", "-c", "-C")) & set(argv)


def _source_names(path: Path, pattern: str) -> set[str]:
    return set(re.findall(pattern, path.read_text(encoding="utf-8")))


def test_every_variable_lightning_and_submitit_read_is_forwarded() -> None:
    forwarded = set(_env_names(render_env_file(REFERENCE)))
    lightning = importlib.util.find_spec("lightning_fabric")
    assert lightning is not None and lightning.origin is not None
    slurm_py = Path(lightning.origin).parent / "plugins" / "environments" / "slurm.py"
    assert _source_names(slurm_py, r'"(SLURM_[A-Z_]+)"') <= forwarded
    assert "MASTER_PORT" in forwarded  # MASTER_ADDR: Lightning derives it from SLURM_NODELIST
    from submitit.slurm.slurm import SlurmJobEnvironment

    assert set(SlurmJobEnvironment._env.values()) | {"SUBMITIT_EXECUTOR"} <= forwarded  # pyright: ignore[reportPrivateUsage]


def test_rank_five_of_the_reference_sees_its_own_identity(tmp_path: Path) -> None:
    env_file = tmp_path / "apptainer.env"
    env_file.write_text(render_env_file(REFERENCE, run_id="r1"))
    env = standin.container_environ(RANK5, cleanenv=True, env_files=[str(env_file)])
    expected = {k: RANK5[k] for k in REQUIRED_SLURM_VARS} | {
        "CUDA_VISIBLE_DEVICES": "0,1,2,3",
        "MASTER_PORT": "19242",
        "OMP_NUM_THREADS": "8",
        "SLURM_ARRAY_TASK_ID": "",
        "SLURM_RESTART_COUNT": "0",
        "LANG": "C",
        "HOME": "/home/alice",
        "NCCL_SOCKET_IFNAME": "ib0",
        "PYTHONNOUSERSITE": "1",
    }
    assert {k: env[k] for k in expected} == expected
    assert env["PATH"] == standin.DEFAULT_PATH  # the host's PATH is not forwarded


@pytest.mark.parametrize("empty", [False, True])
@pytest.mark.parametrize("missing", ["CUDA_VISIBLE_DEVICES", "SLURM_PROCID", "MUSHIN_MASTER_PORT"])
def test_a_missing_forwarded_variable_fails_the_launch(
    tmp_path: Path, missing: str, empty: bool
) -> None:
    env_file = tmp_path / "apptainer.env"
    env_file.write_text(render_env_file(REFERENCE))
    host = {k: v for k, v in RANK5.items() if k != missing} | ({missing: ""} if empty else {})
    # what Apptainer prints for ${X:?}: "X: ", then the evaluation's "exit status 1"
    with pytest.raises(standin.StandinError, match="exit status 1$") as failed:
        standin.container_environ(host, cleanenv=True, env_files=[str(env_file)])
    assert failed.value.printed == f"{missing}: \n"
    assert failed.value.stderr.startswith(f"{missing}: \nFATAL:   while processing {env_file}")


def test_gpu_variable_follows_the_vendor() -> None:
    def gpu_lines(**kw: Any) -> list[str]:
        text = render_env_file(ContainerLaunch(image="/i.sif", project_dir="/p", **kw))
        return [ln for ln in text.splitlines() if "VISIBLE_DEVICES" in ln]

    assert gpu_lines() == ['CUDA_VISIBLE_DEVICES="${CUDA_VISIBLE_DEVICES:?}"']
    assert gpu_lines(nv=False, rocm=True) == ['ROCR_VISIBLE_DEVICES="${ROCR_VISIBLE_DEVICES:?}"']
    assert gpu_lines(nv=False) == []
    with pytest.raises(ValueError, match="exclusive"):
        ContainerLaunch(image="/i.sif", project_dir="/p", rocm=True)
    argv = rank_argv(ContainerLaunch(image="/i.sif", project_dir="/p", nv=False, rocm=True), "/e")
    assert "--rocm" in argv and "--nv" not in argv


def test_master_port_policies() -> None:
    fixed = render_env_file(ContainerLaunch(image="/i.sif", project_dir="/p", master_port=29500))
    assert "MASTER_PORT=29500" in fixed.splitlines()
    spec = ContainerLaunch(image="/i.sif", project_dir="/p", master_port=29500)
    assert not any(
        "MUSHIN_MASTER_PORT" in ln for ln in setup_lines(spec, env_file="/p/e", env_text="")
    )
    line = MasterPort(base=20000, span=100).setup_line()
    assert line is not None
    script = f"{line}; echo $MUSHIN_MASTER_PORT"
    out = subprocess.run(
        ["bash", "-c", script],
        env={"SLURM_JOB_ID": "123456"},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.strip() == "20056"
    for bad in ({"fixed": 80}, {"base": 65000, "span": 1000}, {"fixed": True}):
        with pytest.raises((ValueError, TypeError)):
            MasterPort(**bad)


# -- every value survives (hypothesis) -----------------------------------------------------------

NASTY = " '\"$`\\\n\t!*?~#;&|<>(){}[]=%^,:é漢🙂\u00a0"
VALUES = st.text(
    alphabet=st.sampled_from(list(NASTY))
    | st.characters(blacklist_characters="\x00\r", blacklist_categories=("Cs",)),
    max_size=30,
)
# secret-looking names (U_KEY, U_PWD, ...) accept only None: test_a_secret_looking_...
NAMES = st.from_regex(r"\AU_[A-Z0-9_]{1,8}\Z", fullmatch=True).filter(
    lambda n: not is_secret_name(n)
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(env=st.dictionaries(NAMES, VALUES, min_size=1, max_size=6), no_eval=st.booleans())
def test_every_env_value_survives_both_evaluations(env: dict[str, str], no_eval: bool) -> None:
    spec = ContainerLaunch(image="/i.sif", project_dir="/p", env=env, no_eval=no_eval, nv=False)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "a.env"
        path.write_text(render_env_file(spec, run_id="r $1 `x`", sif_sha256="ab"))
        host = {**RANK5, "MY_SECRET_TOKEN": "hunter2"}
        seen = standin.container_environ(
            host, cleanenv=True, env_files=[str(path)], no_eval=no_eval
        )
    assert {k: seen[k] for k in env} == env
    assert seen["MUSHIN_RUN_ID"] == "r $1 `x`" and seen["SLURM_PROCID"] == "5"
    assert "MY_SECRET_TOKEN" not in seen


SEGMENT = st.text(
    alphabet=st.sampled_from(list(" '\"$`!*?~#;&|<>(){}[]=%é漢🙂"))
    | st.characters(blacklist_characters=":,^\\/", blacklist_categories=("Cs", "Cc")),
    min_size=1,
    max_size=10,
).filter(lambda s: s not in (".", ".."))
PATHS = (
    st.lists(SEGMENT, min_size=1, max_size=3)
    .map(lambda p: "/" + "/".join(p))
    .filter(lambda p: p == p.strip() and "${" not in p)
)


@settings(max_examples=80, deadline=None)
@given(
    image=PATHS,
    project=PATHS,
    work=PATHS.filter(lambda p: '"' not in p),
    src=PATHS,
    dst=PATHS,
    args=st.lists(VALUES),
)
def test_every_path_survives_quoting_and_apptainers_bind_parser(
    image: str, project: str, work: str, src: str, dst: str, args: list[str]
) -> None:
    spec = ContainerLaunch(
        image=image, project_dir=project, binds=[f"{src}:{dst}:ro", Bind(src)], infiniband=False
    )
    env_file = env_file_path(work, "A=1\n")
    argv = rank_argv(spec, env_file, args, working_dir=work)
    assert shlex.split(shlex.join(argv)) == argv
    assert shlex.split(rank_command(spec, env_file, working_dir=work)) + args == argv
    expected = [(project, project, ()), (src, dst, ("ro",)), (src, src, ())]
    if work != project and not work.startswith(project + "/"):
        expected.insert(1, (work, work, ()))
    assert _binds_of(argv) == expected
    at = argv.index("--pwd")
    assert argv[at + 1 : at + 4] == [work, image, "python"]
    assert argv[argv.index("--env-file") + 1] == env_file


@pytest.mark.parametrize("char", [":", ",", "^", "\\", "\n", "\x00"])
def test_bind_paths_apptainer_would_misread_are_refused(char: str) -> None:
    with pytest.raises(ValueError, match="bind|NUL|newline|control"):
        Bind(f"/data{char}x")
    with pytest.raises(ValueError):
        ContainerLaunch(image="/i.sif", project_dir=f"/p{char}q")


@pytest.mark.parametrize(
    ("bind", "message"),
    [
        ("relative/path", "absolute"),
        ("/a:/b:rw:x", "src\\[:dst"),
        ("/a:/b:exec", "accepts"),
        ("/a ", "whitespace"),
        ("/a/${x}", "OmegaConf"),
        ("/a,/b", "one bind per list item"),
    ],
)
def test_bad_binds_are_refused_with_the_reason(bind: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Bind.parse(bind)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"1BAD": "x"}, "not a variable name"),
        ({"APPTAINER_BIND": "x"}, "configure Apptainer"),
        ({"PATH": "/x"}, "special to Apptainer"),
        ({"SLURM_PROCID": "0"}, "rank wrapper itself"),
        ({"NCCL_DEBUG": "INFO"}, "nccl=NcclProfile"),
        ({"A": "x\x00"}, "NUL"),
        ({"A": "x\ry"}, "carriage return"),
        ({"A": True}, "must be a str"),
    ],
)
def test_bad_env_is_refused_with_the_reason(env: dict[str, Any], message: str) -> None:
    with pytest.raises((ValueError, TypeError), match=message):
        ContainerLaunch(image="/i.sif", project_dir="/p", env=env)


# -- --contain, /dev/infiniband ------------------------------------------------------------------


@pytest.mark.parametrize("arg", ["--contain", "--containall", "-c", "-C", "--contain=true"])
def test_contain_is_refused_with_the_reason(arg: str) -> None:
    with pytest.raises(ValueError, match="refused: .*(/dev/shm|--contain)"):
        ContainerLaunch(image="/i.sif", project_dir="/p", extra_args=[arg])


@pytest.mark.parametrize(
    "arg", ["--net", "--env", "--env-file", "-B", "--bind=/x", "--pwd", "-ce", "--no-eval"]
)
def test_options_the_spec_owns_or_that_break_ranks_are_refused(arg: str) -> None:
    with pytest.raises(ValueError, match="extra_args"):
        ContainerLaunch(image="/i.sif", project_dir="/p", extra_args=[arg])


def test_allowed_extra_args_come_before_the_image() -> None:
    spec = ContainerLaunch(
        image="/i.sif",
        project_dir="/p",
        extra_args=["--writable-tmpfs"],
        infiniband=False,
        no_eval=True,
    )
    argv = rank_argv(spec, "/p/e.env")
    assert argv.index("--writable-tmpfs") < argv.index("/i.sif") and "--no-eval" in argv


@pytest.mark.parametrize(
    ("present", "explicit"), [(True, None), (False, None), (False, True), (True, False)]
)
def test_infiniband_is_bound_only_where_it_exists(
    monkeypatch: pytest.MonkeyPatch, present: bool, explicit: bool | None
) -> None:
    monkeypatch.setattr(_rankwrap, "_infiniband_present", lambda: present)
    spec = ContainerLaunch(image="/i.sif", project_dir="/p", infiniband=explicit)
    argv = rank_argv(spec, "/p/e.env")
    bound = ("/dev/infiniband", "/dev/infiniband", ()) in _binds_of(argv)
    assert bound == (present if explicit is None else explicit)


# -- end to end through the stand-in (no SLURM) --------------------------------------------------


def _standin_env(extra: dict[str, str]) -> dict[str, str]:
    path = os.pathsep.join([str(STANDIN_DIR), str(Path(sys.executable).parent), "/usr/bin:/bin"])
    return {"HOME": str(Path.home()), **extra, "PATH": path}


def test_two_ranks_see_exactly_the_env_file_and_the_pass_list(tmp_path: Path) -> None:
    image = tmp_path / "img.sif"
    image.touch()
    spec = ContainerLaunch(
        image=str(image),
        project_dir=str(tmp_path),
        python=sys.executable,
        env={"WANDB_MODE": "offline", "ODD": "a'b\"c $d `e`\n", "WANDB_API_KEY": None},
        infiniband=False,
    )
    planned = plan_env_file(spec, working_dir=tmp_path, run_id="e2e", identity=IDENTITY)
    text, env_file = planned.text, planned.path
    Path(env_file).parent.mkdir()
    Path(env_file).write_text(text)
    argv = rank_argv(spec, env_file, ["-c", PRINT_ENV])
    secret = "s3cr3t-'quoted' \"x\""
    host = {
        **RANK5,
        "MY_SECRET_TOKEN": "hunter2",
        "TERM": "xterm",
        "http_proxy": "http://p:3128",
        "PYTHONPATH": "/leak",
        "LD_PRELOAD": "/leak.so",
        "WANDB_API_KEY": secret,
    }
    seen = []
    for rank in (0, 1):
        env = _standin_env({**host, "SLURM_PROCID": str(rank), "SLURM_LOCALID": str(rank)})
        proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=30)
        assert proc.returncode == 0, proc.stderr
        seen.append(json.loads(proc.stdout))
    allowed = set(_env_names(text, WANDB_API_KEY=secret)) | {"TERM", "http_proxy"}
    for rank, env in enumerate(seen):
        assert set(env) == allowed | CLEANENV_RUNTIME
        assert env["SLURM_PROCID"] == env["SLURM_LOCALID"] == str(rank)
        assert env["ODD"] == "a'b\"c $d `e`\n" and env["WANDB_MODE"] == "offline"
        assert env["PWD"] == str(tmp_path) and env["PYTHONNOUSERSITE"] == "1"
        assert env["MASTER_PORT"] == "19242" and env["APPTAINER_CONTAINER"] == str(image)
        # the image identity, the exact wrapper command and the env file's own path
        assert {k: env[k] for k in IDENTITY_ENV} == IDENTITY_ENV
        assert env["MUSHIN_RANK_COMMAND"] == rank_command(spec, env_file)
        assert shlex.split(env["MUSHIN_RANK_COMMAND"]) + ["-c", PRINT_ENV] == argv
        assert env["MUSHIN_ENV_FILE"] == env_file and Path(env["MUSHIN_ENV_FILE"]).is_file()
        # a forwarded secret reaches the rank; its value is in no file
        assert env["WANDB_API_KEY"] == secret
    assert secret not in text and "hunter2" not in text


WRITE_IN_CWD = "import os, pathlib; pathlib.Path('rank.out').write_text('ok'); print(os.getcwd())"


def test_the_working_dir_reaches_the_rank_only_through_its_bind(tmp_path: Path) -> None:
    """As on a cluster: the project and the run directory live on shared storage the image
    lacks (``scratch/``, declared to the stand-in as host-only; ``--no-mount tmp`` keeps
    Apptainer's /tmp mount from showing it anyway). The rank wrapper binds both, and the rank
    works in the run directory; without the run directory's bind, Apptainer cannot enter it."""
    scratch = tmp_path / "scratch"
    project, work = scratch / "project", scratch / "runs" / "r1"
    project.mkdir(parents=True)
    work.mkdir(parents=True)
    image = tmp_path / "img.sif"
    image.touch()
    spec = ContainerLaunch(
        image=str(image),
        project_dir=str(project),
        python=sys.executable,
        infiniband=False,
        extra_args=["--no-mount", "tmp"],
    )
    planned = plan_env_file(spec, working_dir=work, run_id="binds", identity=IDENTITY)
    Path(planned.path).parent.mkdir(parents=True)
    Path(planned.path).write_text(planned.text)
    argv = rank_argv(spec, planned.path, ["-c", WRITE_IN_CWD], working_dir=work)
    env = _standin_env({**RANK5, "MUSHIN_STANDIN_HOST_ONLY": str(scratch)})
    run = lambda a: subprocess.run(a, env=env, capture_output=True, text=True, timeout=30)  # noqa: E731
    proc = run(argv)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == str(work) and (work / "rank.out").read_text() == "ok"
    # the same command without the run directory's bind: the rank never starts
    i = argv.index(str(work))
    assert argv[i - 1] == "--bind"
    unbound = run(argv[: i - 1] + argv[i + 1 :])
    assert unbound.returncode == 255, unbound.stdout
    assert f"could not set working directory {work}" in unbound.stderr
    # and the honest other side: under Apptainer's default /tmp mount it needs no bind
    default_tmp = [a for a in argv[: i - 1] + argv[i + 1 :] if a not in ("--no-mount", "tmp")]
    assert run(default_tmp).returncode == 0


def test_env_file_is_named_by_the_text_before_its_self_reference(tmp_path: Path) -> None:
    spec = ContainerLaunch(image="/i.sif", project_dir="/p", infiniband=False)
    planned = plan_env_file(spec, working_dir=tmp_path, identity=IDENTITY)
    body, tail = planned.text.split(SELF_REFERENCE_MARKER + "\n")
    assert body == render_env_file(spec, identity=IDENTITY)
    assert planned.path == env_file_path(tmp_path, body)
    digest = hashlib.sha256(body.encode()).hexdigest()[:12]
    assert planned.path == f"{tmp_path}/.mushin-box/apptainer-{digest}.env"
    assert [line.split("=", 1)[0] for line in tail.splitlines()] == [
        "MUSHIN_RANK_COMMAND",
        "MUSHIN_ENV_FILE",
    ]
    other = plan_env_file(spec, working_dir=tmp_path, identity=ImageIdentity(sif_sha256="ff"))
    assert other.path != planned.path  # another image, another file


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    image=st.from_regex(r"\A/[a-z ']{1,8}/i[$`\\\\ ]?\.sif\Z", fullmatch=True),
    work=st.from_regex(r"\A/w[a-z $`']{0,8}\Z", fullmatch=True).filter(lambda p: p == p.strip()),
    version=st.text(alphabet="0123456789.-+ $`'\\abc", min_size=1, max_size=12),
    no_eval=st.booleans(),
)
def test_self_reference_and_identity_survive_both_evaluations(
    image: str, work: str, version: str, no_eval: bool
) -> None:
    spec = ContainerLaunch(image=image, project_dir="/p", infiniband=False, no_eval=no_eval)
    identity = ImageIdentity(sif_sha256="ab" * 32, apptainer_version=version)
    planned = plan_env_file(spec, working_dir=work, identity=identity)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "a.env"
        path.write_text(planned.text)
        seen = standin.container_environ(
            RANK5, cleanenv=True, env_files=[str(path)], no_eval=no_eval
        )
    assert seen["MUSHIN_RANK_COMMAND"] == rank_command(spec, planned.path, working_dir=work)
    assert seen["MUSHIN_ENV_FILE"] == planned.path
    assert seen["MUSHIN_APPTAINER_VERSION"] == version


@pytest.mark.parametrize(
    "image", ["/my images/i.sif", "/it's mine/i.sif", "/say \"hi\" 'there'/i $x `y` \\z.sif"]
)
@pytest.mark.parametrize("no_eval", [False, True])
def test_the_rank_command_reads_back_as_the_same_argv(
    tmp_path: Path, image: str, no_eval: bool
) -> None:
    # regression: with the '\'' spelling Apptainer read `'/my images/i.sif'` back as two
    # arguments, `'/my` and `images/i.sif'`
    from mushin_box._provenance.env import container_from_env

    spec = ContainerLaunch(image=image, project_dir="/p", infiniband=False, no_eval=no_eval)
    planned = plan_env_file(spec, working_dir="/p/runs")
    path = tmp_path / "a.env"
    path.write_text(planned.text)
    seen = standin.container_environ(RANK5, cleanenv=True, env_files=[str(path)], no_eval=no_eval)
    container = container_from_env(seen)
    assert container is not None
    assert container["rank_argv"] == rank_argv(spec, planned.path, working_dir="/p/runs")
    assert container["rank_argv"][-2:] == [image, "python"]


@pytest.mark.parametrize("char", ["\x00", "\r"])
def test_a_value_without_a_spelling_is_refused_before_launch(char: str) -> None:
    with pytest.raises(ValueError, match="cannot be passed to a rank"):
        ContainerLaunch(image="/i.sif", project_dir="/p", env={"U_A": f"a{char}b"})
    with pytest.raises(ValueError, match="cannot be written to the env file.*remove it"):
        _rankwrap._literal(f"a{char}b", no_eval=True)


@pytest.mark.parametrize(
    "name", ["WANDB_API_KEY", "HF_TOKEN", "DB_PASSWORD", "AWS_SECRET_ACCESS_KEY", "hfToken"]
)
def test_a_secret_looking_variable_cannot_be_given_a_value(name: str) -> None:
    with pytest.raises(ValueError) as info:
        ContainerLaunch(image="/i.sif", project_dir="/p", env={name: "hunter2"})
    message = str(info.value)
    assert name in message and "hunter2" not in message
    assert f"export it in the submitting shell and pass env={{{name!r}: None}}" in (
        message.replace("Export", "export")
    )
    spec = ContainerLaunch(image="/i.sif", project_dir="/p", env={name: None})
    assert f'{name}="${{{name}:?}}"' in render_env_file(spec).splitlines()


def test_submitit_slurm_config_refuses_a_literal_secret_before_writing_anything(
    tmp_path: Path,
) -> None:
    from mushin_box import submitit_slurm_config

    with pytest.raises(ValueError, match="HF_TOKEN.*looks like a secret"):
        submitit_slurm_config(
            nodes=1,
            gpus_per_node=2,
            image="/i.sif",
            env={"HF_TOKEN": "x"},
            working_dir=tmp_path,
            preflight=False,
        )
    assert list(tmp_path.iterdir()) == []
    cfg = submitit_slurm_config(
        nodes=1,
        gpus_per_node=2,
        image="/i.sif",
        env={"HF_TOKEN": None},
        working_dir=tmp_path,
        preflight=False,
    )
    assert 'HF_TOKEN="${HF_TOKEN:?}"' in env_file_from_setup(cfg["setup"]).splitlines()


@pytest.mark.parametrize("no_eval", [False, True])
def test_a_forwarded_variable_is_read_from_the_task_and_required(
    tmp_path: Path, no_eval: bool
) -> None:
    spec = ContainerLaunch(
        image="/i.sif", project_dir="/p", env={"HF_TOKEN": None}, no_eval=no_eval
    )
    env_file = tmp_path / "a.env"
    env_file.write_text(render_env_file(spec))
    # with --no-eval the value arrives byte for byte; without it, Apptainer evaluates it once
    # more in the container (documented): only $, ` and \ would change
    secret = "p$ss`w0rd`\\ 'q' \"d\"" if no_eval else "pass 'q' \"d\" #x"
    seen = standin.container_environ(
        {**RANK5, "HF_TOKEN": secret}, cleanenv=True, env_files=[str(env_file)], no_eval=no_eval
    )
    assert seen["HF_TOKEN"] == secret
    with pytest.raises(standin.StandinError, match="exit status 1$") as failed:
        standin.container_environ(RANK5, cleanenv=True, env_files=[str(env_file)])
    assert failed.value.printed == "HF_TOKEN: \n"


def test_the_batch_script_setup_writes_the_env_file_for_every_rank(tmp_path: Path) -> None:
    image = tmp_path / "img.sif"
    image.touch()
    spec = ContainerLaunch(
        image=str(image),
        project_dir=str(tmp_path),
        python=sys.executable,
        env={"Q": "it's", "HF_TOKEN": None},
        infiniband=False,
    )
    fields = container_launcher_fields(
        spec, working_dir=tmp_path, run_id="batch", identity=IDENTITY
    )
    rank = f"SLURM_PROCID=$r SLURM_LOCALID=$r {fields['python']} -c {shlex.quote(PRINT_ENV)}"
    script = "\n".join(["set -u", *fields["setup"], f"for r in 0 1; do {rank} > out.$r; done"])
    host = {k: v for k, v in RANK5.items() if k != "MUSHIN_MASTER_PORT"} | {"SLURM_JOB_ID": "77"}
    host["HF_TOKEN"] = "hf_planted_value"  # exported in the submitting shell
    proc = subprocess.run(
        ["bash", "-c", script],
        env=_standin_env(host),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    written = list((tmp_path / ".mushin-box").iterdir())
    planned = plan_env_file(spec, working_dir=tmp_path, run_id="batch", identity=IDENTITY)
    assert [(str(p), p.read_text()) for p in written] == [(planned.path, planned.text)]
    for rank in (0, 1):
        env = json.loads((tmp_path / f"out.{rank}").read_text())
        assert (env["SLURM_PROCID"], env["MASTER_PORT"], env["Q"]) == (str(rank), "15077", "it's")
        assert env["MUSHIN_RANK_COMMAND"] == fields["python"]
        assert env["MUSHIN_ENV_FILE"] == planned.path
        assert {k: env[k] for k in IDENTITY_ENV} == IDENTITY_ENV
        assert env["HF_TOKEN"] == "hf_planted_value"
    assert "hf_planted_value" not in planned.text + "".join(fields["setup"]) + fields["python"]


def test_standin_refuses_contain_and_reports_a_missing_image(tmp_path: Path) -> None:
    env = _standin_env({})
    run = lambda *a: subprocess.run(["apptainer", *a], env=env, capture_output=True, text=True)  # noqa: E731
    assert "standin" in run("--version").stdout
    refused = run("exec", "--contain", "/nope.sif", "true")
    assert refused.returncode == 255 and "refuses --contain" in refused.stderr
    missing = run("exec", "--cleanenv", str(tmp_path / "nope.sif"), "true")
    assert missing.returncode == 255 and "could not open image" in missing.stderr
    image = tmp_path / "i.sif"
    image.touch()
    bind = run("exec", "--bind", str(tmp_path / "no-such-dir"), str(image), "true")
    assert bind.returncode == 255 and "doesn't exist" in bind.stderr


def test_standin_prints_what_apptainer_prints_for_a_missing_variable(tmp_path: Path) -> None:
    image, env_file = tmp_path / "i.sif", tmp_path / "a.env"
    image.touch()
    env_file.write_text(render_env_file(REFERENCE))
    host = {k: v for k, v in RANK5.items() if k not in ("PATH", "CUDA_VISIBLE_DEVICES")}
    proc = subprocess.run(
        ["apptainer", "exec", "--cleanenv", "--env-file", str(env_file), str(image), "true"],
        env=_standin_env(host | {"CUDA_VISIBLE_DEVICES": ""}),
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 255
    assert proc.stderr.startswith("CUDA_VISIBLE_DEVICES: \nFATAL:   ")
    assert proc.stderr.rstrip().endswith("exit status 1")
    assert "parameter null or not set" not in proc.stderr  # bash's words, not Apptainer's


def test_standin_refuses_a_backslash_outside_quotes(tmp_path: Path) -> None:
    env_file = tmp_path / "old.env"
    env_file.write_text("A='it'\\''s'\n")  # bash: it's; Apptainer: it\'s
    with pytest.raises(standin.StandinError, match="line 1: .*backslash outside single quotes"):
        standin.evaluate_env_file(str(env_file), {}, [])


def test_standin_refuses_commands_in_an_env_file(tmp_path: Path) -> None:
    env_file = tmp_path / "evil.env"
    env_file.write_text("A=$(id -u)\nB=1\n")
    with pytest.raises(standin.StandinError, match="execution is disabled"):
        standin.evaluate_env_file(str(env_file), {"PATH": "/usr/bin:/bin"}, [])


# -- the launcher --------------------------------------------------------------------------------


def test_launcher_fields_reach_the_sbatch_script(tmp_path: Path) -> None:
    try:
        from mushin_box._slurm.launcher import render_sbatch
    except ImportError:  # pragma: no cover
        pytest.skip("waiting for launcher integration")
    spec = ContainerLaunch(image="/img/x.sif", project_dir=str(tmp_path), infiniband=False)
    fields = container_launcher_fields(spec, working_dir=tmp_path)
    text = render_sbatch({"name": "demo", "nodes": 2, "tasks_per_node": 4, **fields}, tmp_path)
    assert f"{fields['python']} -u -m submitit.core._submit" in text
    assert all(line in text for line in fields["setup"])
    assert "--kill-on-bad-exit=1" in text


def echo_env_task(x: int, out_dir: str) -> dict[str, float]:
    """Runs in every rank (inside the stand-in 'container'): records what the rank sees."""
    raw = Path("/proc/self/environ").read_bytes()  # as exec'd (Python adds LC_CTYPE later)
    env = dict(item.decode().split("=", 1) for item in raw.split(b"\0") if item)
    Path(out_dir, f"x{x}_rank{env['SLURM_PROCID']}.json").write_text(json.dumps(env))
    return {"x": float(x), "procid": float(env["SLURM_PROCID"])}


@pytest.mark.slurm
def test_ranks_run_through_the_standin_on_slurm(
    slurm_cluster: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, apptainer_standin: Path
) -> None:
    from mushin_box import Workflow, multirun, submitit_slurm_config

    monkeypatch.setenv("MY_SECRET_TOKEN", "hunter2")
    planted = "wandb-planted-4f1d9c"  # exported in the submitting shell, forwarded by name
    monkeypatch.setenv("WANDB_API_KEY", planted)
    image = tmp_path / "img.sif"
    image.touch()
    spec = ContainerLaunch(
        image=str(image),
        project_dir=str(REPO),
        python=sys.executable,
        env={"PYTHONPATH": os.environ.get("PYTHONPATH", ""), "WANDB_API_KEY": None},
    )
    config = submitit_slurm_config(
        nodes=1, gpus_per_node=2, partition=slurm_cluster.partition, timeout_min=5
    )
    config |= container_launcher_fields(spec, working_dir=tmp_path, identity=IDENTITY)
    config |= {
        "name": "mushin-rankwrap",
        "submitit_folder": str(tmp_path / "submitit" / "%j"),
        "poll_interval_s": 0.5,
        "max_wait_s": 150.0,
    }
    out = tmp_path / "ranks"
    out.mkdir()
    try:
        ds = Workflow(echo_env_task).run(
            working_dir=tmp_path / "sweep",
            launcher="mushin_slurm",
            launcher_config=config,
            progress=False,
            x=multirun([3, 4]),
            out_dir=str(out),
        )
    except TypeError as error:  # known: provenance keeps the launcher's enums (requeue_on)
        if "RequeueReason" not in str(error):
            raise
        pytest.skip(f"waiting for launcher integration: {error}")
    assert ds["procid"].values.tolist() == [0.0, 0.0]  # two cells: a SLURM job array
    ranks = [json.loads((out / f"x{x}_rank{r}.json").read_text()) for x in (3, 4) for r in (0, 1)]
    for i, env in enumerate(ranks):
        assert env["SLURM_PROCID"] == str(i % 2) and env["APPTAINER_NAME"] == "img.sif"
        assert "MY_SECRET_TOKEN" not in env and env["CUDA_VISIBLE_DEVICES"]
        assert env["SUBMITIT_EXECUTOR"] == "slurm" and env["SLURM_ARRAY_JOB_ID"]
        text = plan_env_file(spec, working_dir=tmp_path, identity=IDENTITY).text
        allowed = set(_env_names(text, WANDB_API_KEY=planted)) | set(APPTAINER_ALWAYS_PASS)
        # besides the env file, Workflow's vault is the one channel (APPTAINERENV_): the
        # secret names the driver declared reach every rank, so all ranks judge names alike
        allowed.add(SECRET_NAMES_ENV)
        assert set(env) <= allowed | CLEANENV_RUNTIME
        assert {k: env[k] for k in IDENTITY_ENV} == IDENTITY_ENV
        assert env["MUSHIN_RANK_COMMAND"] == config["python"]
        assert Path(env["MUSHIN_ENV_FILE"]).read_text() == text
        assert env["WANDB_API_KEY"] == planted  # sbatch exported it; no file carried it
    assert ranks[0]["MASTER_PORT"] == ranks[1]["MASTER_PORT"] != ranks[2]["MASTER_PORT"]
    assert set(OPTIONAL_SLURM_VARS) <= set(ranks[0])
    # every file this run wrote (env file, sweep, sidecars, submitit's folder and logs),
    # except the test task's own dumps of what each rank saw
    written = [f for f in tmp_path.rglob("*") if f.is_file() and out not in f.parents]
    assert len(written) > 10
    assert [f for f in written if planted.encode() in f.read_bytes()] == []


def test_module_doctests() -> None:

    from mushin_box._container import launchspec as _container_launch

    for module in (_rankwrap, _container_launch):
        result = run_doctests(module)
        assert result.failed == 0 and result.attempted > 5, module.__name__


def env_file_from_setup(setup: list[str]) -> str:
    """The env file the launcher's setup lines write (base64 inside them)."""
    import base64
    import re

    for line in setup:
        for chunk in re.findall(r"[A-Za-z0-9+/=]{40,}", line):
            try:
                text = base64.b64decode(chunk).decode("utf-8")
            except ValueError:
                continue
            if "SLURM_PROCID" in text:
                return text
    raise AssertionError(f"no env file in {setup}")


def test_trailing_newline_in_env_value_is_quoted_not_dropped() -> None:
    # regression: `^...$` with re.match accepted "0\n" as a bare word, so bash dropped the \n
    spec = ContainerLaunch(image="/i.sif", project_dir="/p", env={"U_A": "0\n"}, nv=False)
    assert "U_A='0\n'" in render_env_file(spec)
