# SPDX-License-Identifier: MIT
"""Where a cell's task (and ``pre_call``) live, written down so ``reproduce`` can import them.

:func:`load_callable` imports them again as ``mushin-box launch`` imports an experiment
file: by module name, else from the file (a script's ``__main__`` task is imported from
the script, whose ``if __name__ == "__main__":`` block does not run). It is ``run``: the
code fingerprint names the task; only whether a rank in an image took it from the image
(:func:`in_image`) is identity, as the fingerprint covers user files, not the kit.
"""

from __future__ import annotations

import importlib
import inspect
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from mushin_box._core.userfile import import_file

#: the module names of a script run as ``python train.py``
MAIN_NAMES = ("__main__", "__mp_main__")
#: the host directories Apptainer mounts into every container, besides ``$HOME``
_DEFAULT_MOUNTS = ("/tmp", "/var/tmp", "/proc", "/sys", "/dev")


def _locate(fn: Callable[..., Any] | None) -> dict[str, Any] | None:
    if fn is None:
        return None
    target = inspect.unwrap(getattr(fn, "func", fn))  # functools.partial, decorators
    module = getattr(target, "__module__", None)
    qualname = getattr(target, "__qualname__", None) or type(target).__qualname__
    file = getattr(sys.modules.get(str(module)), "__file__", None)
    return {
        "module": module,
        "qualname": qualname,
        "file": str(Path(file).resolve()) if isinstance(file, str) else None,
        "partial": fn is not target and hasattr(fn, "func"),
    }


def task_locator(
    task: Callable[..., Any], pre_call: Callable[..., Any] | None = None
) -> dict[str, Any]:
    """``run.task`` of a cell's record: where its task and ``pre_call`` are defined.

    >>> from mushin_box import fit_task, seed_pre_call  # stable names, not API
    >>> loc = task_locator(fit_task, seed_pre_call)
    >>> loc["task"]["module"], loc["task"]["qualname"], loc["pre_call"]["qualname"]
    ('mushin_box', 'fit_task', 'seed_pre_call')
    """
    return {"task": _locate(task), "pre_call": _locate(pre_call)}


def in_image(file: str | None, rank_argv: Sequence[str] | None, home: str | None) -> bool:
    """Whether ``file``, as a rank in a container saw it, lies under no host mount.

    >>> argv = ["apptainer", "exec", "--bind", "/p:/p", "--bind", "/d:/in:ro", "--pwd", "/w",
    ...         "i.sif", "python"]
    >>> [in_image(f, argv, "/home/u") for f in ("/opt/v/m.py", "/p/e.py", "/in/a.py", "/tmp/t.py")]
    [True, False, False, False]
    """
    if not file:
        return False
    mounted = [home, *_DEFAULT_MOUNTS]
    words = list(rank_argv or ())
    for flag, value in zip(words, words[1:], strict=False):
        if flag in ("--bind", "-B"):
            mounted += [(b.split(":") + [""])[1] or b.split(":")[0] for b in value.split(",")]
        elif flag in ("--pwd", "--cwd"):
            mounted.append(value)
    path = PurePosixPath(file)
    return not any(m and path.is_relative_to(m.strip()) for m in mounted)


def locator_problem(entry: Mapping[str, Any] | None, what: str) -> str | None:
    """Why ``entry`` (a :func:`task_locator` entry) cannot be imported again, or None.

    >>> locator_problem({"module": "m", "qualname": "f.<locals>.g", "file": None}, "task")
    'the task m.f.<locals>.g is defined inside a function: ...'
    """
    if entry is None:
        return None
    module, qualname = entry.get("module"), entry.get("qualname")
    if not isinstance(module, str) or not isinstance(qualname, str):
        return f"the record does not name the {what}'s module and name"
    name = f"{module}.{qualname}"
    if "<lambda>" in qualname or "<locals>" in qualname:
        kind = "a lambda" if "<lambda>" in qualname else "defined inside a function"
        return (
            f"the {what} {name} is {kind}: it cannot be imported again; define it at the "
            "top level of a module and run the cell again"
        )
    if entry.get("partial"):
        return (
            f"the {what} {name} was a functools.partial, whose bound arguments are not "
            "recorded; use a named function and run the cell again"
        )
    if module in MAIN_NAMES and not entry.get("file"):
        return f"the {what} {name} was defined in an interactive session, which has no file"
    return None


def _from_cwd(module: Any) -> str | None:
    """The current directory, when ``module`` was imported from it: the ranks need it."""
    file = getattr(module, "__file__", None)
    if not isinstance(file, str):
        return None
    path = Path(file).resolve()
    root = path.parent
    for _ in range(module.__name__.count(".") + (path.name == "__init__.py")):
        root = root.parent  # stops at "/" where a module's name is deeper than its path
    return str(root) if root == Path.cwd().resolve() else None


def load_callable(entry: Mapping[str, Any]) -> tuple[Callable[..., Any], str | None]:
    """``(function, the directory the ranks import it from)``; ``ImportError`` when it
    cannot be found (an error of the module's own code propagates)."""
    module_name, qualname = str(entry["module"]), str(entry["qualname"])
    file = Path(entry["file"]) if entry.get("file") else None
    directory: str | None = None
    module: Any = None
    if module_name not in MAIN_NAMES:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if file is None or not (exc.name and module_name.startswith(exc.name)):
                raise
        else:
            directory = _from_cwd(module)
    if module is None:
        if file is None or not file.is_file():
            raise ImportError(f"cannot import {module_name}: its file {file} does not exist")
        module = import_file(file)
        directory = str(file.parent)
    obj: Any = module
    for part in qualname.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            raise ImportError(f"{module.__name__} ({file or module_name}) defines no {qualname}")
    if not callable(obj):
        raise ImportError(f"{module.__name__}.{qualname} is not a function")
    return obj, directory
