# SPDX-License-Identifier: MIT
"""Apptainer's definition-file rules, for tests: how ``apptainer build`` reads a ``.def``.

Written from the rules of Apptainer's parser (``pkg/build/types/parser/deffile.go``) and
of its ``%files`` copy (``internal/pkg/build/files/``), independently of mushin_box's
renderer, so that a test can check what the renderer writes against what Apptainer will
read:

1. **Stages.** The raw text is cut into build stages at every match of ``bootstrap:`` at
   the start of a line, in any case (Go's ``(?mi)^bootstrap:``: ``^`` follows ``\\n`` only,
   case folding is Unicode's, so ``bootſtrap:`` counts). Before anything else, quotes
   included. A stage that holds nothing (no header, no section) is dropped.
2. **Sections.** Within a stage, a line whose first word (split on Go's ``bufio``
   whitespace) starts with ``%`` opens a section, indented or not. The section's name is
   the header line lowercased, without leading ``%``, up to the first space: an indented
   ``   %post`` gives the name ``""``. What follows up to the next such line is its body.
3. **Header.** The text before the first section: ``Key: value`` lines, keys
   case-insensitive and from a fixed set (``bootstrap``, ``from``, ``osversion``,
   ``mirrorurl``, ...); ``#`` starts a comment anywhere in the line; blank lines skipped;
   a value ending in ``\\`` continues on the next line. An unknown key fails the build.
4. **Known sections.** ``help setup files labels environment pre post runscript test
   startscript arguments`` and the SCIF app sections (``%appinstall NAME``...). Any other
   fails the build ("invalid section(s) specified").
5. **%files.** Each non-blank, non-``#`` line is ``SRC [DST]`` (split on whitespace,
   double quotes group). The build expands ``SRC`` as a ``/bin/sh`` word (globs), joins
   ``DST`` under the root filesystem keeping a trailing ``/``, creates ``DST`` when it
   ends in ``/`` (else only its parent), and runs ``cp -fLr SRC DST`` in the working
   directory of ``apptainer build``. :func:`copy_files` does exactly that.

The autouse fixture :func:`every_rendered_definition_parses` (import it into a test
module) checks every definition a test renders against rules 1-4.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

STAGE_SPLIT = re.compile(r"^bootstrap:", re.IGNORECASE | re.MULTILINE)

VALID_SECTIONS = frozenset(
    "help setup files labels environment pre post runscript test startscript arguments".split()
)
APP_SECTIONS = frozenset(
    "appinstall applabels appfiles appenv apptest apphelp apprun appstart".split()
)
VALID_HEADERS = frozenset(
    (
        "bootstrap from includecmd mirrorurl updateurl osversion include library registry "
        "namespace stage product user regcode productpgp registerurl modules fingerprints "
        "confurl setopt"
    ).split()
)
# keys that may carry a number: OtherURL0, OtherURL1, ...
NUMBERED_HEADERS = frozenset({"otherurl"})

# Go's bufio.ScanWords separators (not Python's str.split: no \x1c-\x1f)
_GO_SPACE = frozenset(" \t\n\v\f\r\x85\xa0\u1680\u2028\u2029\u202f\u205f\u3000") | frozenset(
    chr(c) for c in range(0x2000, 0x200B)
)


class DefinitionError(ValueError):
    """What ``apptainer build`` would refuse in the definition."""


@dataclass
class Section:
    name: str
    args: str
    body: str


@dataclass
class Stage:
    header: dict[str, str] = field(default_factory=dict)
    sections: list[Section] = field(default_factory=list)

    def names(self) -> list[str]:
        return [s.name for s in self.sections]

    def body(self, name: str) -> str:
        """The body of section ``name`` (repeated sections are appended, as Apptainer does)."""
        return "".join(s.body for s in self.sections if s.name == name)


def first_word(line: str) -> str:
    """The first word of ``line`` as Go's ``bufio.ScanWords`` splits it."""
    start = 0
    while start < len(line) and line[start] in _GO_SPACE:
        start += 1
    end = start
    while end < len(line) and line[end] not in _GO_SPACE:
        end += 1
    return line[start:end]


