# SPDX-License-Identifier: MIT
"""The rendered definition read by Apptainer's rules (``defparse.py``), not by bash's.

- stages: a value cannot add a ``Bootstrap:`` stage (the image would be built from its
  base), in any field that reaches the definition;
- every definition the kit renders (the goldens, one spec per base kind and per field) is
  one stage with the expected sections and no unknown one;
- a Dockerfile ``COPY dir/ dest/`` lands where Docker puts it, checked by running
  ``cp -fLr`` the way ``apptainer build`` runs a ``%files`` line;
- the registry-free bases: ``Bootstrap: debootstrap`` and ``Bootstrap: localimage``.

No Apptainer here: the rules are the parser's and the copy's, as written in defparse.py.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import defparse
import pytest
from conftest import GOLDEN, Golden
from defparse import every_rendered_definition_parses  # noqa: F401  (autouse: every def parses)

from mushin_box._image import bases as bases_module
from mushin_box._image import definition as definition_module
from mushin_box._image.bases import Debootstrap, LocalImage, apt_source
from mushin_box._image.definition import render_definition
from mushin_box._image.spec import ImageSpec, ProjectInstall

DIGEST = "sha256:" + "ab" * 32
BASE = "python:3.11-slim-bookworm@" + DIGEST
EVIL = "evil.example/base@sha256:" + "e" * 64
MIRROR = "http://deb.debian.org/debian"
SIF = GOLDEN / "siftool-2.8.3.sif"  # a real SIF (siftool 2.8.3) to stand as a local base


# --------------------------------------------------------------------------- the rules


def test_parser_rules_stages_split_at_column_0_bootstrap_in_any_case() -> None:
    value = f"x\nBootstrap: docker\nFrom: {EVIL}"
    two = f"Bootstrap: docker\nFrom: {BASE}\n%environment\n    export N='{value}'\n"
    first, second = defparse.parse_definition(two)
    assert first.header["from"] == BASE and second.header["from"] == EVIL + "'"
    for head in ("bootstrap:", "BOOTSTRAP:", "BootStrap:", "bootſtrap:"):  # ſ folds to s
        assert len(defparse.split_stages(f"Bootstrap: docker\nFrom: a\n{head} docker\n")) == 2
    # the header keys are only lowercased (no folding): a 'bootſtrap:' stage fails the build
    with pytest.raises(defparse.DefinitionError, match="invalid header keyword found: bootſtrap"):
        defparse.parse_definition("Bootstrap: docker\nFrom: a\nbootſtrap: docker\n")
    for head in (" Bootstrap:", "\tbootstrap:", "Bootstrap :", "xBootstrap:"):
        text = f"Bootstrap: docker\nFrom: a\n%help\n{head} docker\n"
        assert len(defparse.parse_definition(text)) == 1, head


def test_parser_rules_sections_headers_and_unknown_names() -> None:
    stage = defparse.check_definition(
        "Bootstrap: docker  # a comment\nFROM: a\n%post\n  echo '\n%test\n  true'\n"
    )
    assert stage.header == {"bootstrap": "docker", "from": "a"}
    assert stage.names() == ["post", "test"]  # '%' opens a section even inside quotes
    # an indented '%' line opens a section too, named "" (Go's TrimLeft('%') sees the
    # spaces first): the build fails
    with pytest.raises(defparse.DefinitionError, match="invalid section"):
        defparse.parse_definition("Bootstrap: docker\nFrom: a\n%post\n  x\n   %labels\n")
    with pytest.raises(defparse.DefinitionError, match="invalid section.*: postt"):
        defparse.parse_definition("Bootstrap: docker\nFrom: a\n%postt\n")
    with pytest.raises(defparse.DefinitionError, match="invalid header keyword found: frm"):
        defparse.parse_definition("Bootstrap: docker\nFrm: a\n")
    assert defparse.parse_definition("Bootstrap: x\nOtherURL1: y\n%appinstall a\n")[0].names() == [
        "appinstall"
    ]


# --------------------------------------------------------------------------- stage injection

_INJECTED = f"x\nBootstrap: docker\nFrom: {EVIL}"


@pytest.mark.parametrize(
    ("field", "kwargs"),
    [
        ("env NOTE", {"env": {"NOTE": _INJECTED}}),
        ("post[0]", {"post": ["echo start\nbootstrap: docker"]}),
        ("post[1]", {"post": ["true", "echo 'a\nBOOTSTRAP: library'"]}),
        ("test[0]", {"test": ["true \\\nBootStrap: docker"]}),
        ("runscript[2]", {"runscript": ["python", "-c", "print(1)\nbootſtrap: docker"]}),
        ("runscript_args[0]", {"runscript_args": ["a\nBootstrap: oras"]}),
    ],
)
def test_a_value_that_would_start_a_build_stage_is_refused(
    field: str, kwargs: dict[str, Any]
) -> None:
    with pytest.raises(ValueError) as info:
        ImageSpec(base=BASE, **kwargs)
    message = str(info.value)
    assert message.startswith(f"{field}: the line ") and "\n" not in message
    assert "would start a new build stage" in message and message.endswith(
        "reword it, or start that line with another character"
    )


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"labels": {"k": "a\nBootstrap: docker"}}, "single line"),
        ({"pip_index_url": "https://x/\nBootstrap:"}, "URL"),
        ({"files": {"a\nBootstrap:": "/x"}}, "only letters"),
        ({"python": "python\nBootstrap:"}, "command name"),
        ({"apt": ["a=1\nBootstrap:"]}, "name=version"),
    ],
)
def test_single_line_fields_cannot_carry_a_stage(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ImageSpec(base=BASE, **kwargs)


def test_what_the_stage_rule_does_not_match_is_kept_and_renders_one_stage() -> None:
    spec = ImageSpec(
        base=BASE,
        env={"A": "x\n Bootstrap: docker", "B": "x\nBootstrap : docker", "C": "Bootstrap: x"},
        post=["echo 'a\n\tbootstrap: b'"],
        # help lines are all indented when rendered: a 'Bootstrap:' line stays text
        help="Built from:\nBootstrap: docker",
    )
    stage = defparse.check_definition(render_definition(spec))
    assert stage.header == {"bootstrap": "docker", "from": BASE}
    assert "    Bootstrap: docker" in stage.body("help")


def test_without_the_validators_the_injected_stage_would_swap_the_base(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The why: Apptainer would build two stages and keep the last one's image."""
    with attrs.validators.disabled():
        bad = ImageSpec(base=BASE, env={"NOTE": _INJECTED})
    with pytest.raises(AssertionError, match="2 build stages"):
        render_definition(bad)  # the renderer's safety net
    monkeypatch.setattr(definition_module, "_check_rendered", lambda text: None)
    stages = defparse.parse_definition(render_definition(bad))
    assert [s.header["from"] for s in stages] == [BASE, EVIL + "'"]


