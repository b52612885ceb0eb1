"""The workers' shared metrics directory (prometheus-client's multi-process mode): who is alive
in it, and what is kept of the dead.

Every worker process of a machine writes its own files there (`counter_<pid>.db`,
`gauge_livesum_<pid>.db`, …) and any of them may serve the sum. No parent process sees the
workers exit (honcho or systemd starts each on its own), so the directory keeps its own roll:
each member holds an exclusive `flock` on `members/<pid>.lock` for its whole life. The kernel
lets go of it when the process dies, however it dies (`kill -9` too), and a recycled pid cannot
hold it.

- A process that joins a directory where no one is alive starts the group afresh: every file
  goes, so the counters start from zero as a restarted process's would (a reset `rate()`
  expects), and nothing piles up from one start of the group to the next.
- A process that joins live siblings, and every scrape, marks the dead dead as
  prometheus-client intends (`mark_process_dead`): their live gauges ('livesum', 'liveall', …)
  go, their counters and histograms stay in the sums. A served total must not drop while the
  group runs: `rate()` would read the drop as a reset and count the whole total again.

Joining and scraping take `group.lock`, so a scrape never sees half of a join.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

GROUP_LOCK = "group.lock"
MEMBERS = "members"

# The descriptor whose lock says this process is alive, per directory joined (kept open for
# the process's life: closing it would let go of the lock).
_held: dict[Path, int] = {}


def join(directory: Path) -> None:
    """Become a live member of `directory`: start the group afresh if no one else is alive in
    it, otherwise forget the dead."""
    members = directory / MEMBERS
    members.mkdir(parents=True, exist_ok=True)
    with group_locked(directory):
        if directory in _held:
            return
        alive = running_pids(directory)
        if alive:
            forget_dead(directory, alive)
        else:
            for path in directory.glob("*.db"):
                path.unlink(missing_ok=True)
        descriptor = os.open(members / f"{os.getpid()}.lock", os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        _held[directory] = descriptor


@contextmanager
def group_locked(directory: Path) -> Iterator[None]:
    """Hold the directory's group lock (joins and scrapes take turns)."""
    descriptor = os.open(directory / GROUP_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)


def running_pids(directory: Path) -> set[int]:
    """The members whose lock is held (call with the group lock held); the dead's lock files
    are removed on the way."""
    alive = set()
    for path in (directory / MEMBERS).glob("*.lock"):
        try:
            pid = int(path.stem)
        except ValueError:
            continue
        if _is_held(path):
            alive.add(pid)
        else:
            path.unlink(missing_ok=True)
    return alive


def forget_dead(directory: Path, alive: set[int]) -> set[int]:
    """Mark every process with live gauges in `directory` that is not in `alive` dead; answers
    their pids."""
    from prometheus_client import multiprocess

    dead = set()
    for path in directory.glob("gauge_live*_*.db"):
        named = path.stem.rsplit("_", 1)[-1]
        if named.isdigit() and int(named) not in alive:
            dead.add(int(named))
    for pid in dead:
        multiprocess.mark_process_dead(pid, str(directory))
    return dead


def leave(directory: Path) -> None:
    """This process stops: its live gauges go now, and its lock."""
    from prometheus_client import multiprocess

    with group_locked(directory):
        multiprocess.mark_process_dead(os.getpid(), str(directory))
        descriptor = _held.pop(directory, None)
        if descriptor is not None:
            (directory / MEMBERS / f"{os.getpid()}.lock").unlink(missing_ok=True)
            os.close(descriptor)


def _is_held(path: Path) -> bool:
    # A lock taken through a descriptor of its own conflicts with any other, this process's too.
    try:
        descriptor = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(descriptor, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(descriptor)
    return False
