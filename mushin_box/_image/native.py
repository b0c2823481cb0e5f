# SPDX-License-Identifier: MIT
"""The native builder: a bit-reproducible SIF from an ImageSpec, with no Apptainer.

For a :class:`~mushin_box._image.bases.Debootstrap` base, :func:`build_native` makes the
image in these steps, all in a build directory that the caller removes:

1. the root file system, by ``mmdebstrap --variant=minbase`` with the spec's suite,
   mirror and apt packages (``--mode=root`` as root, ``--mode=unshare`` otherwise);
2. in the tree (an mmdebstrap customize hook, which runs this module with the tree's
   path): the spec's ``%files``, then the ``%post`` steps the definition renders after
   apt (:func:`~mushin_box._image.definition.setup_lines`: the venv, pip with
   ``--require-hashes``, the project, ``post``), run in a chroot;
3. ``/.singularity.d`` as Apptainer lays it out (``env/``, ``runscript``, ``test``,
   ``labels.json``, ``Singularity`` = the rendered definition); the spec's ``test`` runs;
4. the package lists for the manifest, then the cleanup that makes the tree the same on
   every build: no ``.pyc`` files (marshal output is not stable across runs), no logs,
   caches, apt lists, ``machine-id``, ``resolv.conf`` or ``hostname`` contents;
5. :func:`~mushin_box._image.pack.pack_tree`: ``mksquashfs`` with every time set to
   ``SOURCE_DATE_EPOCH`` and the kit's SIF writer, with that time and a UUID derived from
   the content.

``SOURCE_DATE_EPOCH`` is the spec's, else the commit time of its pip lock in git: the
recipe's time, never the clock. Equal recipes and equal package versions give equal bytes.

Every check that can fail before a build (a base this builder cannot make, a missing host
tool, ``/etc/subuid`` for an unprivileged build, a missing ``%files`` source, no
``SOURCE_DATE_EPOCH``) runs in :func:`check_native`, before anything is written.
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import json
import os
import pwd
import re
import shlex
import shutil
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mushin_box._core.errors import MushinBoxError
from mushin_box._core.targets import public
from mushin_box._image.bases import Debootstrap
from mushin_box._image.definition import environment_lines, runscript_lines, setup_lines
from mushin_box._image.pack import PackError, PackInputError, pack_tree
from mushin_box._image.spec import ImageSpec

__all__ = [
    "DPKG_QUERY",
    "PROBE_SCRIPT",
    "BuildError",
    "NativeBuildRefused",
    "build_native",
    "check_native",
    "native_refusal",
    "run_bounded",
    "source_date_epoch",
]

#: host tool -> the Debian package that has it
HOST_TOOLS = {"mmdebstrap": "mmdebstrap", "mksquashfs": "squashfs-tools", "git": "git"}
UNSHARE_TOOLS = {"newuidmap": "uidmap", "newgidmap": "uidmap"}
# `\n` is dpkg-query's own escape (a newline), not Python's
DPKG_QUERY = ("dpkg-query", "-W", "-f", "${Package}=${Version}\\n")
#: Runs inside the image with `python -I` (no user site, no PYTHON* variables, no cwd).
PROBE_SCRIPT = """\
import json, platform, re
from importlib import metadata
packages = {}
for dist in metadata.distributions():
    name = dist.metadata["Name"]
    if name:
        packages[re.sub(r"[-_.]+", "-", name).lower()] = dist.version
