"""Link calibration across real hosts (``model --json``, read back by ``--links-from``): the
intra-node pair and the inter-node pair are measured apart, and the inter-node link shows
the rate it was shaped to."""

import json
import sys

from across import hosts, run_across

from mpicomm.testing.netns import BURST_BYTES

RATE_BITS = 200e6
M = 1 << 20


def one_way(link: dict, m: int) -> float:
    k = link["sizes"].index(m)
    return link["alpha"] + m * link["beta"][k]


def test_intra_and_inter_links_measured_apart(tmp_path):
    out = tmp_path / "links.json"
    with hosts(2, rate="200mbit") as net:
        res = run_across(net, [2, 2], ["-m", "mpicomm", "model", "--strategies", "ring",
                                       "-b", "4K", "-e", "1M", "-f", "4", "-n", "2",
                                       "--json", str(out)], timeout=300)
    assert res.returncode == 0, res.tail()
    params = json.loads(out.read_text())["params"]
    intra, inter = params["intra"], params["inter"]
    assert intra["pair"] == [0, 1] and inter["pair"] == [0, 2], (intra["pair"], inter["pair"])
    assert params["num_nodes"] == 2 and params["local_size"] == 2
    # the shaped link cannot carry 1 MiB faster than this: tbf's full bucket lets its first
    # BURST_BYTES through at line speed, the rest at the shaped rate
    wire = (M - BURST_BYTES) * 8 / RATE_BITS
    assert one_way(inter, M) >= 0.9 * wire, (one_way(inter, M), wire)
    assert one_way(intra, M) < one_way(inter, M) / 2, (one_way(intra, M), one_way(inter, M))
    print(f"calibration across hosts: {res.seconds:.1f} s", file=sys.stderr)
