# SPDX-License-Identifier: MIT
"""The image's help, as Apptainer keeps it: ``/.singularity.d/runscript.help`` in the tree and
``helpfile`` in the SIF's ``inspect-metadata.json`` (which ``apptainer inspect --helpfile``
and ``run-help`` read: with that object in a SIF they never look in the tree).

Apptainer's rules (``internal/pkg/build/metadata.go`` ``insertHelpScript``,
``pkg/build/types/parser/deffile.go``, ``cmd/internal/cli/inspect.go``): the file is the
``%help`` body as the parser keeps it (every line as written, indentation included, each
ending in a newline) and one more newline, mode 0644, written only for a non-empty body,
over a base's with ``--force``; the metadata's ``helpfile`` is the file's text less its
trailing newlines, left out when empty.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import defparse
import pytest
from test_native import BASE, _build, _project, _tool_dir

from mushin_box._image.definition import render_definition
from mushin_box._image.intree import _singularity_d
from mushin_box._image.sif import read_sif_descriptors, read_sif_object
from mushin_box._image.spec import ImageSpec

HELP = "Train a model.\n  python -m app --epochs 3\n\nDocs: 100% in README"
LAST = render_definition(ImageSpec(base=BASE, post=["echo hi"], help=HELP))
# not what the renderer writes (%help is its last section), but what Apptainer reads
MIDDLE = "Bootstrap: docker\nFrom: x\n%help\n  first\n\n%post\n  echo hi\n"


def _plan(definition: str) -> dict[str, Any]:
    return {"environment": [], "runscript": [], "test": [], "definition": definition, "labels": {}}


@pytest.mark.parametrize("definition", [LAST, MIDDLE], ids=["last", "middle"])
def test_runscript_help_is_the_help_body_apptainer_parses_and_a_newline(
    tmp_path: Path, definition: str
) -> None:
    returned = _singularity_d(tmp_path, _plan(definition))
    written = tmp_path / ".singularity.d" / "runscript.help"
    body = defparse.parse_definition(definition)[0].body("help")
    assert written.read_text() == body + "\n"
    assert written.stat().st_mode & 0o7777 == 0o644
    assert returned == written.read_text().rstrip("\n")
    if definition == LAST:
        text = "    Train a model.\n      python -m app --epochs 3\n\n    Docs: 100% in README\n\n"
        assert written.read_text() == text


def test_no_help_no_file_and_a_bases_help_is_kept_unless_the_spec_has_its_own(
    tmp_path: Path,
) -> None:
    plain = render_definition(ImageSpec(base=BASE, post=["echo hi"]))
    assert _singularity_d(tmp_path / "a", _plan(plain)) == ""
    assert not (tmp_path / "a" / ".singularity.d" / "runscript.help").exists()
    base_help = tmp_path / "b" / ".singularity.d" / "runscript.help"
    base_help.parent.mkdir(parents=True)
    base_help.write_text("    The base.\n\n")
    assert _singularity_d(tmp_path / "b", _plan(plain)) == "    The base."
    assert base_help.read_text() == "    The base.\n\n"
    # the Apptainer backend builds with --force, which replaces it
    assert _singularity_d(tmp_path / "b", _plan(LAST)).startswith("    Train a model.\n")


def _inspect_metadata(sif: Path) -> dict[str, Any]:
    (found,) = [d for d in read_sif_descriptors(sif) if d.name == "inspect-metadata.json"]
    return json.loads(read_sif_object(sif, found))


@pytest.mark.skipif(os.geteuid() != 0, reason="packs a tree that must read as root's")
@pytest.mark.parametrize("helpfile", ["    Train a model.\n\n    Docs.", ""], ids=["help", "none"])
def test_the_sifs_inspect_metadata_holds_the_help_the_tree_has(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any, helpfile: str
) -> None:
    """A stand-in mmdebstrap makes a tree and the probe the hook would write: the SIF's
    metadata carries its ``helpfile`` (none when empty), beside the labels."""
    ctx, out = _project(tmp_path), tmp_path / "out" / "img.sif"
    probe = {"python_version": "3.11.2", "packages": {}, "dpkg": [], "dpkg_sha256": {}}
    probe |= {"freeze": [], "release_sha256": "sha256:0", "helpfile": helpfile}
    (tmp_path / "probe.json").write_text(json.dumps(probe))
    tree = 'n=$(($# - 1)); eval "root=\\${$n}"; mkdir -p "$root/dev" "$root/.singularity.d"\n'
    tree += f'cp {tmp_path / "probe.json"} "${{root%/*}}/mushin-box-probe.json"'
    monkeypatch.setenv("PATH", str(_tool_dir(tmp_path, mmdebstrap=tree)))
    code, err = _build(ctx, out, capsys, "--backend", "native")
    assert code == 0, err
    attributes = _inspect_metadata(out)["data"]["attributes"]
    assert attributes["labels"]["org.example.title"] == "tiny"
    assert attributes.get("helpfile") == (helpfile or None)