print(json.dumps({"python_version": platform.python_version(), "packages": packages}))
"""
_CHROOT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# mmdebstrap's own hooks: dpkg without fsync while it builds (about half the time), and
# eatmydata removed again before the cleanup
_EATMYDATA = "/usr/share/mmdebstrap/hooks/eatmydata"
_CA_IN_TREE = "/tmp/mushin-box-ca.pem"
_PROBE_IN_TREE = "/tmp/mushin-box-probe.json"
_DEBIAN_CA = "/etc/ssl/certs/ca-certificates.crt"
_MOUNTED = ("proc", "sys", "dev")  # mmdebstrap mounts these in the tree while hooks run
_ENV_01 = "#!/bin/sh\n#\n# Copyright (c) Contributors to the Apptainer project\n#\n"
_ENV_90 = "#!/bin/sh\n# Custom environment shell code should follow\n\n"
_ENV_99 = (
    '#!/bin/sh\nif [ -z "$LD_LIBRARY_PATH" ]; then\n'
    '    LD_LIBRARY_PATH="/.singularity.d/libs"\nelse\n'
    '    LD_LIBRARY_PATH="$LD_LIBRARY_PATH:/.singularity.d/libs"\nfi\n'
    'PS1="Apptainer> "\nexport LD_LIBRARY_PATH PS1\n'
)
_HASH_LINE = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?\s*==\s*([^\s;\\]+)")
_HASH_RE = re.compile(r"--hash[= ](sha256:[0-9a-fA-F]{64})")
_STANZA_FIELD = re.compile(r"^(Package|Version|Architecture|SHA256): (.*)$", re.MULTILINE)


@public
class BuildError(MushinBoxError, RuntimeError):
    """An image build (``apptainer build``, or a step of the native builder) failed."""


@public
class NativeBuildRefused(MushinBoxError, ValueError):
    """The native builder cannot build this spec on this machine; nothing was written.

    The message is one line naming what is missing (a Debian package, an ``/etc/subuid``
    entry, a spec field) or the backend that can build it.
    """


def run_bounded(
    argv: Sequence[str],
    *,
    timeout: float,
    cwd: Path | None = None,
    capture: bool,
    env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` in its own process group; kill that group on timeout or interrupt."""
    proc = subprocess.Popen(
        list(argv),
        cwd=cwd,
        env=None if env is None else dict(env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE if capture else None,
        stderr=subprocess.PIPE if capture else None,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except BaseException as exc:
        for sig, grace in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 10.0)):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, sig)
            try:
                proc.wait(timeout=grace)
                break
            except subprocess.TimeoutExpired:
                continue
        if isinstance(exc, subprocess.TimeoutExpired):
            raise BuildError(
                f"{argv[0]} {argv[1]} ran past {timeout:g} s and was stopped: check that the "
                "mirror answers, or give build_image a longer timeout"
            ) from exc
        raise
    return subprocess.CompletedProcess(list(argv), proc.returncode, stdout, stderr)


# ------------------------------------------------------------------------- the checks


