"""docs/cluster.md's two-node recipe runs as written (one command: set up, run, tear down)
and leaves nothing behind."""

import re
import subprocess
import sys

from across import machine_state, repo_path, require_netns

SECTION = "## Two nodes on one machine"


def recipe_commands() -> list[str]:
    """The lines of the fenced sh blocks in the section."""
    text = repo_path("docs", "cluster.md").read_text()
    body = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    return [line.strip() for block in re.findall(r"```sh\n(.*?)```", body, re.S)
            for line in block.splitlines() if line.strip()]


def test_the_recipe_is_one_command():
    assert recipe_commands() == ["bash experiments/two_nodes.sh"]


def test_recipe_runs_as_written_and_leaves_nothing():
    require_netns()
    before = machine_state()
    for cmd in recipe_commands():
        # the Python running the tests picks the venv (MPICH or Open MPI), as the page says
        out = subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=400,
                             cwd=str(repo_path()), env={"PYTHON": sys.executable,
                                                         "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"})
        assert out.returncode == 0, f"{cmd}: exit {out.returncode}\n{out.stdout[-3000:]}\n" \
                                    f"{out.stderr[-3000:]}"
        assert re.search(r"rank +3 +host h1 +node 1 +local_rank 1", out.stdout), out.stdout
        rows = re.findall(r"^ +(ring|hierarchical) +4 +16777216 .* (\d+) +\S+ *$", out.stdout,
                          re.M)
        assert sorted(r[0] for r in rows) == ["hierarchical", "ring"], out.stdout
        assert all(r[1] == "0" for r in rows), out.stdout  # #wrong
    assert machine_state() == before
