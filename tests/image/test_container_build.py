# SPDX-License-Identifier: MIT
"""The image half of mushin_box's container support: ImageSpec, definition, SIF, build.

Golden files (reviewed like code):

- ``tests/golden/image.def``: ``containers/image.py:IMAGE`` rendered;
- ``tests/golden/kitchen-sink.def``: every ImageSpec field rendered.

After an intended change, regenerate them and review the diff::

    MUSHIN_UPDATE_GOLDEN=1 .venv/bin/pytest tests/image/test_container_build.py -p no:cacheprovider
    git diff tests/golden/

SIF reader: checked against ``tests/golden/siftool-2.8.3.sif``, a real file written by
Debian bookworm's ``siftool`` 2.8.3 (its ``siftool header``/``siftool list`` output is
``tests/golden/siftool-2.8.3.txt``), and against fresh files when ``siftool`` is on PATH.

Lock: ``containers/requirements.lock`` must pin every ``PINS`` entry with hashes;
``scripts/lock-image`` is run against a fake ``uv`` (no network), which checks what it asks
uv for, not what PyPI answers.

Build: ``tests/standins/apptainer-standin-build`` is put on PATH as ``apptainer``. It is
a stand-in, not Apptainer: apptainer support is NOT verified by these tests. The one
test that needs the real binary skips with "apptainer not on PATH".
"""

from __future__ import annotations

import datetime as dt
import hashlib
import importlib.machinery
import importlib.util
import json
import os
import platform
import re
import shlex
import shutil
import struct
import subprocess
import sys
import uuid
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from conftest import GOLDEN, REPO, STANDINS, Golden
from defparse import every_rendered_definition_parses  # noqa: F401  (autouse: every def parses)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mushin_box._core.redact import is_secret_name
from mushin_box._core.sidecars import canonical_dumps
from mushin_box._image.build import (
    ApptainerNotFound,
    BuildError,
    build_image,
    manifest_path,
    plan_build,
    read_manifest,
)
from mushin_box._image.definition import render_definition
from mushin_box._image.sif import (
    SifFormatError,
    file_sha256,
    read_sif_descriptors,
    read_sif_header,
    read_sif_object,
)
from mushin_box._image.spec import ImageSpec, ProjectInstall
from mushin_box.cli import main as cli
from mushin_box.cli.build import load_spec

STANDIN = STANDINS / "apptainer-standin-build"
SIFTOOL_SIF = GOLDEN / "siftool-2.8.3.sif"
SIFTOOL_TXT = GOLDEN / "siftool-2.8.3.txt"
DIGEST = "sha256:" + "ab" * 32

KITCHEN_SINK = ImageSpec(
    base="ghcr.io/example/base:1.0@" + DIGEST,
    apt=("git=1:2.39.5-0+deb12u2", "libibverbs1=44.0-2"),
    pip=(
        "numpy==2.4.6 --hash=sha256:" + "1" * 64 + " --hash=sha256:" + "2" * 64,
        'tomli==2.0.1 ; python_version < "3.11" --hash=sha256:' + "3" * 64,
    ),
    pip_lock="locks/requirements.lock",
    pip_index_url="https://download.pytorch.org/whl/cu128",
    pip_extra_index_urls=("https://pypi.org/simple",),
    files={"configs/site.yaml": "/etc/mushin/site.yaml", "bin/": "/usr/local/bin/"},
    env={
        "NCCL_DEBUG": "WARN",
        "GREETING": 'it\'s a "test" $HOME `date` ; rm -rf / # not a comment',
        "MULTI": "line one\n  line two\n",
        "UNICODE": "naïve ✓",
        "EMPTY": "",
    },
    labels={"org.example.owner": "Joana Q", "org.example.empty": ""},
    post=("python -m compileall -q /opt/app", "echo 'done' \\\n  && true"),
    project=ProjectInstall(
        dest="/opt/app", include=("pyproject.toml", "src/app"), src="app", build_isolation=True
    ),
    runscript=("python", "-m", "app"),
    runscript_args=("--config", "default config.yaml"),
    test=("python -c 'import app'",),
    help="Kitchen-sink image.\n\nSecond paragraph: 100% tested.",
)


def _sections(definition: str) -> dict[str, str]:
    """Split a definition the way Apptainer's parser does (first word starting with %)."""
    out: dict[str, list[str]] = {}
    current = "header"
    for line in definition.split("\n"):
        words = line.split()
        if words and words[0].startswith("%"):
            current = words[0][1:]
            out[current] = []
        else:
            out.setdefault(current, []).append(line)
    return {k: "\n".join(v) for k, v in out.items()}


def _sh(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["sh", "-c", script, "sh", *args], capture_output=True, text=True, timeout=30
    )


# --------------------------------------------------------------------------- golden


def test_project_image_matches_golden(golden: Golden) -> None:
    spec, stem = load_spec(str(REPO / "containers" / "image.py"))
    assert stem == "image"
    golden("image.def", render_definition(spec))


def test_kitchen_sink_matches_golden(golden: Golden) -> None:
    golden("kitchen-sink.def", render_definition(KITCHEN_SINK))


def test_rendering_is_deterministic_and_order_free() -> None:
    a = ImageSpec(base="debian@" + DIGEST, env={"B": "2", "A": "1"}, labels={"y": "1", "x": "2"})
    b = ImageSpec(base="debian@" + DIGEST, env={"A": "1", "B": "2"}, labels={"x": "2", "y": "1"})
    assert a == b
    assert render_definition(a) == render_definition(b)
    env = _sections(render_definition(a))["environment"]
    assert env.index("export A=") < env.index("export B=")


def test_project_image_is_pinned_and_installs_the_project() -> None:
    spec, _ = load_spec(f"{REPO / 'containers' / 'image.py'}:IMAGE")
    assert spec.base_digest.startswith("sha256:") and len(spec.base_digest) == 71
    assert all("=" in p for p in spec.apt)
    post = _sections(render_definition(spec))["post"]
    assert "--require-hashes -r /opt/mushin-box-build/requirements.lock" in post
    assert "pip install --no-cache-dir --no-deps --no-build-isolation /opt/mushin-box" in post
    assert post.index("requirements.lock") < post.index("--no-deps")


LOCK = REPO / "containers" / "requirements.lock"
LOCK_SCRIPT = REPO / "scripts" / "lock-image"


def _project_pins() -> tuple[str, ...]:
    import runpy

    return tuple(runpy.run_path(str(REPO / "containers" / "image.py"))["PINS"])


