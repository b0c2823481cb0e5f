# SPDX-License-Identifier: MIT
"""The native builder: a bit-reproducible SIF from an ImageSpec, with no Apptainer.

For a :class:`~mushin_box._image.bases.Debootstrap` base, :func:`build_native` makes the
image in these steps, all in a build directory that the caller removes:

1. the root file system, by ``mmdebstrap --variant=minbase`` with the spec's suite,
   mirror and apt packages (``--mode=root`` as root, ``--mode=unshare`` otherwise);
2. in the tree (an mmdebstrap customize hook, which runs this module with the tree's
   path): the spec's ``%files``, then the ``%post`` steps the definition renders after
   apt (:func:`~mushin_box._image.definition.setup_lines`: the venv, pip with
   ``--require-hashes``, the project, ``post``), run in a chroot. pip there finds
   packages where this host's pip does (:func:`host_pip_settings`: its indexes and
   find-links, the local ones bound read-only for that step alone): the lock's hashes, not
   the index, decide which bytes are installed;
3. ``/.singularity.d`` as Apptainer lays it out (``env/``, ``runscript``, ``test``,
   ``labels.json``, ``Singularity`` = the rendered definition); the spec's ``test`` runs;
4. the package lists for the manifest, then the cleanup that makes the tree the same on
   every build: no logs, caches, apt lists, ``machine-id``, ``resolv.conf`` or ``hostname``
   contents, and every ``.pyc`` replaced (:data:`COMPILE_SCRIPT`);
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
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from mushin_box._core.errors import MushinBoxError
from mushin_box._core.procs import run_bounded as _run_bounded
from mushin_box._core.targets import public
from mushin_box._core.version import __version__
from mushin_box._image.bases import Debootstrap
from mushin_box._image.definition import environment_lines, runscript_lines, setup_lines
from mushin_box._image.pack import PackError, PackInputError, pack_tree
from mushin_box._image.spec import ImageSpec

__all__ = [
    "COMPILE_SCRIPT",
    "DPKG_QUERY",
    "PROBE_SCRIPT",
    "BuildError",
    "NativeBuildRefused",
    "build_native",
    "check_native",
    "explain_failure",
    "native_refusal",
    "recipe_identity",
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
#: pip settings that say where packages come from, passed to the image's pip
PIP_SOURCES = ("index-url", "extra-index-url", "find-links", "trusted-host")
#: Runs in the image with its Python (``python -I -B FILE``), after every ``.pyc`` the
#: packages left is gone: the bytecode of every source on its ``sys.path``, hash-based and
#: never checked against the source (the image is read-only: without bytecode every rank
#: compiles everything it imports, every time it starts). No time is stored.
#: marshal's output depends on the process's history (its references follow reference
#: counts), so the sources, listed in name order, are cut into a fixed number of parts, each
#: compiled in order by a process of its own: the same parts in the same Python give the
#: same bytes, whatever the machine's cores. ``-B``: the processes' own start-up imports
#: write no timestamped bytecode. A source that does not compile (a package's Python 2 test
#: data) is skipped, as pip skips it: it cannot be imported either.
COMPILE_SCRIPT = """\
import os, py_compile, subprocess, sys
PARTS = 4
def sources():
    found = {}
    for folder in sorted({p for p in sys.path if os.path.isdir(p)}):
        for top, dirs, names in os.walk(folder):
            dirs.sort()
            found.update((os.path.join(top, n), None) for n in sorted(names) if n.endswith(".py"))
    return list(found)
