"""The zoo Transformer's layers (Llama's: RMSNorm, RoPE attention with
grouped key/value heads, optionally a sliding window, SwiGLU), the attention
being the op torch.ops.tmm.attention; as the C++ TransformerBlock
(csrc/models/transformer.cpp). Built on the meta device: the values come
from the model (tmm.models)."""
import torch
from torch import nn

from .layers import RMSNorm


class Attention(nn.Module):
    """wo(attention(RoPE(wq x), RoPE(wk x), wv x)), causal (or within the last
    ``window`` positions), no biases: B x L x d -> B x L x d."""

    def __init__(self, config):
        super().__init__()
        c = config
        self.n_heads, self.n_kv_heads, self.head_dim = c["n_heads"], c["n_kv_heads"], c["head_dim"]
        self.rope_theta, self.window, self.dropout = c["rope_theta"], c["window"], c["dropout"]
        with torch.device("meta"):
            self.wq = nn.Linear(c["d_model"], self.n_heads * self.head_dim, bias=False)
            self.wk = nn.Linear(c["d_model"], self.n_kv_heads * self.head_dim, bias=False)
            self.wv = nn.Linear(c["d_model"], self.n_kv_heads * self.head_dim, bias=False)
            self.wo = nn.Linear(self.n_heads * self.head_dim, c["d_model"], bias=False)

    def forward(self, x):
        return torch.ops.tmm.attention(x, self.wq.weight, self.wk.weight, self.wv.weight, self.wo.weight, self.n_heads,
                                       self.n_kv_heads, self.rope_theta, self.window, self.dropout, self.training)


class SwiGLU(nn.Module):
    """w2(silu(w1 x) * w3 x)."""

    def __init__(self, d_model, hidden):
        super().__init__()
        with torch.device("meta"):
            self.w1 = nn.Linear(d_model, hidden, bias=False)
            self.w2 = nn.Linear(hidden, d_model, bias=False)
            self.w3 = nn.Linear(d_model, hidden, bias=False)

    def forward(self, x):
        return self.w2(nn.functional.silu(self.w1(x)) * self.w3(x))


class TransformerBlock(nn.Module):
    """x + attn(attn_norm(x)), then + mlp(mlp_norm(x)); dropout on each
    branch in training."""

    def __init__(self, config):
        super().__init__()
        c = config
        with torch.device("meta"):
            self.attn_norm = RMSNorm(c["d_model"], c["norm_eps"])
            self.attn = Attention(c)
            self.mlp_norm = RMSNorm(c["d_model"], c["norm_eps"])
            self.mlp = SwiGLU(c["d_model"], c["ffn_hidden"])
        self.drop = nn.Dropout(c["dropout"])

    def forward(self, x):
        h = x + self.drop(self.attn(self.attn_norm(x)))
        return h + self.drop(self.mlp(self.mlp_norm(h)))
