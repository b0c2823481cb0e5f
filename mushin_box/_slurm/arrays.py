# SPDX-License-Identifier: MIT
"""A sweep as SLURM job arrays within the cluster's limits, throttled as one sweep.

Several arrays: SLURM refuses an array index of ``MaxArraySize`` or more (and
``SchedulerParameters=max_array_tasks=N`` may bound an array lower still; so may the
launcher field ``max_array_tasks``), and submitit numbers every array from 0. So a larger
sweep goes as arrays of nearly equal size (2,500 cells at MaxArraySize 1001: 834 + 833 + 833); with
arrays disabled (``MaxArraySize=0``) each cell is a plain job.

Chained: ``%N`` on each of k arrays side by side would run k x N cells, not the sweep's
``array_parallelism`` N. So array i starts after array i - m ended (``afterany``: a failed
cell must not stop the sweep), m being the most arrays whose cells add up to at most N
(dividing N among the arrays would give some none). A user's ``dependency`` goes to the
first m arrays.

All or nothing: each array is recorded once sbatch takes it; when sbatch refuses a later
one, those submitted are cancelled and the refusal raised.

>>> [(p.first, p.cells, p.parallelism, p.after) for p in split_sweep(5, 2, 2)]
[(0, 2, 2, None), (2, 2, 2, 0), (4, 1, 1, 1)]
>>> array_limit("MaxArraySize = 1001\\nSchedulerParameters = max_array_tasks=300,bf_continue")
300
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from mushin_box._slurm.jobs import scancel
from mushin_box._slurm.probe import scontrol_config

log = logging.getLogger(__name__)

#: ``array_parallelism``'s default (hydra-submitit-launcher's): cells of a sweep at once
DEFAULT_ARRAY_PARALLELISM = 256


@attrs.frozen
class ArrayPart:
    """One job array of a sweep: ``cells`` cells from ``first``, at most ``parallelism``
    at once (``%N``), started after array ``after`` (an index; None: at once) has ended."""

    first: int
    cells: int
    parallelism: int
    after: int | None


def array_limit(config_text: str) -> int | None:
    """The most tasks one job array may hold, from ``scontrol show config``'s text: the
    smaller of ``MaxArraySize`` and ``max_array_tasks``; 1 where arrays are disabled; None
    when neither is said.

    >>> array_limit("MaxArraySize            = 1001"), array_limit("MaxArraySize = 0")
    (1001, 1)
    >>> array_limit("SchedulerParameters = (null)") is None
    True
    """
    limits: list[int] = []
    for line in config_text.splitlines():
        key, _, value = line.partition("=")
        key, value = key.strip(), value.strip()
        if key == "MaxArraySize" and value.isdigit():
            limits.append(max(1, int(value)))
        elif key == "SchedulerParameters":
            for item in value.split(","):
                name, _, number = item.strip().partition("=")
                if name == "max_array_tasks" and number.isdigit() and int(number) > 0:
                    limits.append(int(number))
    return min(limits) if limits else None


def split_sweep(cells: int, limit: int | None, parallelism: int) -> list[ArrayPart]:
    """The arrays of ``cells`` cells: at most ``limit`` each (None: one array), nearly
    equal, chained so that at most ``parallelism`` cells run at once.

    >>> [(p.cells, p.parallelism, p.after) for p in split_sweep(2500, 1001, 256)]
    [(834, 256, None), (833, 256, 0), (833, 256, 1)]
    >>> [(p.cells, p.after) for p in split_sweep(2500, 1001, 2000)]  # two at a time
    [(834, None), (833, None), (833, 0)]
    >>> [(p.cells, p.after) for p in split_sweep(2500, 1001, 5000)]  # no chain needed
    [(834, None), (833, None), (833, None)]
    >>> [(p.cells, p.parallelism) for p in split_sweep(10, None, 4)]
    [(10, 4)]
    """
    if cells < 1:
        return []
    count = 1 if limit is None else math.ceil(cells / max(1, limit))
    size, extra = divmod(cells, count)
    # arrays that may run side by side: the most whose largest ones hold at most N cells
    at_once = 1
    while at_once < count and (at_once + 1) * size + min(at_once + 1, extra) <= parallelism:
        at_once += 1
    parts: list[ArrayPart] = []
    first = 0
    for i in range(count):
        n = size + (1 if i < extra else 0)
        after = i - at_once if i >= at_once else None
        parts.append(ArrayPart(first, n, min(n, parallelism), after))
        first += n
    return parts


def sweep_arrays(settings: Mapping[str, Any], cells: int) -> tuple[list[ArrayPart], int | None]:
    """The arrays a ``mushin_slurm`` launcher with ``settings`` (its fields; a missing one
    has its default) submits for ``cells`` cells, and the limit used: the smaller of
    ``max_array_tasks`` and the cluster's (unknown: one array, and sbatch says if too big)."""
    limit = settings.get("max_array_tasks")
    if cells > 1 and (text := scontrol_config()) is not None:
        cluster = array_limit(text)
        if cluster is not None:
            limit = cluster if limit is None else min(int(limit), cluster)
    parallelism = int(settings.get("array_parallelism") or DEFAULT_ARRAY_PARALLELISM)
    return split_sweep(cells, limit, parallelism), limit