if len(sys.argv) == 2:
    files = sources()
    size = -(-len(files) // PARTS)
    part = int(sys.argv[1])
    mode = py_compile.PycInvalidationMode.UNCHECKED_HASH
    for path in files[part * size : (part + 1) * size]:
        py_compile.compile(path, doraise=False, quiet=2, invalidation_mode=mode)
else:
    argv = [sys.executable, "-I", "-B", __file__]
    parts = [subprocess.Popen([*argv, str(i)]) for i in range(PARTS)]
    sys.exit(max(p.wait() for p in parts))
"""
_COMPILE_IN_TREE = "/tmp/mushin-box-compile.py"
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
    tail: int = 0,
) -> subprocess.CompletedProcess[str]:
    """:func:`~mushin_box._core.procs.run_bounded`, its timeout a :class:`BuildError`."""
    try:
        return _run_bounded(argv, timeout=timeout, cwd=cwd, capture=capture, env=env, tail=tail)
    except subprocess.TimeoutExpired as exc:
        raise BuildError(
            f"{argv[0]} {argv[1]} ran past {timeout:g} s and was stopped: check what it waits "
            "for (the mirror, an index, a lock), or give build_image a longer timeout"
        ) from exc


#: (what a failed build printed, what it means and what to do), first match wins; each
#: needle is a line only that failure prints (apt's warnings name "Permission denied" in
#: builds that succeed). ``None``: the matching line itself, which already says it.
_FAILURES = (
    ("No space left on device", "the disk filled up: free space under {where}, or build "
     "elsewhere (-o)"),
    ("DO NOT MATCH THE HASHES", "pip refused a file whose hash is not in the lock (named above): "
     "the lock does not match what the index serves; generate the lock again"),
    ("Temporary failure resolving", "the mirror {mirror} cannot be reached: check the network, "
     "the proxy (http_proxy) and the mirror's URL"),
    ("Failed to fetch", "the mirror {mirror} cannot be reached or lacks a file: check the "
     "network, the proxy (http_proxy) and the mirror's URL"),
    ("Could not connect", "the mirror {mirror} cannot be reached: check the network, the proxy "
     "(http_proxy) and the mirror's URL"),
    ("E: Version '", "an apt pin is not on the mirror {mirror} (named above): pin a version it "
     "has, or use a snapshot mirror that has the pinned one"),
    ("Unable to locate package", "an apt package is not on the mirror {mirror} (named above)"),
    ("E: cannot create", "the build's subordinate ids cannot reach a directory (above): the "
     "output's directory and its parents must be searchable by all (chmod o+x)"),
    ("in the image: ", None),
)  # fmt: skip


def explain_failure(output: str, *, mirror: str, where: Path) -> str | None:
    """What the tail of a failed build's ``output`` says went wrong, as one line, or
    ``None`` when it matches nothing known.

    Examples
    --------
    >>> explain_failure("E: ...: No space left on device", mirror="m", where=Path("/x"))
    'the disk filled up: free space under /x, or build elsewhere (-o)'
    """
    for needle, meaning in _FAILURES:
        line = next((x.strip() for x in output.splitlines() if needle in x), None)
        if line is not None:
            return line if meaning is None else meaning.format(mirror=mirror, where=where)
    return None


# ------------------------------------------------------------------------- the checks


def host_ca_bundle() -> str:
    """The CA bundle this host's pip trusts: ``PIP_CERT``, ``SSL_CERT_FILE``, or Debian's."""
    for name in ("PIP_CERT", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE"):
        if os.path.isfile(os.environ.get(name, "")):
            return os.environ[name]
    return _DEBIAN_CA


def host_pip_settings() -> tuple[dict[str, str], list[str]]:
    """Where this host's pip finds packages, for the image's pip.

    Returns the ``PIP_*`` variables of :data:`PIP_SOURCES` (from ``pip config list``,
    where this Python has pip, and the environment, which wins), and the local paths they
    name (``file://`` indexes, find-links: directories), which the build binds read-only
    into the tree while pip runs. A site's private index or wheel directory then serves
    the image's pip as it serves the user's.
    """
    found: dict[str, str] = {}
    try:
        listed = run_bounded(
            [sys.executable, "-m", "pip", "config", "list"], timeout=120, capture=True
        ).stdout
    except OSError:
        listed = ""
    for line in (listed or "").splitlines():
        key, _, raw = line.partition("=")
        section, _, name = key.partition(".")
        if section in ("global", "install") and name in PIP_SOURCES:
            found[name] = raw.strip().strip("'\"")
    names = {n: "PIP_" + n.upper().replace("-", "_") for n in PIP_SOURCES}
    env = {names[n]: v for n, v in found.items()}
    env.update({var: os.environ[var] for var in names.values() if os.environ.get(var)})
    paths = set()
    for token in " ".join(env.values()).split():
        path = token.removeprefix("file://")
        if path.startswith("/") and os.path.isdir(path):
            paths.add(os.path.normpath(path))
    return env, sorted(paths)


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


def _recipe_files(spec: ImageSpec, context: Path, spec_file: Path | None) -> list[Path]:
    """Every file a native build reads from the context, in a fixed order: the spec's own
    file, then each ``%files`` source (the lock, the files, the project), directories
    walked in name order. ``__pycache__`` is left out: the build removes it."""
    found = [spec_file] if spec_file is not None else []
    for src, _ in spec.all_files():
        for match in sorted(glob.glob(str(context / src))):
            path = Path(match)
            if not path.is_dir():
                found.append(path)
                continue
            found += sorted(
                q for q in path.rglob("*") if q.is_file() and "__pycache__" not in q.parts
            )
    return found


def recipe_identity(
    spec: ImageSpec, definition: str, context: Path, epoch: int, spec_file: Path | None = None
) -> tuple[str, str | None]:
    """``(recipe sha256, context commit)`` of a native build.

    The sha256 covers what decides the image's bytes apart from the mirror's and the
    indexes' contents: the rendered definition (base, mirror, packages, steps), the
    builder's version, ``SOURCE_DATE_EPOCH``, and the names, modes and bytes of every file
    the build reads (:func:`_recipe_files`). Two builds with one recipe sha256 and the
    same package versions are the same bytes, so an image whose manifest holds it is not
    built again.

    The commit is the context's git ``HEAD`` when every one of those files is committed
    there unchanged, so the recipe can be checked out again (``reproduce
    --rebuild-image``); else ``None``.
    """
    files = _recipe_files(spec, context, spec_file)
    digest = hashlib.sha256()
    digest.update(f"{__version__}\0{epoch}\0{len(definition)}\0{definition}".encode())
    for path in files:
        data = path.read_bytes()
        mode = "x" if path.stat().st_mode & 0o111 else "-"  # the image's mode: see _plan
        digest.update(f"\0{os.path.relpath(path, context)}\0{mode}\0{len(data)}\0".encode())
        digest.update(data)
    return digest.hexdigest(), _clean_commit(context, files)


def _clean_commit(context: Path, files: Sequence[Path]) -> str | None:
    """``HEAD`` of the git work tree at ``context`` if it holds ``files`` committed and
    unchanged, else ``None`` (no git, not a work tree, untracked or changed files)."""
    if shutil.which("git") is None or not files:
        return None
    names = [str(p) for p in files]
    try:
        head = run_bounded(["git", "rev-parse", "HEAD"], cwd=context, timeout=60, capture=True)
        # --ignored: an ignored input (!!) is in no commit, as an untracked one (??)
        status = run_bounded(["git", "status", "--porcelain", "--ignored", "--", *names],
                             cwd=context, timeout=60, capture=True)  # fmt: skip
    except (OSError, BuildError):
        return None
    if head.returncode or status.returncode or status.stdout.strip():
        return None
    return head.stdout.strip()


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
    ``staging``, with modes 0755 (directories, executables) or 0644: readable by all (an
    unprivileged build's hook runs as a subordinate id, which cannot read the user's own
    files), and the same whatever the user's umask.
    """
    files = []
    pip_env, pip_paths = host_pip_settings() if setup_lines(spec) else ({}, [])
    for index, (src, dest) in enumerate(spec.all_files()):
        stage = staging / str(index)
        stage.mkdir(parents=True)
        subprocess.run(
            ["cp", "-fLr", *sorted(glob.glob(str(context / src))), str(stage)], check=True
        )
        files.append([[str(p) for p in sorted(stage.iterdir())], dest])
    for path in [staging, *staging.rglob("*")] if files else []:
        if not path.is_symlink():  # one mode per kind, whatever the umask: the same image
            executable = path.is_dir() or path.stat().st_mode & 0o111
            path.chmod(0o755 if executable else 0o644)
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
        "pip_env": pip_env,
        "pip_paths": pip_paths,
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
    hook = shlex.join([sys.executable, "-m", __spec__.name, str(workdir)]) + ' "$1"'
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
    with _timed("mmdebstrap and the hooks"):
        result = run_bounded(argv, timeout=timeout, env=env, capture=False, tail=200)
    probe_file = workdir / Path(_PROBE_IN_TREE).name
    if result.returncode != 0 or not probe_file.is_file():
        mirror = str(spec.base.mirror)
        why = explain_failure(result.stderr or "", mirror=mirror, where=workdir.parent)
        raise BuildError(
            f"mmdebstrap failed with exit code {result.returncode}: "
            + (why or f"its output is above; check the mirror {mirror} and the apt pins")
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
        with _timed("mksquashfs and the SIF"):
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
        **plan["pip_env"],
        "PIP_CERT": _CA_IN_TREE,
        "PATH": _CHROOT_PATH,
        "HOME": "/root",
        "LANG": "C.UTF-8",
        "SOURCE_DATE_EPOCH": plan["epoch"],
        "PYTHONDONTWRITEBYTECODE": "1",
        "PIP_NO_COMPILE": "1",  # compiled once, at the end (COMPILE_SCRIPT)
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "PIP_NO_INPUT": "1",
        "DEBIAN_FRONTEND": "noninteractive",
    }
    argv = ["chroot", str(root), "/bin/sh", "-c", script]
    result = subprocess.run(argv, env=env, stdout=subprocess.PIPE if capture else None, text=True)
    if result.returncode != 0:
        what = script if "\n" not in script else "a step of the setup (%post)"
        raise SystemExit(f"in the image: {what} failed ({result.returncode}): see above")
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
    for folder, dirs, files in os.walk(root):  # os.walk follows no symlinked directory
        if folder == str(root):
            dirs[:] = [d for d in dirs if d not in _MOUNTED]
        if "__pycache__" in dirs:
            dirs.remove("__pycache__")
            if not os.path.islink(cache := os.path.join(folder, "__pycache__")):
                shutil.rmtree(cache)
        for name in files:
            if name.endswith(".pyc") and not os.path.islink(os.path.join(folder, name)):
                os.unlink(os.path.join(folder, name))
    for path in sorted((root / "var/log").rglob("*"), reverse=True):
        if path.is_file() or path.is_symlink():
            path.unlink()
    shutil.rmtree(root / "root/.cache", ignore_errors=True)  # mmdebstrap empties apt's after
    for name in ("etc/resolv.conf", "etc/hostname"):  # Apptainer binds the host's at run time
        (root / name).unlink(missing_ok=True)
        (root / name).write_text("")


def _bind_points(root: Path, paths: Sequence[str]) -> list[tuple[str, Path]]:
    """``(host path, mount point)`` for each local pip path: its topmost ancestor the tree
    lacks (so a ``file://`` index's relative links resolve), never one the tree has."""
    points: dict[str, Path] = {}
    for path in paths:
        top = Path("/")
        for part in Path(path).parts[1:]:
            top /= part
            if not (root / str(top).lstrip("/")).exists():
                points.setdefault(str(top), root / str(top).lstrip("/"))
                break
    return sorted(points.items())


def _setup_with_binds(workdir: Path, root: Path, plan: Mapping[str, Any]) -> None:
    """The setup lines in a chroot, in a private mount namespace where the host's local pip
    paths are bound read-only: the binds end with that namespace, and the mount points
    made for them are removed after, so nothing of the host stays in the tree."""
    points = _bind_points(root, plan["pip_paths"])
    for _, point in points:
        point.mkdir()  # pip's sources are directories (find-links, file:// indexes)
    argv = ["unshare", "--mount", "--propagation", "private"]
    argv += [sys.executable, "-m", __spec__.name, "--setup", str(workdir), str(root)]
    code = subprocess.run([*argv, *(str(p) for pair in points for p in pair)]).returncode
    for _, point in reversed(points):
        point.rmdir()  # empty unless a bind outlived the namespace: then this fails
    if code != 0:
        raise SystemExit(f"the image's setup failed ({code}): its output is above")


def _setup(workdir: Path, root: Path, binds: Sequence[str]) -> None:
    """In the private mount namespace: bind ``binds`` (host path, mount point, ...)
    read-only, then run the setup lines."""
    plan = json.loads((workdir / "plan.json").read_text(encoding="utf-8"))
    for source, point in zip(binds[::2], binds[1::2], strict=True):
        subprocess.run(["mount", "--bind", source, point], check=True)
        subprocess.run(["mount", "-o", "remount,bind,ro", point], check=True)
    _chroot(root, "set -eu\n" + "\n".join(plan["setup"]), plan)


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
        with _timed("setup (venv, pip, project, post)"):
            _setup_with_binds(workdir, root, plan)
    _singularity_d(root, plan)
    if plan["test"]:
        with _timed("test"):
            test = ". /.singularity.d/env/90-environment.sh\n/bin/sh /.singularity.d/test"
            _chroot(root, test, plan)
    # apt's download directories belong to _apt, unless apt could not drop to _apt (a build
    # directory _apt cannot reach) and downloaded as root
    partial = "/var/cache/apt/archives/partial /var/lib/apt/lists/partial"
    _chroot(root, f"for d in {partial}; do [ ! -d $d ] || chown _apt:root $d || :; done", plan)
    with _timed("package lists and cleanup"):
        probe = json.dumps(_probe(root, plan))
        (root / _PROBE_IN_TREE.lstrip("/")).write_text(probe, encoding="utf-8")
        _cleanup(root)
    with _timed("bytecode"):
        script = root / _COMPILE_IN_TREE.lstrip("/")
        script.write_text(COMPILE_SCRIPT, encoding="utf-8")
        _chroot(root, f"{shlex.quote(plan['python'])} -I -B {_COMPILE_IN_TREE}", plan)
        script.unlink()


@contextlib.contextmanager
def _timed(step: str) -> Iterator[None]:
    """Say on stderr how long ``step`` took, as mmdebstrap's own ``I:`` lines do."""
    start = time.monotonic()
    yield
    print(f"I: mushin-box: {step}: {time.monotonic() - start:.1f} s", file=sys.stderr, flush=True)


if __name__ == "__main__":  # mmdebstrap's customize hook: WORKDIR ROOT
    if sys.argv[1] == "--setup":  # in the hook's own private mount namespace
        _setup(Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[4:])
    else:
        _hook(Path(sys.argv[1]), Path(sys.argv[2]))
