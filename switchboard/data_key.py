"""The deployment key (`SWITCHBOARD_DATA_KEY`) that wraps every session's data key, found or
made as a process starts.

- Set: it is parsed (standard or urlsafe base64 of 32 bytes); anything else stops the process.
- Unset, on the embedded defaults (no `SWITCHBOARD_DATABASE_URL`: the local or embedded
  PostgreSQL `switchboard.services` finds or starts): it is read from `.switchboard/data.key`,
  or generated there once (mode 0600), saying so in one log line.
- Unset while a database is configured: the process stops. A deployment never falls back to
  keeping values it cannot erase.

`SWITCHBOARD_DATA_KEY_PREVIOUS`, when set, follows the current key, so a key wrapped under it
still opens while `switchboard data-keys rotate` re-wraps everything under the current one.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path

from pipeline.privacy.sealing import BadDataKey, DeploymentKey, parse_deployment_key
from switchboard.folders import DATA_DIR, writable_folder

CURRENT = "SWITCHBOARD_DATA_KEY"
PREVIOUS = "SWITCHBOARD_DATA_KEY_PREVIOUS"
KEY_FILE = "data.key"
MAKE_ONE = "make one with `switchboard data-keys new` or `openssl rand -base64 32`"


class DataKeyError(Exception):
    """The deployment key is missing or malformed; the message names the variable (or file)
    and what is wrong, never the key."""


def key_file(state_dir: Path) -> Path:
    """Where the embedded defaults keep their generated key."""
    return state_dir / KEY_FILE


def deployment_keys(
    env: Mapping[str, str],
    *,
    embedded: bool,
    state_dir: Path,
    log: Callable[[str], None] = print,
) -> tuple[DeploymentKey, ...]:
    """The deployment keys in effect: the current one first, then the previous one if set.

    `embedded` says the deployment runs on the embedded defaults (no database configured), where
    an unset key is read from, or generated into, `state_dir/data.key`. `DataKeyError` for a
    missing or malformed key; `ConfigError` for a `state_dir` the key cannot be written in."""
    text = env.get(CURRENT)
    if text is not None:
        current = _parse(text, CURRENT)
    elif embedded:
        current = _read_or_generate(key_file(state_dir), log)
    else:
        raise DataKeyError(
            f"{CURRENT} is not set; a deployment with a configured database (SWITCHBOARD_DATABASE_URL)"
            f" needs one to keep sensitive values erasable: {MAKE_ONE}"
        )
    previous_text = env.get(PREVIOUS, "")
    if not previous_text.strip():
        return (current,)
    previous = _parse(previous_text, PREVIOUS)
    return (current,) if previous.key_id == current.key_id else (current, previous)


def _parse(text: str, name: str) -> DeploymentKey:
    try:
        return parse_deployment_key(text)
    except BadDataKey as error:
        raise DataKeyError(f"{name} {error}") from None


def _read_or_generate(path: Path, log: Callable[[str], None]) -> DeploymentKey:
    """The key in `path`, or a new one written there (mode 0600) if there is none. Processes
    starting together agree on one: the file appears whole or not at all (written aside, then
    linked into place, which fails if another process got there first)."""
    if not path.exists():
        writable_folder(path.parent, DATA_DIR)
        key = DeploymentKey.generate()
        descriptor, aside = tempfile.mkstemp(prefix=".data.key.", dir=path.parent)
        try:
            os.fchmod(descriptor, 0o600)
            os.write(descriptor, f"{key.text}\n".encode())
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
        try:
            os.link(aside, path)
        except FileExistsError:
            pass  # another process made it first: its key is the deployment's
        else:
            log(
                f"generated a deployment key ({CURRENT} was not set) in {path}; keep it: without it"
                " no sealed value of this deployment opens again"
            )
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(aside)
    try:
        text = path.read_text()
    except OSError as error:
        raise DataKeyError(f"{CURRENT} is not set and {path} cannot be read: {error.strerror}") from None
    try:
        return parse_deployment_key(text)
    except BadDataKey as error:
        raise DataKeyError(f"{CURRENT} is not set and the key in {path} {error}") from None