# --------------------------------------------------------------------------- every definition

SECTIONS_ALL = ["labels", "environment", "files", "post", "runscript", "test", "help"]
GOLDEN_SECTIONS = {
    "image.def": SECTIONS_ALL,
    "kitchen-sink.def": SECTIONS_ALL,
    "debootstrap.def": ["labels", "environment", "post", "runscript", "test"],
    "localimage.def": ["labels", "files", "post"],
}


@pytest.mark.parametrize("name", sorted(p.name for p in GOLDEN.glob("*.def")))
def test_every_golden_definition_is_one_stage_with_known_sections(name: str) -> None:
    assert name in GOLDEN_SECTIONS, f"{name}: add the sections it must have to GOLDEN_SECTIONS"
    stage = defparse.check_definition((GOLDEN / name).read_text(), GOLDEN_SECTIONS[name])
    assert stage.header["bootstrap"] in {"docker", "debootstrap", "localimage"}


def _sandbox(tmp_path: Path) -> Path:
    (tmp_path / "sandbox" / ".singularity.d").mkdir(parents=True, exist_ok=True)
    return tmp_path / "sandbox"


_DEBIAN = {"suite": "bookworm", "mirror": MIRROR}
SpecCase = Callable[[Path], ImageSpec]
CASES: dict[str, tuple[SpecCase, list[str]]] = {
    "docker": (lambda t: ImageSpec(base=BASE), ["post"]),
    "debootstrap": (lambda t: ImageSpec(base=Debootstrap(**_DEBIAN)), ["post"]),
    "localimage-sif": (lambda t: ImageSpec(base=LocalImage(path=SIF)), ["post"]),
    "localimage-sandbox": (lambda t: ImageSpec(base=LocalImage(path=_sandbox(t))), ["post"]),
    "apt": (lambda t: ImageSpec(base=BASE, apt=["git=1:2.39.5-0+deb12u2"]), ["post"]),
    "pip": (lambda t: ImageSpec(base=BASE, pip=["a==1 --hash=sha256:" + "1" * 64]), ["post"]),
    "pip_lock": (lambda t: ImageSpec(base=BASE, pip_lock="req.lock"), ["files", "post"]),
    "pip_index_url": (
        lambda t: ImageSpec(
            base=BASE,
            pip_lock="req.lock",
            pip_index_url="https://i.example/simple",
            pip_extra_index_urls=["https://j.example/simple"],
        ),
        ["files", "post"],
    ),
    "files": (
        lambda t: ImageSpec(base=BASE, files={"bin/.": "/usr/local/bin/"}),
        ["files", "post"],
    ),
    "env": (lambda t: ImageSpec(base=BASE, env={"A": "1\n  2"}), ["environment", "post"]),
    "labels": (lambda t: ImageSpec(base=BASE, labels={"a.b": "c d", "e": ""}), ["labels", "post"]),
    "post": (lambda t: ImageSpec(base=BASE, post=["echo 'a\n 100%'"]), ["post"]),
    "project": (
        lambda t: ImageSpec(base=BASE, project=ProjectInstall(dest="/opt/p", include=["p"])),
        ["files", "post"],
    ),
    "runscript": (
        lambda t: ImageSpec(base=BASE, runscript=["python", "-m", "x"]),
        ["post", "runscript"],
    ),
    "runscript_args": (
        lambda t: ImageSpec(base=BASE, runscript_args=["--a"]),
        ["post", "runscript"],
    ),
    "test": (lambda t: ImageSpec(base=BASE, test=["true"]), ["post", "test"]),
    "help": (lambda t: ImageSpec(base=BASE, help="a\n\n b 100%"), ["post", "help"]),
}


