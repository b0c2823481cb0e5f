# SPDX-License-Identifier: MIT
"""Loading the experiment of ``mushin-box launch`` (and the SPEC of ``build``), one line
when the user's code fails to import.

``path/to/exp.py[:NAME]`` or ``package.module:NAME`` (default NAME: ``workflow``, else
``Config``); a file is imported as a module named after it, its directory on the ranks'
``PYTHONPATH``, so that every rank imports it the same way.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import traceback
from pathlib import Path
from typing import Any

from mushin_box._core.errors import MushinBoxError
from mushin_box._core.layout import code_patch_file
from mushin_box._core.targets import public
from mushin_box._core.userfile import import_file
from mushin_box._provenance.patch import code_patch
from mushin_box._provenance.record import git_root
from mushin_box._sweep.usercode import CodeIdentity, code_identity
from mushin_box._train.configtask import fit_task, seed_pre_call


@public
class LoadError(MushinBoxError, ValueError):
    """The experiment cannot be loaded; the message says where and what to fix."""


def load_target(spec: str) -> tuple[Any, str | None]:
    """``(object, directory to put on the ranks' PYTHONPATH or None)`` for ``spec``."""
    target, _, name = spec.partition(":")
    directory: str | None = None
    path: Path | None = None
    # exp.txt would otherwise be looked up as the module exp (isfile is False for a bad path)
    if not target.endswith(".py") and (
        os.path.isfile(target) or (os.sep not in target and os.path.islink(target))
    ):
        raise LoadError(
            f"experiment file {target!r} is not a .py file: the ranks import the experiment "
            f"as a Python module by its name, which needs the .py suffix; rename it to "
            f"{Path(target).stem}.py"
        )
    if target.endswith(".py") or os.sep in target:
        try:
            path = Path(target).resolve(strict=False)
        except (OSError, RuntimeError) as exc:  # a symlink loop (RuntimeError on 3.11)
            raise LoadError(
                f"experiment file {target!r} cannot be resolved ({exc}): a symlink loop; "
                "point the link at the real .py file"
            ) from None
        if not path.is_file():
            raise LoadError(f"experiment file {target!r} does not exist")
        if path.suffix != ".py":
            raise LoadError(
                f"experiment file {target!r} is {path}, not a .py file: the ranks import it "
                "as a Python module by name; point it at the .py file"
            )
        if not path.stem.isidentifier():
            raise LoadError(
                f"experiment file name {path.name!r} is not a Python module name: rename it "
                "(letters, digits, underscores) so the ranks can import it"
            )
        directory = str(path.parent)
        module_name = path.stem
        loaded = sys.modules.get(module_name)
        if loaded is not None and Path(getattr(loaded, "__file__", "") or "").resolve() != path:
            raise LoadError(
                f"{path.name}: a different module named {module_name!r} is already imported "
                f"({loaded.__file__}); rename the experiment file"
            )
        if loaded is None:
            _check_not_shadowing(path)
    else:
        module_name = target
    try:
        module = importlib.import_module(module_name) if path is None else import_file(path)
    except Exception as exc:  # the user's code failed to import: where, and what to fix
        raise LoadError(user_code_error(f"experiment {spec!r}", exc, module_name)) from exc
    names = (name,) if name else ("workflow", "Config")
    for candidate in names:
        if hasattr(module, candidate):
            return getattr(module, candidate), directory
    raise LoadError(
        f"{target} defines none of {', '.join(names)}: name a Workflow or a hydra-zen config "
        f"with trainer/module nodes, e.g. {target}:Config"
    )


def experiment_file(spec: str) -> str | None:
    """The file a loaded experiment was read from (its git repository, the cells')."""
    target = spec.partition(":")[0]
    if target.endswith(".py") or os.sep in target:
        return str(Path(target).resolve())
    file = getattr(sys.modules.get(target), "__file__", None)
    return str(Path(file).resolve()) if isinstance(file, str) else None


def dirty_tree(file: str | None, target: Any = None) -> str | None:
    """One line when the experiment's repository has uncommitted changes: whether the
    sweep keeps them, and why not (``target``'s untracked code files count, as for the cells)."""
    if not file:
        return None
    patch = code_patch(Path(file), launch_code(target, file).files if target else ())
    if patch is None:
        return None
    where = f"{git_root(Path(file).parent)} has uncommitted changes (sha256 {patch.sha256[:12]})"
    if patch.refused is None:
        return (
            f"{where}: the sweep keeps them ({code_patch_file(patch.sha256)}), so "
            "`mushin-box reproduce` can give them back; commit them to keep them in git"
        )
    return (
        f"{where}, not kept in the sweep: {patch.refused}. The cells record only their hash, "
        "so `mushin-box reproduce` runs them again only on this very tree; commit them to "
        "keep the code"
    )


def as_workflow(target: Any, source: str | None = None) -> Any:
    """``target`` as a launch runs it (a config alone: ``fit_task``, ``seed_pre_call``)."""
    # the experiment file's name check (run first) must find yaml not imported, too
    # lazy: _sweep.workflow loads Hydra and yaml, which importing this module must not
    from mushin_box._sweep.workflow import Workflow

    if isinstance(target, Workflow):
        return target
    return Workflow(fit_task, target, pre_call=seed_pre_call, source=source)


def launch_code(target: Any, source: str | None) -> CodeIdentity:
    """The code a launch of ``target`` runs, as ``Workflow.run`` identifies it."""
    workflow = as_workflow(target, source)
    return code_identity(workflow.task, config=workflow.config, extra=(workflow.pre_call,))


def _check_not_shadowing(path: Path) -> None:
    """Refuse an experiment file named like an importable module (``yaml.py``): first on
    ``sys.path`` it would hide that module; looked up without the file's own directory."""
    saved = list(sys.path)
    sys.path[:] = [p for p in saved if Path(p or ".").resolve() != path.parent]
    try:
        spec = importlib.util.find_spec(path.stem)
    except (ImportError, ValueError):  # pragma: no cover - a broken finder: let import say
        return
    finally:
        sys.path[:] = saved
    if spec is None:
        return
    origin = spec.origin if spec.has_location else None
    if origin is not None and Path(origin).resolve() == path:
        return  # its directory is already on sys.path: the file itself
    where = origin or spec.origin or "a namespace package"
    raise LoadError(
        f"experiment file {path.name!r} has the name of the module {path.stem!r} ({where}): "
        "imported first, it would hide that module from every rank. Rename the experiment "
        "file"
    )


def user_code_error(what: str, exc: BaseException, module: str | None = None) -> str:
    """One line for ``exc``, raised importing the user's ``what``: the error, the innermost
    ``file:line`` of the user's code, and the fix. ``module`` missing itself is a wrong name."""
    if isinstance(exc, SyntaxError):
        return (
            f"could not load {what}: {type(exc).__name__} at {exc.filename}:{exc.lineno}: "
            f"{exc.msg}; fix it there"
        )
    missing = exc.name if isinstance(exc, ModuleNotFoundError) else None
    if missing and module and (module == missing or module.startswith(missing + ".")):
        return (
            f"could not load {what}: there is no module {missing!r}; check the name, or add "
            "the directory that holds it to PYTHONPATH"
        )
    # the innermost frame not Python's, a package's or mushin-box's: the user's code
    prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    theirs = [Path(p).resolve() for p in prefixes] + [Path(__file__).resolve().parents[1]]
    frames = [
        frame
        for frame in traceback.extract_tb(exc.__traceback__)
        if not frame.filename.startswith("<")
        and not any(Path(frame.filename).resolve().is_relative_to(p) for p in theirs)
    ]
    at = f" ({frames[-1].filename}:{frames[-1].lineno})" if frames else ""
    if missing:
        return (
            f"could not load {what}: it imports {missing!r}{at}, which is not installed in "
            f"this Python ({sys.executable}): install the package that provides it, or fix "
            "the import"
        )
    text = " ".join(str(exc).split())  # a multi-line message stays one line
    return f"could not load {what}: {type(exc).__name__}: {text}{at}; fix the code there"
