"""MLP: hand-written backward against finite differences (float64), init determinism, layout."""

import numpy as np
import pytest

from mpicomm.nn import MLP, num_params, parse_layers


def _batch(layers, n, seed=3):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, layers[0]))
    y = rng.integers(0, layers[-1], size=n).astype(np.int64)
    return x, y


def _reference_loss(params, layers, x, y):
    """Independent forward from the flat vector: plain NumPy, no shared code with model.py."""
    h, lo = x, 0
    for k, (i, o) in enumerate(zip(layers[:-1], layers[1:], strict=True)):
        W = params[lo : lo + i * o].reshape(i, o)
        b = params[lo + i * o : lo + i * o + o]
        lo += i * o + o
        h = h @ W + b
        if k < len(layers) - 2:
            h = np.maximum(h, 0)
    z = h - h.max(axis=1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    return -logp[np.arange(len(y)), y].mean()


@pytest.mark.parametrize("layers", [(5, 7, 3), (4, 6, 5, 3), (3, 2)])
def test_backward_matches_finite_differences(layers):
    model = MLP(layers, seed=11, dtype="float64")
    model.params += 0.01 * np.random.default_rng(0).standard_normal(model.num_params)  # b != 0
    x, y = _batch(layers, 9)
    loss = model.loss_and_grads(x, y)
    assert abs(float(loss) - _reference_loss(model.params, layers, x, y)) < 1e-12
    theta = model.params.copy()
    h = 1e-6
    numeric = np.empty_like(theta)
    for j in range(theta.size):  # central differences on the independent reference
        tp, tm = theta.copy(), theta.copy()
        tp[j] += h
        tm[j] -= h
        up, down = _reference_loss(tp, layers, x, y), _reference_loss(tm, layers, x, y)
        numeric[j] = (up - down) / (2 * h)
    err = np.abs(model.grads - numeric).max() / max(np.abs(numeric).max(), 1e-12)
    assert err < 1e-6, f"relative gradient error {err:.3g}"


def test_backward_yields_last_layer_first_and_each_slice_is_final():
    layers = (6, 8, 8, 4)
    model = MLP(layers, seed=2, dtype="float64")
    x, y = _batch(layers, 5)
    model.forward(x, y)
    seen = {}
    for i in model.backward():
        seen[i] = model.grads[model.spans[i]].copy()
    assert list(seen) == [2, 1, 0]
    for i, g in seen.items():  # nothing written after the yield
        np.testing.assert_array_equal(g, model.grads[model.spans[i]])


def test_params_are_one_flat_buffer_with_views():
    layers = (4, 5, 3)
    model = MLP(layers, seed=0)
    assert model.params.size == model.grads.size == num_params(layers) == 4 * 5 + 5 + 5 * 3 + 3
    for lin in model.linears:
        assert np.shares_memory(lin.W, model.params) and np.shares_memory(lin.dW, model.grads)
    model.params[:] = 7
    assert (model.linears[1].b == 7).all()
    assert model.params.flags.c_contiguous and model.grads.flags.c_contiguous


def test_init_is_deterministic_and_seed_dependent():
    a = MLP((10, 20, 5), seed=42).params
    b = MLP((10, 20, 5), seed=42).params
    c = MLP((10, 20, 5), seed=43).params
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    w = MLP((1000, 400, 5), seed=0).linears[0].W
    assert abs(float(w.std()) - np.sqrt(2 / 1000)) < 0.01 * np.sqrt(2 / 1000)


def test_no_per_step_buffer_growth():
    layers = (6, 8, 4)
    model = MLP(layers, seed=0)
    x, y = _batch(layers, 16)
    x = x.astype(np.float32)
    model.loss_and_grads(x, y)
    bufs = model._bufs[16]
    first = [id(z) for z in bufs.z]
    model.loss_and_grads(x, y)
    assert [id(z) for z in model._bufs[16].z] == first and len(model._bufs) == 1


def test_evaluate_counts_correct_and_matches_loss():
    layers = (5, 7, 3)
    model = MLP(layers, seed=1, dtype="float64")
    x, y = _batch(layers, 10)
    loss_sum, correct = model.evaluate(x, y, batch=4)  # chunks 4, 4, 2
    assert abs(loss_sum / 10 - _reference_loss(model.params, layers, x, y)) < 1e-12
    h = x
    for k, lin in enumerate(model.linears):
        h = h @ lin.W + lin.b
        if k == 0:
            h = np.maximum(h, 0)
    assert correct == int((h.argmax(axis=1) == y).sum())


@pytest.mark.parametrize(
    "text, msg",
    [("10", "at least 2 widths"), ("10,x,3", "'x' is not an integer"), ("10,0,3", ">= 1"),
     ("10,1", "at least 2 classes"), ("10,8x0,3", "the count must be >= 1"),
     ("10,8xy,3", "'8xy' is not an integer or WIDTHxCOUNT")],
)
def test_parse_layers_refuses_bad_widths(text, msg):
    with pytest.raises(ValueError, match=msg):
        parse_layers(text)


def test_parse_layers_expands_repeats():
    assert parse_layers("256,64x3,10") == (256, 64, 64, 64, 10)
    assert parse_layers("4x2,3") == (4, 4, 3)
    assert len(parse_layers("64,64x48,10")) == 50