def _expected_header(spec: ImageSpec) -> dict[str, str]:
    if isinstance(spec.base, Debootstrap):
        return {"bootstrap": "debootstrap", "osversion": "bookworm", "mirrorurl": MIRROR}
    if isinstance(spec.base, LocalImage):
        return {"bootstrap": "localimage", "from": spec.base.path}
    return {"bootstrap": "docker", "from": BASE}


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_base_and_field_renders_one_stage_with_its_sections(case: str, tmp_path: Path) -> None:
    make, sections = CASES[case]
    spec = make(tmp_path)
    stage = defparse.check_definition(render_definition(spec), sections)
    assert stage.header == _expected_header(spec)
    assert defparse.labels(stage) == dict(spec.labels)
    assert defparse.files(stage) == list(spec.all_files())


# --------------------------------------------------------------------------- %files: cp -fLr

DOCKERFILE_COPIES = """\
FROM python:3.11@{digest}
COPY bin/ /usr/local/bin/
COPY bin /opt/new
COPY ./bin/ /opt/newer/
COPY a.txt /opt/
"""


def _tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


@pytest.fixture
def copy_context(tmp_path: Path) -> tuple[Path, Path]:
    """A build context with a directory holding a dotfile and a subdirectory, and a root
    filesystem where /usr/local/bin already exists (as in every base image)."""
    context, rootfs = tmp_path / "ctx", tmp_path / "rootfs"
    for rel in ("bin/tool", "bin/.hidden", "bin/sub/deep", "a.txt"):
        (context / rel).parent.mkdir(parents=True, exist_ok=True)
        (context / rel).write_text(rel)
    (rootfs / "usr/local/bin").mkdir(parents=True)
    (rootfs / "usr/local/bin/python3").write_text("base image file")
    return context, rootfs


