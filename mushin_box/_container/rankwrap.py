# SPDX-License-Identifier: MIT
"""Run every SLURM rank inside the image (a :class:`ContainerLaunch` rendered), one
container per srun task (``docs/containers.md``)::

    srun --kill-on-bad-exit=1 ... apptainer exec --nv --cleanenv --env-file FILE \\
        --bind PROJECT:PROJECT --bind WORKDIR [--bind /dev/infiniband] --pwd WORKDIR \\
        IMAGE.sif python -u ...

``--cleanenv`` makes the env file the only channel from host to rank. Apptainer parses it
on the host in each task's environment (``SLURM_PROCID="${SLURM_PROCID:?}"`` forwards the
task's value, or fails the launch), then evaluates each value once more inside the
container unless ``--no-eval``: literal values survive both (:func:`_literal`); forwarded
Slurm values are not escaped (``no_eval=True`` keeps a ``$`` in a job name literal).
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import TypedDict

import attrs

from mushin_box._container import launchspec
from mushin_box._container.launchspec import (
    ContainerLaunch,
    ImageIdentity,
    absolute_path,
    plain_text,
)
from mushin_box._core.layout import ENV_FILE_DIR
from mushin_box._core.targets import public

StrPath = str | os.PathLike[str]

_SAFE_VALUE_RE = re.compile(r"^[A-Za-z0-9_.,:/@%+=-]+\Z")
#: The comment line that opens the env file's last block (:data:`SELF_REFERENCE_VARS`).
#: The file's name is the sha256 of the text *before* this line: the block names the file,
#: so it cannot be part of what the name is computed from.
SELF_REFERENCE_MARKER = (
    "# this file and the rank's command (the file is named by the sha256 of the text above)"
)


def _literal(value: str, *, no_eval: bool) -> str:
    """``value`` as an env-file word that both Apptainer evaluations turn back into ``value``:
    a safe bare run, or single-quoted pieces joined by ``"'"``, the only spellings on which
    bash and Apptainer's interpreter agree (Apptainer keeps the backslash of ``'\\''``). NUL
    and carriage return have no spelling: ValueError.

    >>> print(_literal('it\\'s "x"', no_eval=True), _literal("a/b=1", no_eval=True))
    'it'"'"'s "x"' a/b=1
    >>> print(_literal("'", no_eval=True), _literal("", no_eval=True))
    "'" ''
    """
    for char, what in (("\x00", "NUL"), ("\r", "a carriage return")):
        if char in value:
            raise ValueError(
                f"{value!r}: {what} cannot be written to the env file (no spelling reaches a "
                "rank unchanged); remove it from the value"
            )
    if not no_eval:  # the container re-evaluates it inside "...": keep \ $ ` literal there
        value = value.replace("\\", "\\\\").replace("$", "\\$").replace("`", "\\`")
    if _SAFE_VALUE_RE.match(value):
        return value
    word = '"\'"'.join(f"'{piece}'" if piece else "" for piece in value.split("'"))
    return word or "''"


def render_env_file(
    spec: ContainerLaunch,
    *,
    run_id: str | None = None,
    sif_sha256: str | None = None,
    identity: ImageIdentity | None = None,
) -> str:
    """The ``--env-file`` body, before the self-reference block :func:`plan_env_file` adds:
    plain assignments and comments (what Apptainer's shell and bash agree on), forwarded
    variables as ``NAME="${NAME:?}"``/``"${NAME:-default}"``, the rest literal.
    ``sif_sha256`` is a shorthand of ``identity`` (``preflight(image).identity``).

    >>> spec = ContainerLaunch(image="/i.sif", project_dir="/p", env={"GREETING": "it's $5"})
    >>> text = render_env_file(spec)
    >>> 'SLURM_PROCID="${SLURM_PROCID:?}"' in text, 'PYTHONNOUSERSITE=1' in text
    (True, True)
    >>> print(*[line for line in text.splitlines() if line.startswith("GREETING")])
    GREETING='it'"'"'s \\$5'
    >>> spec = ContainerLaunch(image="/i.sif", project_dir="/p", env={"HF_TOKEN": None})
    >>> [line for line in render_env_file(spec).splitlines() if "HF_TOKEN" in line]
    ['HF_TOKEN="${HF_TOKEN:?}"']
    """
    lit = lambda v: _literal(v, no_eval=spec.no_eval)  # noqa: E731
    image = identity or ImageIdentity(sif_sha256=sif_sha256)
    if identity is not None and sif_sha256 not in (None, identity.sif_sha256):
        raise ValueError(
            f"sif_sha256={sif_sha256!r} disagrees with identity.sif_sha256="
            f"{identity.sif_sha256!r}: pass only identity= (e.g. preflight(image).identity)"
        )
    second = "are evaluated once more inside the container"
    if spec.no_eval:
        second = "are not evaluated again (--no-eval)"
    lines = [
        "# mushin-box rank environment: parsed by Apptainer on the host,",
        "# once per srun task, with that task's environment; ${X:?} = fail the launch if X is",
        f"# unset. Values {second}.",
        *(f'{n}="${{{n}:?}}"' for n in launchspec.REQUIRED_SLURM_VARS),
        'SLURM_CPUS_PER_TASK="${SLURM_CPUS_PER_TASK:-1}"',
    ]
    if spec.gpu_variable:
        lines.append(f'{spec.gpu_variable}="${{{spec.gpu_variable}:?}}"')
    lines.append("# set only in some jobs (arrays, requeues, ...): empty when unset")
    lines += [f'{n}="${{{n}:-{d}}}"' for n, d in launchspec.OPTIONAL_SLURM_VARS.items()]
    lines.append(
        "# rendezvous: Lightning takes MASTER_ADDR from SLURM_NODELIST; the port is pinned"
    )
    port = spec.master_port.fixed
    lines.append('MASTER_PORT="${MUSHIN_MASTER_PORT:?}"' if port is None else f"MASTER_PORT={port}")
    if spec.nccl is not None:
        lines.append("# NCCL profile")
        lines += [f"{k}={lit(v)}" for k, v in spec.nccl.to_env().items()]
    user = dict(spec.env)
    lines += ["# hygiene", "PYTHONNOUSERSITE=1"]
    if "PYTHONUNBUFFERED" not in user:
        lines.append("PYTHONUNBUFFERED=1")
    if "OMP_NUM_THREADS" not in user:
        lines.append('OMP_NUM_THREADS="${SLURM_CPUS_PER_TASK:-1}"')
    if run_id is not None:
        lines.append(f"MUSHIN_RUN_ID={lit(plain_text(run_id, 'run_id'))}")
    if image_env := image.to_env():
        lines.append("# the image, as pre-flight identified it on the submit host")
        lines += [f"{k}={lit(v)}" for k, v in image_env.items()]
    if user:
        lines.append('# user environment (NAME="${NAME:?}": forwarded, never written here)')
        lines += [f'{k}="${{{k}:?}}"' if v is None else f"{k}={lit(v)}" for k, v in user.items()]
    return "\n".join(lines) + "\n"


def env_file_path(working_dir: StrPath, env_text: str) -> str:
    """Where the env file lives: ``<working_dir>/.mushin-box/apptainer-<sha256[:12]>.env``,
    content-addressed by its body ``env_text`` (the text before :data:`SELF_REFERENCE_MARKER`).

    >>> env_file_path("/runs/r1", "A=1\\n")
    '/runs/r1/.mushin-box/apptainer-91d6a3d55e9f.env'
    """
    digest = hashlib.sha256(env_text.encode("utf-8")).hexdigest()[:12]
    work = absolute_path(working_dir, "working_dir")
    if '"' in work:
        raise ValueError(f"working_dir={work!r}: '\"' would break --env-file's CSV parsing")
    return str(Path(work) / ENV_FILE_DIR / f"apptainer-{digest}.env")


@attrs.frozen
class EnvFile:
    """A rank env file: where it goes and its complete text (:func:`plan_env_file`)."""

    path: str
    text: str


def plan_env_file(
    spec: ContainerLaunch,
    *,
    working_dir: StrPath,
    run_id: str | None = None,
    sif_sha256: str | None = None,
    identity: ImageIdentity | None = None,
) -> EnvFile:
    """The complete env file of a run: :func:`render_env_file`'s body, named by its hash
    (:func:`env_file_path`), then :data:`SELF_REFERENCE_MARKER`, ``MUSHIN_RANK_COMMAND``
    (the launcher's ``python``, :func:`rank_command`) and ``MUSHIN_ENV_FILE`` (its path).

    >>> spec = ContainerLaunch(image="/i.sif", project_dir="/p", infiniband=False)
    >>> env = plan_env_file(spec, working_dir="/p/runs")
    >>> env.path == env_file_path("/p/runs", render_env_file(spec))
    True
    >>> print(env.text.split(SELF_REFERENCE_MARKER)[1].strip())
    ... # doctest: +NORMALIZE_WHITESPACE
    MUSHIN_RANK_COMMAND='apptainer exec --nv --cleanenv --env-file
      /p/runs/.mushin-box/apptainer-....env --bind /p:/p --pwd /p/runs /i.sif python'
    MUSHIN_ENV_FILE=/p/runs/.mushin-box/apptainer-....env
    """
    body = render_env_file(spec, run_id=run_id, sif_sha256=sif_sha256, identity=identity)
    path = env_file_path(working_dir, body)
    command = rank_command(spec, path, working_dir=working_dir)
    lit = lambda v: _literal(v, no_eval=spec.no_eval)  # noqa: E731
    rank_var, file_var = launchspec.SELF_REFERENCE_VARS
    tail = [SELF_REFERENCE_MARKER, f"{rank_var}={lit(command)}", f"{file_var}={lit(path)}"]
    return EnvFile(path=path, text=body + "\n".join(tail) + "\n")


def _infiniband_present() -> bool:
    return os.path.exists(launchspec.INFINIBAND_DEVICE)


def rank_argv(
    spec: ContainerLaunch,
    env_file: StrPath,
    python_args: Sequence[str] = (),
    *,
    working_dir: StrPath | None = None,
) -> list[str]:
    """``apptainer exec ... IMAGE python *python_args`` for one rank; ``working_dir`` (bound,
    ``--pwd``) defaults to ``spec.project_dir``.

    >>> spec = ContainerLaunch(image="/i.sif", project_dir="/p", infiniband=False)
    >>> rank_argv(spec, "/w/a.env", ["-u", "x.py"], working_dir="/w")
    ... # doctest: +NORMALIZE_WHITESPACE
    ['apptainer', 'exec', '--nv', '--cleanenv', '--env-file', '/w/a.env', '--bind', '/p:/p',
     '--bind', '/w', '--pwd', '/w', '/i.sif', 'python', '-u', 'x.py']
    """
    env_path = absolute_path(env_file, "env_file", bind=False)
    if "," in env_path or '"' in env_path:
        raise ValueError(f"env_file={env_path!r}: --env-file is a comma-separated list (CSV)")
    work = absolute_path(spec.project_dir if working_dir is None else working_dir, "working_dir")
    argv = ["apptainer", "exec"]
    argv += ["--nv"] if spec.nv else ["--rocm"] if spec.rocm else []
    argv += ["--cleanenv", "--env-file", env_path]
    if spec.no_eval:
        argv.append("--no-eval")
    project = spec.project_dir
    argv += ["--bind", f"{project}:{project}"]
    if work != project and not work.startswith(project.rstrip("/") + "/"):
        argv += ["--bind", work]
    for bind in spec.binds:
        argv += ["--bind", bind.spec]
    infiniband = _infiniband_present() if spec.infiniband is None else spec.infiniband
    if infiniband:
        argv += ["--bind", launchspec.INFINIBAND_DEVICE]
    argv += [*spec.extra_args, "--pwd", work, spec.image, spec.python]
    return argv + [plain_text(a, "python_args item", allow_newline=True) for a in python_args]


def rank_command(
    spec: ContainerLaunch, env_file: StrPath, *, working_dir: StrPath | None = None
) -> str:
    """:func:`rank_argv` without Python arguments, shell-quoted: submitit's ``python``.

    >>> spec = ContainerLaunch(image="/my images/i.sif", project_dir="/p", nv=False,
    ...                        infiniband=False)
    >>> rank_command(spec, "/p/a.env")
    "apptainer exec --cleanenv --env-file /p/a.env --bind /p:/p --pwd /p '/my images/i.sif' python"
    """
    return shlex.join(rank_argv(spec, env_file, (), working_dir=working_dir))


def srun_argv(
    spec: ContainerLaunch,
    env_file: StrPath,
    python_args: Sequence[str],
    *,
    ntasks_per_node: int,
    working_dir: StrPath | None = None,
) -> list[str]:
    """``srun --kill-on-bad-exit=1 --ntasks-per-node=N`` + :func:`rank_argv`.

    ``--kill-on-bad-exit=1``: one dead rank would leave the others stuck in a collective.
    """
    argv = ["srun", "--kill-on-bad-exit=1", f"--ntasks-per-node={int(ntasks_per_node)}"]
    return argv + rank_argv(spec, env_file, python_args, working_dir=working_dir)


def setup_lines(
    spec: ContainerLaunch, *, env_file: StrPath, env_text: str, heredoc: bool = False
) -> list[str]:
    """Batch-script lines (host side, before srun): export the job's ``MUSHIN_MASTER_PORT``
    and write ``env_text`` to ``env_file`` atomically, base64-encoded so that no ``${``
    reaches Hydra (``heredoc=True``: verbatim, for hand-written batch scripts).

    >>> spec = ContainerLaunch(image="/i.sif", project_dir="/p")
    >>> lines = setup_lines(spec, env_file="/p/.mushin-box/a.env", env_text="A=1\\n")
    >>> lines[1]
    'export MUSHIN_MASTER_PORT=$(( 15000 + SLURM_JOB_ID % 10000 ))'
    >>> "base64 -d" in lines[2] and "${" not in "".join(lines)
    True
    """
    path = absolute_path(env_file, "env_file", bind=False)
    tmp = shlex.quote(path + ".partial.") + "$SLURM_JOB_ID.$$"
    lines = [f"# mushin-box rank wrapper: every rank's env file, {os.path.basename(path)}"]
    if (port := spec.master_port.setup_line()) is not None:
        lines.append(port)
    if heredoc:
        end = f"MUSHIN_ENV_{hashlib.sha256(env_text.encode('utf-8')).hexdigest()[:12]}"
        write, body = f"cat > {tmp} <<'{end}'", f"\n{env_text}{end}"
    else:
        blob = base64.b64encode(env_text.encode("utf-8")).decode("ascii")
        write, body = f"printf %s {blob} | base64 -d > {tmp}", ""
    fail = shlex.quote(f"mushin-box: could not write {path}")
    lines.append(
        f"mkdir -p -- {shlex.quote(os.path.dirname(path))} && {write} && mv -f -- {tmp} "
        f"{shlex.quote(path)} || {{ echo {fail} >&2; exit 1; }}{body}"
    )
    return lines


#: the line :func:`setup_lines` writes the env file with (base64; its reader below)
_WRITTEN_RE = re.compile(r"printf %s (?P<blob>[A-Za-z0-9+/=]+) \| base64 -d")


def env_file_written(python: str, setup: Sequence[str]) -> tuple[str | None, str] | None:
    """``(path, text)`` of the env file that launcher fields write (``python`` names the
    file, a :func:`setup_lines` line carries the text); None when they write none.

    >>> spec = ContainerLaunch(image="/i.sif", project_dir="/p")
    >>> lines = setup_lines(spec, env_file="/p/.mushin-box/a.env", env_text="A='1'\\n")
    >>> env_file_written("apptainer exec --env-file /p/.mushin-box/a.env /i.sif python", lines)
    ('/p/.mushin-box/a.env', "A='1'\\n")
    """
    words = shlex.split(python) if python else []
    path = words[words.index("--env-file") + 1] if "--env-file" in words[:-1] else None
    for line in setup:
        found = _WRITTEN_RE.search(str(line))
        if found is not None:
            return path, base64.b64decode(found["blob"]).decode("utf-8", "replace")
    return None


def fold_env_file(script: str) -> str:
    """``script`` with each env file :func:`setup_lines` writes folded to a note of its size.

    >>> fold_env_file("printf %s QT0xCg== | base64 -d > /f")
    'printf %s <the env file shown below, 8 bytes of base64> | base64 -d > /f'
    """
    note = "printf %s <the env file shown below, {} bytes of base64> | base64 -d"
    return _WRITTEN_RE.sub(lambda m: note.format(len(m["blob"])), script)


@public
class ContainerLauncherFields(TypedDict):
    """The ``hydra/launcher=mushin_slurm`` fields that run every rank in an image (a dict:
    ``launcher_config`` and ``hydra.launcher.KEY=VALUE`` take it as it is)."""

    #: submitit's python command: :func:`rank_command`
    python: str
    #: the :func:`setup_lines`, to put before any user setup
    setup: list[str]
    #: ``["--kill-on-bad-exit=1"]``
    srun_args: list[str]


@public
def container_launcher_fields(
    spec: ContainerLaunch,
    *,
    working_dir: StrPath,
    run_id: str | None = None,
    sif_sha256: str | None = None,
    identity: ImageIdentity | None = None,
) -> ContainerLauncherFields:
    """``hydra/launcher=mushin_slurm`` fields that run every rank in the image.

    The env file is :func:`plan_env_file`'s (``identity``: ``preflight(image).identity``).

    Examples
    --------
    >>> spec = ContainerLaunch(image="/i.sif", project_dir="/p", infiniband=False)
    >>> fields = container_launcher_fields(spec, working_dir="/p")
    >>> fields["python"].startswith("apptainer exec --nv --cleanenv --env-file /p/.mushin-box/")
    True
    >>> fields["srun_args"]
    ['--kill-on-bad-exit=1']
    """
    env = plan_env_file(
        spec, working_dir=working_dir, run_id=run_id, sif_sha256=sif_sha256, identity=identity
    )
    return {
        "python": rank_command(spec, env.path, working_dir=working_dir),
        "setup": setup_lines(spec, env_file=env.path, env_text=env.text),
        "srun_args": ["--kill-on-bad-exit=1"],
    }


def render_sbatch_fragment(
    spec: ContainerLaunch,
    *,
    working_dir: StrPath,
    python_args: Sequence[str],
    ntasks_per_node: int,
    run_id: str | None = None,
    sif_sha256: str | None = None,
    identity: ImageIdentity | None = None,
) -> str:
    """The part of ``job.sbatch`` that starts the ranks: setup lines (the env file as a
    heredoc), then ``srun ... apptainer exec ...``, one option per line."""
    env = plan_env_file(
        spec, working_dir=working_dir, run_id=run_id, sif_sha256=sif_sha256, identity=identity
    )
    argv = srun_argv(
        spec, env.path, python_args, ntasks_per_node=ntasks_per_node, working_dir=working_dir
    )
    srun, rest = argv[:3], argv[5:]  # drop "apptainer exec"
    image_at = len(rest) - len(python_args) - 2
    head = " ".join(srun) + ' --cpus-per-task="$SLURM_CPUS_PER_TASK" \\'
    setup = setup_lines(spec, env_file=env.path, env_text=env.text, heredoc=True)
    out = [*setup, head, "  apptainer exec \\"]
    i = 0
    while i < image_at:  # one option (with its value) per line
        takes_value = rest[i] in ("--env-file", "--bind", "--pwd")
        words = rest[i : i + 1 + takes_value]
        out.append("    " + shlex.join(words) + " \\")
        i += len(words)
    out.append(f"    {shlex.quote(spec.image)} \\")
    out.append("    " + shlex.join(rest[image_at + 1 :]))
    return "\n".join(out) + "\n"
