# SPDX-License-Identifier: MIT
"""What the native builder runs in the image's tree: mmdebstrap's customize hook.

mmdebstrap runs ``python -m mushin_box._image.intree WORKDIR ROOT`` once the base's tree is
in ``ROOT``, to carry out ``WORKDIR/plan.json`` (plain data: in an unprivileged build this
process is a subordinate id in mmdebstrap's user namespace). It imports the standard
library only: that process loads nothing of the host side's build.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

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
#: Runs in the image (``python -I -B FILE``) once every ``.pyc`` is gone: unchecked-hash
#: bytecode of every source on ``sys.path`` (the image is read-only). marshal's output
#: depends on the process's history, so a fixed number of processes each compile a fixed
#: part of the sources, in name order: the same bytes whatever the machine's cores.
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
_CA_IN_TREE = "/tmp/mushin-box-ca.pem"
PROBE_IN_TREE = "/tmp/mushin-box-probe.json"
DEBIAN_CA = "/etc/ssl/certs/ca-certificates.crt"
_MOUNTED = ("proc", "sys", "dev")  # mmdebstrap mounts these in the tree while hooks run
_HELP_SECTION = re.compile(r"^%help\n(.*?)(?=^%|\Z)", re.MULTILINE | re.DOTALL)
_STANZA_FIELD = re.compile(r"^(Package|Version|Architecture|SHA256): (.*)$", re.MULTILINE)
_ENV_01 = "#!/bin/sh\n#\n# Copyright (c) Contributors to the Apptainer project\n#\n"
_ENV_90 = "#!/bin/sh\n# Custom environment shell code should follow\n\n"
_ENV_99 = (
    '#!/bin/sh\nif [ -z "$LD_LIBRARY_PATH" ]; then\n'
    '    LD_LIBRARY_PATH="/.singularity.d/libs"\nelse\n'
    '    LD_LIBRARY_PATH="$LD_LIBRARY_PATH:/.singularity.d/libs"\nfi\n'
    'PS1="Apptainer> "\nexport LD_LIBRARY_PATH PS1\n'
)


def host_ca_bundle() -> str:
    """The CA bundle this host's pip trusts: ``PIP_CERT``, ``SSL_CERT_FILE``, or Debian's."""
    for name in ("PIP_CERT", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE"):
        if os.path.isfile(os.environ.get(name, "")):
            return os.environ[name]
    return DEBIAN_CA


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
    if "FAKECHROOT" in os.environ:  # the fakechroot mode: fakechroot's chroot (its variables),
        # where pip reads the host's local sources in place
        env |= {k: v for k, v in os.environ.items() if k.startswith(("FAKE", "LD_"))}
        env["FAKECHROOT_EXCLUDE_PATH"] = ":".join(["/dev:/proc:/sys", *plan["pip_paths"]])
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


def _singularity_d(root: Path, plan: Mapping[str, Any]) -> str:
    """``/.singularity.d`` over a base's, by Apptainer's rules (``build --force``): the
    environment appended, the labels merged, the runscript, test and help replaced only by
    the spec's, the base's definition kept in ``bootstrap_history``. Returns the help."""
    sd = root / ".singularity.d"
    for sub in ("env", "libs", "actions"):
        (sd / sub).mkdir(parents=True, exist_ok=True)
    for name, text in (("01-base.sh", _ENV_01), ("99-base.sh", _ENV_99)):
        if not (sd / "env" / name).is_file():
            _write(sd / "env" / name, text, 0o755)
    env90 = sd / "env" / "90-environment.sh"
    if not env90.is_file():
        _write(env90, _ENV_90 + "".join(line + "\n" for line in plan["environment"]), 0o755)
    elif plan["environment"]:
        with env90.open("a", encoding="utf-8") as out:
            out.write("\n" + "\n".join(plan["environment"]) + "\n")
    if plan["runscript"] or not (sd / "runscript").is_file():
        runscript = plan["runscript"] or ['exec "$@"']
        _write(sd / "runscript", "#!/bin/sh\n\n" + "".join(f"{x}\n" for x in runscript), 0o755)
    if plan["test"]:
        _write(sd / "test", "#!/bin/sh\n\n" + "".join(f"{x}\n" for x in plan["test"]), 0o755)
    # %help's body as Apptainer's parser keeps it (lines as written), then a newline
    if (found := _HELP_SECTION.search(plan["definition"])) and found[1]:
        _write(sd / "runscript.help", found[1] + "\n")
    if (sd / "Singularity").is_file():
        history = sd / "bootstrap_history"
        history.mkdir(exist_ok=True)
        (sd / "Singularity").rename(history / f"Apptainer{len(list(history.iterdir()))}")
    _write(sd / "Singularity", plan["definition"])
    found = sd / "labels.json"
    try:  # a base's labels that are no JSON object fail the build, as Apptainer's does
        labels = json.loads(found.read_text(encoding="utf-8")) if found.is_file() else {}
    except ValueError:
        labels = None
    if not isinstance(labels, dict):
        raise SystemExit("in the image: the base's labels.json is not a JSON object; fix the base")
    _write(found, json.dumps({**labels, **plan["labels"]}, indent=4, sort_keys=True) + "\n")
    for link, target in (
        ("singularity", ".singularity.d/runscript"),
        ("environment", ".singularity.d/env/90-environment.sh"),
    ):
        (root / link).unlink(missing_ok=True)
        (root / link).symlink_to(target)
    help_file = sd / "runscript.help"  # the spec's, or a base's
    return help_file.read_text("utf-8", "replace").rstrip("\n") if help_file.is_file() else ""


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
    """The setup lines in a chroot, in a private mount namespace that binds the host's local
    pip paths read-only (not in fakechroot mode); the mount points made for them go after."""
    fake = "FAKECHROOT" in os.environ
    points = [] if fake else _bind_points(root, plan["pip_paths"])
    for _, point in points:
        point.mkdir()  # pip's sources are directories (find-links, file:// indexes)
    argv = [] if fake else ["unshare", "--mount", "--propagation", "private"]
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
    """The customize hook (mmdebstrap copies the package lists it writes out)."""
    plan = json.loads((workdir / "plan.json").read_text(encoding="utf-8"))
    # pip in the tree trusts what the host trusts (a site's proxy CA); mmdebstrap empties /tmp
    shutil.copyfile(host_ca_bundle(), root / _CA_IN_TREE.lstrip("/"))
    for sources, dest in plan["files"]:
        target = root / dest.lstrip("/")  # Apptainer makes DEST when it ends in "/"
        (target if dest.endswith("/") else target.parent).mkdir(parents=True, exist_ok=True)
        subprocess.run(["cp", "-fLr", *sources, str(target)], check=True)
    if plan["setup"]:
        with timed("setup (venv, pip, project, post)"):
            _setup_with_binds(workdir, root, plan)
    helpfile = _singularity_d(root, plan)
    if plan["test"]:
        with timed("test"):
            test = ". /.singularity.d/env/90-environment.sh\n/bin/sh /.singularity.d/test"
            _chroot(root, test, plan)
    # apt's download directories belong to _apt, unless apt could not drop to _apt (a build
    # directory _apt cannot reach) and downloaded as root
    partial = "/var/cache/apt/archives/partial /var/lib/apt/lists/partial"
    _chroot(root, f"for d in {partial}; do [ ! -d $d ] || chown _apt:root $d || :; done", plan)
    with timed("package lists and cleanup"):
        probe = json.dumps({**_probe(root, plan), "helpfile": helpfile})
        (root / PROBE_IN_TREE.lstrip("/")).write_text(probe, encoding="utf-8")
        _cleanup(root)
    with timed("bytecode"):
        script = root / _COMPILE_IN_TREE.lstrip("/")
        script.write_text(COMPILE_SCRIPT, encoding="utf-8")
        _chroot(root, f"{shlex.quote(plan['python'])} -I -B {_COMPILE_IN_TREE}", plan)
        script.unlink()


@contextlib.contextmanager
def timed(step: str) -> Iterator[None]:
    """Say on stderr how long ``step`` took, as mmdebstrap's own ``I:`` lines do."""
    start = time.monotonic()
    yield
    print(f"I: mushin-box: {step}: {time.monotonic() - start:.1f} s", file=sys.stderr, flush=True)


if __name__ == "__main__":  # mmdebstrap's customize hook: WORKDIR ROOT
    if sys.argv[1] == "--setup":  # in the hook's own private mount namespace
        _setup(Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[4:])
    else:
        _hook(Path(sys.argv[1]), Path(sys.argv[2]))