def split_stages(text: str) -> list[str]:
    """The raw stages of a definition (rule 1), the part before the first match included."""
    starts = [m.start() for m in STAGE_SPLIT.finditer(text)]
    bounds = [0, *starts, len(text)]
    chunks = [text[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]
    return [c for c in chunks if c]


def _parse_header(text: str) -> dict[str, str]:
    header: dict[str, str] = {}
    key_cont = value_cont = ""
    for raw in text.strip().split("\n"):
        line = raw.strip()
        if not line or line.startswith("#"):
            if key_cont:
                header[key_cont], key_cont, value_cont = value_cont, "", ""
            continue
        line = line.split("#", 1)[0]
        if value_cont:
            key, value = key_cont, value_cont + line.strip()
            key_cont = value_cont = ""
        else:
            name, sep, value = line.partition(":")
            if not sep:
                raise DefinitionError(f"header key {name} had no val")
            key, value = name.strip().lower(), value.strip()
        if value.endswith("\\"):
            key_cont, value_cont = key, value[:-1]
            continue
        if key not in VALID_HEADERS and re.sub(r"\d+$", "", key) not in NUMBERED_HEADERS:
            raise DefinitionError(f"invalid header keyword found: {key}")
        header[key] = value
    return header


def _section_start(line: str) -> tuple[str, str]:
    rest = line.lstrip("%")  # Go's TrimLeft: only a '%' at the very start goes
    name, _, args = rest.partition(" ")
    return name.lower(), args


def parse_stage(chunk: str) -> Stage:
    """One stage's header and sections (rules 2-4); raises :class:`DefinitionError`."""
    lines = [line.removesuffix("\r") for line in chunk.split("\n")]
    if lines and lines[-1] == "":
        lines.pop()  # the newline that ends the last line
    stage = Stage()
    head: list[str] = []
    current: Section | None = None
    for line in lines:
        if first_word(line).startswith("%"):
            # the stage's first token is trimmed; later section lines are taken as written
            start = line.strip() if current is None and not head else line
            name, args = _section_start(start)
            current = Section(name, args, "")
            stage.sections.append(current)
        elif current is None:
            head.append(line)
        else:
            current.body += line + "\n"
    stage.header = _parse_header("\n".join(head))
    unknown = [s.name for s in stage.sections if s.name not in VALID_SECTIONS | APP_SECTIONS]
    if unknown:
        raise DefinitionError(f"invalid section(s) specified: {', '.join(unknown)}")
    return stage


def parse_definition(text: str) -> list[Stage]:
    """Every non-empty stage of ``text``, as ``apptainer build`` reads them."""
    stages = [parse_stage(chunk) for chunk in split_stages(text)]
    return [s for s in stages if s.header or s.sections]


def check_definition(text: str, sections: list[str] | None = None) -> Stage:
    """Assert ``text`` is one stage with a ``Bootstrap:`` header and known sections, each
    at most once (and exactly ``sections``, in order, when given); return the stage."""
    stages = parse_definition(text)
    assert len(stages) == 1, f"{len(stages)} build stages in:\n{text}"
    (stage,) = stages
    assert "bootstrap" in stage.header, stage.header
    names = stage.names()
    assert len(names) == len(set(names)), f"a section repeats: {names}"
    if sections is not None:
        assert names == sections, (names, sections)
    return stage


def labels(stage: Stage) -> dict[str, str]:
    """``%labels`` as Apptainer reads them: ``KEY VALUE`` per line, both trimmed."""
    out: dict[str, str] = {}
    for raw in stage.body("labels").strip().split("\n"):
        line = raw.strip()
        if line and not line.startswith("#"):
            key, _, value = line.partition(" ")
            out[key.strip()] = value.strip()
    return out


def files(stage: Stage) -> list[tuple[str, str]]:
    """``%files`` pairs (rule 5): ``(SRC, DST)``, ``DST`` ``""`` when absent."""
    out: list[tuple[str, str]] = []
    for raw in stage.body("files").strip().split("\n"):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        words = [w.strip('"') for w in re.findall(r'"[^"]*"|[^\s"]+', line)]
        out.append((words[0], words[1] if len(words) > 1 else ""))
    return out


def _expand(src: str, cwd: Path) -> list[str]:
    """``SRC`` expanded as one ``/bin/sh`` word, in ``cwd`` (globs; spaces escaped)."""
    word = src.replace(" ", "\\ ")
    script = f"for n in {word} ; do printf '%s\\0' \"$n\"; done"
    result = subprocess.run(
        ["/bin/sh", "-c", script], cwd=cwd, capture_output=True, check=True, timeout=30
    )
    return [p for p in result.stdout.decode().split("\0") if p]


def _under(rootfs: Path, dst: str) -> str:
    """``dst`` joined under ``rootfs`` (it cannot leave it), a trailing ``/`` kept."""
    inside = os.path.normpath("/" + dst).lstrip("/")
    joined = str(rootfs / inside) if inside else str(rootfs)
    return joined + "/" if dst.endswith("/") and not joined.endswith("/") else joined


def copy_files(stage: Stage, context: Path, rootfs: Path) -> Iterator[list[str]]:
    """Run the stage's ``%files`` copies from ``context`` into ``rootfs`` (rule 5), as
    ``apptainer build`` does; yields each ``cp`` argv run."""
    for src, dst in files(stage):
        for expanded in _expand(src, context):
            target = _under(rootfs, dst or expanded)
            if not os.path.exists(target):
                parent = target if target.endswith("/") else os.path.dirname(target)
                os.makedirs(parent, exist_ok=True)
            argv = ["cp", "-fLr", expanded, target]
            subprocess.run(argv, cwd=context, check=True, capture_output=True, timeout=60)
            yield argv


@pytest.fixture(autouse=True)
def every_rendered_definition_parses(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Check every definition rendered during the test (rules 1-4), whatever renders it
    (a test, ``build_image``, the CLI): the renderer's final safety net is wrapped, so
    each text is seen once, after the renderer's own checks passed."""
    from mushin_box._image import definition

    seen: list[str] = []
    original = definition._check_rendered

    def record(text: str) -> None:
        original(text)
        seen.append(text)

    monkeypatch.setattr(definition, "_check_rendered", record)
    yield seen
    for text in seen:
        check_definition(text)
