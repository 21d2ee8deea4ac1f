"""Issue 34: what an adversary found. Outputs never destroy inputs or special files, temporary
files never outlive a write, and the files a run reads are checked before use. Each case
failed on main before its fix (named in each test's docstring)."""

import argparse
import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from mpicomm.core import outputs as O
from mpicomm.core.outputs import check_outputs

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable


def _args(**kw) -> argparse.Namespace:
    fields = dict(json=None, csv=None, trace=None, checkpoint=None, tensorboard=None, data=None,
                  links_from=None)
    return argparse.Namespace(**{**fields, **kw})


def _check(**kw) -> str | None:
    return check_outputs(_args(**kw), ("json", "csv", "trace", "checkpoint"))


@pytest.fixture()
def data(tmp_path) -> Path:
    path = tmp_path / "d.npz"
    rng = np.random.default_rng(0)
    np.savez(path, x=rng.random((64, 8)).astype("float32"), y=rng.integers(0, 4, 64))
    return path


# ------------------------------------------------------------------ 1. outputs over inputs
@pytest.mark.parametrize("flag", ["json", "trace", "checkpoint", "csv"])
def test_an_output_naming_the_data_is_refused(data, flag):
    """Main compared outputs only with each other: ``--data d.npz --json d.npz`` ran."""
    problem = _check(data=str(data), **{flag: str(data)})
    assert problem is not None and "is the input of --data" in problem, problem
    assert f"--{flag}" in problem


def test_an_output_reached_by_another_name_or_a_hard_link_is_refused(data, tmp_path):
    os.link(data, tmp_path / "hard.npz")
    os.symlink(data, tmp_path / "soft.npz")
    for name in ("hard.npz", "soft.npz", "./../" + tmp_path.name + "/d.npz"):
        path = str(tmp_path / name)
        assert "is the input of --data" in (_check(data=str(data), json=path) or ""), name


def test_an_output_naming_the_links_table_is_refused(tmp_path):
    links = tmp_path / "links.json"
    links.write_text("{}")
    problem = _check(links_from=str(links), checkpoint=str(links))
    assert problem is not None and "--links-from" in problem, problem
    assert _check(links_from="this-machine", json=str(tmp_path / "out.json")) is None


def test_two_outputs_one_file_through_a_hard_link_are_refused(tmp_path):
    (tmp_path / "a.json").write_text("{}")
    os.link(tmp_path / "a.json", tmp_path / "b.json")
    problem = _check(json=str(tmp_path / "a.json"), trace=str(tmp_path / "b.json"))
    assert problem is not None and "both write" in problem, problem


def _train(tmp_path, *flags, timeout=60):
    return subprocess.run([PY, "-m", "mpicomm", "train", "--layers", "8,4", "--steps", "2",
                           *flags], cwd=tmp_path, capture_output=True, text=True,
                          timeout=timeout)


@pytest.mark.parametrize("flag", ["--json", "--trace", "--checkpoint"])
def test_train_leaves_the_data_set_as_it_was(data, tmp_path, flag):
    """Main replaced the data set and exited 0 (``--trace``: destroyed it, then failed)."""
    before = data.read_bytes()
    res = _train(tmp_path, "--data", "d.npz", flag, "d.npz")
    out = res.stdout + res.stderr
    assert res.returncode == 2, out
    assert "is the input of --data" in out and "Traceback" not in out, out
    assert data.read_bytes() == before


