# SPDX-License-Identifier: MIT
"""The code fingerprint of a sweep: the user code its cells run, by content.

* Roots: the module of the task (and ``pre_call``); every module a ``_target_`` or
  ``_zen_target`` names, imported or not; every loaded module another dotted string names.
* From the roots and the packages above them, the imports written in each file (lazy ones
  too) are followed transitively, into namespace packages; nothing is imported to find them.
* Only user code counts: not the standard library, ``site-packages`` or mushin-box.
* Each module counts by the sha256 of its bytes (cached by path, ``mtime_ns`` and size),
  keyed by its name (``__main__`` by its file's stem, as ``mushin-box launch`` imports it).

So a notebook or the README re-runs nothing. Not seen: names built at run time, data files,
the git state (a commit must not re-run a sweep; the provenance records it).
"""

from __future__ import annotations

import ast
import hashlib
import importlib.machinery
import importlib.util
import inspect
import itertools
import re
import site
import sys
import sysconfig
from collections.abc import Callable, Iterable, Iterator, Mapping
from functools import cache
from pathlib import Path
from typing import Any

import attrs

from mushin_box._core.sidecars import canonical_dumps
from mushin_box._core.targets import FIRST_NAMES
from mushin_box._provenance.task import MAIN_NAMES

_DOTTED = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")
#: config keys whose value is an import path (Hydra's, and hydra-zen's zen wrappers')
_TARGET_KEYS = frozenset({"_target_", "_zen_target"})


@attrs.frozen
class CodeIdentity:
    """The code fingerprint (sha256) and the modules it covers (name -> short sha256)."""

    fingerprint: str
    modules: Mapping[str, str]
    #: the files of those modules (the experiment's git state hashes the untracked ones)
    files: tuple[str, ...] = ()


