"""pytest plugin: each test's CPU seconds, load-independent enough to size the tiers by.

    PYTHONPATH=tests python -m pytest -q -p cpuclock      # appends to results/cpu_seconds.tsv

One line per test: node id, CPU seconds (this process and the children it waited for:
mpiexec and its ranks), wall seconds, the 1-minute load average. On 2 quiet cores a test
with 2 or more busy-polling ranks takes about half its CPU seconds of wall time.
"""

import os
import resource
import time

import pytest

OUT = os.environ.get("CPUCLOCK_OUT", os.path.join("results", "cpu_seconds.tsv"))  # untracked


def _cpu() -> float:
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(
        resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    cpu, wall = _cpu(), time.monotonic()
    yield
    os.makedirs(os.path.dirname(OUT) or ".", exist_ok=True)
    with open(OUT, "a") as f:
        f.write(f"{item.nodeid}\t{_cpu() - cpu:.2f}\t{time.monotonic() - wall:.2f}\t"
                f"{os.getloadavg()[0]:.1f}\n")
