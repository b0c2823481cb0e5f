# SPDX-License-Identifier: MIT
"""Build an image from an :class:`~mushin_box._image.spec.ImageSpec` and record its identity.

:func:`build_image` writes ``<out .def>.partial`` and ``<out>.partial``, then moves them into
place together and writes ``<out>.manifest.json``: a failed or interrupted build removes its
partial files and leaves the old set as it was. The manifest's identity is ``sif_sha256``
(the header UUID is nil for reproducible builds; ``definition_sha256`` equals the SIF's
``Def.FILE`` hash when built from it). It also lists the image's Python and Debian packages
(through ``apptainer exec``), which pin a base without a digest: ``"unknown"`` and why when
the image cannot list them.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import attrs

from mushin_box._core.errors import MushinBoxError
from mushin_box._core.sidecars import StrPath, read_json, write_json_atomic, write_text_atomic
from mushin_box._core.targets import public
from mushin_box._core.version import __version__
from mushin_box._image import native, sif
from mushin_box._image.bases import LocalImage
from mushin_box._image.definition import render_definition
from mushin_box._image.digest import image_sha256
from mushin_box._image.intree import DPKG_QUERY, PROBE_SCRIPT
from mushin_box._image.native import BuildError, NativeBuildRefused, run_bounded
from mushin_box._image.pack import describe_check
from mushin_box._image.spec import ImageSpec

MANIFEST_SCHEMA = "mushin-box.image-manifest/1"
APPTAINER = "apptainer"
DEFAULT_BUILD_TIMEOUT = 4 * 3600.0
#: what ``build_image(backend=...)`` and ``mushin-box build --backend`` take
BACKENDS = ("auto", "native", "apptainer")
_PROBE_TIMEOUT = 600.0
#: What ``dpkg_packages``/``pip_freeze`` hold when the image could not list them.
UNKNOWN = "unknown"
_DRY_RUN_HINT = "`mushin-box build --dry-run` renders and writes the definition file without it."


@public
class ApptainerNotFound(MushinBoxError, RuntimeError):
    """``apptainer`` is not on PATH; the message says how to get it.

    ``what`` completes "it is needed to ..."; ``hint`` is a last sentence (default: how to
    render the definition without Apptainer, which only helps a build).
    """

    def __init__(self, what: str = "build an image", *, hint: str | None = _DRY_RUN_HINT) -> None:
        super().__init__(
            f"apptainer was not found on PATH, and it is needed to {what}. Get it with "
            "`module load apptainer` on an HPC cluster (`module avail apptainer`, or ask "
            "your admins), your distribution's `apptainer` package, or "
            "https://apptainer.org/docs/admin/main/installation.html"
            + (f". {hint}" if hint else "")
        )


@public
class OutputNotWritable(MushinBoxError, ValueError):
    """Files cannot be created where the image should go; nothing was written.

    ``path`` is the file that could not be written, ``reason`` what is in the way.
    """

    def __init__(
        self, path: Path, reason: str, *, arguments: Mapping[str, object] | None = None
    ) -> None:
        self.path, self.reason = path, reason
        super().__init__(f"cannot write {path}: {reason}", arguments=arguments)


def manifest_path(image: StrPath) -> Path:
    """The manifest written beside ``image``: ``<image>.manifest.json``.

    >>> manifest_path("out/train.sif").as_posix()
    'out/train.sif.manifest.json'
    """
    p = Path(image)
    return p.with_name(p.name + ".manifest.json")


@attrs.frozen(kw_only=True)
class BuildPlan:
    """What :func:`build_image` will write and run (``--dry-run`` shows exactly this):
    ``argv`` runs in ``context``, reads ``definition_partial`` and writes ``partial``."""

    definition: str
    definition_path: Path
    definition_partial: Path
    image: Path
    partial: Path
    context: Path
    argv: tuple[str, ...]


def _lines_or_unknown(value: object) -> tuple[str, ...] | str | None:
    """A package list as the manifest keeps it: a tuple of lines, ``"unknown"`` or ``None``."""
    if value is None or value == UNKNOWN:
        return UNKNOWN if value is not None else None
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise ValueError(f"expected a list of lines or {UNKNOWN!r}, got {value!r}")
    return tuple(str(line) for line in value)


@public
@attrs.frozen(kw_only=True)
class Manifest:
    """Identity of a built image (``<image>.manifest.json``).

    For ``dry_run=True`` only the definition-side fields are set. ``base_digest`` is
    ``None`` for a base without one (Debootstrap, a sandbox LocalImage). The package lists
    read from the image: ``packages`` (Python, name -> version), ``pip_freeze``
    (``pip freeze --all``) and ``dpkg_packages`` (``name=version`` lines); each is
    ``"unknown"`` when the image could not list it (``package_list_errors`` says why), and
    ``None`` in a manifest written before they were recorded.

    ``backend`` is ``"apptainer"`` or ``"native"``. A native build also records its
    ``mirror``, ``source_date_epoch``, each ``.deb``'s sha256 from the mirror's index
    (``dpkg_sha256``: ``name=version`` -> ``sha256:...``), the lock's hashes
    (``pip_hashes``: ``name==version`` -> hashes), as ``base_digest`` the sha256 of the
    mirror's ``Release`` files, and ``build_tools``
    (:func:`~mushin_box._image.native.build_tools`). Its recipe: ``spec`` (the SPEC as
    given, relative to the context when it lies there), ``recipe_sha256``
    (:func:`~mushin_box._image.native.recipe_identity`), ``context_commit`` (the git commit
    that holds every input unchanged, else ``None``) and ``context_dir`` (the context's
    place in that commit's tree, ``"."`` at its top): what ``build --check`` and
    ``reproduce --rebuild-image`` rebuild from.
    """

    image: str | None
    definition: str
    definition_sha256: str
    base_image: str
    base_digest: str | None
    build_argv: tuple[str, ...] = attrs.field(converter=tuple)
    mushin_box_version: str
    sif_sha256: str | None = None
    sif_size: int | None = None
    sif_uuid: str | None = None
    sif_arch: str | None = None
    sif_created: int | None = None
    embedded_definition_sha256: str | None = None
    apptainer_version: str | None = None
    python_version: str | None = None
    packages: Mapping[str, str] = attrs.field(factory=dict)
    dpkg_packages: tuple[str, ...] | str | None = attrs.field(
        default=None, converter=_lines_or_unknown
    )
    pip_freeze: tuple[str, ...] | str | None = attrs.field(
        default=None, converter=_lines_or_unknown
    )
    package_list_errors: Mapping[str, str] = attrs.field(factory=dict)
    source_date_epoch: str | None = None
    backend: str | None = None
    mirror: str | None = None
    dpkg_sha256: Mapping[str, str] = attrs.field(factory=dict)
    pip_hashes: Mapping[str, list[str]] = attrs.field(factory=dict)
    build_tools: Mapping[str, str | None] = attrs.field(factory=dict)
    spec: str | None = None
    recipe_sha256: str | None = None
    context_commit: str | None = None
    context_dir: str | None = None
    dry_run: bool = False
    schema: str = MANIFEST_SCHEMA

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict (tuples as lists, mappings as dicts)."""
        return attrs.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Manifest:
        """Inverse of :meth:`to_dict` (unknown keys are an error)."""
        return cls(**dict(data))


@public
def read_manifest(path: StrPath) -> Manifest:
    """Read a manifest written by :func:`build_image`.

    Parameters
    ----------
    path : str or os.PathLike
        The ``.manifest.json`` file (or the image; ``.manifest.json`` is then appended).

    Returns
    -------
    Manifest

    Raises
    ------
    FileNotFoundError
        If the manifest is missing or unreadable.
    """
    p = Path(path)
    if not p.name.endswith(".manifest.json"):
        p = manifest_path(p)
    data = read_json(p)
    if not isinstance(data, dict):
        raise FileNotFoundError(f"no readable image manifest at {p}")
    return Manifest.from_dict(data)


def plan_build(
    spec: ImageSpec,
    out: StrPath,
    *,
    context: StrPath | None = None,
    fakeroot: bool | None = None,
) -> BuildPlan:
    """Render the definition and the ``apptainer build`` command without running anything.

    ``context`` (default: the current directory) is where relative ``%files`` sources
    resolve; ``fakeroot`` (default: when not root) passes ``--fakeroot``.

    >>> spec = ImageSpec(base="debian@sha256:" + "2" * 64)
    >>> plan = plan_build(spec, "/tmp/x/img.sif", fakeroot=True)
    >>> plan.argv  # doctest: +NORMALIZE_WHITESPACE
    ('apptainer', 'build', '--fakeroot', '--force', '/tmp/x/img.sif.partial',
     '/tmp/x/img.def.partial')
    """
    image = Path(out).absolute()
    definition_path = image.with_suffix(".def")
    if definition_path == image:
        raise ValueError(f"output {image} must not end in .def")
    partial = image.with_name(image.name + ".partial")
    definition_partial = definition_path.with_name(definition_path.name + ".partial")
    # --force: else a base's labels (and help) win over the spec's, with only a warning
    fake = ["--fakeroot"] if (os.geteuid() != 0 if fakeroot is None else fakeroot) else []
    argv = [APPTAINER, "build", *fake, "--force", str(partial), str(definition_partial)]
    return BuildPlan(
        definition=render_definition(spec),
        definition_path=definition_path,
        definition_partial=definition_partial,
        image=image,
        partial=partial,
        context=Path(context if context is not None else Path.cwd()).absolute(),
        argv=tuple(argv),
    )


def check_output(image: StrPath) -> None:
    """Raise :class:`OutputNotWritable`, before anything is written, unless the nearest
    existing ancestor of ``image`` is a directory this user may write (``os.access``).

    >>> import tempfile
    >>> check_output(Path(tempfile.mkdtemp()) / "new" / "dir" / "img.sif")
    >>> check_output(Path(__file__) / "img.sif")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    mushin_box.OutputNotWritable: cannot write .../img.sif: ...build.py is a file, ...
    """
    image = Path(image).absolute()
    ancestor = image.parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise OutputNotWritable(image, f"{ancestor} is a file, not a directory")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise OutputNotWritable(image, f"{ancestor} is not writable")


def _write_definition(path: Path, text: str) -> None:
    """Write a definition file; what :func:`check_output` could not foresee (a directory
    that takes no new files, a full disk) is an :class:`OutputNotWritable` too."""
    try:
        write_text_atomic(path, text)
    except OSError as error:
        reason = f"cannot create files in {path.parent} ({error.strerror or error})"
        raise OutputNotWritable(path, reason) from error


def apptainer_version() -> str:
    result = run_bounded([APPTAINER, "--version"], timeout=60, capture=True)
    text = (result.stdout or "").strip()
    if result.returncode != 0 or not text:
        raise BuildError(f"`apptainer --version` failed: {(result.stderr or '').strip()}")
    return text.removeprefix("apptainer version ").strip()


def probe_image(image: Path, python: str) -> dict[str, Any]:
    """The manifest fields read through ``apptainer exec``: ``python_version`` and
    ``packages`` (a :class:`BuildError` when they cannot be read), ``dpkg_packages`` and
    ``pip_freeze`` (``"unknown"``, and why in ``package_list_errors``: never an error)."""
    argv = [APPTAINER, "exec", "--cleanenv", str(image), python, "-I", "-c", PROBE_SCRIPT]
    result = run_bounded(argv, timeout=_PROBE_TIMEOUT, capture=True)
    lines = (result.stdout or "").strip().splitlines()
    try:
        if result.returncode != 0 or not lines:
            raise ValueError("no output")
        data = json.loads(lines[-1])
        version = str(data["python_version"])
        packages = {str(k): str(v) for k, v in dict(data["packages"]).items()}
    except (ValueError, KeyError, TypeError) as exc:
        raise BuildError(
            f"built {image}, but listing its Python packages failed (exit "
            f"{result.returncode}): {(result.stderr or '').strip()[-2000:]}"
        ) from exc
    out: dict[str, Any] = {"python_version": version, "packages": dict(sorted(packages.items()))}
    out["package_list_errors"] = {}
    pip = (python, "-I", "-m", "pip", "freeze", "--all")
    for key, argv in (("dpkg_packages", DPKG_QUERY), ("pip_freeze", pip)):
        command = [APPTAINER, "exec", "--cleanenv", str(image), *argv]
        try:
            result = run_bounded(command, timeout=_PROBE_TIMEOUT, capture=True)
        except (BuildError, OSError) as error:
            why = str(error)
        else:
            if result.returncode == 0:
                lines = (result.stdout or "").splitlines()
                out[key] = tuple(line for line in lines if line.strip())
                continue
            tail = " ".join((result.stderr or "").split())[-300:]
            why = f"`{shlex.join(argv)}` in the image exited {result.returncode}: {tail}"
        out[key] = UNKNOWN
        out["package_list_errors"][key] = why
    return out


def embedded_definition(image: Path) -> bytes | None:
    """The definition a SIF embeds (Apptainer stores it as ``Def.FILE``), or ``None``."""
    for descriptor in sif.read_sif_descriptors(image):
        if descriptor.datatype_name == "Def.FILE":
            return sif.read_sif_object(image, descriptor)
    return None


def sif_identity(image: Path) -> dict[str, Any]:
    """The manifest fields read from a SIF file: its sha256, size, header and definition."""
    header = sif.read_sif_header(image)
    definition = embedded_definition(image)
    definition_sha256 = None if definition is None else hashlib.sha256(definition).hexdigest()
    return {
        "sif_sha256": sif.file_sha256(image),
        "sif_size": image.stat().st_size,
        "sif_uuid": str(header.uuid),
        "sif_arch": header.arch,
        "sif_created": header.created,
        "embedded_definition_sha256": definition_sha256,
    }


@public
def build_image(
    spec: ImageSpec,
    out: StrPath,
    *,
    context: StrPath | None = None,
    dry_run: bool = False,
    fakeroot: bool | None = None,
    timeout: float = DEFAULT_BUILD_TIMEOUT,
    backend: str = "auto",
    spec_ref: str | None = None,
    force: bool = False,
    native_mode: str = "auto",
) -> Manifest:
    """Render, build and record an image.

    Parameters
    ----------
    spec : ImageSpec
        The image.
    out : str or os.PathLike
        The ``.sif`` to write; ``out.with_suffix('.def')`` gets the definition and
        ``<out>.manifest.json`` the manifest.
    context : str or os.PathLike, optional
        Where relative ``%files`` sources resolve; default: the current directory.
    dry_run : bool, optional
        Only write the definition; nothing is run, Apptainer is not needed.
    fakeroot : bool, optional
        Pass ``--fakeroot``; default when the effective user is not root.
    timeout : float, optional
        Seconds the build may run before its process group is stopped.
    backend : {"auto", "native", "apptainer"}, optional
        ``native``: a bit-reproducible SIF, no Apptainer (:mod:`~mushin_box._image.native`);
        ``auto`` (default): native for a base it can make, else Apptainer.
    spec_ref : str, optional
        How the spec was named (``FILE.py[:ATTR]`` or ``module:ATTR``): the manifest's
        ``spec``; its file is one of the recipe's inputs.
    force : bool, optional
        Build even when ``out`` is a native build of the same recipe (same bytes: kept).
    native_mode : {"auto", "root", "unshare", "fakechroot"}, optional
        A native build's mmdebstrap mode (each gives the same bytes); ``auto``: the first
        this user can use.

    Returns
    -------
    Manifest
        What was written to ``<out>.manifest.json``; an up-to-date image's own; for a dry
        run, the definition-side fields (no file is written).

    Raises
    ------
    OutputNotWritable
        If files cannot be created in ``out``'s directory (checked before anything else).
    ApptainerNotFound
        If ``apptainer`` is not on PATH (not raised for a dry run).
    FileNotFoundError
        If a ``%files`` source does not exist under ``context``.
    BuildError
        If the build fails or times out, or the image cannot be inspected.
    NativeBuildRefused
        What the native backend cannot build, or this machine lacks for it.

    Examples
    --------
    >>> import tempfile
    >>> spec = ImageSpec(base="debian@sha256:" + "3" * 64, post=["echo hi"])
    >>> out = Path(tempfile.mkdtemp()) / "img.sif"
    >>> manifest = build_image(spec, out, dry_run=True)
    >>> manifest.dry_run, out.with_suffix(".def").exists(), manifest.sif_sha256
    (True, True, None)
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend {backend!r}: one of {', '.join(BACKENDS)}")
    if backend == "auto":
        backend = "apptainer" if native.native_refusal(spec) is not None else "native"
    plan = plan_build(spec, out, context=context, fakeroot=fakeroot)
    check_output(plan.image)
    common: dict[str, Any] = {
        "definition": plan.definition_path.name,
        "definition_sha256": hashlib.sha256(plan.definition.encode("utf-8")).hexdigest(),
        "base_image": spec.base_image,
        "base_digest": spec.base_digest,
        "build_argv": plan.argv,
        "mushin_box_version": __version__,
        "source_date_epoch": os.environ.get("SOURCE_DATE_EPOCH"),
        "backend": backend,
    }
    if dry_run:
        _write_definition(plan.definition_path, plan.definition)
        return Manifest(image=None, dry_run=True, **common)
    if isinstance(spec.base, LocalImage) and Path(spec.base.path).is_file():
        # the exact base bytes, for either backend: a local SIF has no registry digest, its
        # file's sha256 is one (cached: the native recipe hashes the same file)
        common["base_digest"] = "sha256:" + image_sha256(spec.base.path)
    if backend == "native":
        return _build_native(
            plan, spec, spec_ref, timeout=timeout, common=common, force=force, mode=native_mode
        )
    if shutil.which(APPTAINER) is None:
        raise ApptainerNotFound()
    native.check_files_exist(spec, plan.context)
    return _install(plan, plan.partial, _build_partial(plan, spec, timeout=timeout, common=common))


def _install(plan: BuildPlan, built: Path, manifest: Manifest) -> Manifest:
    """Move ``built`` and its definition into place together, then write ``manifest``."""
    target = manifest_path(plan.image)
    target.unlink(missing_ok=True)  # never leave an old manifest beside a new image
    os.replace(plan.definition_partial, plan.definition_path)
    os.replace(built, plan.image)
    write_json_atomic(target, manifest.to_dict())
    return manifest


def check_image(
    spec: ImageSpec,
    image: StrPath,
    *,
    context: StrPath | None = None,
    backend: str = "auto",
    timeout: float = DEFAULT_BUILD_TIMEOUT,
    native_mode: str = "auto",
) -> str:
    """Rebuild ``spec`` in a temporary directory beside ``image`` and compare: ``"identical"``,
    else the first difference and the host tools at other versions (:func:`_other_tools`)."""
    image = Path(image)
    if not image.is_file():
        raise FileNotFoundError(f"{image}: no such image to check")
    beside = image.parent if os.access(image.parent, os.W_OK | os.X_OK) else None
    tmp = Path(tempfile.mkdtemp(prefix=f".{image.name}.check-", dir=beside))
    rebuilt = tmp / image.name
    try:
        tmp.chmod(0o755)  # an unprivileged build's subordinate ids must reach it
        build_image(
            spec,
            rebuilt,
            context=context,
            backend=backend,
            timeout=timeout,
            native_mode=native_mode,
        )
        verdict = describe_check(image, rebuilt)
        if verdict != "identical":
            verdict += _other_tools(image, rebuilt)
        return verdict
    finally:
        if not _mounts_under(tmp):  # the build says so when it could not unmount its tree
            shutil.rmtree(tmp, ignore_errors=True)


def _other_tools(image: Path, rebuilt: Path) -> str:
    """``" (built with mksquashfs 4.5.1, this host has 4.6.1: ...)"`` for the tools that
    both manifests' ``build_tools`` know at different versions, else ``""``."""
    try:
        was, now = read_manifest(image).build_tools, read_manifest(rebuilt).build_tools
    except (OSError, TypeError, ValueError):  # no manifest, or not one of ours
        return ""
    tools = [t for t in sorted(was.keys() & now.keys()) if None not in (was[t], now[t])]
    tools = [t for t in tools if was[t] != now[t]]
    if not tools:
        return ""
    built = " and ".join(f"{t} {was[t]}" for t in tools)
    those = "those versions" if len(tools) > 1 else "that version"
    here = " and ".join(str(now[t]) for t in tools)
    return f" (built with {built}, this host has {here}: install {those} to rebuild it)"


def native_recipe(
    spec: ImageSpec, context: StrPath, spec_ref: str | None = None
) -> tuple[str, str | None, str | None]:
    """``(recipe_sha256, context_commit, spec)`` a native build records; ``spec_ref`` (as
    ``mushin-box build`` was given it) names a file that is one of the recipe's inputs, and
    ``spec`` names it relative to ``context`` when it lies there."""
    context = Path(context).absolute()
    epoch = native.source_date_epoch(spec, context)
    ref, spec_file = spec_ref, None
    if spec_ref is not None:
        target, sep, attr = spec_ref.rpartition(":")
        if not sep:
            target, attr = spec_ref, ""
        if (path := Path(target).absolute()).is_file():  # else package.module:ATTR
            spec_file = path
            if path.is_relative_to(context):
                target = path.relative_to(context).as_posix()
            ref = target + (f":{attr}" if attr else "")
    definition = render_definition(spec)
    recipe, commit = native.recipe_identity(spec, definition, context, epoch, spec_file)
    return recipe, commit, ref


def _build_native(
    plan: BuildPlan,
    spec: ImageSpec,
    spec_ref: str | None,
    *,
    timeout: float,
    common: Mapping[str, Any],
    force: bool,
    mode: str,
) -> Manifest:
    """Build natively in a directory beside the image, removed after (a failed build leaves
    nothing at the output path); an image of the same recipe is kept unless ``force``."""
    if (why := native.native_refusal(spec)) is not None:
        raise NativeBuildRefused(why)
    recipe, commit, ref = native_recipe(spec, plan.context, spec_ref)
    with contextlib.suppress(OSError, TypeError, ValueError):  # none in place, or not ours
        kept = None if force else read_manifest(plan.image)
        if kept and (kept.recipe_sha256, kept.sif_size) == (recipe, plan.image.stat().st_size):
            return kept  # before the host checks: an image in place needs no build tools
    mode, epoch = native.check_native(spec, plan.context, mode)
    common = {**common, "spec": ref, "recipe_sha256": recipe, "context_commit": commit}
    common["context_dir"] = None if commit is None else native.context_dir(plan.context)
    plan.image.parent.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix=f".{plan.image.name}.native-", dir=plan.image.parent))
    workdir.chmod(0o755)  # apt downloads as the _apt user
    try:
        _write_definition(plan.definition_partial, plan.definition)
        built, found = native.build_native(
            spec,
            plan.definition,
            context=plan.context,
            workdir=workdir,
            mode=mode,
            epoch=epoch,
            timeout=timeout,
        )
        manifest = Manifest(image=plan.image.name, **sif_identity(built), **{**common, **found})
        return _install(plan, built, manifest)
    finally:
        plan.definition_partial.unlink(missing_ok=True)
        for point in sorted(_mounts_under(workdir), reverse=True):  # a killed mmdebstrap's
            with contextlib.suppress(OSError, subprocess.SubprocessError):  # /proc, /dev/pts
                run_bounded(["umount", "--lazy", point], timeout=60, capture=True)
        if _mounts_under(workdir):  # never delete through one
            raise BuildError(
                f"{workdir} still has mounts ({_mounts_under(workdir)[0]}, ...): "
                "unmount them (umount -R), then remove it"
            )
        # rm: a tree of ~10^5 files, and in unshare mode they belong to the user's
        # subordinate ids (in fakechroot mode: to the user); never across a mount left in it
        helper = ["mmdebstrap", "--unshare-helper"] if mode == "unshare" else []
        argv = [*helper, "rm", "-rf", "--one-file-system", str(workdir / "root")]
        with contextlib.suppress(OSError):  # never hide why the build stopped
            run_bounded(argv, timeout=600, capture=True)
        shutil.rmtree(workdir, ignore_errors=True)