def test_dockerfile_copy_of_a_directory_lands_where_docker_puts_it(
    copy_context: tuple[Path, Path],
) -> None:
    """Docker's COPY reference: "If <src> is a directory, the entire contents of the
    directory are copied, including filesystem metadata. The directory itself isn't
    copied, only its contents." Here the %files lines run as Apptainer runs them
    (sh expansion, DEST created when it ends in '/', then `cp -fLr SRC DEST`)."""
    pytest.importorskip("spython")
    context, rootfs = copy_context
    dockerfile = context / "Dockerfile"
    dockerfile.write_text(DOCKERFILE_COPIES.format(digest=DIGEST))
    spec = ImageSpec.from_dockerfile(dockerfile)
    stage = defparse.check_definition(render_definition(spec))
    argvs = list(defparse.copy_files(stage, context, rootfs))
    assert argvs[0] == ["cp", "-fLr", "bin/.", f"{rootfs}/usr/local/bin/"]
    contents = {"tool", ".hidden", "sub/deep"}
    assert _tree(rootfs) == {
        "usr/local/bin/python3",  # what the base had stays
        *(f"usr/local/bin/{c}" for c in contents),  # not usr/local/bin/bin/tool
        *(f"opt/new/{c}" for c in contents),
        *(f"opt/newer/{c}" for c in contents),
        "opt/a.txt",
    }


def test_the_directory_itself_lands_inside_an_existing_destination(
    copy_context: tuple[Path, Path],
) -> None:
    """Why the import writes ``bin/.``: ``cp -r bin DEST`` nests the directory when DEST
    exists, which Docker never does."""
    context, rootfs = copy_context
    spec = ImageSpec(base=BASE, files={"bin": "/usr/local/bin"})
    list(defparse.copy_files(defparse.check_definition(render_definition(spec)), context, rootfs))
    assert "usr/local/bin/bin/tool" in _tree(rootfs)
    assert "usr/local/bin/tool" not in _tree(rootfs)


# --------------------------------------------------------------------------- registry-free bases


def test_debootstrap_golden(golden: Golden) -> None:
    spec = ImageSpec(
        base=Debootstrap(suite="bookworm", mirror=MIRROR),
        apt=["python3=3.11.2-1+b1", "python3-pip=23.0.1+dfsg-1"],
        env={"PYTHONUNBUFFERED": "1"},
        labels={"org.opencontainers.image.title": "debian-base"},
        runscript=["python3"],
        test=["python3 -c 'import sys; print(sys.version)'"],
        python="python3",
    )
    text = render_definition(spec)
    golden("debootstrap.def", text)
    assert text.startswith(f"Bootstrap: debootstrap\nOSVersion: bookworm\nMirrorURL: {MIRROR}\n")
    assert spec.base_digest is None and spec.base_image == f"debootstrap bookworm {MIRROR}"


def test_localimage_golden(golden: Golden, tmp_path: Path) -> None:
    base = tmp_path / "images" / "base.sif"
    base.parent.mkdir()
    shutil.copyfile(SIF, base)
    (tmp_path / "conf.yaml").write_text("a: 1\n")
    spec = ImageSpec(
        base=LocalImage(path=base),
        files={"conf.yaml": "/etc/app/conf.yaml"},
        labels={"org.example.layer": "project"},
        post=["python -m compileall -q /etc/app"],
    )
    text = render_definition(spec)
    assert f"\nFrom: {base}\n" in text
    # the absolute path depends on the machine: the golden shows it under /images
    golden("localimage.def", text.replace(str(tmp_path), ""))
    assert spec.base_digest is None and spec.base_image == f"localimage {base}"


