# SPDX-License-Identifier: MIT
"""Import a user's Python file: the one way the kit does it.

:func:`import_file` imports it as the ranks will (named after the file, its directory first
on ``sys.path``), never takes another module of that name already imported, and forgets a
file whose code raised. :func:`owner_problem`: a file a sweep directory names that another
user could write is code another user chose (as ``ssh`` treats its keys): ``o+w``, or ``g+w``
with a group other than the owner's private one (Debian's and Red Hat's default).
"""

from __future__ import annotations

import functools
import grp
import importlib.util
import os
import pwd
import stat
import sys
import types
from pathlib import Path


def writable_by_others(st: os.stat_result) -> bool:
    """Can a user other than the owner (or root) write the file ``st`` describes (module doc)?"""
    if st.st_mode & stat.S_IWOTH:
        return True
    return bool(st.st_mode & stat.S_IWGRP) and not _private_group(st.st_uid, st.st_gid)


@functools.lru_cache(maxsize=64)
def _private_group(uid: int, gid: int) -> bool:
    try:
        user, group = pwd.getpwuid(uid).pw_name, grp.getgrgid(gid)
    except KeyError:  # a uid or gid with no name: nothing says the group is theirs alone
        return False
    return group.gr_name == user and set(group.gr_mem) <= {user}


def owner_problem(path: Path, st: os.stat_result | None = None) -> str | None:
    """Why ``path`` is not the user's own regular file that no one else can write, or None;
    ``st``: its ``fstat`` when read through an open descriptor (the file checked is read).

    >>> import tempfile
    >>> with tempfile.NamedTemporaryFile() as f:
    ...     os.chmod(f.name, 0o644)
    ...     ok = owner_problem(Path(f.name))
    ...     os.chmod(f.name, 0o666)
    ...     shared = owner_problem(Path(f.name))
    >>> ok is None, shared
    (True, 'can be written by other users (chmod go-w it)')
    """
    try:
        st = st or path.stat()
    except OSError as exc:
        return f"cannot be read ({exc.strerror})"
    if not stat.S_ISREG(st.st_mode):
        return "is not a regular file"
    if st.st_uid not in (os.getuid(), 0):
        return f"belongs to another user (uid {st.st_uid})"
    if writable_by_others(st):
        return "can be written by other users (chmod go-w it)"
    return None


def import_file(
    path: Path, *, name: str | None = None, on_path: bool = True, keep: bool = True
) -> types.ModuleType:
    """Import ``path`` as the module ``name`` (default: the file's stem), or return the module
    already imported from that file; ``keep=False`` drops it from ``sys.modules`` (a SPEC
    file is read once). An ``ImportError`` when another module of that name is imported.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     _ = (Path(d) / "userfile_doc.py").write_text("X = 1\\n")
    ...     module = import_file(Path(d) / "userfile_doc.py", on_path=False, keep=False)
    >>> module.X, "userfile_doc" in sys.modules
    (1, False)
    """
    path = Path(path).resolve()
    name = name or path.stem
    loaded = sys.modules.get(name)
    if loaded is not None:
        if Path(getattr(loaded, "__file__", "") or "").resolve() == path:
            return loaded
        raise ImportError(
            f"{path}: a different module named {name!r} is already imported "
            f"({getattr(loaded, '__file__', None)})"
        )
    if on_path and str(path.parent) not in sys.path:
        sys.path.insert(0, str(path.parent))
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path}: not a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    if not keep:
        sys.modules.pop(name, None)
    return module
