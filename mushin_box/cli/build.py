# SPDX-License-Identifier: MIT
"""``mushin-box build [SPEC]``: parsing and printing; the build is
:func:`mushin_box._image.build.build_image`. A native build whose output already holds an
image of the same recipe keeps it, as ``make`` keeps an up-to-date target.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import importlib.util
import shlex
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from mushin_box.cli.main import UsageError

if TYPE_CHECKING:
    from mushin_box._image.spec import ImageSpec

HELP = "Build the Apptainer image from an ImageSpec and record its manifest."
EXAMPLES = (
    "mushin-box build -o image.sif   # containers/image.py:IMAGE -> image.sif + its manifest",
    "mushin-box build --dry-run   # write and print image.def and the apptainer command only",
    "mushin-box build --adopt /images/site.sif   # an image built elsewhere: its manifest",
)
EXITS = {0: "built (or --dry-run reviewed)", 1: "the build could not run, or failed"}
DEFAULT_SPEC = "containers/image.py:IMAGE"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "spec",
        nargs="?",
        default=DEFAULT_SPEC,
        metavar="SPEC",
        help="FILE.py[:ATTR] or package.module:ATTR naming an ImageSpec "
        f"(default: {DEFAULT_SPEC}; ATTR defaults to IMAGE)",
    )
    parser.add_argument(
        "-o",
        "--output",
        metavar="OUT.sif",
        help="image to write (default: <spec file stem>.sif); OUT.def and "
        "OUT.sif.manifest.json are written beside it",
    )
    parser.add_argument(
        "--context",
        metavar="DIR",
        default=".",
        help="build context: relative %%files sources resolve here (default: .)",
    )
    parser.add_argument(
        "--backend",
        choices=("auto", "native", "apptainer"),
        default="auto",
        help="native: mmdebstrap, pip and the kit's SIF writer, a bit-reproducible image with "
        "no Apptainer (Debootstrap and LocalImage bases); apptainer: `apptainer build`; auto: "
        "native where it can build the base, else apptainer",
    )
    parser.add_argument(
        "--native-mode",
        choices=("auto", "root", "unshare", "fakechroot"),
        default="auto",
        help="with the native backend, mmdebstrap's mode: root (as root); unshare (user "
        "namespaces and subordinate ids); fakechroot (the Debian packages fakechroot and "
        "fakeroot); auto: the first of these this user can use. Each gives the same bytes",
    )
    parser.add_argument(
        "--check",
        metavar="IMG.sif",
        help="rebuild SPEC in a temporary directory beside IMG.sif and print 'identical' "
        "(exit 0), or the first SIF field or file that differs (exit 1)",
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="write and print the definition and the apptainer command; build nothing",
    )
    parser.add_argument(
        "--adopt",
        metavar="IMG.sif",
        help="build nothing: write the manifest of an image the kit did not build (its "
        "sha256, Python and packages, read through `apptainer exec`), so that pre-flight "
        "checks it and provenance pins it",
    )
    parser.add_argument(
        "--python",
        default="python",
        help="with --adopt: the image's Python command (default: python)",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="build even when OUT.sif is a native build of the same recipe (kept by "
        "default: it would be the same bytes); with --adopt: replace an existing manifest",
    )
    parser.add_argument(
        "--fakeroot",
        action="store_true",
        default=None,
        help="with the apptainer backend: pass --fakeroot even as root (it is passed by "
        "default when not root), for hosts that withhold what a root build needs",
    )


def load_spec(ref: str) -> tuple[ImageSpec, str]:
    """The ImageSpec that ``ref`` names, and the stem of the default output."""
    from mushin_box._image.spec import ImageSpec

    target, sep, attr = ref.rpartition(":")
    if not sep:
        target, attr = ref, "IMAGE"
    elif not target or not attr.isidentifier():
        raise UsageError(f"SPEC {ref!r}: expected FILE.py[:ATTR] or package.module:ATTR")
    path = Path(target)
    is_file = target.endswith(".py") or "/" in target or path.is_file()
    if is_file and not path.is_file():
        raise UsageError(f"SPEC file {target!r} does not exist")
    try:
        if is_file:
            from mushin_box._core.userfile import import_file

            # a private name, dropped after: a SPEC is read, not imported by the ranks
            digest = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:12]
            module = import_file(path, name=f"_mushin_spec_{digest}", on_path=False, keep=False)
            stem = path.stem
        else:
            module = importlib.import_module(target)
            stem = attr.lower()
    except Exception as exc:  # the user's spec code, worded as launch words an experiment's
        from mushin_box._launch.loading import user_code_error

        raise UsageError(
            user_code_error(f"SPEC {ref!r}", exc, None if is_file else target)
        ) from exc
    if not hasattr(module, attr):
        raise UsageError(f"SPEC {ref!r}: {target} has no attribute {attr!r}")
    spec = getattr(module, attr)
    if not isinstance(spec, ImageSpec):
        raise UsageError(f"SPEC {ref!r} is a {type(spec).__qualname__}, not an ImageSpec")
    return spec, stem


def run(args: argparse.Namespace) -> int:
    from mushin_box._image.build import (
        ApptainerNotFound,
        OutputNotWritable,
        build_image,
        check_image,
        manifest_path,
        plan_build,
    )
    from mushin_box._image.native import BuildError, NativeBuildRefused

    if args.adopt is not None:
        from mushin_box._image.adopt import adopt_image

        try:
            adopted = adopt_image(args.adopt, python=args.python, force=args.force)
        except FileNotFoundError as exc:
            raise UsageError(f"--adopt {args.adopt}: {exc}") from None
        except (ApptainerNotFound, BuildError) as exc:
            print(f"mushin-box build: error: {exc}", file=sys.stderr)
            return 1
        print(f"image     {args.adopt}  (adopted: built elsewhere)")
        print(f"sha256    {adopted.sif_sha256}")
        print(f"python    {adopted.python_version}")
        print(f"manifest  {manifest_path(args.adopt)}")
        return 0
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _stopped)  # unwind: the build removes what it wrote
    spec, stem = load_spec(args.spec)
    out = Path(args.output) if args.output else Path(f"{stem}.sif")
    if out.suffix == ".def":
        raise UsageError(f"-o {out}: the image must not end in .def (the definition goes there)")
    context = Path(args.context)
    if not context.is_dir():
        raise UsageError(f"--context {context}: not a directory")
    if args.dry_run:
        plan = plan_build(spec, out, context=context, fakeroot=args.fakeroot)
        try:
            build_image(spec, out, context=context, dry_run=True)
        except OutputNotWritable as exc:
            raise UsageError(f"-o {out}: {exc.reason}; choose another -o") from None
        sys.stdout.write(plan.definition)
        sys.stdout.flush()
        print(f"# wrote {plan.definition_path}", file=sys.stderr)
        print(f"# would run in {plan.context}: {shlex.join(plan.argv)}", file=sys.stderr)
        return 0
    try:
        if args.check is not None:
            if not Path(args.check).is_file():
                raise UsageError(f"--check {args.check}: no such image")
            verdict = check_image(spec, args.check, context=context, backend=args.backend,
                                  native_mode=args.native_mode)  # fmt: skip
            print(verdict)
            return 0 if verdict == "identical" else 1
        before = _mtime(manifest_path(out))
        manifest = build_image(
            spec,
            out,
            context=context,
            backend=args.backend,
            fakeroot=args.fakeroot,
            spec_ref=args.spec,
            force=args.force,
            native_mode=args.native_mode,
        )
    except OutputNotWritable as exc:
        raise UsageError(f"-o {out}: {exc.reason}; choose another -o") from None
    except NativeBuildRefused as exc:
        raise UsageError(f"--backend {args.backend}: {exc}") from None
    except (ApptainerNotFound, BuildError, FileNotFoundError) as exc:
        print(f"mushin-box build: error: {exc}", file=sys.stderr)
        return 1
    kept = before is not None and before == _mtime(manifest_path(out))
    print(f"image     {out}" + ("  (up to date: the same recipe; --force builds)" if kept else ""))
    print(f"sha256    {manifest.sif_sha256}")
    print(f"uuid      {manifest.sif_uuid}")
    print(f"backend   {manifest.backend}")
    print(f"manifest  {manifest_path(out)}")
    return 0


def _stopped(signum: int, _frame: object) -> None:
    name = signal.Signals(signum).name
    raise SystemExit(f"mushin-box build: stopped by {name}; nothing was written to the output")


def _mtime(path: Path) -> int | None:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return None
