# SPDX-License-Identifier: MIT
"""The host tools a native build ran, with their versions, are in its manifest
(``build_tools``): a rebuild on another machine gives the same bytes only with the same
mksquashfs and mmdebstrap. ``build --check`` names the tools whose versions differ when the
bytes differ, and says nothing of them when the bytes are the same. The builds here are
stand-ins (a fake mmdebstrap writes a small tree; the host's mksquashfs packs it).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from test_native import _build, _project, _tool_dir

from mushin_box._image.build import Manifest, read_manifest
from mushin_box._image.native import build_tools
from mushin_box.cli import main as cli

PROBE = {
    "helpfile": "",
    "release_sha256": "sha256:" + "1" * 64,
    "python_version": "3.11.2",
    "packages": {"six": "1.16.0"},
    "dpkg": ["python3=3.11.2-1+b1"],
    "dpkg_sha256": {},
    "freeze": ["six==1.16.0"],
}


def _host(where: Path, *, mmdebstrap: str, mksquashfs: str, content: str) -> Path:
    """A PATH directory whose mmdebstrap (version ``mmdebstrap``) writes a tree holding
    ``content`` and the probe the hooks would copy out, and whose mksquashfs answers
    ``-version`` with ``mksquashfs`` and packs with the host's."""
    probe = where / "probe.json"
    where.mkdir(parents=True)
    probe.write_text(json.dumps(PROBE))
    fake = f'if [ "$1" = --version ]; then echo "mmdebstrap {mmdebstrap}"; exit 0; fi\n'
    fake += 'n=$(($# - 1)); eval "root=\\${$n}"\n'
    fake += 'for a in "$@"; do case "$a" in --customize-hook=copy-out*) w="${a##* }";; esac; done\n'
    fake += f'mkdir -p "$root/dev/pts" "$root/etc" && echo {content} > "$root/etc/tree"\n'
    fake += f'cp {probe} "$w/mushin-box-probe.json"'
    real = shutil.which("mksquashfs")
    tools = _tool_dir(where, mmdebstrap=fake)
    (tools / "mksquashfs").unlink()  # the host's, linked: never write through it
    (tools / "mksquashfs").write_text(
        f'#!/bin/sh\nif [ "$1" = -version ]; then echo "mksquashfs version {mksquashfs} '
        f'(2023/03/25)"; echo "copyright (C) 2023"; exit 0; fi\nexec {real} "$@"\n'
    )
    (tools / "mksquashfs").chmod(0o755)
    return tools


def test_the_versions_are_read_from_the_tools_on_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tools = _tool_dir(tmp_path, mmdebstrap='echo "mmdebstrap 1.4.3"', fakechroot="exit 1")
    (tools / "mksquashfs").unlink()
    (tools / "mksquashfs").write_text("#!/bin/sh\necho 'mksquashfs version 4.6.1 (2023/03/25)'\n")
    (tools / "mksquashfs").chmod(0o755)
    monkeypatch.setenv("PATH", str(tools))  # fakechroot fails, fakeroot is missing
    assert (
        build_tools("root")
        == build_tools("unshare")
        == {
            "mmdebstrap": "1.4.3",
            "mksquashfs": "4.6.1",
        }
    )
    assert build_tools("fakechroot") == {
        "mmdebstrap": "1.4.3",
        "mksquashfs": "4.6.1",
        "fakechroot": None,
        "fakeroot": None,
    }


def test_a_manifest_written_before_build_tools_still_loads(tmp_path: Path) -> None:
    manifest = Manifest(
        image="img.sif",
        definition="img.def",
        definition_sha256="0" * 64,
        base_image="debootstrap:bookworm",
        base_digest=None,
        build_argv=["mmdebstrap"],
        mushin_box_version="0.1.0",
        build_tools={"mksquashfs": "4.5.1", "mmdebstrap": None},
    )
    old = manifest.to_dict()
    del old["build_tools"]
    (tmp_path / "img.sif.manifest.json").write_text(json.dumps(old))
    assert read_manifest(tmp_path / "img.sif").build_tools == {}
    assert Manifest.from_dict(json.loads(json.dumps(manifest.to_dict()))) == manifest


@pytest.mark.skipif(os.geteuid() != 0, reason="the stand-in build runs in the root mode")
@pytest.mark.parametrize(
    ("mmdebstrap", "mksquashfs", "content", "verdict"),
    [
        ("1.3.5", "4.5.1", "a", "identical"),  # the same tools, the same bytes
        ("1.4.0", "4.6.1", "a", "identical"),  # other tools, the same bytes: nothing to say
        ("1.3.5", "4.5.1", "b", "differs: {found}"),  # the same tools: no word of them
        ("1.3.5", "4.6.1", "b", "differs: {found} (built with mksquashfs 4.5.1, this host has "
         "4.6.1: install that version to rebuild it)"),
        ("1.4.0", "4.6.1", "b", "differs: {found} (built with mksquashfs 4.5.1 and mmdebstrap "
         "1.3.5, this host has 4.6.1 and 1.4.0: install those versions to rebuild it)"),
    ],
)  # fmt: skip
def test_check_names_the_tools_whose_versions_differ_when_the_bytes_do(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: Any,
    mmdebstrap: str,
    mksquashfs: str,
    content: str,
    verdict: str,
) -> None:
    ctx, out = _project(tmp_path), tmp_path / "out" / "img.sif"
    first = _host(tmp_path / "first", mmdebstrap="1.3.5", mksquashfs="4.5.1", content="a")
    monkeypatch.setenv("PATH", str(first))
    code, err = _build(ctx, out, capsys, "--backend", "native")
    assert code == 0, err
    assert read_manifest(out).build_tools == {"mmdebstrap": "1.3.5", "mksquashfs": "4.5.1"}
    again = _host(tmp_path / "again", mmdebstrap=mmdebstrap, mksquashfs=mksquashfs,
                  content=content)  # fmt: skip
    monkeypatch.setenv("PATH", str(again))
    argv = ["build", str(ctx / "image.py"), "--check", str(out), "--context", str(ctx)]
    code = cli.main(argv)
    printed = capsys.readouterr().out.strip().splitlines()
    assert len(printed) == 1 and code == (verdict != "identical")
    a, b = (hashlib.sha256(f"{c}\n".encode()).hexdigest()[:12] for c in ("a", content))
    found = f"/etc/tree: content sha256:{a} != sha256:{b}"
    assert printed[0] == verdict.format(found=found)


def test_the_build_commands_choices_are_the_builders_own() -> None:
    """``mushin-box build`` spells its backends and native modes at start-up, without the
    builder's modules: the two spellings must stay one list each."""
    import argparse

    from mushin_box._image.build import BACKENDS
    from mushin_box._image.native import MODES
    from mushin_box.cli import build as command

    parser = argparse.ArgumentParser()
    command.add_arguments(parser)
    choices = {a.dest: tuple(a.choices or ()) for a in parser._actions}
    assert (choices["backend"], choices["native_mode"]) == (BACKENDS, MODES)
