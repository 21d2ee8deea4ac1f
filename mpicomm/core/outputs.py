"""Output paths checked before the first step, so a run's results are never lost at its end,
and written so that nothing but the named file changes.

``check_outputs(cfg)`` looks at every path the run will write (``--json``, ``--csv``,
``--trace``, ``--checkpoint``) and the ``--tensorboard`` folder, and returns the first
problem as one line, or None. The rules (docs/train.md, "Outputs"):

1. a target is a regular file (or a link to one) or a path that does not exist yet: a
   device, a FIFO, a socket or a folder is refused (``--json /dev/null`` would replace
   ``/dev/null`` for the whole machine);
2. writability is tried by creating a file: a scratch file in the target's folder (the
   folder where the temporary file of rule 5 goes), removed at once; so a folder where no
   file can be made (``/proc``) is refused before any work, not at the end. The
   ``--tensorboard`` folder (made with its parents at the end) is tried by making a scratch
   folder in its nearest existing part;
3. no output names an input (``--data``, ``--links-from``): compared by real path and by
   ``os.path.samefile`` (hard links), so ``--json d.npz --data d.npz`` is refused before
   the data is read (``--checkpoint`` with ``--resume`` is the one file both read and
   written, by design);
4. no two outputs name one file;
5. JSON and checkpoints are written to ``PATH.tmp.PID`` and renamed over the target
   (``replace_atomically``); the temporary file is removed on every exit path Python sees,
   and a run starting removes the ones a killed run (``kill -9``) left: those of a process
   id that no longer runs on this host.

The commands call it on every rank and stop every rank (exit 2) if any rank saw a problem.
"""

from __future__ import annotations

import contextlib
import glob
import os
import stat
import tempfile
from collections.abc import Callable
from typing import IO, Any

__all__ = ["check_outputs", "check_output_path", "check_output_folder", "not_a_regular_file",
           "replace_atomically", "temp_path", "remove_stale_temps", "OUTPUT_FLAGS",
           "INPUT_FLAGS"]

OUTPUT_FLAGS = ("json", "trace", "checkpoint")
FOLDER_FLAGS = ("tensorboard",)  # a folder the run makes (with its parents) at its end
INPUT_FLAGS = ("data", "links_from")  # files a run reads by path