def _lock_entries(text: str) -> dict[str, list[str]]:
    """``name==version`` -> its ``--hash=sha256:...`` values, from a uv/pip-tools lock."""
    entries: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        if re.match(r"^[A-Za-z0-9]", line):
            current = line.split()[0]
            entries[current] = []
        elif current and (m := re.search(r"--hash=sha256:([0-9a-f]{64})", line)):
            entries[current].append(m.group(1))
    return entries


def test_project_lock_pins_every_pin_with_hashes() -> None:
    PINS = _project_pins()

    text = LOCK.read_text()
    assert text.startswith(
        "# This file was autogenerated by uv via the following command:\n#    scripts/lock-image\n"
    )
    entries = _lock_entries(text)
    assert set(PINS) <= set(entries), set(PINS) - set(entries)
    assert all(entries.values()), [k for k, v in entries.items() if not v]  # --require-hashes
    names = [e.split("==")[0] for e in entries]
    assert len(names) == len(set(names)) and len(entries) > len(PINS)


def test_project_image_builds_through_the_standin(
    tmp_path: Path, standin_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    # every %files source of the project's image exists in the repository (the lock
    # included), so the build gets past the check that runs before Apptainer does
    monkeypatch.chdir(REPO)
    out = tmp_path / "image.sif"
    assert cli.main(["build", "-o", str(out)]) == 0, capsys.readouterr().err
    manifest = read_manifest(out)
    spec, _ = load_spec("containers/image.py")
    assert manifest.base_digest == spec.base_digest and manifest.sif_sha256 == file_sha256(out)
    assert "containers/requirements.lock /opt/mushin-box-build/requirements.lock" in (
        out.with_suffix(".def").read_text()
    )


FAKE_UV = """#!/bin/sh
# records what scripts/lock-image passes to uv, then writes a fake lock to -o/--output-file
if [ "$1" = "--version" ]; then echo "uv ${FAKE_UV_VERSION:-0.13.9}"; exit 0; fi
log="$FAKE_UV_LOG"
printf '%s\\n' "$@" > "$log.argv"
cat > "$log.stdin"
env > "$log.env"
while [ $# -gt 0 ]; do
    if [ "$1" = "--output-file" ]; then
        shift; cp "$1" "$log.prior" 2>/dev/null  # uv keeps the pins of an existing output
        printf 'fake==1 \\\\\\n    --hash=sha256:00\\n' > "$1"
    fi
    shift
done
"""


@pytest.fixture
def lock_sandbox(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A copy of scripts/lock-image and containers/image.py, and a fake uv (MUSHIN_UV)."""
    root = tmp_path / "repo"
    (root / "scripts").mkdir(parents=True)
    (root / "containers").mkdir()
    shutil.copy2(LOCK_SCRIPT, root / "scripts" / "lock-image")
    shutil.copy2(LOCK_SCRIPT.with_name("lock-common.sh"), root / "scripts" / "lock-common.sh")
    shutil.copy2(REPO / "containers" / "image.py", root / "containers" / "image.py")
    uv = tmp_path / "uv"
    uv.write_text(FAKE_UV)
    uv.chmod(0o755)
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "MUSHIN_UV": str(uv),
        "FAKE_UV_LOG": str(tmp_path / "uv"),
        "UV_INDEX_URL": "https://evil.example/simple",
        "UV_EXCLUDE_NEWER": "2000-01-01T00:00:00Z",
    }
    return root, env


def test_lock_image_compiles_the_pins_for_the_image_platform(
    lock_sandbox: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    PINS = _project_pins()

    root, env = lock_sandbox
    proc = subprocess.run(
        [str(root / "scripts" / "lock-image"), "--no-annotate"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    argv = (tmp_path / "uv.argv").read_text().splitlines()
    assert argv[:3] == ["pip", "compile", "-"]
    for flag, value in [
        ("--python-version", "3.11"),
        ("--python-platform", "x86_64-manylinux_2_28"),
        ("--index-url", "https://pypi.org/simple"),
        ("--custom-compile-command", "scripts/lock-image"),
    ]:
        assert argv[argv.index(flag) + 1] == value
    assert {"--generate-hashes", "--no-config", "--exclude-newer", "--no-annotate"} <= set(argv)
    assert (tmp_path / "uv.stdin").read_text().splitlines() == list(PINS)
    seen_env = (tmp_path / "uv.env").read_text()
    assert "UV_INDEX_URL" not in seen_env and "UV_EXCLUDE_NEWER" not in seen_env
    lock = root / "containers" / "requirements.lock"
    assert lock.read_text().startswith("fake==1")
    check = subprocess.run(
        [str(root / "scripts" / "lock-image"), "--no-annotate", "--check"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert check.returncode == 0, check.stderr
    lock.write_text("stale==0\n")
    check = subprocess.run(
        [str(root / "scripts" / "lock-image"), "--check"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert check.returncode == 1 and "out of date: run scripts/lock-image" in check.stderr
    assert lock.read_text() == "stale==0\n"  # --check never writes
    assert (tmp_path / "uv.prior").read_text() == "stale==0\n"  # resolved over the lock


def test_lock_image_refuses_another_uv_version(lock_sandbox: tuple[Path, dict[str, str]]) -> None:
    root, env = lock_sandbox
    env["FAKE_UV_VERSION"] = "0.1.0"
    proc = subprocess.run(
        [str(root / "scripts" / "lock-image")], capture_output=True, env=env, text=True, timeout=60
    )
    assert proc.returncode == 2 and "is uv 0.1.0, this lock is made with uv 0.13.9" in proc.stderr
    assert not (root / "containers" / "requirements.lock").exists()


# --------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"base": "python:3.11-slim"}, r"pinned by digest.*skopeo inspect docker://python"),
        ({"base": "python@sha256:abc"}, "pinned by digest"),
        ({"base": "python:3.11@sha256:" + "A" * 64}, "pinned by digest"),
        ({"apt": ["git"]}, r"'name=version'.*apt-cache policy git"),
        ({"pip": ["torch==2.13.0"]}, "no --hash"),
        ({"pip": ["torch>=2 --hash=sha256:" + "0" * 64]}, "pin one version"),
        ({"pip": ["torch==2.13.0 --hash=sha256:abc"]}, "malformed sha256"),
        ({"files": {"my file": "/x"}}, "only letters"),
        ({"files": {"a*.py": "/x/"}}, "only letters"),
        ({"files": {"-rf": "/x"}}, "not start"),
        ({"files": {"a": "relative"}}, "absolute"),
        ({"env": {"1X": "v"}}, "valid variable name"),
        ({"env": {"APPTAINERENV_X": "v"}}, "configure Apptainer"),
        ({"env": {"WANDB_API_KEY": "v"}}, r"looks like a secret.*env=\{'WANDB_API_KEY': None\}"),
        ({"env": {"X": "{{ TORCH }}"}}, "build-argument"),
        ({"env": {"X": "a\n%post"}}, "new section"),
        ({"env": {"X": "a\n   %x"}}, "new section"),
        ({"env": {"X": "a\rb"}}, "carriage returns"),
        ({"env": {"X": "a\x00b"}}, "NUL"),
        ({"env": {"X": "\ud800"}}, "UTF-8"),
        ({"env": [("X", "1"), ("X", "2")]}, "duplicate"),
        ({"labels": {"k": "a\nb"}}, "single line"),
        ({"labels": {"k": " padded"}}, "whitespace"),
        ({"labels": {"has space": "v"}}, "label key"),
        ({"labels": {"#k": "v"}}, "label key"),
        ({"post": ["%files"]}, "starts with '%'"),
        ({"post": ["echo {{ x }}"]}, "build-argument"),
        ({"test": ["ok\n%runscript"]}, "new section"),
        ({"help": "fine\n%labels"}, "section"),
        ({"pip_index_url": "ftp://x"}, "URL"),
        ({"pip_lock": "my lock.txt"}, "only letters"),
        ({"python": "python; rm"}, "command name"),
    ],
)
def test_invalid_specs_are_rejected(kwargs: dict[str, Any], message: str) -> None:
    fields: dict[str, Any] = {"base": "debian@" + DIGEST, **kwargs}
    with pytest.raises(ValueError, match=message):
        ImageSpec(**fields)


def test_single_strings_and_wrong_types_are_type_errors() -> None:
    with pytest.raises(TypeError, match="single string"):
        ImageSpec(base="debian@" + DIGEST, apt="git=1")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="ProjectInstall"):
        ImageSpec(base="debian@" + DIGEST, project="/opt/x")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"include": []}, "must list what to copy"),
        ({"include": ["../secret"]}, "no '..'"),
        ({"include": ["/abs"]}, "relative"),
        ({"dest": "opt/app"}, "absolute"),
    ],
)
def test_invalid_project_install(kwargs: dict[str, Any], message: str) -> None:
    fields: dict[str, Any] = {"dest": "/opt/app", "include": ["pyproject.toml"], **kwargs}
    with pytest.raises(ValueError, match=message):
        ProjectInstall(**fields)


def test_specs_are_frozen_and_hashable() -> None:
    spec = ImageSpec(base="debian@" + DIGEST, env={"A": "1"})
    with pytest.raises(AttributeError):
        spec.base = "x"  # type: ignore[misc]
    assert hash(spec) == hash(ImageSpec(base="debian@" + DIGEST, env={"A": "1"}))


# --------------------------------------------------------------------------- shell safety

_VALUE = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00\r"),
    max_size=40,
) | st.sampled_from(["'", '"', "\\", "$(id)", "`id`", "$HOME", "a'b\"c", "\n", "-n", "*", "~"])


def _valid(value: str) -> bool:
    try:
        ImageSpec(base="debian@" + DIGEST, env={"X": value})
    except ValueError:
        return False
    return True


_ENV = st.dictionaries(
    st.from_regex(r"\A[A-Za-z_][A-Za-z0-9_]{0,8}\Z").filter(
        lambda k: not k.upper().startswith(("APPTAINER", "SINGULARITY")) and not is_secret_name(k)
    ),
    _VALUE.filter(_valid),
    min_size=1,
    max_size=5,
)


@settings(max_examples=300, deadline=None)
@given(env=_ENV)
def test_environment_round_trips_through_shlex(env: dict[str, str]) -> None:
    body = _sections(render_definition(ImageSpec(base="debian@" + DIGEST, env=env)))["environment"]
    words = shlex.split(body)
    assert words[0::2] == ["export"] * len(env)
    assert dict(w.split("=", 1) for w in words[1::2]) == env


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(env=_ENV)
def test_environment_values_survive_sh_exactly(env: dict[str, str], tmp_path_factory: Any) -> None:
    body = _sections(render_definition(ImageSpec(base="debian@" + DIGEST, env=env)))["environment"]
    script = tmp_path_factory.mktemp("env") / "90-environment.sh"
    script.write_text(body, encoding="utf-8")
    dump = "import json, os; print(json.dumps(dict(os.environ)))"
    result = _sh(f'. "$1" && exec "$2" -c {shlex.quote(dump)}', str(script), sys.executable)
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout)
    assert {k: seen.get(k) for k in env} == env


def test_value_starting_a_section_is_refused_not_mangled() -> None:
    for bad in ("x\n%post", "x\n\t%environment", "{{ X }}", "{{\nX }}"):
        assert not _valid(bad)
    assert _valid("x\n 100%")  # '%' is fine when it does not start a line's first word


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    prefix=st.lists(_VALUE.filter(_valid), max_size=3),
    defaults=st.lists(_VALUE.filter(_valid), min_size=1, max_size=3),
)
def test_runscript_argv_survives_sh_exactly(
    prefix: list[str], defaults: list[str], tmp_path_factory: Any
) -> None:
    code = "import json, sys; print(json.dumps(sys.argv[1:]))"
    spec = ImageSpec(
        base="debian@" + DIGEST,
        runscript=[sys.executable, "-c", code, *prefix],
        runscript_args=defaults,
    )
    body = _sections(render_definition(spec))["runscript"]
    script = tmp_path_factory.mktemp("run") / "runscript"
    script.write_text(body, encoding="utf-8")
    with_args = subprocess.run(
        ["sh", str(script), "given", "two words"], capture_output=True, text=True, timeout=30
    )
    assert json.loads(with_args.stdout) == [*prefix, "given", "two words"], with_args.stderr
    without = subprocess.run(["sh", str(script)], capture_output=True, text=True, timeout=30)
    assert json.loads(without.stdout) == [*prefix, *defaults], without.stderr


def test_inline_pip_requirements_are_written_verbatim(tmp_path: Path) -> None:
    post = _sections(render_definition(KITCHEN_SINK))["post"]
    (line,) = [x for x in post.split("\n") if x.strip().startswith("printf")]
    line = line.replace("/opt/mushin-box-build", str(tmp_path))
    result = _sh(line)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "requirements.txt").read_text() == "\n".join(KITCHEN_SINK.pip) + "\n"


def test_rendered_sections_parse_back_as_apptainer_would() -> None:
    sections = _sections(render_definition(KITCHEN_SINK))
    assert set(sections) == {
        "header",
        "labels",
        "environment",
        "files",
        "post",
        "runscript",
        "test",
        "help",
    }
    header = dict(line.split(":", 1) for line in sections["header"].split("\n") if ":" in line)
    assert header["From"].strip() == KITCHEN_SINK.base
    labels = {}
    for line in sections["labels"].strip().split("\n"):  # Apptainer's GetLabels
        key, _, value = line.strip().partition(" ")
        labels[key] = value.strip()
    assert labels == dict(KITCHEN_SINK.labels)
    files = [tuple(line.split()) for line in sections["files"].strip().split("\n")]
    assert files == list(KITCHEN_SINK.all_files())
    assert ("app/src/app", "/opt/app/src/app") in files


# --------------------------------------------------------------------------- SIF reader


def _load_standin() -> ModuleType:
    loader = importlib.machinery.SourceFileLoader("apptainer_standin_build", str(STANDIN))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def _parse_siftool_header(text: str) -> dict[str, str]:
    return {
        k.strip(): v.strip()
        for k, v in (line.split(":", 1) for line in text.splitlines() if ":" in line)
    }


def _parse_siftool_list(text: str) -> list[tuple[int, int, int, int, int, str]]:
    rows = []
    for line in text.splitlines():
        cols = [c.strip() for c in line.split("|")]
        if len(cols) != 5 or not cols[0].isdigit():
            continue
        start, end = (int(x) for x in cols[3].split("-"))
        group, link = (0 if c == "NONE" else int(c) for c in cols[1:3])
        rows.append((int(cols[0]), group, link, start, end, cols[4]))
    return rows


def _utc(seconds: int) -> str:
    moment = dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(seconds=seconds)
    return moment.strftime("%Y-%m-%d %H:%M:%S +0000 UTC")


def _assert_matches_siftool(path: Path, header_text: str, list_text: str) -> None:
    header = read_sif_header(path)
    want = _parse_siftool_header(header_text)
    assert want["Version"] == header.version
    assert want["Primary Architecture"] == header.arch
    assert want["ID"] == str(header.uuid)
    assert want["Created At"] == _utc(header.created)
    assert want["Modified At"] == _utc(header.modified)
    assert int(want["Descriptors Free"]) == header.descriptors_free
    assert int(want["Descriptors Total"]) == header.descriptors_total
    assert int(want["Descriptors Offset"]) == header.descriptors_offset
    assert int(want["Data Offset"]) == header.data_offset
    assert header.data_offset + header.data_size == path.stat().st_size
    rows = [
        (d.id, d.group_id, d.linked_id, d.offset, d.offset + d.size, d.datatype_name)
        for d in read_sif_descriptors(path)
    ]
    siftool_rows = _parse_siftool_list(list_text)
    assert [r[:5] for r in rows] == [r[:5] for r in siftool_rows]
    assert all(s[5].startswith(r[5]) for r, s in zip(rows, siftool_rows, strict=True))


def test_sif_reader_on_real_siftool_file() -> None:
    """tests/golden/siftool-2.8.3.sif was written by Debian bookworm's siftool 2.8.3."""
    text = SIFTOOL_TXT.read_text()
    header_text, list_text = text.split("$ siftool list")
    _assert_matches_siftool(SIFTOOL_SIF, header_text, list_text)
    header = read_sif_header(SIFTOOL_SIF)
    assert header.launch_script == "" and not header.is_reproducible
    assert header.descriptors_used == 4
    deffile, meta, fs, sig = read_sif_descriptors(SIFTOOL_SIF)
    assert read_sif_object(SIFTOOL_SIF, deffile).startswith(b"Bootstrap: docker\n")
    assert json.loads(read_sif_object(SIFTOOL_SIF, meta))["data"]["attributes"]["labels"] == {
        "org.example.kind": "siftool-fixture"
    }
    assert meta.name == "inspect-metadata.json"
    assert struct.unpack_from("<ii3s", fs.extra) == (1, 2, b"02\x00")  # Squashfs, *System
    assert fs.size_with_padding - fs.size == fs.offset - (meta.offset + meta.size)
    assert sig.linked_id == deffile.id and sig.group_id == 0


def test_synthetic_writer_reproduces_siftool_bytes_exactly(tmp_path: Path) -> None:
    """The stand-in's pure-Python writer, given the same inputs, writes siftool's bytes."""
    standin = _load_standin()
    header = read_sif_header(SIFTOOL_SIF)
    objects = [
        {
            "datatype": d.datatype,
            "data": read_sif_object(SIFTOOL_SIF, d),
            "name": d.name,
            "extra": d.extra,
            "group": d.group_id,
            "link": d.linked_id,
            "align": 4096 if d.datatype_name == "FS" else 0,
            "created": d.created,
            "modified": d.modified,
        }
        for d in read_sif_descriptors(SIFTOOL_SIF)
    ]
    out = tmp_path / "copy.sif"
    standin.write_sif(
        out, objects, image_uuid=header.uuid, created=header.created, launch=b"", arch=b"02"
    )
    assert out.read_bytes() == SIFTOOL_SIF.read_bytes()


@pytest.mark.skipif(shutil.which("siftool") is None, reason="siftool not on PATH")
def test_sif_reader_on_fresh_siftool_file(tmp_path: Path) -> None:
    sif = tmp_path / "fresh.sif"
    (tmp_path / "x.def").write_text("Bootstrap: docker\nFrom: alpine@" + DIGEST + "\n")
    (tmp_path / "fs.img").write_bytes(os.urandom(5000))
    (tmp_path / "m.json").write_text("{}\n")
    for argv in (
        ["new", str(sif)],
        ["add", "--datatype", "1", str(sif), str(tmp_path / "x.def")],
        [
            "add",
            "--datatype",
            "4",
            "--parttype",
            "2",
            "--partfs",
            "1",
            "--partarch",
            "4",
            str(sif),
            str(tmp_path / "fs.img"),
        ],
        [
            "add",
            "--datatype",
            "6",
            "--groupid",
            "3",
            "--filename",
            "m.json",
            str(sif),
            str(tmp_path / "m.json"),
        ],
    ):
        subprocess.run(["siftool", *argv], check=True, capture_output=True, timeout=30)
    header_text = subprocess.run(
        ["siftool", "header", str(sif)], check=True, capture_output=True, text=True, timeout=30
    ).stdout
    list_text = subprocess.run(
        ["siftool", "list", str(sif)], check=True, capture_output=True, text=True, timeout=30
    ).stdout
    _assert_matches_siftool(sif, header_text, list_text)
    assert read_sif_header(sif).arch == "arm64"


def _synthetic(tmp_path: Path, **kwargs: Any) -> Path:
    standin = _load_standin()
    out = tmp_path / "synthetic.sif"
    args: dict[str, Any] = {"image_uuid": uuid.UUID(int=0), "created": -62135596800}
    args.update(kwargs)
    standin.write_sif(out, [{"datatype": 0x4001, "data": b"Bootstrap: docker\n"}], **args)
    return out


def test_sif_reader_reproducible_build_header(tmp_path: Path) -> None:
    header = read_sif_header(_synthetic(tmp_path))
    assert header.is_reproducible and header.uuid == uuid.UUID(int=0)
    assert header.launch_script == "#!/usr/bin/env run-singularity\n"
    assert header.created_at.year == 1 and header.created_at.isoformat().startswith("0001-01-01")
    (descriptor,) = read_sif_descriptors(tmp_path / "synthetic.sif")
    assert descriptor.datatype_name == "Def.FILE" and descriptor.group_id == 0


@pytest.mark.parametrize(("code", "arch"), [(b"01", "386"), (b"04", "arm64"), (b"99", "unknown")])
def test_sif_reader_arch_codes(tmp_path: Path, code: bytes, arch: str) -> None:
    header = read_sif_header(_synthetic(tmp_path, arch=code))
    assert (header.arch_code, header.arch) == (code.decode(), arch)


def test_sif_reader_errors(tmp_path: Path) -> None:
    good = _synthetic(tmp_path).read_bytes()
    bad = tmp_path / "bad.sif"
    bad.write_bytes(good[:100])
    with pytest.raises(SifFormatError, match="truncated"):
        read_sif_header(bad)
    bad.write_bytes(good[:32] + b"NOT_MAGIC\x00" + good[42:])
    with pytest.raises(SifFormatError, match="not a SIF image"):
        read_sif_header(bad)
    bad.write_bytes(good[:42] + b"02\x00" + good[45:])
    with pytest.raises(SifFormatError, match="unsupported SIF version '02'"):
        read_sif_header(bad)
    bad.write_bytes(good[: 4096 + 585 * 3])
    with pytest.raises(SifFormatError, match="truncated"):
        read_sif_descriptors(bad)
    lying = bytearray(good)
    struct.pack_into("<q", lying, 64 + 16, 40)  # descriptors free: 40 of 48 -> 8 used
    bad.write_bytes(bytes(lying))
    with pytest.raises(SifFormatError, match="8 descriptors are used"):
        read_sif_descriptors(bad)
    with pytest.raises(SifFormatError, match="not a SIF"):
        read_sif_header(Path(__file__))


def test_file_sha256_of_a_file_larger_than_one_read(tmp_path: Path) -> None:
    path = tmp_path / "blob"
    data = os.urandom(1_000_000)  # hashlib.file_digest reads 256 KiB at a time
    path.write_bytes(data)
    assert file_sha256(path) == hashlib.sha256(data).hexdigest()


# --------------------------------------------------------------------------- build


@pytest.fixture
def standin_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Put the stand-in on PATH as `apptainer`; return its call log (JSON lines)."""
    bindir = tmp_path / "standin-bin"
    bindir.mkdir()
    wrapper = bindir / "apptainer"
    wrapper.write_text(
        f'#!/bin/sh\nexec {shlex.quote(sys.executable)} {shlex.quote(str(STANDIN))} "$@"\n'
    )
    wrapper.chmod(0o755)
    log = tmp_path / "standin.log"
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("MUSHIN_STANDIN_LOG", str(log))
    monkeypatch.delenv("SOURCE_DATE_EPOCH", raising=False)
    monkeypatch.delenv("MUSHIN_STANDIN_FAIL", raising=False)
    return log


@pytest.fixture
def no_apptainer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))


def _calls(log: Path) -> list[dict[str, Any]]:
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines()]


def _small_spec(context: Path) -> ImageSpec:
    (context / "conf").mkdir(exist_ok=True)
    (context / "conf" / "site.yaml").write_text("a: 1\n")
    return ImageSpec(
        base="python:3.11-slim-bookworm@" + DIGEST,
        files={"conf/site.yaml": "/etc/site.yaml"},
        env={"PYTHONNOUSERSITE": "1"},
        labels={"org.example.name": "small"},
        runscript=["python"],
    )


def test_build_image_with_standin_writes_a_consistent_manifest(
    tmp_path: Path, standin_path: Path
) -> None:
    context = tmp_path / "ctx"
    context.mkdir()
    spec = _small_spec(context)
    out = tmp_path / "images" / "small.sif"
    manifest = build_image(spec, out, context=context, fakeroot=True)

    assert out.is_file() and not out.with_name("small.sif.partial").exists()
    definition = out.with_suffix(".def")
    assert definition.read_text() == render_definition(spec)
    assert manifest.sif_sha256 == hashlib.sha256(out.read_bytes()).hexdigest()
    assert manifest.sif_size == out.stat().st_size
    assert manifest.sif_uuid == str(read_sif_header(out).uuid)
    assert manifest.definition_sha256 == hashlib.sha256(definition.read_bytes()).hexdigest()
    assert manifest.embedded_definition_sha256 == manifest.definition_sha256
    assert manifest.base_digest == DIGEST and manifest.base_image == spec.base
    assert manifest.apptainer_version == "0.0.0-standin"
    assert manifest.python_version == platform.python_version()
    assert manifest.packages["attrs"] and manifest.packages["pytest"]
    assert manifest.image == "small.sif" and manifest.definition == "small.def"
    assert not manifest.dry_run and manifest.source_date_epoch is None

    on_disk = manifest_path(out)
    assert on_disk.name == "small.sif.manifest.json"
    assert on_disk.read_bytes() == canonical_dumps(manifest.to_dict())
    assert read_manifest(out) == manifest == read_manifest(on_disk)

    calls = _calls(standin_path)
    assert [c["argv"][0] for c in calls] == ["--version", "build", "exec", "exec", "exec"]
    build_call = calls[1]
    assert build_call["argv"] == list(manifest.build_argv[1:])
    assert build_call["argv"][:3] == ["build", "--fakeroot", "--force"]
    assert build_call["cwd"] == str(context)
    for call in calls[2:]:
        assert call["argv"][:3] == ["exec", "--cleanenv", str(out) + ".partial"]
    assert calls[2]["argv"][3:5] == ["python", "-I"]
    assert calls[3]["argv"][3:] == ["dpkg-query", "-W", "-f", "${Package}=${Version}\\n"]
    assert calls[4]["argv"][3:] == ["python", "-I", "-m", "pip", "freeze", "--all"]


def test_build_image_reproducible_mode_records_nil_uuid(
    tmp_path: Path, standin_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    out = tmp_path / "r.sif"
    first = build_image(_small_spec(tmp_path), out, context=tmp_path)
    second = build_image(_small_spec(tmp_path), out, context=tmp_path)
    assert first.sif_uuid == str(uuid.UUID(int=0)) and first.source_date_epoch == "1700000000"
    assert first.sif_sha256 == second.sif_sha256  # the stand-in's output is deterministic


@pytest.mark.parametrize(("euid", "expect"), [(1000, True), (0, False)])
def test_fakeroot_when_not_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, euid: int, expect: bool
) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: euid)
    plan = plan_build(_small_spec(tmp_path), tmp_path / "x.sif")
    assert ("--fakeroot" in plan.argv) is expect
    # both partial: the definition moves to x.def with the image, after a good build
    assert plan.argv[-2:] == (str(tmp_path / "x.sif.partial"), str(tmp_path / "x.def.partial"))


def test_failed_build_keeps_the_previous_image_and_manifest(
    tmp_path: Path, standin_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "keep.sif"
    before = build_image(_small_spec(tmp_path), out, context=tmp_path)
    monkeypatch.setenv("MUSHIN_STANDIN_FAIL", "build")
    changed = ImageSpec(base=_small_spec(tmp_path).base, post=["echo changed"])
    with pytest.raises(BuildError, match="failed with exit code 255"):
        build_image(changed, out, context=tmp_path)
    assert read_manifest(out) == before
    assert file_sha256(out) == before.sif_sha256
    assert not (tmp_path / "keep.sif.partial").exists()


@pytest.mark.parametrize("fail", ["build", "exec"])
def test_failed_build_keeps_the_previous_definition(
    tmp_path: Path, standin_path: Path, monkeypatch: pytest.MonkeyPatch, fail: str
) -> None:
    """A failed build of a changed spec leaves the old image, manifest and definition as a
    consistent set, and no partial file; the next good build replaces all three."""
    out = tmp_path / "keep.sif"
    before = build_image(_small_spec(tmp_path), out, context=tmp_path)
    definition = out.with_suffix(".def")
    old = definition.read_bytes()
    kept = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("keep"))
    assert kept == ["keep.def", "keep.sif", "keep.sif.manifest.json"]
    monkeypatch.setenv("MUSHIN_STANDIN_FAIL", fail)  # apptainer build, or the package probe
    changed = ImageSpec(base=_small_spec(tmp_path).base, post=["echo changed"])
    with pytest.raises(BuildError):
        build_image(changed, out, context=tmp_path)
    assert definition.read_bytes() == old
    assert hashlib.sha256(old).hexdigest() == read_manifest(out).definition_sha256
    assert read_manifest(out) == before and file_sha256(out) == before.sif_sha256
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("keep")) == kept

    monkeypatch.delenv("MUSHIN_STANDIN_FAIL")
    after = build_image(changed, out, context=tmp_path)
    assert definition.read_text() == render_definition(changed)
    assert hashlib.sha256(definition.read_bytes()).hexdigest() == after.definition_sha256
    assert after.embedded_definition_sha256 == after.definition_sha256
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("keep")) == kept


def test_failed_probe_is_a_build_error(
    tmp_path: Path, standin_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MUSHIN_STANDIN_FAIL", "exec")
    with pytest.raises(BuildError, match="listing its Python packages failed"):
        build_image(_small_spec(tmp_path), tmp_path / "p.sif", context=tmp_path)
    assert not manifest_path(tmp_path / "p.sif").exists()


def test_missing_files_source_fails_before_apptainer_runs(
    tmp_path: Path, standin_path: Path
) -> None:
    spec = ImageSpec(base="debian@" + DIGEST, files={"nope/x.txt": "/x.txt"})
    with pytest.raises(FileNotFoundError, match=r"nope/x\.txt"):
        build_image(spec, tmp_path / "m.sif", context=tmp_path)
    assert _calls(standin_path) == []


def test_build_without_apptainer_says_how_to_get_it(tmp_path: Path, no_apptainer: None) -> None:
    with pytest.raises(ApptainerNotFound) as info:
        build_image(_small_spec(tmp_path), tmp_path / "n.sif", context=tmp_path)
    text = str(info.value)
    for needle in (
        "apptainer was not found on PATH",
        "module load apptainer",
        "apptainer.org",
        "--dry-run",
    ):
        assert needle in text
    assert not (tmp_path / "n.sif").exists()


def test_dry_run_needs_no_apptainer(tmp_path: Path, no_apptainer: None) -> None:
    manifest = build_image(_small_spec(tmp_path), tmp_path / "d.sif", dry_run=True)
    assert manifest.dry_run and manifest.sif_sha256 is None
    definition = (tmp_path / "d.def").read_bytes()
    assert manifest.definition_sha256 == hashlib.sha256(definition).hexdigest()
    assert not manifest_path(tmp_path / "d.sif").exists()


# --------------------------------------------------------------------------- CLI


def test_cli_dry_run_without_apptainer(
    tmp_path: Path, no_apptainer: None, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    monkeypatch.chdir(REPO)
    out = tmp_path / "image.sif"
    assert cli.main(["build", "--dry-run", "-o", str(out)]) == 0
    captured = capsys.readouterr()
    assert captured.out == (GOLDEN / "image.def").read_text()
    assert (tmp_path / "image.def").read_text() == captured.out
    argv_line = [x for x in captured.err.splitlines() if "would run" in x][0]
    assert argv_line.endswith(shlex.join(plan_build(load_spec("containers/image.py")[0], out).argv))


def test_cli_build_without_apptainer_exits_1(
    tmp_path: Path, no_apptainer: None, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    monkeypatch.chdir(REPO)
    assert cli.main(["build", "-o", str(tmp_path / "image.sif")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("mushin-box build: error: apptainer was not found on PATH")
    assert "module load apptainer" in err and "--dry-run" in err


def _unwritable_output(tmp_path: Path, where: str) -> Path:
    """An -o path in a directory that cannot be written (see the test's variants)."""
    notes = tmp_path / "notes.txt"
    notes.write_text("keep me\n")
    if where == "dir is a file":
        return notes / "x.sif"
    if where == "under a file":
        return notes / "sub" / "x.sif"
    if where == "read-only dir":
        if os.geteuid() == 0:
            pytest.skip("root writes into a mode 0555 directory; no read-only mount here")
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o555)
        return locked / "x.sif"
    assert where == "no files allowed"  # a real directory where no file can be created
    if not Path("/proc/self").is_dir():
        pytest.skip("needs Linux /proc")
    return Path("/proc") / f"mushin-{os.getpid()}.sif"


@pytest.mark.parametrize(
    "where", ["dir is a file", "under a file", "read-only dir", "no files allowed"]
)
@pytest.mark.parametrize("dry_run", [True, False])
def test_cli_build_into_an_unwritable_directory_exits_2(
    tmp_path: Path, standin_path: Path, where: str, dry_run: bool
) -> None:
    out = _unwritable_output(tmp_path, where)
    before = sorted(tmp_path.rglob("*"))
    proc = subprocess.run(
        [sys.executable, "-m", "mushin_box", "build", *(["--dry-run"] if dry_run else [])]
        + ["-o", str(out), "containers/image.py"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith(f"mushin-box build: error: -o {out}: "), proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert "choose another -o" in proc.stderr
    assert sorted(tmp_path.rglob("*")) == before  # nothing written, nothing half-made
    assert (tmp_path / "notes.txt").read_text() == "keep me\n"
    assert _calls(standin_path) == []  # refused before apptainer ran


def test_cli_build_with_standin(
    tmp_path: Path, standin_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    monkeypatch.chdir(tmp_path)
    _small_spec(tmp_path)
    (tmp_path / "myimage.py").write_text(
        "from mushin_box._image.spec import ImageSpec\n"
        f"IMAGE = ImageSpec(base={'python@' + DIGEST!r}, files={{'conf/site.yaml': '/s'}})\n"
        "OTHER = 3\n"
    )
    assert cli.main(["build", "myimage.py"]) == 0
    out = capsys.readouterr().out
    sha = file_sha256(tmp_path / "myimage.sif")
    assert f"sha256    {sha}" in out
    assert read_manifest(tmp_path / "myimage.sif").sif_sha256 == sha


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("nope.py", "does not exist"),
        ("myimage.py:MISSING", "no attribute 'MISSING'"),
        ("myimage.py:OTHER", "not an ImageSpec"),
        ("broken.py", "could not load SPEC.*pinned by digest"),
        ("no_such_module_xyz:IMAGE", "could not load SPEC"),
        ("myimage.py:1bad", "expected FILE.py"),
    ],
)
def test_cli_bad_spec_exits_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any, spec: str, message: str
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "myimage.py").write_text(
        f"from mushin_box._image.spec import ImageSpec\nIMAGE = ImageSpec(base={'d@' + DIGEST!r})\n"
        "OTHER = 3\n"
    )
    (tmp_path / "broken.py").write_text(
        "from mushin_box._image.spec import ImageSpec\nIMAGE = ImageSpec(base='python:3.11')\n"
    )
    assert cli.main(["build", "--dry-run", spec]) == 2
    assert re.search(message, capsys.readouterr().err)


def test_cli_module_spec(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    pkg = tmp_path / "specpkg_for_test"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "images.py").write_text(
        f"from mushin_box._image.spec import ImageSpec\nTRAIN = ImageSpec(base={'d@' + DIGEST!r})\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    assert cli.main(["build", "--dry-run", "specpkg_for_test.images:TRAIN"]) == 0
    assert capsys.readouterr().out.startswith("Bootstrap: docker\n")
    assert (tmp_path / "train.def").is_file()


def test_cli_module_does_not_import_torch() -> None:
    code = (
        "import sys, mushin_box.cli.build, mushin_box._image.build, mushin_box._image.sif;"
        "bad = [m for m in ('torch', 'lightning', 'pytorch_lightning') if m in sys.modules];"
        "sys.exit(1 if bad else 0)"
    )
    assert subprocess.run([sys.executable, "-c", code], timeout=60).returncode == 0


# --------------------------------------------------------------------------- spython

DOCKERFILE = """\
# syntax=docker/dockerfile:1
FROM python:3.11-slim-bookworm@{digest} AS base
LABEL org.example.owner="Joana Q" org.example.version=1.2
ENV PYTHONUNBUFFERED=1 GREETING="hello world"
ARG TORCH=2.13.0
RUN apt-get update && apt-get install -y --no-install-recommends git=1:2.39.5-0+deb12u2 \\
    # a comment inside a continued RUN
    && rm -rf /var/lib/apt/lists/*
COPY requirements.lock /opt/req.lock
COPY a.txt b.txt /opt/
COPY src/ /opt/src/
RUN ["python", "-c", "print('exec form')"]
USER 1000
EXPOSE 8080
ENTRYPOINT ["python", "-m", "app"]
CMD ["--help"]
"""


@pytest.fixture
def dockerfile(tmp_path: Path) -> Path:
    pytest.importorskip("spython")
    for name in ("requirements.lock", "a.txt", "b.txt"):
        (tmp_path / name).write_text("x\n")
    (tmp_path / "src").mkdir()
    path = tmp_path / "Dockerfile"
    path.write_text(DOCKERFILE.format(digest=DIGEST))
    return path


def test_spython_docker_parser_output_as_characterized(dockerfile: Path) -> None:
    """What spython 0.3.14's DockerParser gives us; from_dockerfile relies on (and
    fixes up) exactly this, so a spython upgrade that changes it fails here first."""
    from spython.main.parse.parsers import DockerParser  # pyright: ignore

    (recipe,) = DockerParser(str(dockerfile)).recipe.values()  # pyright: ignore
    # right:
    assert isinstance(recipe.fromHeader, str)
    assert recipe.fromHeader.strip() == "python:3.11-slim-bookworm@" + DIGEST
    assert recipe.environ == ["PYTHONUNBUFFERED=1", 'GREETING="hello world"']
    assert recipe.files[:3] == [
        ["requirements.lock", "/opt/req.lock"],
        ["a.txt", "/opt/"],
        ["b.txt", "/opt/"],
    ]
    assert recipe.entrypoint == ["python", "-m", "app"] and recipe.cmd == ["--help"]
    # wrong or raw (fixed up by mushin_box._image.dockerfile):
    assert recipe.fromHeader.endswith(" ")  # 'AS base' removed, its space kept
    assert recipe.labels == [['org.example.owner="Joana Q" org.example.version=1.2']]
    assert 'GREETING="hello world"' in recipe.install  # ENV copied as a bare assignment
    assert "# a comment inside a continued RUN" in recipe.install  # breaks the continuation
    assert """["python", "-c", "print('exec form')"]""" in recipe.install  # JSON, not shell
    assert "USER 1000\n" in recipe.install  # a Docker instruction as a shell line


@pytest.mark.parametrize(
    ("body", "exc"),
    [("ENV FOO bar baz", IndexError), ("ENV FOO=a\\ b", IndexError)],
)
def test_spython_env_parser_crashes_as_characterized(
    tmp_path: Path, body: str, exc: type[Exception]
) -> None:
    pytest.importorskip("spython")
    from spython.main.parse.parsers import DockerParser  # pyright: ignore

    path = tmp_path / "Dockerfile"
    path.write_text(f"FROM python@{DIGEST}\n{body}\n")
    with pytest.raises(exc):
        DockerParser(str(path))


def test_spython_singularity_writer_mangles_our_definition(tmp_path: Path) -> None:
    """Why the renderer is ours: spython 0.3.14's writer on a parse of our own def."""
    pytest.importorskip("spython")
    from spython.main.parse.parsers import SingularityParser  # pyright: ignore
    from spython.main.parse.writers import SingularityWriter  # pyright: ignore

    path = tmp_path / "image.def"
    path.write_text(render_definition(KITCHEN_SINK))
    parser = SingularityParser(str(path))
    written = SingularityWriter(parser.recipe).convert()  # pyright: ignore
    assert "o r g . e x a m p l e . o w n e r" in written  # %labels split into characters
    assert "c o n f i g s / s i t e . y a m l" in written  # %files too
    assert "%help" not in written and "Stage: spython-base" in written


def test_from_dockerfile_converts_what_spython_gets_right(dockerfile: Path) -> None:
    with pytest.warns(UserWarning, match="USER 1000"):
        spec = ImageSpec.from_dockerfile(dockerfile)
    assert spec.base == "python:3.11-slim-bookworm@" + DIGEST
    assert dict(spec.env) == {"PYTHONUNBUFFERED": "1", "GREETING": "hello world"}
    assert dict(spec.labels) == {"org.example.owner": "Joana Q", "org.example.version": "1.2"}
    assert spec.files == (
        ("requirements.lock", "/opt/req.lock"),
        ("a.txt", "/opt/"),
        ("b.txt", "/opt/"),
        ("src/.", "/opt/src/"),  # the directory's contents, as Docker (test_build_records.py)
    )
    assert spec.post == (
        "export PYTHONUNBUFFERED=1",
        "export GREETING='hello world'",
        "TORCH=2.13.0",
        "apt-get update && apt-get install -y --no-install-recommends git=1:2.39.5-0+deb12u2 \\",
        "    && rm -rf /var/lib/apt/lists/*",
        "python -c 'print('\"'\"'exec form'\"'\"')'",
    )
    assert spec.runscript == ("python", "-m", "app") and spec.runscript_args == ("--help",)
    post = _sections(render_definition(spec))["post"]
    result = _sh(
        post.replace("apt-get", "true").replace("rm -rf", "true").replace("python -c", "echo")
    )
    assert result.returncode == 0 and result.stdout == "print('exec form')\n", result.stderr


def test_from_dockerfile_override_pins_an_unpinned_base(tmp_path: Path) -> None:
    pytest.importorskip("spython")
    path = tmp_path / "Dockerfile"
    path.write_text("FROM python:3.11\nRUN echo hi\n")
    with pytest.raises(ValueError, match="pinned by digest"):
        ImageSpec.from_dockerfile(path)
    spec = ImageSpec.from_dockerfile(path, base="python:3.11@" + DIGEST)
    assert spec.post == ("echo hi",)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("FROM debian@{d} AS build\nRUN make\nFROM python@{d}\n", "multi-stage"),
        ("FROM python@{d}\nADD data.tar.gz /data\n", "tar -zvf"),
        ("FROM python@{d}\nADD https://example.com/x.tgz /opt/\n", "remote ADD"),
        ("FROM python@{d}\nCOPY --chown=1000 a.txt /opt/\n", "--chown"),
        ("FROM python@{d}\nrun echo hi\n", "lowercase"),
        ("FROM python@{d}\nRUN <<EOT\necho hi\nEOT\n", "heredoc"),
        ("FROM python@{d}\nENV FOO bar baz\n", "IndexError"),
        ("FROM python@{d}\nENV P=/opt/bin:$PATH\n", "literal"),
        ("FROM --platform=linux/amd64 python@{d}\n", "--platform"),
        ('FROM python@{d}\nSHELL ["/bin/bash", "-c"]\n', "no Apptainer equivalent"),
        ("FROM python@{d}\nCOPY a.txt opt/\n", "absolute"),
        ("FROM python@{d}\nLABEL a b\n", "key=value"),
    ],
)
def test_from_dockerfile_refuses_what_would_not_convert(
    tmp_path: Path, body: str, message: str
) -> None:
    pytest.importorskip("spython")
    from mushin_box._image.dockerfile import DockerfileError

    (tmp_path / "a.txt").write_text("x\n")
    path = tmp_path / "Dockerfile"
    path.write_text(body.format(d=DIGEST))
    with pytest.raises(DockerfileError, match=re.escape(message)):
        ImageSpec.from_dockerfile(path)


# --------------------------------------------------------------------------- real binary


@pytest.mark.skipif(shutil.which("apptainer") is None, reason="apptainer not on PATH")
def test_real_apptainer_build(tmp_path: Path) -> None:
    """Needs the real binary and a digest-pinned base with Python, given as
    MUSHIN_TEST_BASE_IMAGE (e.g. python:3.11-slim-bookworm@sha256:...), and network."""
    base = os.environ.get("MUSHIN_TEST_BASE_IMAGE")
    if not base:
        pytest.skip("set MUSHIN_TEST_BASE_IMAGE to a digest-pinned python base image")
    spec = ImageSpec(base=base, env={"MUSHIN_REAL": "yes it's real"}, labels={"a": "b"})
    manifest = build_image(spec, tmp_path / "real.sif", context=tmp_path)
    assert manifest.sif_sha256 == file_sha256(tmp_path / "real.sif")
    assert manifest.embedded_definition_sha256 == manifest.definition_sha256
    env = subprocess.run(
        [
            "apptainer",
            "exec",
            "--cleanenv",
            str(tmp_path / "real.sif"),
            "sh",
            "-c",
            'printf %s "$MUSHIN_REAL"',
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    ).stdout
    assert env == "yes it's real"
