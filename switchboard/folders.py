"""The folders a process writes (its data folder, a worker's metrics folder), made and proved
writable as it starts.

A process that cannot write one (a container's user in a root-owned working directory, where
the default `.switchboard` lands) would otherwise die later with a `PermissionError` traceback
and be restarted into the same death. It stops at start instead, with one line naming the folder
and the setting that chose it (`ConfigError`, exit 2), before it reaches any server.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from pipeline.platform.config import PREFIX, ConfigError, Settings

DATA_DIR = f"{PREFIX}DATA_DIR"
METRICS_DIR = f"{PREFIX}METRICS_DIR"


def writable_folder(folder: Path, setting: str, *, or_else: str = "") -> Path:
    """`folder`, made if missing, once a file could be written in it; a `ConfigError` naming
    `setting` (and `or_else`, another setting that would do) and the folder otherwise."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        # A file made and removed, as the process's own would be: a folder that exists and
        # lists can still refuse to be written (its owner is another user, or it is read-only).
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as error:
        reason = error.strerror or type(error).__name__
        raise ConfigError(
            f"{setting}: cannot write the folder {Path(os.path.abspath(folder))} ({reason}) as uid"
            f" {os.getuid()}; set {setting}{f' (or {or_else})' if or_else else ''} to a folder this"
            " user may write"
        ) from None
    return folder


def metrics_folder(settings: Settings) -> Path:
    """A worker's metrics folder (SWITCHBOARD_METRICS_DIR, else the data folder's
    `metrics/<namespace>`), writable."""
    if settings.metrics_dir is not None:
        return writable_folder(settings.metrics_dir, METRICS_DIR)
    return writable_folder(
        settings.data_dir / "metrics" / settings.broker_namespace, DATA_DIR, or_else=METRICS_DIR
    )
