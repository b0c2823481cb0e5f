# SPDX-License-Identifier: MIT
"""Record a cell's failure, even on a full disk, without hiding the error itself.

Design note: a full disk (``ENOSPC``, or a quota: ``EDQUOT``) is the failure that is hardest
to record, since recording it is a write too. In order:

1. the redacted traceback (``mushin_error.txt``) and the ``failed`` status, each written
   atomically, as always;
2. if the status does not fit, the traceback makes way for it (the status says why the
   cell failed; the traceback only says where);
3. if it still does not fit, the status file of the attempt (the ``running`` record
   written when it started, which holds a filesystem block already) is overwritten in
   place by one ``pwrite`` at offset 0, padded with spaces to its old length when the new
   record is shorter. One write of at most one page, into a block the file already has,
   needs no new space, and a process killed during it leaves either record whole (a
   signal takes effect between system calls). Only a machine crash before the ``fsync``
   could tear it, which a reader takes as a corrupt status: the cell runs again.
4. if none of this works (no status file yet, a record larger than its block), the failure
   is not recorded: a note on the exception says so, and the caller re-raises it (its
   first error, never the error of recording it).
"""

from __future__ import annotations

import errno
import os
import traceback
from pathlib import Path
from typing import Any

from mushin_box._core.layout import ERROR_FILE, STATUS_FILE
from mushin_box._core.redact import redact_secret_values
from mushin_box._core.sidecars import canonical_dumps, write_json_atomic, write_text_atomic

__all__ = ["record_failure"]

_PAGE = 4096


def _overwrite_in_place(path: Path, data: bytes) -> None:
    """Step 3 of the module doc: one pwrite into the blocks the file already holds."""
    fd = os.open(path, os.O_WRONLY)
    try:
        st = os.fstat(fd)
        if len(data) > min(_PAGE, st.st_blocks * 512):
            raise OSError(errno.ENOSPC, "the failed status does not fit in its file's block")
        data += b" " * max(0, st.st_size - len(data))  # JSON readers skip trailing spaces
        if os.pwrite(fd, data, 0) != len(data):
            raise OSError(errno.ENOSPC, "short write of the failed status")
        os.fsync(fd)
    finally:
        os.close(fd)


def record_failure(cell_dir: Path, record: dict[str, Any], exc: BaseException) -> bool:
    """Write the traceback and the ``failed`` status ``record`` (with ``error`` added) of a
    cell; False, with a note on ``exc``, when the status could not be written at all."""
    # an exception may quote a secret (e.g. "invalid token ..."): the values of
    # secret-looking environment variables, sweep secrets included (whatever their
    # length), are replaced; the manifest's row copies this status's error
    text = redact_secret_values("".join(traceback.format_exception(exc)))
    message = redact_secret_values(str(exc))
    error: dict[str, Any] = {
        "type": type(exc).__qualname__,
        "message": message[:2000],
        "file": ERROR_FILE,
    }
    status = cell_dir / STATUS_FILE
    try:
        write_text_atomic(cell_dir / ERROR_FILE, text)
    except OSError:
        error["file"] = None
    try:
        write_json_atomic(status, {**record, "error": error})
        return True
    except OSError as full:
        problem = full  # the one to name: the later tries only fall back
    if error["file"] is not None:  # the traceback makes way for the status
        (cell_dir / ERROR_FILE).unlink(missing_ok=True)
        error["file"] = None
    data = canonical_dumps({**record, "error": error})
    tries = [lambda: write_json_atomic(status, {**record, "error": error})]
    if status.is_file():
        tries.append(lambda: _overwrite_in_place(status, data))
    for write in tries:
        try:
            write()
            return True
        except OSError:
            continue
    exc.add_note(
        f"cell {cell_dir.name}: this failure could not be recorded ({problem}); the next "
        "run of the sweep runs the cell again"
    )
    return False