def _mounts_under(path: Path) -> list[str]:
    """The mount points at or below ``path`` (``/proc/self/mountinfo``)."""
    prefix = str(path.resolve()).rstrip("/") + "/"
    with contextlib.suppress(OSError), open("/proc/self/mountinfo", encoding="utf-8") as info:
        return [p for line in info if ((p := line.split()[4]) + "/").startswith(prefix)]
    return []


def _build_partial(
    plan: BuildPlan, spec: ImageSpec, *, timeout: float, common: Mapping[str, Any]
) -> Manifest:
    """Build ``plan.partial`` and read its identity; on any failure (or an interrupt) both
    partial files go, so nothing stale is left beside the image to mistake for current."""
    plan.partial.unlink(missing_ok=True)
    _write_definition(plan.definition_partial, plan.definition)  # first: a bad -o runs nothing
    try:
        version = apptainer_version()
        result = run_bounded(plan.argv, timeout=timeout, cwd=plan.context, capture=False)
        if result.returncode != 0 or not plan.partial.is_file():
            raise BuildError(
                f"`{' '.join(plan.argv)}` failed with exit code {result.returncode} "
                "(its output is above)"
            )
        return Manifest(
            image=plan.image.name,
            **probe_image(plan.partial, spec.python),
            **sif_identity(plan.partial),
            apptainer_version=version,
            **common,
        )
    except BaseException:
        plan.partial.unlink(missing_ok=True)
        plan.definition_partial.unlink(missing_ok=True)
        raise