def host_ca_bundle() -> str:
    """The CA bundle this host's pip trusts: ``PIP_CERT``, ``SSL_CERT_FILE``, or Debian's."""
    for name in ("PIP_CERT", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE"):
        if os.path.isfile(os.environ.get(name, "")):
            return os.environ[name]
    return _DEBIAN_CA


def native_refusal(spec: ImageSpec) -> str | None:
    """Why the native builder cannot make ``spec``'s base, or ``None`` when it can.

    It makes Debian trees with mmdebstrap: a :class:`Debootstrap` base. A Docker base
    needs a registry client and a ``LocalImage`` needs its tree unpacked; Apptainer
    builds both.

    Examples
    --------
    >>> native_refusal(ImageSpec(base="debian@sha256:" + "0" * 64))  # doctest: +ELLIPSIS
    'the base debian@sha256:000... is a Docker image: ...--backend apptainer'
    """
    if isinstance(spec.base, Debootstrap):
        return None
    if isinstance(spec.base, str):
        kind = f"the base {spec.base} is a Docker image"
    else:
        kind = f"the base {spec.base.reference} is a local image"
    return f"{kind}: the native builder makes Debootstrap bases only; use --backend apptainer"


def source_date_epoch(spec: ImageSpec, context: Path) -> int:
    """The build's ``SOURCE_DATE_EPOCH``: the spec's, else the commit time of its pip lock.

    A lock with changes not yet committed has no such time: its build would carry the
    time of another recipe.
    """
    if spec.source_date_epoch is not None:
        return spec.source_date_epoch
    fix = "set ImageSpec(source_date_epoch=...) (Unix seconds)"
    if spec.pip_lock is None:
        raise NativeBuildRefused(f"a native build needs SOURCE_DATE_EPOCH: {fix}")
    lock = context / spec.pip_lock
    status = run_bounded(
        ["git", "status", "--porcelain", "--", lock.name], cwd=lock.parent, timeout=60, capture=True
    )
    log = run_bounded(
        ["git", "log", "-1", "--format=%ct", "--", lock.name],
        cwd=lock.parent,
        timeout=60,
        capture=True,
    )
    when = (log.stdout or "").strip()
    if status.returncode != 0 or status.stdout.strip() or log.returncode != 0 or not when:
        raise NativeBuildRefused(
            f"{spec.pip_lock} has no commit time in git (not committed, or changed since): "
            f"commit it, or {fix}"
        )
    return int(when)


def _mode() -> str:
    """``root`` as root; ``unshare`` otherwise, after checking what it needs."""
    if os.geteuid() == 0:
        return "root"
    for tool, package in UNSHARE_TOOLS.items():
        if shutil.which(tool) is None:
            raise NativeBuildRefused(
                f"an unprivileged native build needs {tool}: install the Debian package {package}"
            )
    user = pwd.getpwuid(os.geteuid()).pw_name
    for path in ("/etc/subuid", "/etc/subgid"):
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError:
            text = ""
        names = {line.split(":", 1)[0] for line in text.splitlines()}
        if user not in names and str(os.geteuid()) not in names:
            raise NativeBuildRefused(
                f"an unprivileged native build needs subordinate ids: add {user} to {path} "
                f"(e.g. `usermod --add-subuids 100000-165535 --add-subgids 100000-165535 {user}`)"
            )
    for path, what in ((sys.executable, "this Python"), (__file__, "mushin-box")):
        if not _others_can_read(Path(path).resolve()):
            raise NativeBuildRefused(
                f"an unprivileged native build runs {what} ({path}) in a user namespace, "
                "where it reads as another user's: make it readable by all, or build as root"
            )
    return "unshare"


def _others_can_read(path: Path) -> bool:
    """Whether a user that owns nothing here may read ``path`` (every parent searchable)."""
    for parent in path.parents:
        if not os.stat(parent).st_mode & 0o001:
            return False
    return bool(os.stat(path).st_mode & 0o004)


def check_native(spec: ImageSpec, context: Path) -> tuple[str, int]:
    """Everything a native build needs, checked before anything is written.

    Returns
    -------
    (mode, source_date_epoch) : tuple of (str, int)
        mmdebstrap's mode (``"root"`` or ``"unshare"``) and the build's time.

    Raises
    ------
    NativeBuildRefused
        A base this builder cannot make, a missing host tool (named with its Debian
        package), missing subordinate ids, pip packages with no ``venv``, no
        ``SOURCE_DATE_EPOCH``.
    FileNotFoundError
        A ``%files`` source that does not exist under ``context``.
    """
    why = native_refusal(spec)
    if why is not None:
        raise NativeBuildRefused(why)
    for tool, package in HOST_TOOLS.items():
        if shutil.which(tool) is None:
            raise NativeBuildRefused(
                f"the native builder needs {tool}: install the Debian package {package}"
            )
    if not os.path.isfile(host_ca_bundle()):
        raise NativeBuildRefused(
            f"the native builder needs a CA bundle for pip: install the Debian package "
            f"ca-certificates ({_DEBIAN_CA}), or set SSL_CERT_FILE"
        )
    mode = _mode()
    if spec.venv is None and (spec.pip or spec.pip_lock or spec.project):
        raise NativeBuildRefused(
            "pip packages on a Debian base need a venv (Debian's Python refuses pip installs "
            "outside one): set ImageSpec(venv='/opt/venv', python='python3')"
        )
    missing = [src for src, _ in spec.all_files() if not glob.glob(str(context / src))]
    if missing:
        raise FileNotFoundError(
            f"%files sources not found under the build context {context}: {missing} "
            "(relative sources resolve against the context; pass context=/--context)"
        )
    return mode, source_date_epoch(spec, context)


# ------------------------------------------------------------------------- the build


def _lock_hashes(text: str) -> dict[str, list[str]]:
    """``name==version -> [sha256:...]`` of a hash-locked requirements text."""
    out: dict[str, list[str]] = {}
    current = ""
    for line in text.replace("\\\n", " ").splitlines():
        line = line.split(" #", 1)[0].strip()
        if match := _HASH_LINE.match(line):
            current = f"{match[1].lower()}=={match[2]}"
            out[current] = []
        if current:
            out[current] += _HASH_RE.findall(line)
    return out


def _plan(
    spec: ImageSpec, definition: str, context: Path, epoch: int, staging: Path
) -> dict[str, Any]:
    """What the hook does in the tree, as plain data (it runs in another process).

    The ``%files`` sources are first copied (``cp -fLr``, as Apptainer copies them) into
    ``staging``, readable by all: an unprivileged build's hook runs as a subordinate id,
    which cannot read the user's own files.
    """
    files = []
    for index, (src, dest) in enumerate(spec.all_files()):
        stage = staging / str(index)
        stage.mkdir(parents=True)
        subprocess.run(
            ["cp", "-fLr", *sorted(glob.glob(str(context / src))), str(stage)], check=True
        )
        files.append([[str(p) for p in sorted(stage.iterdir())], dest])
    for path in [staging, *staging.rglob("*")] if files else []:  # chmod -R a+rX
        mode = path.lstat().st_mode
        if not path.is_symlink():
            path.chmod(mode | 0o444 | (0o111 if path.is_dir() or mode & 0o100 else 0))
    return {
        "files": files,
        "setup": setup_lines(spec),
        "environment": environment_lines(spec),
        "runscript": runscript_lines(spec),
        "test": list(spec.test),
        "labels": dict(spec.labels),
        "definition": definition,
        "python": spec.python if spec.venv is None else f"{spec.venv}/bin/python",
        "epoch": str(epoch),
    }


def build_native(
    spec: ImageSpec,
    definition: str,
    *,
    context: Path,
    workdir: Path,
    mode: str,
    epoch: int,
    timeout: float,
) -> tuple[Path, dict[str, Any]]:
    """Build ``spec`` in ``workdir`` (which the caller removes); return the SIF and the
    manifest fields it adds to the definition-side ones."""
    assert isinstance(spec.base, Debootstrap)
    plan = _plan(spec, definition, context, epoch, workdir / "files")
    (workdir / "plan.json").write_text(json.dumps(plan), encoding="utf-8")
    root = workdir / "root"
    hook = shlex.join([sys.executable, "-m", __name__, str(workdir)]) + ' "$1"'
    # written by mmdebstrap as this user: the hook's user may not write in workdir
    copy_out = shlex.join(["copy-out", _PROBE_IN_TREE, str(workdir)])
    env = {**os.environ, "SOURCE_DATE_EPOCH": str(epoch), "LC_ALL": "C.UTF-8"}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    argv = [
        "mmdebstrap",
        f"--mode={mode}",
        "--variant=minbase",
        "--format=directory",
        *(["--include=" + ",".join(spec.apt)] if spec.apt else []),
        *([f"--hook-dir={_EATMYDATA}"] if os.path.isdir(_EATMYDATA) else []),
        f"--customize-hook={hook}",
        f"--customize-hook={copy_out}",
        str(spec.base.suite),
        str(root),
        str(spec.base.mirror),
    ]
    result = run_bounded(argv, timeout=timeout, env=env, capture=False)
    probe_file = workdir / Path(_PROBE_IN_TREE).name
    if result.returncode != 0 or not probe_file.is_file():
        raise BuildError(
            f"mmdebstrap failed with exit code {result.returncode} (its output is above): "
            f"check the mirror {spec.base.mirror} and the apt pins"
        )
    if mode == "root":  # the device nodes root can make: an unshare build has none
        for entry in sorted((root / "dev").iterdir()):  # (Apptainer mounts /dev at run time)
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
    sif = workdir / "image.sif"
    labels = {**plan["labels"], "org.mushin-box.backend": "native"}
    meta = json.dumps({"data": {"attributes": {"labels": labels}}, "type": "container"})
    userns = ("mmdebstrap", "--unshare-helper") if mode == "unshare" else ()
    try:
        pack_tree(
            root,
            sif,
            source_date_epoch=epoch,
            definition=definition,
            metadata=meta.encode(),
            userns=userns,
        )
    except (PackError, PackInputError) as error:
        raise BuildError(f"packing the image failed: {error}") from error
    probe = json.loads(probe_file.read_text(encoding="utf-8"))
    lock = "" if spec.pip_lock is None else (context / spec.pip_lock).read_text(encoding="utf-8")
    lock += "\n" + "\n".join(spec.pip)
    # the hooks and the tree name the build directory
    recorded = [a if a != str(root) else "DIR" for a in argv if "-hook=" not in a]
    return sif, {
        "build_argv": tuple(recorded),
        "backend": "native",
        "mirror": spec.base.mirror,
        "base_digest": probe["release_sha256"],
        "python_version": probe["python_version"],
        "packages": probe["packages"],
        "dpkg_packages": tuple(probe["dpkg"]),
        "dpkg_sha256": probe["dpkg_sha256"],
        "pip_freeze": tuple(probe["freeze"]),
        "pip_hashes": _lock_hashes(lock),
        "source_date_epoch": str(epoch),
    }


# ------------------------------------------------------------------- in the tree (hook)


def _chroot(root: Path, script: str, plan: Mapping[str, Any], *, capture: bool = False) -> str:
    proxies = {k: v for k, v in os.environ.items() if k.lower().endswith("_proxy")}
    env = {
        **proxies,
        "PIP_CERT": _CA_IN_TREE,
        "PATH": _CHROOT_PATH,
        "HOME": "/root",
        "LANG": "C.UTF-8",
        "SOURCE_DATE_EPOCH": plan["epoch"],
        "PYTHONDONTWRITEBYTECODE": "1",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "PIP_NO_INPUT": "1",
        "DEBIAN_FRONTEND": "noninteractive",
    }
    argv = ["chroot", str(root), "/bin/sh", "-c", script]
    result = subprocess.run(argv, env=env, stdout=subprocess.PIPE if capture else None, text=True)
    if result.returncode != 0:
        raise SystemExit(f"in the image: `{script.splitlines()[-1]}` failed ({result.returncode})")
    return result.stdout or ""


def _write(path: Path, text: str, mode: int = 0o644) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    path.chmod(mode)


def _singularity_d(root: Path, plan: Mapping[str, Any]) -> None:
    sd = root / ".singularity.d"
    for sub in ("env", "libs", "actions"):
        (sd / sub).mkdir(parents=True, exist_ok=True)
    environment = "".join(line + "\n" for line in plan["environment"])
    for name, text in (("01-base.sh", _ENV_01), ("90-environment.sh", _ENV_90 + environment)):
        _write(sd / "env" / name, text, 0o755)
    _write(sd / "env" / "99-base.sh", _ENV_99, 0o755)
    runscript = plan["runscript"] or ['exec "$@"']
    _write(sd / "runscript", "#!/bin/sh\n\n" + "".join(f"{x}\n" for x in runscript), 0o755)
    if plan["test"]:
        _write(sd / "test", "#!/bin/sh\n\n" + "".join(f"{x}\n" for x in plan["test"]), 0o755)
    _write(sd / "Singularity", plan["definition"])
    _write(sd / "labels.json", json.dumps(plan["labels"], indent=4, sort_keys=True) + "\n")
    for link, target in (("singularity", ".singularity.d/runscript"),
                         ("environment", ".singularity.d/env/90-environment.sh")):  # fmt: skip
        (root / link).unlink(missing_ok=True)
        (root / link).symlink_to(target)


def _probe(root: Path, plan: Mapping[str, Any]) -> dict[str, Any]:
    """The package lists the manifest records, read in the tree before the cleanup."""
    python = shlex.quote(plan["python"])
    found = _chroot(root, f"{python} -I -c {shlex.quote(PROBE_SCRIPT)}", plan, capture=True)
    query = shlex.join([*DPKG_QUERY[:3], "${Package}=${Version}=${Architecture}\\n"])
    installed = _chroot(root, query, plan, capture=True).split()
    freeze = _chroot(root, f"{python} -I -m pip freeze --all 2>/dev/null || :", plan, capture=True)
    lists = root / "var/lib/apt/lists"
    sums: dict[str, str] = {}
    for packages in sorted(lists.glob("*_Packages")):
        for stanza in packages.read_text(encoding="utf-8", errors="replace").split("\n\n"):
            fields = dict(_STANZA_FIELD.findall(stanza))
            if len(fields) == 4:
                key = "=".join(fields[k] for k in ("Package", "Version", "Architecture"))
                sums[key] = "sha256:" + fields["SHA256"]
    release = b"".join(p.read_bytes() for p in sorted(lists.glob("*Release")))
    return {
        **json.loads(found),
        "dpkg": [line.rsplit("=", 1)[0] for line in installed],
        "dpkg_sha256": {k.rsplit("=", 1)[0]: sums[k] for k in installed if k in sums},
        "freeze": [line for line in freeze.splitlines() if line],
        "release_sha256": "sha256:" + hashlib.sha256(release).hexdigest(),
    }


def _cleanup(root: Path) -> None:
    """What differs from one build to the next, or names the build host, goes."""
    for top in sorted(root.iterdir()):
        if top.name in _MOUNTED or top.is_symlink() or not top.is_dir():
            continue
        for path in sorted(top.rglob("*"), reverse=True):
            if path.name == "__pycache__" and path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            elif path.suffix == ".pyc" and path.is_file() and not path.is_symlink():
                path.unlink()
    for path in sorted((root / "var/log").rglob("*"), reverse=True):
        if path.is_file() or path.is_symlink():
            path.unlink()
    shutil.rmtree(root / "root/.cache", ignore_errors=True)  # mmdebstrap empties apt's after
    for name in ("etc/resolv.conf", "etc/hostname"):  # Apptainer binds the host's at run time
        (root / name).unlink(missing_ok=True)
        (root / name).write_text("")


def _hook(workdir: Path, root: Path) -> None:
    """The customize hook: every step that runs in the tree (see the module docstring)."""
    plan = json.loads((workdir / "plan.json").read_text(encoding="utf-8"))
    # pip in the tree trusts what the host trusts (a site's proxy CA); mmdebstrap empties /tmp
    shutil.copyfile(host_ca_bundle(), root / _CA_IN_TREE.lstrip("/"))
    for sources, dest in plan["files"]:
        target = root / dest.lstrip("/")
        if dest.endswith("/"):
            target.mkdir(parents=True, exist_ok=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["cp", "-fLr", *sources, str(target)], check=True)
    if plan["setup"]:
        _chroot(root, "set -eu\n" + "\n".join(plan["setup"]), plan)
    _singularity_d(root, plan)
    if plan["test"]:
        _chroot(root, ". /.singularity.d/env/90-environment.sh\n/bin/sh /.singularity.d/test", plan)
    # apt's download directories belong to _apt, unless apt could not drop to _apt (a build
    # directory _apt cannot reach) and downloaded as root
    partial = "/var/cache/apt/archives/partial /var/lib/apt/lists/partial"
    _chroot(root, f"for d in {partial}; do [ ! -d $d ] || chown _apt:root $d || :; done", plan)
    probe = json.dumps(_probe(root, plan))
    (root / _PROBE_IN_TREE.lstrip("/")).write_text(probe, encoding="utf-8")
    _cleanup(root)


if __name__ == "__main__":  # mmdebstrap's customize hook: WORKDIR ROOT
    _hook(Path(sys.argv[1]), Path(sys.argv[2]))
