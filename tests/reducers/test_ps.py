"""ps (parameter server) against the NumPy reference: 1-3 servers, colocated and dedicated."""

import json

import pytest
from mpi_harness import run_script

LENGTHS = "1,2,p-1,1000,1000003"


@pytest.mark.parametrize("nranks", [1, 2, 3, *(pytest.param(n, marks=pytest.mark.slow)
                                               for n in (4, 5))])  # 4-5 ranks: the slow tier
def test_ps_one_server_matches_numpy(nranks):
    res = run_script(nranks, "check_reducer.py", "ps", "{}", "--lengths", LENGTHS, timeout=180)
    res.expect_ok()


@pytest.mark.slow  # 5 ranks: the slow tier (tests/conftest.py's rule for rank counts)
@pytest.mark.parametrize("dedicated", [False, True])
@pytest.mark.parametrize("servers", [1, 2, 3])
def test_ps_sharded_servers(servers, dedicated):
    nranks = 5
    opts = json.dumps({"servers": servers, "dedicated": dedicated})
    res = run_script(
        nranks, "check_reducer.py", "ps", opts, "--lengths", "1,2,3,1000,65537", timeout=180
    )
    res.expect_ok()
    roles = [r.get("role", "worker") for r in res.records]
    assert roles.count("server") == (servers if dedicated else 0)
    if dedicated:  # the servers are the last S ranks and every worker got a result
        assert sorted(r["rank"] for r in res.records if r.get("role") == "server") == list(
            range(nranks - servers, nranks)
        )


def test_ps_two_colocated_servers_on_two_ranks():
    """The default tier's sharded case: each of 2 ranks serves half the buffer."""
    opts = json.dumps({"servers": 2, "dedicated": False})
    run_script(2, "check_reducer.py", "ps", opts, "--lengths", LENGTHS, timeout=180).expect_ok()


@pytest.mark.parametrize("nranks", [2, 3])
def test_ps_dedicated_small_jobs(nranks):
    """One worker and one server (2 ranks), and 2 workers + 1 server, at odd lengths."""
    res = run_script(
        nranks, "check_reducer.py", "ps", '{"dedicated": true}', "--lengths", LENGTHS, timeout=180
    )
    res.expect_ok()


@pytest.mark.slow  # 3 ranks: the slow tier
@pytest.mark.parametrize("servers", [2, 3])
def test_ps_pieces_with_uneven_ranges(servers):
    """Ranges larger than one 1 MiB piece, one element longer on the first server(s),
    so the last piece is empty on some servers: message counts must still pair up."""
    lengths = f"{servers * 262144 + 1},{servers * 131072 + 2},{servers * 300000 + 1}"
    res = run_script(
        3,
        "check_reducer.py",
        "ps",
        json.dumps({"servers": servers}),
        "--lengths",
        lengths,
        "--repeat",
        "1",
        timeout=180,
    )
    res.expect_ok()
