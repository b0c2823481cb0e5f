# SPDX-License-Identifier: MIT
"""The host-side requeue of ``mushin_slurm``: the batch shell's trap, as ``setup`` lines.

submitit and Lightning requeue from inside a rank (``scontrol requeue``), which fails in a
container without ``scontrol``; the batch script runs on the host, so it requeues instead.
SLURM signals the batch shell alone (``#SBATCH --signal=B:USR2@<signal_delay_s>``, added by
:mod:`mushin_box._slurm.launcher`) before the time limit and at preemption
(``preempt_send_user_signal``, or ``scancel --batch --signal=USR2``); the ranks ignore
USR2, so submitit's own requeue never fires. ``srun`` is shadowed by a function that runs
the real one in the background (bash defers a trap until the foreground command ends).
On USR2 the trap tells *timeout* (within ``signal_delay_s + 90`` s of the limit:
SLURM may signal a minute early) from *preemption*, sends ``rank_signal`` to the ranks and
waits up to ``signal_delay_s - 10`` s; unless they all exited 0 it requeues the job (an
array task as ``<array>_<index>``) when the reason is in ``requeue_on`` and
``SLURM_RESTART_COUNT < max_requeues``. The cell then resumes from its checkpoint.
"""

from __future__ import annotations

import enum
import re
import shlex
from collections.abc import Sequence

from mushin_box._slurm.jobs import JOB_ID_BASH

#: the signal SLURM sends the batch shell before the time limit (and at preemption)
REQUEUE_SIGNAL = "USR2"
_TIMEOUT_SLACK_S = 90  # SLURM may send --signal up to 60 s early
_GRACE_MARGIN_S = 10  # requeue this long before SLURM's kill


# The trap, as shell code; @name@ are filled in (quoted) by requeue_setup_lines.
_TRAP = r"""
# mushin-box host-side requeue (mushin_box._slurm.launcher): `srun` is a function that runs the real
# srun in the background, so that this shell's trap runs while the ranks work
__mushin_requeue_on=@requeue_on@ __mushin_max_requeues=@max_requeues@
__mushin_rank_signal=@rank_signal@ __mushin_grace_s=@grace_s@
__mushin_timeout_after_s=@timeout_after_s@
__mushin_srun_pid= __mushin_srun_rc= __mushin_handled=
__mushin_log() { printf 'mushin-box requeue: %s\n' "$*" >&2; }
__mushin_on_signal() {
  [[ -n $__mushin_handled ]] && return 0
  __mushin_handled=1
  local reason=preemption restarts=${SLURM_RESTART_COUNT:-0} i job
  # an array task by its array id: the plain id of the array's last task requeues them all
  @job_id@
  (( SECONDS >= __mushin_timeout_after_s )) && reason=timeout
  __mushin_log "SIG@signal@ after ${SECONDS}s: $reason (job $job, restarts $restarts)"
  if [[ -n $__mushin_srun_pid ]] && kill -0 "$__mushin_srun_pid" 2>/dev/null; then
    if [[ -n $__mushin_rank_signal ]]; then
      __mushin_log "SIG$__mushin_rank_signal to the ranks; waiting up to ${__mushin_grace_s}s"
      kill -s "$__mushin_rank_signal" "$__mushin_srun_pid" 2>/dev/null || true
    fi
    for ((i = 0; i < 5 * __mushin_grace_s; i++)); do  # at least grace_s seconds
      kill -0 "$__mushin_srun_pid" 2>/dev/null && sleep 0.2 || break
    done
    if ! kill -0 "$__mushin_srun_pid" 2>/dev/null; then
      wait "$__mushin_srun_pid" && __mushin_srun_rc=0 || __mushin_srun_rc=$?
    fi
  fi
  if [[ $__mushin_srun_rc == 0 ]]; then __mushin_log "the ranks finished"; return 0; fi
  case " $__mushin_requeue_on " in
    *" $reason "*) ;;
    *) __mushin_log "not requeueing: requeue_on has no $reason"; return 0 ;;
  esac
  if (( restarts >= __mushin_max_requeues )); then
    __mushin_log "not requeueing: max_requeues=$__mushin_max_requeues reached"; return 0
  fi
  __mushin_log "scontrol requeue $job"
  scontrol requeue "$job" || __mushin_log "scontrol requeue failed"
}
trap __mushin_on_signal @signal@
srun() {
  command srun "$@" &
  __mushin_srun_pid=$! __mushin_srun_rc=
  local rc again
  while :; do
    wait "$__mushin_srun_pid" && rc=0 || rc=$?  # (safe under a `set -e` in setup)
    if [[ -n $__mushin_srun_rc ]]; then rc=$__mushin_srun_rc; break; fi  # reaped by the trap
    kill -0 "$__mushin_srun_pid" 2>/dev/null && continue  # the trap interrupted wait
    if (( rc > 128 )); then
      wait "$__mushin_srun_pid" 2>/dev/null && again=0 || again=$?
      (( again != 127 )) && rc=$again
    fi
    break
  done
  __mushin_srun_pid= __mushin_srun_rc=$rc
  return "$rc"
}
"""


class RequeueReason(enum.Enum):
    """Why SLURM signalled the batch shell; ``requeue_on`` lists the ones that requeue."""

    preemption = "preemption"
    timeout = "timeout"


def requeue_setup_lines(
    *,
    requeue_on: Sequence[str],
    max_requeues: int,
    rank_signal: str | None,
    signal_delay_s: int,
    timeout_min: int,
) -> list[str]:
    """Shell lines for submitit's ``setup``: the host-side requeue trap (see module doc).

    >>> lines = requeue_setup_lines(requeue_on=["preemption"], max_requeues=2,
    ...                             rank_signal="USR1", signal_delay_s=60, timeout_min=30)
    >>> lines[2:4]
    ['__mushin_requeue_on=preemption __mushin_max_requeues=2', \
'__mushin_rank_signal=USR1 __mushin_grace_s=50']
    >>> "trap __mushin_on_signal USR2" in lines
    True
    """
    values = {
        "requeue_on": " ".join(RequeueReason(r).value for r in requeue_on),
        "max_requeues": str(int(max_requeues)),
        "rank_signal": rank_signal or "",
        "grace_s": str(max(0, int(signal_delay_s) - _GRACE_MARGIN_S)),
        "timeout_after_s": str(
            max(0, int(timeout_min) * 60 - int(signal_delay_s) - _TIMEOUT_SLACK_S)
        ),
        "signal": REQUEUE_SIGNAL,
    }
    trap = _TRAP.replace("@job_id@", JOB_ID_BASH)  # code, not a value: not quoted
    text = re.sub(r"@(\w+)@", lambda m: shlex.quote(values[m.group(1)]), trap)
    return text.strip("\n").splitlines()
