"""TrainConfig: every flag generated from a field, invalid values and output paths refused
in one line before the first step."""

import json

import pytest
from train_runs import SMALL, SMALL_DATA, ok, train

import mpicomm
from mpicomm.cli.main import build_parser
from mpicomm.train.loop import ConfigError, TrainConfig


@pytest.mark.slow
def test_validate_flag_defaults_to_the_reducer_default(tmp_path):
    parse = build_parser().parse_args
    assert TrainConfig().validate is None and "validate" not in TrainConfig().reducer_options()
    for flags, want in (([], None), (["--validate"], True), (["--no-validate"], False)):
        for command in ("train", "compare"):
            assert parse([command, *flags]).validate is want, (command, flags)
        assert TrainConfig.from_args(parse(["train", *flags])).validate is want
    assert TrainConfig(validate=False).reducer_options()["validate"] is False
    out = tmp_path / "v.json"
    ok(train(1, *SMALL, "--steps", "2", "--json", out))
    assert json.loads(out.read_text())["config"]["validate"] is None


SLOW = pytest.mark.slow  # the default tier keeps a case of each kind; CI runs them all


@pytest.mark.parametrize("args, message", [
    (["--layers", "16,x,4"], "--layers '16,x,4': 'x' is not an integer"),
    pytest.param(["--layers", "16"], "need at least 2 widths", marks=SLOW),
    pytest.param(["--data", "/nonexistent/d.npz"], "--data /nonexistent/d.npz: no such file",
                 marks=SLOW),
    (["--batch-size", "300"], "batch too large for the shard: --batch-size 300 per worker × 2"),
    pytest.param(["--momentum", "1.5"], "--momentum must be in [0, 1)", marks=SLOW),
    (["--strategy", "carrier-pigeon"], "unknown strategy 'carrier-pigeon'; valid strategies"),
])
def test_bad_input_gives_a_clear_message(args, message):
    base = SMALL_DATA if "--data" in args else SMALL
    res = train(2, *base, "--steps", "2", *args, timeout=60)
    assert res.returncode == 2, res.tail()  # config and set-up errors: exit code 2
    out = res.stdout + res.stderr
    assert message in out, res.tail()
    assert out.count(message) == 1  # said once, not once per rank


def test_config_refuses_invalid_values():
    assert ConfigError is mpicomm.ConfigError  # one class: `except mpicomm.ConfigError` works
    with pytest.raises(mpicomm.ConfigError, match="--lr must be a positive number"):
        TrainConfig(lr=-1.0)
    with pytest.raises(ConfigError, match="need --checkpoint"):
        TrainConfig(resume=True)
    with pytest.raises(ConfigError, match="--batch-size must be a positive integer"):
        TrainConfig(batch_size=0)
    cfg = TrainConfig(layers="8,4")
    assert cfg.layers == (8, 4)
    with pytest.raises(Exception, match="cannot assign|frozen"):
        cfg.lr = 1.0


def test_flags_are_generated_from_every_config_field():
    import dataclasses

    from mpicomm.train.config import SINGLE_RUN_ONLY, field_help

    helps = field_help()
    parser = build_parser()
    train_args, compare_args = parser.parse_args(["train"]), parser.parse_args(["compare"])
    for f in dataclasses.fields(TrainConfig):
        assert helps.get(f.name), f"{f.name}: no help comment"
        default = ",".join(map(str, f.default)) if isinstance(f.default, tuple) else f.default
        if f.default == ():  # a repeatable flag (action="append"): absent is None
            default = None
        assert getattr(train_args, f.name) == default, f.name
        assert hasattr(compare_args, f.name) == (f.name not in SINGLE_RUN_ONLY), f.name
    assert TrainConfig.from_args(train_args) == TrainConfig()
    args = parser.parse_args(["train", "--no-overlap", "--bucket-mb", "0", "--accumulate", "4",
                              "--layers", "256,64x48,10", "--scale-lr"])
    cfg = TrainConfig.from_args(args)
    assert (cfg.overlap, cfg.bucket_mb, cfg.accumulate, cfg.scale_lr) == (False, 0.0, 4, True)
    assert cfg.layers == (256, *[64] * 48, 10)
    assert "validate" in helps and "MPICOMM_VALIDATE" in helps["validate"]  # continued comment


@pytest.mark.parametrize("kwargs, message", [
    ({"bucket_mb": -1}, "--bucket-mb must be a number >= 0"),
    ({"accumulate": 0}, "--accumulate must be a positive integer"),
    ({"trace_steps": "5:2", "trace": "t.json"}, "--trace-steps must be A:B"),
    ({"trace_steps": ":0", "trace": "t.json"}, "--trace-steps must be A:B"),  # was: an empty trace
    ({"trace_steps": "2:5"}, "--trace-steps needs --trace"),
])
def test_engine_flags_refuse_invalid_values(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        TrainConfig(**kwargs)


@pytest.mark.parametrize("flag, path, fragment", [
    ("--json", "/nonexistent/x.json", "folder /nonexistent does not exist"),
    pytest.param("--trace", "/nonexistent/t.json", "--trace /nonexistent/t.json", marks=SLOW),
    pytest.param("--checkpoint", "/nonexistent/c.npz", "--checkpoint", marks=SLOW),
    ("--json", "/", "is a folder"),
])
def test_output_paths_checked_before_the_first_step(flag, path, fragment):
    """Issue 19 §5: one line, exit 2, before any step (100,000 steps would time out)."""
    res = train(2, *SMALL, "--strategy", "ring", "--steps", "100000", flag, path, timeout=60)
    assert res.returncode == 2 and not res.timed_out, res.tail()
    out = res.stdout + res.stderr  # every command checks its outputs first (cli.main._run)
    errors = [x for x in out.splitlines() if "error:" in x]
    assert len(errors) == 1 and fragment in errors[0], out
    assert not res.stdout.strip() and "Traceback" not in out, out  # nothing ran
