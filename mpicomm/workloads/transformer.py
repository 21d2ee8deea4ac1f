"""BERT (base, large) and GPT-2 (small, medium) as Hugging Face ``transformers`` builds them.

Sources: ``BertModel`` with its pooler (Devlin et al., arXiv:1810.04805: BERT-base L=12,
H=768, "110M"; BERT-large L=24, H=1024, "340M"), vocabulary 30,522, 512 positions, 2 token
types; ``GPT2LMHeadModel`` (Radford et al. 2019; the model cards gpt2 "124M" and
gpt2-medium "355M"): vocabulary 50,257, 1,024 positions, the output projection tied to
the token embedding (no tensor of its own, but its matmul is computed). A sample is one
sequence: 128 tokens for BERT (pre-training phase 1, Devlin et al. §A.2), 1,024 for GPT-2.

Per layer and token: Q, K, V and the output projection 4H², the feed-forward 8H²
multiply-adds; attention QKᵀ and AV, T·H each (T the sequence length, all of it computed
as frameworks do, the mask applied after).
"""

from __future__ import annotations

from mpicomm.workloads.layer import Layer, elementwise, embedding, linear, norm
from mpicomm.workloads.workload import Workload

__all__ = ["bert", "gpt2", "BERT_SIZES", "GPT2_SIZES"]

BERT_SIZES = {"bert-base": (12, 768), "bert-large": (24, 1024)}
GPT2_SIZES = {"gpt2": (12, 768), "gpt2-medium": (24, 1024)}
BERT_SEQ, GPT2_SEQ = 128, 1024


def _attention(name: str, h: int, t: int) -> Layer:
    """QKᵀ, softmax and AV over t tokens (no parameters)."""
    heads = h // 64  # softmax: ~5 FLOPs a score, one t×t map per head
    return Layer(f"{name}.scores", (), float(2 * t * t * h), float(5 * heads * t * t),
                 float(t * h))


def _bert_block(out: list[Layer], name: str, h: int, t: int) -> None:
    for proj in ("query", "key", "value"):
        out.append(linear(f"{name}.attention.self.{proj}", h, h, t))
    out.append(_attention(f"{name}.attention", h, t))
    out.append(linear(f"{name}.attention.output.dense", h, h, t))
    out.append(norm(f"{name}.attention.output.LayerNorm", h, t))
    out.append(linear(f"{name}.intermediate.dense", h, 4 * h, t))
    out.append(elementwise(f"{name}.gelu", 4 * h * t, 8.0))
    out.append(linear(f"{name}.output.dense", 4 * h, h, t))
    out.append(norm(f"{name}.output.LayerNorm", h, t))


def bert(name: str) -> Workload:
    """BERT-base or BERT-large (``BertModel`` with pooler), one 128-token sequence a sample."""
    n_layer, h = BERT_SIZES[name]
    t = BERT_SEQ
    layers: list[Layer] = [embedding("embeddings", (
        ("embeddings.word_embeddings.weight", (30522, h)),
        ("embeddings.position_embeddings.weight", (512, h)),
        ("embeddings.token_type_embeddings.weight", (2, h))), t, h),
        norm("embeddings.LayerNorm", h, t)]
    for i in range(n_layer):
        _bert_block(layers, f"encoder.layer.{i}", h, t)
    layers.append(linear("pooler.dense", h, h))
    return Workload(name, tuple(layers), f"sequence of {t} tokens",
                    "Hugging Face BertModel (with pooler), Devlin et al. arXiv:1810.04805")


def _gpt2_block(out: list[Layer], name: str, h: int, t: int) -> None:
    out.append(norm(f"{name}.ln_1", h, t))
    out.append(linear(f"{name}.attn.c_attn", h, 3 * h, t, weight_shape=(h, 3 * h)))
    out.append(_attention(f"{name}.attn", h, t))
    out.append(linear(f"{name}.attn.c_proj", h, h, t, weight_shape=(h, h)))
    out.append(norm(f"{name}.ln_2", h, t))
    out.append(linear(f"{name}.mlp.c_fc", h, 4 * h, t, weight_shape=(h, 4 * h)))
    out.append(elementwise(f"{name}.gelu", 4 * h * t, 8.0))
    out.append(linear(f"{name}.mlp.c_proj", 4 * h, h, t, weight_shape=(4 * h, h)))


def gpt2(name: str) -> Workload:
    """GPT-2 small or medium (LM head tied to the embedding), one 1,024-token sequence."""
    n_layer, h = GPT2_SIZES[name]
    t, vocab = GPT2_SEQ, 50257
    layers: list[Layer] = [embedding("transformer", (("transformer.wte.weight", (vocab, h)),
                                                     ("transformer.wpe.weight", (1024, h))),
                                     t, h)]
    for i in range(n_layer):
        _gpt2_block(layers, f"transformer.h.{i}", h, t)
    layers.append(norm("transformer.ln_f", h, t))
    head = linear("lm_head", h, vocab, t, bias=False)  # tied: its weight is wte's
    layers.append(Layer(head.name, (), head.macs, 0.0, head.out_elems))
    return Workload(name, tuple(layers), f"sequence of {t} tokens",
                    "Hugging Face GPT2LMHeadModel (tied head), Radford et al. 2019")
