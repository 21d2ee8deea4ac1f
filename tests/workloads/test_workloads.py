"""The workloads against published totals: parameters, multiply-adds, FLOPs, tensor order.

Sources of the published figures:
- torchvision ``models/*.py`` weight metadata (``num_params``, ``_ops`` = GMACs at the
  weights' input size): resnet50 25,557,032 / 4.089; resnet101 44,549,160 / 7.801;
  resnet152 60,192,808 / 11.514; vgg16 138,357,544 / 15.470; inception_v3 27,161,264
  (with the auxiliary classifier) / 5.713 (eval mode: the auxiliary head does not run).
- Transformer parameters: Devlin et al. arXiv:1810.04805 (BERT-base "110M"; BERT-large
  "340M", 335M as Hugging Face counts bert-large-uncased), the gpt2 / gpt2-medium model
  cards ("124M", "355M").
- Transformer FLOPs per token: forward 2·N (N non-embedding parameters, Kaplan et al.
  arXiv:2001.08361 Table 1) + 4·n_layer·n_ctx·d (attention QKᵀ and AV, Chowdhery et al.
  "PaLM" arXiv:2204.02311 Appendix B: 6N + 12·L·H·Q·T for forward and backward)
  + 2·d·n_vocab for GPT-2's de-embedding (Kaplan Table 1).
"""

from __future__ import annotations

import pytest

from mpicomm.core.errors import ConfigError
from mpicomm.workloads import MODEL_NAMES, workload
from mpicomm.workloads.transformer import BERT_SEQ, BERT_SIZES, GPT2_SEQ, GPT2_SIZES

CNN = {  # name: (parameters exactly, forward GMACs)
    "resnet50": (25_557_032, 4.089),
    "resnet101": (44_549_160, 7.801),
    "resnet152": (60_192_808, 11.514),
    "vgg16": (138_357_544, 15.470),
    "inception3": (27_161_264, 5.713),
}
TRANSFORMER_PARAMS = {"bert-base": 110e6, "bert-large": 335e6, "gpt2": 124e6,
                      "gpt2-medium": 355e6}


@pytest.mark.parametrize("name", sorted(CNN))
def test_cnn_parameters_exact_and_macs_within_2_percent(name):
    w = workload(name)
    params, gmacs = CNN[name]
    assert w.num_params == params
    macs = w.macs
    if name == "inception3":  # torchvision's _ops: eval mode, the auxiliary head idle
        macs -= sum(layer.macs for layer in w.layers if layer.name.startswith("AuxLogits"))
    assert macs / 1e9 == pytest.approx(gmacs, rel=0.02)


def test_resnet50_has_161_tensors_and_vgg16_one_tensor_holds_74_percent():
    assert workload("resnet50").num_tensors == 161
    vgg = workload("vgg16")
    biggest = max(n for _, _, n in vgg.tensors_backward())
    assert biggest == 25088 * 4096
    assert biggest / vgg.num_params == pytest.approx(0.74, abs=0.005)


@pytest.mark.parametrize("name", sorted(TRANSFORMER_PARAMS))
def test_transformer_parameters_within_half_a_percent(name):
    assert workload(name).num_params == pytest.approx(TRANSFORMER_PARAMS[name], rel=0.005)


def _published_forward_flops(name: str) -> float:
    sizes, seq, vocab = ((BERT_SIZES, BERT_SEQ, 0) if name.startswith("bert")
                         else (GPT2_SIZES, GPT2_SEQ, 50257))
    n_layer, d = sizes[name]
    n_nonembed = 12 * n_layer * d * d  # Kaplan: N ≈ 2·d·n_layer·(2·d_attn + d_ff)
    per_token = 2 * n_nonembed + 4 * n_layer * seq * d + 2 * d * vocab
    return per_token * seq


@pytest.mark.parametrize("name", sorted(TRANSFORMER_PARAMS))
def test_transformer_forward_flops_within_2_percent_of_the_closed_form(name):
    w = workload(name)
    assert w.fwd_flops == pytest.approx(_published_forward_flops(name), rel=0.02)
    assert w.bwd_flops == pytest.approx(2 * w.fwd_flops, rel=0.02)


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_tensors_backward_is_the_flat_layout_reversed(name):
    w = workload(name)
    back = w.tensors_backward()
    flat = w.flat_tensors()
    assert len(back) == len(flat) == w.num_tensors
    assert [n for _, _, n in back] == [hi - lo for _, lo, hi in reversed(flat)]
    assert [layer for layer, _, _ in back] == [layer for layer, _, _ in reversed(flat)]
    assert flat[0][1] == 0 and flat[-1][2] == w.num_params
    assert all(a[2] == b[1] for a, b in zip(flat, flat[1:], strict=False))  # contiguous
    assert w.fwd_flops > 0 and w.bwd_flops > w.fwd_flops and w.act_bytes() > 0
    assert all(layer.out_elems > 0 for layer in w.layers)


def test_mlp_matches_the_training_loops_model():
    from mpicomm.nn import MLP
    from mpicomm.train.config import DEFAULT_LAYERS

    model = MLP(DEFAULT_LAYERS)
    w = workload("mlp")
    assert w.num_params == model.num_params
    assert [(lo, hi) for _, lo, hi in w.flat_tensors()] == [(lo, hi) for _, lo, hi in
                                                             model.tensors]


def test_unknown_model_is_refused_in_one_line_listing_the_names():
    with pytest.raises(ConfigError) as e:
        workload("resnet51")
    msg = str(e.value)
    assert "\n" not in msg and "resnet51" in msg
    assert all(n in msg for n in MODEL_NAMES)
