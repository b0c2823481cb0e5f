# SPDX-License-Identifier: MIT
"""The native builder: a bit-reproducible SIF from an ImageSpec, with no Apptainer.

:func:`build_native` makes the image in a build directory the caller removes. mmdebstrap
makes the root file system in the first mode this user can use (:func:`_mode`): a
``Debootstrap`` base as ``--variant=minbase`` with the spec's apt packages, or a
``LocalImage`` copied in whole (its own apt sources install them later). Its customize hook
(:mod:`~mushin_box._image.intree`) does in the tree what the definition says, then
:func:`~mushin_box._image.pack.pack_tree` packs it. ``SOURCE_DATE_EPOCH`` is the recipe's
time (the spec's, else its pip lock's commit time), never the clock: equal recipes and
equal package versions give equal bytes. Every check that can fail runs in
:func:`check_native`, before anything is written.
"""

from __future__ import annotations

import contextlib
import functools
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
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from mushin_box._core.errors import MushinBoxError
from mushin_box._core.procs import git
from mushin_box._core.procs import run_bounded as _run_bounded
from mushin_box._core.targets import public
from mushin_box._core.version import __version__
from mushin_box._image import intree
from mushin_box._image.bases import Debootstrap, LocalImage
from mushin_box._image.definition import (
    apt_lines,
    environment_lines,
    image_python,
    runscript_lines,
    setup_lines,
)
from mushin_box._image.digest import image_sha256
from mushin_box._image.pack import PackError, PackInputError, pack_tree
from mushin_box._image.sif import SifFormatError, file_sha256, root_squashfs_offset
from mushin_box._image.spec import ImageSpec

#: host tool -> the Debian package that has it
HOST_TOOLS = {
    "mmdebstrap": "mmdebstrap",
    "mksquashfs": "squashfs-tools",
    "unsquashfs": "squashfs-tools",
    "git": "git",
}
UNSHARE_TOOLS = {"newuidmap": "uidmap", "newgidmap": "uidmap", "unshare": "util-linux"}
#: what ``build_image(native_mode=...)`` and ``mushin-box build --native-mode`` take
MODES = ("auto", "root", "unshare", "fakechroot")
#: pip settings that say where packages come from, passed to the image's pip
PIP_SOURCES = ("index-url", "extra-index-url", "find-links", "trusted-host")
_P = ParamSpec("_P")
_R = TypeVar("_R")
# mmdebstrap's own hooks: dpkg without fsync while it builds (about half the time), and
# eatmydata removed again before the cleanup
_EATMYDATA = "/usr/share/mmdebstrap/hooks/eatmydata"
_HASH_LINE = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?\s*==\s*([^\s;\\]+)")
_HASH_RE = re.compile(r"--hash[= ](sha256:[0-9a-fA-F]{64})")
_CHECK_MIRROR = ": check the network, the proxy (http_proxy) and the mirror's URL"
#: what a failed build printed -> what it means and what to do, first match wins; each
#: needle is a line only that failure prints (apt's warnings name "Permission denied" in
#: builds that succeed). ``None``: the matching line itself, which already says it.
_FAILURES = {
    "No space left on device": (
        "the disk filled up: free space under {where}, or build elsewhere (-o)"
    ),
    "DO NOT MATCH THE HASHES": (
        "pip refused a file whose hash is not in the lock (named above): "
        "the lock does not match what the index serves; generate the lock again"
    ),
    "Temporary failure resolving": "the mirror {mirror} cannot be reached" + _CHECK_MIRROR,
    "Failed to fetch": "the mirror {mirror} cannot be reached or lacks a file" + _CHECK_MIRROR,
    "Could not connect": "the mirror {mirror} cannot be reached" + _CHECK_MIRROR,
    "E: Version '": (
        "an apt pin is not on the mirror {mirror} (named above): pin a version it "
        "has, or use a snapshot mirror that has the pinned one"
    ),
    "Unable to locate package": "an apt package is not on the mirror {mirror} (named above)",
    "E: cannot create": (
        "the build's subordinate ids cannot reach a directory (above): the "
        "output's directory and its parents must be searchable by all (chmod o+x)"
    ),
    "in the image: ": None,
}