def not_a_regular_file(path: str) -> str | None:
    """Return what ``path`` is when it exists and is not a regular file (following links),
    or None (a regular file, or nothing there yet)."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return None
    except OSError as exc:  # a dangling link loop, no permission to look
        return f"cannot be looked at ({exc.strerror})"
    if stat.S_ISREG(mode):
        return None
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def check_output_path(flag: str, path: str) -> str | None:
    """Return why ``path`` (given to ``--flag``) cannot be written, or None if it can
    (rules 1 and 2 of the module's docstring: this creates and removes a scratch file)."""
    folder = os.path.dirname(os.path.abspath(path))
    kind = not_a_regular_file(path)
    if kind is not None:
        return (f"--{flag} {path}: is {kind}, not a regular file; an output is a regular file "
                "or a new path")
    if not os.path.isdir(folder):
        return f"--{flag} {path}: folder {folder} does not exist"
    if os.path.exists(path) and not os.access(path, os.W_OK):
        return f"--{flag} {path}: the file is not writable"
    try:  # the rename of replace_atomically needs a new file in this folder
        fd, scratch = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", dir=folder)
    except OSError as exc:
        return f"--{flag} {path}: cannot create a file in {folder} ({exc.strerror})"
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(scratch)
    return None


def check_output_folder(flag: str, path: str) -> str | None:
    """Return why the folder ``path`` (given to ``--flag``, made with its parents) cannot be
    written, or None if it can (tried by making and removing a scratch folder)."""
    if os.path.exists(path) and not os.path.isdir(path):
        return f"--{flag} {path}: is a file, not a folder"
    existing = os.path.abspath(path)
    while not os.path.exists(existing):  # the nearest part that exists: the folders go there
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        return f"--{flag} {path}: {existing} is a file, not a folder"
    try:
        scratch = tempfile.mkdtemp(prefix=".mpicomm-probe.", dir=existing)
    except OSError as exc:
        return f"--{flag} {path}: cannot create a folder in {existing} ({exc.strerror})"
    with contextlib.suppress(OSError):
        os.rmdir(scratch)
    return None


def check_outputs(cfg: Any, flags: tuple[str, ...] = OUTPUT_FLAGS,
                  inputs: tuple[str, ...] = INPUT_FLAGS) -> str | None:
    """Return the first problem among ``cfg``'s output paths (``flags``), output folders
    (``FOLDER_FLAGS``) and their overlap with the input paths (``inputs``), or None.

    Also removes the temporary files a killed run left beside each output (rule 5)."""
    for flag in (*flags, *FOLDER_FLAGS):
        path = getattr(cfg, flag, None)
        if path:
            check = check_output_folder if flag in FOLDER_FLAGS else check_output_path
            problem = check(flag.replace("_", "-"), str(path))
            if problem is not None:
                return problem
            if flag not in FOLDER_FLAGS:
                remove_stale_temps(str(path))
    return _same_file(cfg, flags) or _over_input(cfg, flags, inputs)


def _one_file(a: str, b: str) -> bool:
    """``a`` and ``b`` name one file: the same real path, or (both existing) one inode."""
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:  # one does not exist (yet)
        return False


def _same_file(cfg: Any, flags: tuple[str, ...]) -> str | None:
    """Two output flags naming one file: the later write would replace the earlier's."""
    given = [(flag, str(getattr(cfg, flag))) for flag in flags if getattr(cfg, flag, None)]
    for i, (flag, path) in enumerate(given):
        for other, before in given[:i]:
            if _one_file(path, before):
                return (f"--{other.replace('_', '-')} and --{flag.replace('_', '-')} both write "
                        f"{path}: one would overwrite the other; give each its own file")
    return None


def _over_input(cfg: Any, flags: tuple[str, ...], inputs: tuple[str, ...]) -> str | None:
    """An output flag naming a file the run reads: it would be destroyed (rule 3)."""
    for name in inputs:
        source = getattr(cfg, name, None)
        if not source or not os.path.exists(str(source)):  # 'digits', 'this-machine', a typo
            continue
        for flag in (*flags, *FOLDER_FLAGS):
            path = getattr(cfg, flag, None)
            if path and _one_file(str(path), str(source)):
                return (f"--{flag.replace('_', '-')} {path} is the input of "
                        f"--{name.replace('_', '-')} {source}: writing it would destroy the "
                        "input; give the output its own file")
    return None


# ------------------------------------------------------------------ writing
def temp_path(path: str) -> str:
    """The temporary file ``replace_atomically`` writes before renaming it over ``path``."""
    return f"{path}.tmp.{os.getpid()}"


def replace_atomically(path: str, write: Callable[[IO[Any]], None], binary: bool = False) -> None:
    """Write ``path`` through ``write(file)``: a temporary file in the same folder, synced,
    then renamed over ``path``; the temporary file is removed if anything fails.

    Raises ``OSError`` (without touching it) when ``path`` exists and is not a regular file:
    the rename would replace a device or a FIFO.
    """
    kind = not_a_regular_file(path)
    if kind is not None:
        raise OSError(f"{path} is {kind}, not a regular file: not replaced")
    tmp = temp_path(path)
    try:
        with open(tmp, "wb" if binary else "w") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def remove_stale_temps(path: str) -> list[str]:
    """Remove ``PATH.tmp.PID`` files whose process no longer runs on this host (left by a
    ``kill -9`` during a write); return the paths removed."""
    removed = []
    for tmp in glob.glob(glob.escape(path) + ".tmp.*"):
        pid = tmp.rsplit(".", 1)[-1]
        if not pid.isdigit() or int(pid) == os.getpid() or _alive(int(pid)):
            continue
        with contextlib.suppress(OSError):
            os.unlink(tmp)
            removed.append(tmp)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True