@cache
def _excluded_dirs() -> tuple[Path, ...]:
    """The standard library, site-packages, mushin-box and its Hydra plugin."""
    paths = sysconfig.get_paths()
    dirs = [paths.get(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")]
    dirs += [*site.getsitepackages(), site.getusersitepackages()]
    package = Path(__file__).resolve().parents[1]  # mushin_box/
    dirs += [str(package), str(package.parent / "hydra_plugins" / "mushin_box_launcher")]
    return tuple(Path(d).resolve() for d in dirs if d)


def is_user_file(path: Path) -> bool:
    if {"site-packages", "dist-packages"} & set(path.parts):
        return False
    return not any(path.is_relative_to(d) for d in _excluded_dirs())


def _key(path: Path) -> tuple[str, int, int]:
    st = path.stat()  # an OSError: the caller's
    return (str(path), st.st_mtime_ns, st.st_size)


@cache  # by (path, mtime_ns, size); an OSError is not cached
def _digest(key: tuple[str, int, int]) -> str:
    return hashlib.sha256(Path(key[0]).read_bytes()).hexdigest()


def _sha256(path: Path) -> str | None:
    try:
        return _digest(_key(path))
    except OSError:
        return None


def _imports(path: Path) -> tuple[tuple[str, int, tuple[str, ...]], ...]:
    """(module, relative level, imported names) of every import statement in the file."""
    try:
        return _parsed_imports(_key(path)) if path.suffix == ".py" else ()
    except OSError:
        return ()


@cache
def _parsed_imports(key: tuple[str, int, int]) -> tuple[tuple[str, int, tuple[str, ...]], ...]:
    found: list[tuple[str, int, tuple[str, ...]]] = []
    try:
        tree = ast.parse(Path(key[0]).read_bytes(), filename=key[0])
    except (OSError, SyntaxError, ValueError):
        return ()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, 0, ()) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = tuple(a.name for a in node.names if a.name != "*")
            found.append((node.module or "", node.level, names))
    return tuple(found)


def _spec(name: str) -> importlib.machinery.ModuleSpec | None:
    """The spec of module ``name`` as found on ``sys.path``, importing nothing (None: unknown)."""
    parent, _, tail = name.rpartition(".")
    search: Any = None
    if parent:
        search = _search_path(parent)
        if not search:
            return None
    try:
        return importlib.machinery.PathFinder.find_spec(name, search)
    except KeyError:
        # a namespace package in a package not imported yet: its modules are in the folders
        spec = importlib.machinery.ModuleSpec(name, None)
        spec.submodule_search_locations = [str(Path(d, tail)) for d in search]
        return spec
    except (ImportError, ValueError):
        return None


def module_file(name: str) -> Path | None:
    """The file of module ``name``, loaded or found without importing anything; None for a
    builtin, a namespace package or an unknown name."""
    module = sys.modules.get(name)
    if module is not None:
        file = getattr(module, "__file__", None)
        return Path(file).resolve() if isinstance(file, str) else None
    spec = _spec(name)
    if spec is None or not spec.has_location or not spec.origin:
        return None
    return Path(spec.origin).resolve()


def _search_path(package: str) -> list[str] | None:
    """``package``'s ``__path__``, imported or not ([]: not a package; None: unknown)."""
    module = sys.modules.get(package)
    if module is not None:
        return list(getattr(module, "__path__", ()))
    spec = _spec(package)
    return list(spec.submodule_search_locations or ()) if spec else None


def _absolute(importer: str, is_package: bool, module: str, level: int) -> str:
    """The absolute name of ``from <level dots><module> import ...`` written in ``importer``."""
    if level == 0:
        return module
    package = importer if is_package else importer.rpartition(".")[0]
    try:
        return importlib.util.resolve_name("." * level + module, package)
    except (ImportError, ValueError):  # beyond the top-level package: "" names nothing
        return ""


def _prefixes(name: str) -> Iterator[str]:
    return itertools.accumulate(name.split("."), lambda a, b: f"{a}.{b}")


def _imported(name: str, path: Path) -> Iterator[str]:
    """The modules the file of module ``name`` imports (and their parent packages)."""
    is_package = path.name == "__init__.py"
    for module, level, names in _imports(path):
        base = _absolute(name, is_package, module, level)
        if not base:
            continue
        yield from _prefixes(base)
        for imported in names:  # `from pkg import sub` may name a module
            yield f"{base}.{imported}"


def _names_in(config: Any) -> Iterator[tuple[str, bool]]:
    """Every dotted string in the config, and whether its key is a target's."""
    if config is None:
        return
    from omegaconf import OmegaConf

    try:
        plain = OmegaConf.to_container(OmegaConf.structured(config), resolve=False)
    except Exception:  # a config OmegaConf can't read: its targets are not roots
        return
    stack: list[tuple[Any, bool]] = [(plain, False)]
    while stack:
        node, is_target = stack.pop()
        if isinstance(node, dict):
            stack.extend((v, k in _TARGET_KEYS) for k, v in node.items())
        elif isinstance(node, list):
            stack.extend((v, False) for v in node)
        elif isinstance(node, str) and _DOTTED.fullmatch(node):
            yield node, is_target


def _roots(callables: Iterable[Any], config: Any) -> set[str]:
    roots: set[str] = set()
    for fn in callables:
        if fn is None:
            continue
        fn = inspect.unwrap(getattr(fn, "func", fn))  # functools.partial, decorators
        name = getattr(fn, "__module__", None) or getattr(type(fn), "__module__", None)
        if isinstance(name, str):
            roots.add(name)
    for text, is_target in _names_in(config):
        # mypkg.models.Net: mypkg.models; a dotted value that is no target counts if loaded
        modules = [p for p in _prefixes(text) if p in sys.modules or (is_target and module_file(p))]
        if modules:
            roots.add(modules[-1])
    return roots


def _script_file(fn: Any) -> Path | None:
    """The file a ``__main__`` callable was defined in, from its code: under ``python -m
    cProfile`` or ``pdb``, ``sys.modules["__main__"]`` is the runner's module, and the
    fingerprint must follow the script's bytes, not how it was started."""
    fn = inspect.unwrap(getattr(fn, "func", fn))
    if getattr(fn, "__module__", None) not in MAIN_NAMES:
        return None
    file = getattr(getattr(fn, "__code__", None), "co_filename", None)
    return Path(file).resolve() if isinstance(file, str) and Path(file).is_file() else None


def user_modules(callables: Iterable[Any], config: Any = None) -> dict[str, Path]:
    """The user modules the callables and the config reach (see the module doc): name -> file."""
    callables = list(callables)
    script = next((f for f in map(_script_file, callables) if f is not None), None)
    # a root's packages run before it does (their __init__.py): they count too
    todo = sorted({p for root in _roots(callables, config) for p in _prefixes(root)})
    seen: set[str] = set()
    found: dict[str, Path] = {}
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        path = script if script and name in MAIN_NAMES else module_file(name)
        if path is None or not is_user_file(path):
            continue
        found[path.stem if name in MAIN_NAMES else name] = path
        todo.extend(n for n in _imported(name, path) if n not in seen)
    return found


def _task_text(task: Callable[..., Any]) -> str:
    """The task's name, and its source when its module has no file (a notebook, a REPL)."""
    fn = inspect.unwrap(getattr(task, "func", task))
    module = getattr(fn, "__module__", "?")
    qualname = getattr(fn, "__qualname__", type(fn).__qualname__)
    script = _script_file(fn)
    file = str(script) if script else getattr(sys.modules.get(str(module)), "__file__", None)
    if isinstance(file, str):
        # a script's task is named after its file, as the same task imported from it is
        # (`python train.py` runs train.task as __main__.task): reproduce imports it
        name = f"{Path(file).stem if str(module) in MAIN_NAMES else module}.{qualname}"
        return FIRST_NAMES.get(name, name)  # the kit's own tasks: their first name
    name = f"{'__main__' if module in MAIN_NAMES else module}.{qualname}"
    try:
        return name + "\n" + inspect.getsource(fn)
    except (OSError, TypeError):
        return name


def code_identity(
    task: Callable[..., Any], *, config: Any = None, extra: Iterable[Any] = ()
) -> CodeIdentity:
    """The code fingerprint of a sweep of ``task`` over ``config`` (``extra``: e.g.
    ``pre_call``): sha256 of the task's name and of every user module reached."""
    modules: dict[str, str] = {}
    files: list[str] = []
    for name, path in sorted(user_modules([task, *extra], config).items()):
        digest = _sha256(path)
        if digest is not None:
            modules[name] = digest
            files.append(str(path))
    text = canonical_dumps({"task": _task_text(task), "modules": modules})
    return CodeIdentity(
        fingerprint=hashlib.sha256(text).hexdigest(),
        modules={name: digest[:16] for name, digest in modules.items()},
        files=tuple(files),
    )
