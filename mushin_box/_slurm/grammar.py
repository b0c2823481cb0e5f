# SPDX-License-Identifier: MIT
"""SLURM's own grammars for ``--time`` and ``--mem``, parsed as sbatch reads them (the
launch flags, the profiles and the config builder all go through here).

Pure Python: importing this module imports nothing beyond the standard library.
"""

from __future__ import annotations

import math
import re
from typing import Any

_TIME = re.compile(
    r"(?:(?P<days>\d+)-(?P<dh>\d+)(?::(?P<dm>\d+)(?::(?P<ds>\d+))?)?"  # D-H[:M[:S]]
    r"|(?P<h>\d+):(?P<hm>\d+):(?P<hs>\d+)"  # H:M:S
    r"|(?P<m>\d+)(?::(?P<ms>\d+))?)\Z"  # M[:S]
)
_TIME_HELP = "give minutes (90), H:MM:SS (1:30:00), MM:SS, or D-HH[:MM[:SS]] (1-00:00:00)"


def parse_slurm_time(value: object, *, what: str = "time") -> int:
    """Minutes of a wall-time limit in sbatch's ``--time`` grammar (an int is minutes),
    seconds rounded up as SLURM does. A limit is required (the requeue trap counts from
    it): ``0``, ``UNLIMITED`` and ``INFINITE`` are refused.

    >>> [parse_slurm_time(t) for t in (90, "90", "2:00:00", "1-00:00:00", "1-2", "0:30")]
    [90, 90, 120, 1440, 1560, 1]
    >>> parse_slurm_time("2h")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: time '2h' is not a SLURM time; give minutes (90), H:MM:SS (1:30:00), ...
    """
    text = value.strip() if isinstance(value, str) else ""
    if text.upper() in ("UNLIMITED", "INFINITE"):
        raise ValueError(
            f"{what} {value!r}: a job needs a time limit (the requeue trap counts from it); "
            f"{_TIME_HELP}"
        )
    if isinstance(value, int) and not isinstance(value, bool):
        minutes = value
    elif (m := _TIME.match(text) if isinstance(value, str) else None) is None:
        raise ValueError(f"{what} {value!r} is not a SLURM time; {_TIME_HELP}")
    else:
        g = {k: int(v or 0) for k, v in m.groupdict().items()}
        hours = g["days"] * 24 + g["dh"] + g["h"]
        seconds = g["ds"] + g["hs"] + g["ms"]
        minutes = hours * 60 + g["dm"] + g["hm"] + g["m"] + math.ceil(seconds / 60)
    if minutes < 1:
        raise ValueError(f"{what} {value!r}: the limit must be at least a minute; {_TIME_HELP}")
    return minutes


_MEMORY = re.compile(r"(?P<n>\d+)(?P<unit>[KMGT]?)B?\Z", re.IGNORECASE)
_MB_PER = {"K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024}


def parse_slurm_memory(value: object, *, what: str = "mem") -> int:
    """Megabytes of a memory size written as sbatch's ``--mem`` takes it: a whole number
    with an optional unit ``K``, ``M`` (the default), ``G`` or ``T``; kilobytes round up.

    >>> [parse_slurm_memory(m) for m in ("64G", "500M", "500", "1T", "2048K", "16gb")]
    [65536, 500, 500, 1048576, 2, 16384]
    >>> parse_slurm_memory("1.5G")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: mem '1.5G' is not a SLURM memory size; give a whole number ...
    """
    text = str(value).strip() if isinstance(value, int | str) else ""
    m = _MEMORY.match(text) if not isinstance(value, bool) else None
    if m is None:
        raise ValueError(
            f"{what} {value!r} is not a SLURM memory size; give a whole number with a unit "
            "K, M (the default) or G, T: 64G, 500M, 1536M"
        )
    return math.ceil(int(m["n"]) * _MB_PER[m["unit"].upper() or "M"])


def memory_fields(megabytes: int) -> dict[str, Any]:
    """The launcher fields for ``--mem`` of ``megabytes`` per node: ``mem_gb`` for whole
    gigabytes, else sbatch's ``mem`` (``0``: all of each node's memory).

    >>> memory_fields(65536), memory_fields(500)
    ({'mem_gb': 64}, {'additional_parameters': {'mem': '500M'}})
    >>> memory_fields(0)
    {'additional_parameters': {'mem': '0'}}
    """
    if megabytes > 0 and megabytes % 1024 == 0:
        return {"mem_gb": megabytes // 1024}
    return {"additional_parameters": {"mem": f"{megabytes}M" if megabytes else "0"}}
