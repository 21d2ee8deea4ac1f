"""Output paths checked before the first step, so a run's results are never lost at its end.

``check_outputs(cfg)`` looks at every path the run will write (``--json``,
``--trace``, ``--checkpoint``) without creating anything: the folder must exist
and be writable, the path must not be a folder, an existing file must be
writable. The ``--tensorboard`` folder, made with its parents at the end, must
not be a file, nor lie under one, and its nearest existing folder must be
writable; no two flags may name one file. It returns the first problem as one
line, or None. The training command calls it on every rank and stops every
rank (exit 2) if any rank saw one.
"""

from __future__ import annotations

import os
from typing import Any

__all__ = ["check_outputs", "check_output_path", "check_output_folder"]

OUTPUT_FLAGS = ("json", "trace", "checkpoint")
FOLDER_FLAGS = ("tensorboard",)  # a folder the run makes (with its parents) at its end


def check_output_path(flag: str, path: str) -> str | None:
    """Return why ``path`` (given to ``--flag``) cannot be written, or None if it can."""
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        return f"--{flag} {path}: is a folder, not a file"
    if not os.path.isdir(folder):
        return f"--{flag} {path}: folder {folder} does not exist"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"--{flag} {path}: folder {folder} is not writable"
    if os.path.exists(path) and not os.access(path, os.W_OK):
        return f"--{flag} {path}: the file is not writable"
    return None


def check_output_folder(flag: str, path: str) -> str | None:
    """Return why the folder ``path`` (given to ``--flag``, made with its parents) cannot be
    written, or None if it can."""
    if os.path.exists(path) and not os.path.isdir(path):
        return f"--{flag} {path}: is a file, not a folder"
    existing = os.path.abspath(path)
    while not os.path.exists(existing):  # the nearest part that exists: the folders go there
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        return f"--{flag} {path}: {existing} is a file, not a folder"
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"--{flag} {path}: folder {existing} is not writable"
    return None


def check_outputs(cfg: Any, flags: tuple[str, ...] = OUTPUT_FLAGS) -> str | None:
    """Return the first problem among ``cfg``'s output paths (``flags``) and output folders
    (``FOLDER_FLAGS``), or None."""
    for flag in (*flags, *FOLDER_FLAGS):
        path = getattr(cfg, flag, None)
        if path:
            check = check_output_folder if flag in FOLDER_FLAGS else check_output_path
            problem = check(flag.replace("_", "-"), str(path))
            if problem is not None:
                return problem
    return _same_file(cfg, flags)


def _same_file(cfg: Any, flags: tuple[str, ...]) -> str | None:
    """Two output flags naming one file: the later write would replace the earlier's."""
    seen: dict[str, str] = {}
    for flag in flags:
        path = getattr(cfg, flag, None)
        if path:
            key = os.path.realpath(str(path))
            if key in seen:
                return (f"--{seen[key]} and --{flag.replace('_', '-')} both write {path}: "
                        "one would overwrite the other; give each its own file")
            seen[key] = flag.replace("_", "-")
    return None