def test_localimage_paths_are_made_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Apptainer would resolve a relative From: against the build context: fixed at once."""
    shutil.copyfile(SIF, tmp_path / "base.sif")
    monkeypatch.chdir(tmp_path)
    assert LocalImage(path="base.sif").path == str(tmp_path / "base.sif")
    assert LocalImage(path="./sub/../base.sif").path == str(tmp_path / "base.sif")
    assert LocalImage(path=Path("base.sif")) == LocalImage(path=tmp_path / "base.sif")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert LocalImage(path="~/base.sif").path == str(tmp_path / "base.sif")
    assert LocalImage(path=_sandbox(tmp_path)).path == str(tmp_path / "sandbox")


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("missing.sif", r"does not exist: build the base first"),
        ("notes.txt", r"is neither a SIF image \(.*not a SIF image.*\) nor a sandbox directory"),
        ("half.sif", r"is neither a SIF image \(.*truncated.*\) nor a sandbox"),
        ("we#ird.sif", r"cannot be written as a definition header value \(no '#'"),
        ("new\nline.sif", r"cannot be written as a definition header value"),
        ("trailing\\", r"cannot be written as a definition header value"),
    ],
)
def test_localimage_refuses_with_one_line(tmp_path: Path, name: str, message: str) -> None:
    (tmp_path / "notes.txt").write_text("not an image\n" * 20)
    (tmp_path / "half.sif").write_bytes(SIF.read_bytes()[:64])
    for weird in ("we#ird.sif", "new\nline.sif", "trailing\\"):
        shutil.copyfile(SIF, tmp_path / weird)
    with pytest.raises(ValueError, match=message) as info:
        LocalImage(path=tmp_path / name)
    assert "\n" not in str(info.value).replace(repr(str(tmp_path / name)), "")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"suite": "Bookworm"}, r"suite 'Bookworm' is not a Debian suite"),
        ({"suite": "bookworm stable"}, r"suite 'bookworm stable' is not a Debian suite"),
        ({"suite": ""}, r"cannot be written as a definition header value"),
        ({"suite": "bookworm#x"}, r"no '#'"),
        ({"mirror": "ftp://deb.debian.org/debian"}, r"must be an http\(s\):// or file:// URL"),
        ({"mirror": "http://deb.debian.org/debian#frag"}, r"no '#'"),
        ({"mirror": "http://deb.debian.org/deb ian"}, r"must be an http\(s\):// or file:// URL"),
        ({"mirror": "http://x/\nBootstrap: docker"}, r"control characters"),
        ({"mirror": "http://x/{{ M }}"}, r"braces"),
        ({"suite": 12}, r"expected str"),
    ],
)
def test_debootstrap_refuses_bad_shapes_with_one_line(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises((ValueError, TypeError), match=message) as info:
        Debootstrap(**{**_DEBIAN, **kwargs})
    assert "\n" not in str(info.value).replace(repr(kwargs.get("mirror")), "")


SOURCES_LIST = """\
# deb cdrom:[Debian GNU/Linux 12]/ bookworm main
deb-src http://src.example/debian bookworm main
deb [arch=amd64 signed-by=/k.gpg] http://mirror.example/debian/ bookworm main contrib
deb http://security.debian.org/debian-security bookworm-security main
"""
DEBIAN_SOURCES = """\
Types: deb-src
URIs: http://src.example/debian
Suites: trixie

Types: deb
URIs: http://deb.debian.org/debian
Suites: trixie-updates
 trixie
Components: main
Enabled: yes