@public
class BuildError(MushinBoxError, RuntimeError):
    """An image build (``apptainer build``, or a step of the native builder) failed."""


@public
class NativeBuildRefused(MushinBoxError, ValueError):
    """The native builder cannot build this spec on this machine; nothing was written.

    The message is one line naming what is missing (a Debian package, an ``/etc/subuid``
    entry, a spec field) or the backend that can build it.
    """


def _timeout_is_build_error(run: Callable[_P, _R]) -> Callable[_P, _R]:
    """``run``, its timeout a :class:`BuildError` that names the step and what to check."""

    @functools.wraps(run)
    def bounded(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return run(*args, **kwargs)
        except subprocess.TimeoutExpired as exc:
            argv = list(exc.cmd)
            raise BuildError(
                f"{argv[0]} {argv[1]} ran past {exc.timeout:g} s and was stopped: check what it "
                "waits for (the mirror, an index, a lock), or give build_image a longer timeout"
            ) from exc

    return bounded


run_bounded = _timeout_is_build_error(_run_bounded)


def explain_failure(output: str, *, mirror: str, where: Path) -> str | None:
    """What the tail of a failed build's ``output`` says went wrong, as one line, or
    ``None`` when it matches nothing known.

    >>> explain_failure("E: ...: No space left on device", mirror="m", where=Path("/x"))
    'the disk filled up: free space under /x, or build elsewhere (-o)'
    """
    for needle, meaning in _FAILURES.items():
        line = next((x.strip() for x in output.splitlines() if needle in x), None)
        if line is not None:
            return line if meaning is None else meaning.format(mirror=mirror, where=where)
    return None


def host_pip_settings() -> tuple[dict[str, str], list[str]]:
    """This host's pip sources (:data:`PIP_SOURCES`) as ``PIP_*`` variables, from ``pip
    config list`` and the environment (which wins), and the local directories they name
    (bound read-only into the tree): a site's index serves the image's pip too."""
    names = {n: "PIP_" + n.upper().replace("-", "_") for n in PIP_SOURCES}
    argv, listed = [sys.executable, "-m", "pip", "config", "list"], ""
    with contextlib.suppress(OSError):
        listed = run_bounded(argv, timeout=120, capture=True).stdout
    env: dict[str, str] = {}
    for line in listed.splitlines():
        key, _, raw = line.partition("=")
        section, _, name = key.partition(".")
        if section in ("global", "install") and name in PIP_SOURCES:
            env[names[name]] = raw.strip().strip("'\"")
    env.update({var: os.environ[var] for var in names.values() if os.environ.get(var)})
    tokens = (t.removeprefix("file://") for t in " ".join(env.values()).split())
    return env, sorted({os.path.normpath(t) for t in tokens if t[:1] == "/" and os.path.isdir(t)})


def native_refusal(spec: ImageSpec) -> str | None:
    """Why the native builder cannot make ``spec``'s base (it makes a ``Debootstrap`` base,
    or copies a ``LocalImage`` sandbox or squashfs SIF; not a Docker one), else ``None``.

    >>> native_refusal(ImageSpec(base="debian@sha256:" + "0" * 64))  # doctest: +ELLIPSIS
    'the base debian@sha256:000... is a Docker image: ...--backend apptainer'
    """
    if isinstance(spec.base, str):
        return (
            f"the base {spec.base} is a Docker image: the native builder makes Debootstrap and "
            "LocalImage bases only; use --backend apptainer"
        )
    if isinstance(spec.base, LocalImage) and not os.path.isdir(spec.base.path):
        try:
            root_squashfs_offset(spec.base.path)
        except (SifFormatError, OSError) as exc:
            why = exc.text if isinstance(exc, SifFormatError) else str(exc)
            return f"the base {spec.base.path}: {why}; use --backend apptainer"
    return None


def source_date_epoch(spec: ImageSpec, context: Path) -> int:
    """The build's ``SOURCE_DATE_EPOCH``: the spec's, else the commit time of its pip lock
    (refused when changed since: the build would carry another recipe's time)."""
    if spec.source_date_epoch is not None:
        return spec.source_date_epoch
    fix = "set ImageSpec(source_date_epoch=...) (Unix seconds)"
    if spec.pip_lock is None:
        raise NativeBuildRefused(f"a native build needs SOURCE_DATE_EPOCH: {fix}")
    lock = context / spec.pip_lock
    status, log = (
        git([*args, "--", lock.name], lock.parent, timeout=60)
        for args in (["status", "--porcelain"], ["log", "-1", "--format=%ct"])
    )
    if status is None:  # git failed, so it cannot say whether the lock is committed
        raise NativeBuildRefused(
            f"`git status` could not read {spec.pip_lock} (not in a git repository, git not "
            f"installed, or past 60 s): commit it in a repository, or {fix}"
        )
    when = (log or "").strip()
    if status.strip() or not when:
        raise NativeBuildRefused(
            f"{spec.pip_lock} has no commit time in git (not committed, or changed since): "
            f"commit it, or {fix}"
        )
    return int(when)


def _mode(forced: str = "auto") -> str:
    """mmdebstrap's mode: ``forced``, or (``auto``) ``root`` as root, else ``unshare`` where
    it works, else ``fakechroot``; each checked for what it needs (:data:`MODES`)."""
    if forced not in MODES:
        raise NativeBuildRefused(f"native mode {forced!r}: one of {', '.join(MODES)}")
    if forced in ("auto", "root") and os.geteuid() == 0:
        return "root"
    if forced == "root":
        raise NativeBuildRefused("the native mode root needs root: build as root, or in another")
    why = None if forced == "fakechroot" else _unshare_refusal()
    if forced == "unshare" and why:
        raise NativeBuildRefused(why)
    if forced != "fakechroot" and why is None:
        return "unshare"
    if all(shutil.which(tool) for tool in ("fakechroot", "fakeroot")):
        return "fakechroot"
    lead = "the native mode fakechroot" if why is None else f"{why}; or, for the fakechroot mode"
    raise NativeBuildRefused(f"{lead}: install the Debian packages fakechroot fakeroot")


def _unshare_refusal() -> str | None:
    """Why ``mmdebstrap --mode=unshare`` cannot run for this user, or ``None``: its tools,
    a user namespace (tried), the user's subordinate ids, mushin-box readable by them."""
    who = "an unprivileged native build (mode unshare)"
    if why := _missing_tool(UNSHARE_TOOLS, who):
        return why
    refused, tried = 1, ["unshare", "--user", "--map-root-user", "true"]  # hung: refused
    with contextlib.suppress(subprocess.TimeoutExpired):
        refused = subprocess.run(tried, capture_output=True, timeout=30).returncode
    if refused:
        return f"{who} needs user namespaces, which this host refuses to this user"
    user = pwd.getpwuid(os.geteuid()).pw_name
    for path in ("/etc/subuid", "/etc/subgid"):
        text = Path(path).read_text(encoding="utf-8") if os.path.isfile(path) else ""
        names = {line.split(":", 1)[0] for line in text.splitlines()}
        if user not in names and str(os.geteuid()) not in names:
            return (
                f"{who} needs subordinate ids: add {user} to {path} (e.g. `usermod "
                f"--add-subuids 100000-165535 --add-subgids 100000-165535 {user}`)"
            )
    for path, what in ((sys.executable, "this Python"), (__file__, "mushin-box")):
        real = Path(path).resolve()  # readable by all, its parents searchable by all
        searchable = all(p.stat().st_mode & 0o001 for p in real.parents)
        if not searchable or not real.stat().st_mode & 0o004:
            return (
                f"{who} runs {what} ({path}) in a user namespace, where it reads as another "
                "user's: make it readable by all, or build as root"
            )
    return None


def _missing_tool(tools: Mapping[str, str], who: str) -> str | None:
    """The line that refuses a build missing a host tool, naming its Debian package."""
    missing = [(tool, package) for tool, package in tools.items() if not shutil.which(tool)]
    return next((f"{who} needs {t}: install the Debian package {p}" for t, p in missing), None)


def build_tools(mode: str) -> dict[str, str | None]:
    """The versions of the host tools that can change the image's bytes (the manifest's
    ``build_tools``; a rebuild elsewhere needs the same): the first version number in the
    first line of ``TOOL --version``, ``None`` for one not told."""
    tools = ["mmdebstrap", "mksquashfs"]
    tools += ["fakechroot", "fakeroot"] if mode == "fakechroot" else []
    versions: dict[str, str | None] = dict.fromkeys(tools)
    for tool in versions:
        flag = "-version" if tool == "mksquashfs" else "--version"
        with contextlib.suppress(OSError, BuildError):
            done = run_bounded([tool, flag], timeout=60, capture=True)
            first = done.stdout.partition("\n")[0] if done.returncode == 0 else ""
            if found := re.search(r"\d+(?:\.\d+)+[^\s,)]*", first):
                versions[tool] = found[0]
    return versions


def check_native(spec: ImageSpec, context: Path, mode: str = "auto") -> tuple[str, int]:
    """Check all a native build in ``mode`` needs, before anything is written; return
    mmdebstrap's mode (``auto`` resolved) and ``SOURCE_DATE_EPOCH``."""
    if why := native_refusal(spec) or _missing_tool(HOST_TOOLS, "the native builder"):
        raise NativeBuildRefused(why)
    if not os.path.isfile(intree.host_ca_bundle()):
        raise NativeBuildRefused(
            f"the native builder needs a CA bundle for pip: install the Debian package "
            f"ca-certificates ({intree.DEBIAN_CA}), or set SSL_CERT_FILE"
        )
    mode = _mode(mode)
    if mode == "fakechroot" and isinstance(spec.base, LocalImage):  # copied in outside the
        raise NativeBuildRefused(  # chroot, where its links resolve wrongly (mmdebstrap(1))
            "the fakechroot mode builds Debootstrap bases only: build a LocalImage base as root "
            "or in the mode unshare"
        )
    if spec.venv is None and (spec.pip or spec.pip_lock or spec.project):
        raise NativeBuildRefused(
            "pip packages on a Debian base need a venv (Debian's Python refuses pip installs "
            "outside one): set ImageSpec(venv='/opt/venv', python='python3')"
        )
    check_files_exist(spec, context)
    return mode, source_date_epoch(spec, context)


def check_files_exist(spec: ImageSpec, context: Path) -> None:
    """A ``FileNotFoundError`` naming the ``%files`` sources missing under ``context``."""
    missing = [src for src, _ in spec.all_files() if not (context / src).exists()]
    if missing:
        raise FileNotFoundError(
            f"%files sources not found under the build context {context}: {missing} "
            "(relative sources resolve against the context; pass context=/--context)"
        )


def _recipe_files(spec: ImageSpec, context: Path, spec_file: Path | None) -> list[Path]:
    """Every file a native build reads from the context, in a fixed order: the spec's file,
    then each ``%files`` source, in name order; not ``__pycache__``, which the build removes."""
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
    """``(recipe sha256, context commit)`` of a native build: the sha256 of all that decides
    the image's bytes but the mirror, the indexes and the host tools; the commit, ``HEAD``
    of the git work tree at ``context`` when it holds those files committed and unchanged."""
    files = _recipe_files(spec, context, spec_file)
    digest = hashlib.sha256()
    digest.update(f"{__version__}\0{epoch}\0{len(definition)}\0{definition}".encode())
    digest.update(f"\0{_base_identity(spec)}".encode())
    for path in files:
        data = path.read_bytes()
        mode = "x" if path.stat().st_mode & 0o111 else "-"  # the image's mode: see _plan
        digest.update(f"\0{os.path.relpath(path, context)}\0{mode}\0{len(data)}\0".encode())
        digest.update(data)
    recipe = digest.hexdigest()
    if shutil.which("git") is None or not files:
        return recipe, None
    head = git(["rev-parse", "HEAD"], context, timeout=60)
    # --ignored: an ignored input (!!) is in no commit, as an untracked one (??)
    status = git(
        ["status", "--porcelain", "--ignored", "--", *map(str, files)], context, timeout=60
    )
    return recipe, None if head is None or status is None or status.strip() else head.strip()


def _base_identity(spec: ImageSpec) -> str:
    """A ``LocalImage`` base's bytes as the recipe knows them: a SIF's sha256, or a sandbox's
    tree; "" for a ``Debootstrap`` base, which the definition names whole."""
    if not isinstance(spec.base, LocalImage):
        return ""
    base = Path(spec.base.path)
    if base.is_file():
        return "sif:" + image_sha256(base)
    digest = hashlib.sha256()
    for top, dirs, names in os.walk(base):  # never into a symlinked directory
        dirs.sort()
        for name in sorted(dirs + names):
            path = os.path.join(top, name)
            st = os.lstat(path)
            entry = f"{os.path.relpath(path, base)}\0{st.st_mode:o}\0{st.st_uid}:{st.st_gid}\0"
            digest.update(entry.encode("utf-8", "surrogateescape"))
            if os.path.islink(path):
                digest.update(os.readlink(path).encode("utf-8", "surrogateescape"))
            elif os.path.isfile(path):
                digest.update(file_sha256(path).encode())
    return "tree:" + digest.hexdigest()


def context_dir(context: Path) -> str | None:
    """Where ``context`` lies in its git work tree (``"."`` at its top, else the relative
    path), or None outside one: a rebuild from the commit builds there again."""
    prefix = git(["rev-parse", "--show-prefix"], context, timeout=60)
    return None if prefix is None else prefix.strip().rstrip("/") or "."


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
    """What the hook does in the tree, as plain data; the ``%files`` sources staged with
    modes 0755 or 0644: readable by the hook's subordinate id, whatever the umask."""
    files = []
    # a Debootstrap base gets its apt packages from mmdebstrap, a LocalImage base from its
    # own apt sources, here
    setup = [*(apt_lines(spec) if isinstance(spec.base, LocalImage) else ()), *setup_lines(spec)]
    pip_env, pip_paths = host_pip_settings() if setup_lines(spec) else ({}, [])
    for index, (src, dest) in enumerate(spec.all_files()):
        stage = staging / str(index)
        stage.mkdir(parents=True)
        # os.path.join, not pathlib, which drops the "." of `dir/.` (the directory's contents)
        sources = sorted(glob.glob(os.path.join(context, src)))
        subprocess.run(["cp", "-fLr", *sources, str(stage)], check=True)
        files.append([[str(p) for p in sorted(stage.iterdir())], dest])
    for path in [staging, *staging.rglob("*")] if files else []:
        if not path.is_symlink():  # one mode per kind, whatever the umask: the same image
            executable = path.is_dir() or path.stat().st_mode & 0o111
            path.chmod(0o755 if executable else 0o644)
    return {
        "files": files,
        "setup": setup,
        "environment": environment_lines(spec),
        "runscript": runscript_lines(spec),
        "test": list(spec.test),
        "labels": dict(spec.labels),
        "definition": definition,
        "python": image_python(spec),
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
    plan = _plan(spec, definition, context, epoch, workdir / "files")
    (workdir / "plan.json").write_text(json.dumps(plan), encoding="utf-8")
    root = workdir / "root"
    hook = shlex.join([sys.executable, "-m", intree.__name__, str(workdir)]) + ' "$1"'
    # written by mmdebstrap as this user: the hook's user may not write in workdir
    copy_out = shlex.join(["copy-out", intree.PROBE_IN_TREE, str(workdir)])
    env = {**os.environ, "SOURCE_DATE_EPOCH": str(epoch), "LC_ALL": "C.UTF-8"}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    options, where = _base_argv(spec)
    hooks = [f"--customize-hook={hook}", f"--customize-hook={copy_out}"]
    # fakechroot: a tar, whose owners are fakeroot's records (a directory's are this user's)
    out = root if mode != "fakechroot" else workdir / "root.tar"
    argv = ["mmdebstrap", f"--mode={mode}", f"--format={'tar' if out != root else 'directory'}"]
    argv += [*options, *hooks, where[0], str(out), *where[1:]]
    with intree.timed("mmdebstrap and the hooks"):
        result = run_bounded(argv, timeout=timeout, env=env, capture=False, tail=200)
    probe_file = workdir / Path(intree.PROBE_IN_TREE).name
    mirror = str(spec.base.mirror) if isinstance(spec.base, Debootstrap) else "of the base"
    if result.returncode != 0 or not probe_file.is_file():
        why = explain_failure(result.stderr or "", mirror=mirror, where=workdir.parent)
        raise BuildError(
            f"mmdebstrap failed with exit code {result.returncode}: "
            + (why or f"its output is above; check the mirror {mirror} and the apt pins")
        )
    userns = ("mmdebstrap", "--unshare-helper") if mode == "unshare" else ()
    if mode == "fakechroot":  # unpacked in a fakeroot session whose record of owners, modes
        # and devices (on disk all is this user's) packs it; /dev's entries go, as in root mode
        userns = ("fakeroot", "-i", str(workdir / "fakeroot.state"))
        root.mkdir()
        argv_x = ["fakeroot", "-s", userns[2], "tar", "-C", str(root), "--exclude=./dev/?*"]
        argv_x += ["--same-owner", "--numeric-owner", "-xpf", str(out)]
        untar = run_bounded(argv_x, timeout=timeout, capture=True)
        if untar.returncode != 0:
            raise BuildError(f"unpacking mmdebstrap's tar failed: {untar.stderr.strip()}")
        out.unlink()
    if mode == "root":  # the device nodes root can make: the other modes' trees have none
        for entry in sorted((root / "dev").iterdir()):  # (Apptainer mounts /dev at run time)
            (shutil.rmtree if entry.is_dir() and not entry.is_symlink() else os.unlink)(entry)
    sif = workdir / "image.sif"
    probe = json.loads(probe_file.read_text(encoding="utf-8"))
    # `apptainer inspect --helpfile` and `run-help` read a SIF's help here, not in the tree
    attributes = {"labels": {**plan["labels"], "org.mushin-box.backend": "native"}}
    attributes |= {"helpfile": probe["helpfile"]} if probe["helpfile"] else {}
    meta = json.dumps({"data": {"attributes": attributes}, "type": "container"})
    try:
        with intree.timed("mksquashfs and the SIF"):
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
    lock = "" if spec.pip_lock is None else (context / spec.pip_lock).read_text(encoding="utf-8")
    lock += "\n" + "\n".join(spec.pip)
    # the hooks and the tree name the build directory
    recorded = [a if a != str(out) else "DIR" for a in argv if "-hook=" not in a]
    return sif, {
        "build_argv": tuple(recorded),
        "mirror": spec.base.mirror if isinstance(spec.base, Debootstrap) else None,
        # a LocalImage SIF's is its file's sha256 (build_image's)
        **({"base_digest": probe["release_sha256"]} if isinstance(spec.base, Debootstrap) else {}),
        "python_version": probe["python_version"],
        "packages": probe["packages"],
        "dpkg_packages": tuple(probe["dpkg"]),
        "dpkg_sha256": probe["dpkg_sha256"],
        "pip_freeze": tuple(probe["freeze"]),
        "pip_hashes": _lock_hashes(lock),
        "source_date_epoch": str(epoch),
        "build_tools": build_tools(mode),
    }


def _base_argv(spec: ImageSpec) -> tuple[list[str], list[str]]:
    """mmdebstrap's options for ``spec``'s base, and its suite and mirror; a ``LocalImage``
    is copied in whole, with the host's ``resolv.conf`` (for ``apt_lines``; emptied after)."""
    base = spec.base
    if isinstance(base, Debootstrap):
        options = ["--variant=minbase", *(["--include=" + ",".join(spec.apt)] if spec.apt else [])]
        if os.path.isdir(_EATMYDATA):
            options.append(f"--hook-dir={_EATMYDATA}")
        return options, [str(base.suite), str(base.mirror)]
    assert isinstance(base, LocalImage)
    if os.path.isdir(base.path):  # tar in the hook's namespace: the owners are the tree's
        copy = f'tar -C {shlex.quote(base.path)} -c . | tar -C "$1" -x'
    else:
        offset = root_squashfs_offset(base.path)
        copy = f'unsquashfs -q -n -f -o {offset} -d "$1" {shlex.quote(base.path)}'
    setup = 'rm -f "$1/etc/apt/sources.list" && ' + copy
    setup += ' && rm -f "$1/etc/resolv.conf" && cp /etc/resolv.conf "$1/etc/resolv.conf"'
    options = ["--variant=custom", "--skip=update,check/signed-by", f"--setup-hook={setup}"]
    return options, ["stable", "http://deb.debian.org/debian"]  # written over, then gone