# ------------------------------------------------------------------ 2. special files
def _char_device(tmp_path) -> Path:
    """A character device of our own (a copy of /dev/null's numbers), never /dev/null."""
    dev = tmp_path / "null"
    try:
        os.mknod(dev, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except (PermissionError, OSError) as exc:
        pytest.skip(f"cannot make a device node here ({exc})")
    return dev


@pytest.mark.parametrize("kind", ["fifo", "device", "link to a device", "folder"])
def test_an_output_onto_a_special_file_is_refused(tmp_path, kind):
    """Main os.replace'd JSON and checkpoints over the target: ``--json /dev/null`` as root
    turned /dev/null into a regular file for the whole machine."""
    if kind == "fifo":
        target = tmp_path / "pipe"
        os.mkfifo(target)
    elif kind == "folder":
        target = tmp_path / "sub"
        target.mkdir()
    else:
        target = _char_device(tmp_path)
        if kind == "link to a device":
            os.symlink(target, tmp_path / "link")
            target = tmp_path / "link"
    for flag in ("json", "trace", "checkpoint", "csv"):
        problem = _check(**{flag: str(target)})
        assert problem is not None and "not a regular file" in problem, (flag, problem)
    mode = os.stat(target).st_mode
    assert not stat.S_ISREG(mode)  # still what it was


def test_writing_never_replaces_a_special_file(tmp_path):
    """The writer itself refuses (a library caller skips the command's check)."""
    os.mkfifo(tmp_path / "pipe")
    with pytest.raises(OSError, match="not a regular file"):
        O.replace_atomically(str(tmp_path / "pipe"), lambda f: f.write("{}"))
    assert stat.S_ISFIFO(os.stat(tmp_path / "pipe").st_mode)
    assert sorted(os.listdir(tmp_path)) == ["pipe"]


def test_train_refuses_a_fifo_before_any_work(tmp_path):
    os.mkfifo(tmp_path / "pipe")
    res = _train(tmp_path, "--json", "pipe")
    assert res.returncode == 2 and "is a FIFO, not a regular file" in res.stderr, res.stderr
    assert stat.S_ISFIFO(os.stat(tmp_path / "pipe").st_mode)


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux's /proc")
def test_a_folder_where_no_file_can_be_made_is_refused_up_front():
    """Main: ``--json /proc/x.json`` passed the check, trained, then lost the results;
    ``--tensorboard /proc/d`` gave a traceback at the end."""
    problem = _check(json="/proc/x.json")
    assert problem is not None and "cannot create a file in /proc" in problem, problem
    problem = check_outputs(_args(tensorboard="/proc/d"))
    assert problem is not None and "cannot create a folder in /proc" in problem, problem
    assert not os.path.exists("/proc/x.json") and not os.path.exists("/proc/d")


def test_the_check_leaves_nothing_behind(tmp_path):
    assert _check(json=str(tmp_path / "r.json"), trace=str(tmp_path / "t.json")) is None
    assert check_outputs(_args(tensorboard=str(tmp_path / "tb" / "run"))) is None
    assert os.listdir(tmp_path) == []


# ------------------------------------------------------------------ temporary files
def test_a_failed_write_leaves_no_temporary_file(tmp_path):
    target = tmp_path / "r.json"
    target.write_text("old")

    def boom(f):
        f.write("half")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        O.replace_atomically(str(target), boom)
    assert os.listdir(tmp_path) == ["r.json"] and target.read_text() == "old"


def test_a_killed_save_leaves_a_temporary_file_the_next_run_removes(tmp_path):
    """Main: ``kill -9`` during a checkpoint save left ``*.tmp.PID`` for good."""
    target = tmp_path / "ck.npz"
    code = ("import sys, time; from mpicomm.core.outputs import replace_atomically; "
            "replace_atomically(sys.argv[1], lambda f: (f.write(b'x'), f.flush(), "
            "print('writing', flush=True), time.sleep(60)), binary=True)")
    proc = subprocess.Popen([PY, "-c", code, str(target)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "writing"
    left = O.temp_path(str(target)).replace(str(os.getpid()), str(proc.pid))
    assert os.path.exists(left)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    assert os.path.exists(left)  # no Python code ran: the next run must find it
    mine = O.temp_path(str(target))  # a live process's temporary file stays
    Path(mine).write_text("in use")
    assert _check(checkpoint=str(target)) is None
    assert not os.path.exists(left) and os.path.exists(mine)
    assert O.remove_stale_temps(str(target)) == []