Types: deb
URIs: http://security.debian.org/debian-security
Suites: trixie-security
"""


def _apt_root(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "etc-apt"
    (root / "sources.list.d").mkdir(parents=True)
    for rel, text in files.items():
        (root / rel).write_text(text)
    return root


def test_apt_source_reads_one_line_and_deb822_files_in_apt_order(tmp_path: Path) -> None:
    one_line = _apt_root(tmp_path / "a", {"sources.list": SOURCES_LIST})
    assert apt_source(one_line) == ("http://mirror.example/debian/", "bookworm")
    deb822 = _apt_root(tmp_path / "b", {"sources.list.d/debian.sources": DEBIAN_SOURCES})
    assert apt_source(deb822) == (MIRROR, "trixie")  # the release, not trixie-updates
    both = _apt_root(
        tmp_path / "c",
        {
            "sources.list": "# empty since bookworm\n",
            "sources.list.d/b.sources": DEBIAN_SOURCES,
            "sources.list.d/a.list": "deb http://a.example/debian sid main\n",
        },
    )
    assert apt_source(both) == ("http://a.example/debian", "sid")  # a.list sorts first
    disabled = _apt_root(
        tmp_path / "d",
        {"sources.list.d/x.sources": DEBIAN_SOURCES.replace("Enabled: yes", "Enabled: no")},
    )
    with pytest.raises(ValueError, match=r"no Debian release suite found .* give them, e\.g\."):
        apt_source(disabled)


@pytest.mark.parametrize(
    "stanza",
    [
        "Types: deb\nX-Note this line is no field\nURIs: http://m.example/debian\nSuites: sid\n",
        " Types: deb\nURIs: http://m.example/debian\nSuites: sid\n",  # an indented first line
        "# a comment\n URIs: http://m.example/debian\n# another\nTypes: deb\nSuites: sid\n",
        "Types : deb\nURIs: http://m.example/debian\nSuites: sid\n",  # a space before ':'
    ],
)
def test_apt_source_reads_the_fields_around_what_is_no_field(tmp_path: Path, stanza: str) -> None:
    root = _apt_root(tmp_path, {"sources.list.d/x.sources": stanza})
    assert apt_source(root) == ("http://m.example/debian", "sid")


def test_debootstrap_reads_what_it_was_not_given_from_the_machine(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _apt_root(tmp_path, {"sources.list": SOURCES_LIST})
    monkeypatch.setattr(bases_module, "APT_SOURCES", str(root))
    assert Debootstrap() == Debootstrap(suite="bookworm", mirror="http://mirror.example/debian/")
    assert Debootstrap(suite="trixie").mirror == "http://mirror.example/debian/"
    assert Debootstrap(mirror=MIRROR).suite == "bookworm"
    monkeypatch.setattr(bases_module, "APT_SOURCES", str(tmp_path / "none"))
    with pytest.raises(ValueError, match=r"suite='bookworm', mirror=") as info:
        Debootstrap(suite="bookworm")
    assert "\n" not in str(info.value)
    assert Debootstrap(**_DEBIAN).suite == "bookworm"  # both given: the machine is not read


def test_base_of_another_type_is_a_type_error() -> None:
    with pytest.raises(TypeError, match=r"base: expected .*Debootstrap.*LocalImage.*PosixPath"):
        ImageSpec(base=Path("/x.sif"))  # type: ignore[arg-type]


def test_every_render_is_seen_by_the_check(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """The autouse check wraps the renderer's last step: a direct render and one made by
    build_image (dry run) are both parsed after the test."""
    from mushin_box._image.build import build_image

    seen = request.getfixturevalue("every_rendered_definition_parses")
    render_definition(ImageSpec(base=BASE))
    build_image(ImageSpec(base=BASE, post=["true"]), tmp_path / "x.sif", dry_run=True)
    assert len(seen) == 2 and all(t.startswith("Bootstrap: docker\n") for t in seen)
