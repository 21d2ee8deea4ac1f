"""``model --predict --model M --reducers mpicomm``: a named profile priced as mpicomm's own
reducers run on it, the step ``compare`` predicts for a virtual run of the same flags
(``bench.step_predict.own_reducers_cluster``, called by both); ``--reducers nccl`` (the
default) keeps the profile's own forms, NCCL's. Both code paths run in-process, no MPI."""

import argparse
import json

import pytest

from mpicomm.core.flags import GIVEN

# ResNet-50 on the 25 GbE profile at 256 ranks (figure 10's committed 256-rank point)
FLAGS = ["--model", "resnet50", "--profile", "ethernet-25g", "--batch-size", "64",
         "--accelerator", "v100", "--strategies", "ps,ring,hierarchical", "--servers", "32"]
RANKS = 256


def _compare_predicted_steps(monkeypatch) -> dict[str, float]:
    """compare's own path for a virtual run of FLAGS on RANKS ranks: its flags with the
    profile applied (``cli.main._apply_profile``), its configs (``_configure``), then
    ``_predict`` (``charged_cluster`` -> ``run_step_s``) on records of the run's shape."""
    import importlib

    from mpicomm.cli import compare

    main = importlib.import_module("mpicomm.cli.main")  # the module (the package names main())
    monkeypatch.setattr(main, "_world_size", lambda: RANKS)
    parser = main.build_parser()
    argv = ["compare", *FLAGS, "--clock", "virtual"]
    args = parser.parse_args(argv)
    setattr(args, GIVEN, main.given_dests(parser, argv))
    main._apply_profile(args)
    names = args.strategies.split(",")
    cfg, run_cfgs = compare._configure(args, names, RANKS)
    rpn = cfg.ranks_per_node
    records = [{"ranks": RANKS, "grad_bytes": 25_557_032 * 4} for _ in names]
    compare._predict(args, cfg, run_cfgs, records, None, (rpn, rpn))
    return {n: r["predicted_step_s"] for n, r in zip(names, records, strict=True)}


def _model_predict_rows(tmp_path, *extra: str) -> list[dict]:
    """``model --predict`` of the same flags, run as the command runs it (JSON rows)."""
    from mpicomm.cli import model as model_cmd

    p = argparse.ArgumentParser()
    model_cmd.add_arguments(p)
    out = tmp_path / "p.json"
    args = p.parse_args(["--predict", *FLAGS, "--ranks", str(RANKS), *extra,
                         "--json", str(out)])
    assert model_cmd.run(args) == 0
    doc = json.loads(out.read_text())
    assert {r["reducers"] for r in doc["results"]} == {doc["reducers"]}
    return doc["results"]


def test_compare_predicts_a_virtual_run_as_model_predict_reducers_mpicomm(
        device_model, monkeypatch, tmp_path):
    """Every strategy's step: compare's prediction of the virtual run (which the committed
    256-rank run meets to 0.03%) equals ``model --predict --reducers mpicomm``'s; the
    default, NCCL's forms on the profile, prices the ring otherwise (it did before
    --reducers: 243 ms against 235 for ResNet-50's ring here)."""
    device_model("v100")  # what cli.main installs for compare --clock virtual --accelerator v100
    compare_s = _compare_predicted_steps(monkeypatch)
    own = {r["strategy"]: r for r in _model_predict_rows(tmp_path, "--reducers", "mpicomm")}
    nccl = {r["strategy"]: r for r in _model_predict_rows(tmp_path)}
    for name, step_s in compare_s.items():
        assert step_s is not None
        assert own[name]["step_ms"] / 1e3 == pytest.approx(step_s, rel=1e-9), name
        assert own[name]["reducers"] == "mpicomm" and nccl[name]["reducers"] == "nccl"
    assert abs(nccl["ring"]["step_ms"] / own["ring"]["step_ms"] - 1) > 0.01


def test_compares_step_line_names_the_forms_it_predicts_with():
    """On a named profile compare's "this run/predicted" line names ``--reducers mpicomm``,
    the command that reproduces its predicted column; on link flags (refused there) not."""
    from types import SimpleNamespace

    from mpicomm.cli import compare

    rec = [{"step_time_median_s": 0.23467, "predicted_step_s": 0.23473}]
    cfg = SimpleNamespace(model="resnet50")
    on_profile = compare._step_line(cfg, rec, ["ring"], "ethernet-25g")
    assert "(model --predict --model resnet50 --reducers mpicomm, the same flags): " \
           "ring 234.67/234.73" in on_profile
    assert "--reducers" not in compare._step_line(cfg, rec, ["ring"], None)
