"""Issue 30's step agreement: a virtual ``train`` step and ``model --predict --model mlp`` of the
same step (model, batch, device, cluster) agree within 10%.

A compute-bound step (batch 4096 a rank, 2 ranks on one node, h100): before the predictor
charged the loop's MLP kernels (``workloads.kernels``), it gave one roofline a layer and no
loss, 0.39 ms against the loop's 0.440 ms (1.13x; 1.18x before the SGD's kernels were
shared). docs/virtual_clock.md has the figures and these commands.
"""

import json
import subprocess
import sys

import pytest
from mpi_harness import ROOT, run_mpi

LINKS = ["--ranks-per-node", "2", "--intra-link", "2us,400GB/s"]


@pytest.mark.slow
def test_compute_bound_train_step_and_its_prediction_agree_within_10_percent(tmp_path):
    out = tmp_path / "t.json"
    res = run_mpi(2, ["-m", "mpicomm", "train", "--clock", "virtual", "--strategy", "ring",
                      "--batch-size", "4096", "--steps", "20", "--log-every", "0", *LINKS,
                      "--json", str(out)], timeout=120)
    assert res.returncode == 0, res.tail()
    virtual = json.loads(out.read_text())["results"][0]["step_time_median_s"] * 1e3
    pred = tmp_path / "p.json"
    done = subprocess.run([sys.executable, "-m", "mpicomm", "model", "--predict", "--model",
                           "mlp", "--batch-size", "4096", "--ranks", "2", *LINKS,
                           "--strategies", "ring", "--json", str(pred)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    predicted = json.loads(pred.read_text())["results"][0]["step_ms"]
    assert 0.9 < virtual / predicted < 1.1, (virtual, predicted)


MLP16 = ["--model", "mlp", "--ranks-per-node", "8", "--intra-link", "1us,10GB/s",
         "--inter-link", "5us,2GB/s"]


@pytest.mark.slow
def test_mpicomms_own_reducers_at_16_ranks_agree_with_the_predictor(tmp_path):
    """Issue 32's agreement (a virtual step and the prediction within 10% for each strategy),
    held at 16 ranks (2 nodes of 8, 1.6 MB of gradient in one bucket: latency-bound) to 2%
    for ring, ps, hierarchical, native and the tree (its closed form was -2% here and -15%
    at 64 ranks; now the clock's recurrence, costmodel/tree_steps.py). Before the predictor charged
    each add's kernel launch and the ring's neighbour-paced steps (costmodel/stepwise.py),
    it gave ring 1.77 ms against the clock's 1.67 (+6%) and hierarchical 0.53 against 0.56
    (-6%); at 64 ranks the ring was 19% off (docs/validation_steps.md).

    On a named profile (NCCL's model for NCCL) compare's comm column is mpicomm's own ring
    as the clock charged it: 0.08 ms modelled against 0.47 run at 16 ranks before, the
    profile's eight channels' eight add kernels a step left out."""
    out = tmp_path / "c.json"
    res = run_mpi(16, ["-m", "mpicomm", "compare", *MLP16, "--clock", "virtual", "--steps", "3",
                       "--repeats", "1", "--no-baseline", "--log-every", "0", "--strategies",
                       "ring,ps,hierarchical,native,tree", "--json", str(out)], timeout=300)
    assert res.returncode == 0, res.tail()
    for r in json.loads(out.read_text())["results"]:
        ratio = r["step_time_median_s"] / r["predicted_step_s"]
        assert abs(ratio - 1) < 0.02, (r["strategy"], ratio)
    res = run_mpi(16, ["-m", "mpicomm", "compare", "--profile", "dgx-h100-ib400", "--clock",
                       "virtual", "--strategies", "ring,hierarchical", "--steps", "3",
                       "--repeats", "1", "--no-baseline", "--log-every", "0", "--json",
                       str(out)], timeout=300)
    assert res.returncode == 0, res.tail()
    for r in json.loads(out.read_text())["results"]:
        assert abs(r["comm_s"] / r["predicted_comm_s"] - 1) < 0.10, r["strategy"]