def first_array(settings: Mapping[str, Any], cells: int | None) -> tuple[int | None, str | None]:
    """The cells of a sweep's first array (None: a single job) and :func:`arrays_summary`,
    for the dry run and ``sbatch --test-only`` (``cells`` None: an interval sweep)."""
    if cells is None or cells < 2:
        return None, None
    parts, limit = sweep_arrays(settings, cells)
    return (parts[0].cells if parts[0].cells > 1 else None), arrays_summary(parts, limit)


def arrays_summary(parts: Sequence[ArrayPart], limit: int | None) -> str | None:
    """One line for the dry run about a sweep split into several arrays (None: one array).

    >>> arrays_summary(split_sweep(2500, 1001, 256), 1001)  # doctest: +NORMALIZE_WHITESPACE
    '3 job arrays (834, 833, 833 cells; at most 1001 per array), each after the one before
     ends, at most 256 cells at once'
    """
    if len(parts) < 2:
        return None
    sizes = ", ".join(str(p.cells) for p in parts[:5]) + (", ..." if len(parts) > 5 else "")
    chained = [p for p in parts if p.after is not None]
    at_once = len(parts) - len(chained)
    total = max(p.parallelism for p in parts) * (at_once if chained else len(parts))
    if not chained:
        order = "all at once"
    elif at_once == 1:
        order = "each after the one before ends"
    else:
        order = f"{at_once} at a time, each after the one {at_once} before it ends"
    return (
        f"{len(parts)} job arrays ({sizes} cells; at most {limit} per array), {order}, "
        f"at most {min(total, sum(p.cells for p in parts))} cells at once"
    )


def submit_cells(
    executor: Any,
    fn: Any,
    columns: Sequence[Sequence[Any]],
    parts: Sequence[ArrayPart],
    record: Callable[[list[Any]], None],
) -> list[Any]:
    """Submit ``fn`` over ``columns`` (one list per argument, one item per cell) as the
    arrays ``parts``, calling ``record(jobs so far)`` after each; one job per cell, in order."""
    jobs: list[Any] = []
    arrays: list[str] = []
    sbatch_extra = dict(executor.parameters.get("additional_parameters") or {})
    try:
        for part in parts:
            extra = dict(sbatch_extra)
            if part.after is not None:
                extra["dependency"] = f"afterany:{arrays[part.after]}"
            executor.update_parameters(
                array_parallelism=part.parallelism, additional_parameters=extra
            )
            chunk = [list(c[part.first : part.first + part.cells]) for c in columns]
            submitted = executor.map_array(fn, *chunk)
            jobs += submitted
            arrays.append(str(submitted[0].job_id).split("_", 1)[0])
            record(jobs)
    except Exception:
        if arrays:
            log.warning(
                "job array %d of %d was not submitted; cancelling the %d submitted before "
                "it (%s) so that no part of the sweep runs alone",
                len(arrays) + 1,
                len(parts),
                len(arrays),
                " ".join(arrays),
            )
            if why := scancel(arrays):
                log.warning("scancel %s failed (%s): cancel them yourself", " ".join(arrays), why)
        raise
    return jobs
