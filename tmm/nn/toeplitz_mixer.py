"""TMM's token mixer as a plain nn.Module over torch.ops.tmm.causal_toeplitz:
the mathematics, parameter names and init of the C++ ToeplitzMixer
(csrc/models/tmm.cpp), so that its state_dict is a zoo model's
``blocks.<i>.mixer.*``."""
import torch
from torch import nn
from torch.nn import functional as F

from .layers import choice, make_linear, positive, reset_linear, residual_scale, toeplitz_init_, uniform_init_

VARIANTS = ("toeplitz", "expanded", "frozen", "masked")
INITS = ("kaiming", "scaled")
EXPANDED_DROPOUT = 0.1  # the authors' heads version (csrc/models/tmm.cpp)


def causal_matrix_mix(x, matrix, bias):
    """y[b,t,g,:] = sum_{s<=t} M[g,t,s] x[b,s,g,:] + bias[g,t] over the first L
    rows and columns of the G x N x N matrix M (its upper triangle ignored):
    the "masked" mixer, as tmm::models::causal_matrix_mix computes it."""
    B, L, C = x.shape
    G = matrix.shape[0]
    M = matrix[:, :L, :L].tril()
    y = torch.einsum("gts,bsgc->btgc", M, x.reshape(B, L, G, C // G))
    y = y + bias[:, :L].t().reshape(1, L, G, 1)
    return y.reshape(B, L, C)


class ToeplitzMixer(nn.Module):
    """Causal token mixing of B x L x d_model inputs (L <= max_len).

    ``heads=0``: flat, one Toeplitz vector ``weight`` (1 x kernel x max_len)
    and bias for all channels, no projections. ``heads=h``: ``in_proj`` and
    ``out_proj`` (d -> d, with bias) around h groups of d/h channels, each
    with its own vector. ``kernel=k``: output channel c mixes channels
    c-k+1..c of its group. Variants (at most one): ``expanded``
    (Toeplitz -> SiLU -> dropout -> Toeplitz, adding ``weight2``, ``bias2``
    and ``dropout``; ``mixer_dropout`` defaults to 0.1 there, as the authors',
    and must be 0 for the other variants), ``frozen`` (``weight`` and ``bias``
    are buffers: saved, never trained), ``masked`` (a full lower-triangular
    max_len x max_len matrix per group; kernel 1).
    Init, as the C++ mixer: Kaiming-normal (fan-in) Linear weights, zero
    biases; Toeplitz vectors N(0, 2/max_len) per tap; the masked matrix and
    bias U(+-1/sqrt(max_len)). ``init="scaled"`` (a tmm extension) divides
    the last weight (out_proj's with heads, else the Toeplitz vectors) by
    sqrt(2 n_layers). Decoding: :meth:`start_decoding`, :meth:`step`.
    """

    def __init__(self, d_model, max_len, heads=0, kernel=1, expanded=False, frozen=False, masked=False,
                 mixer_dropout=None, init="kaiming", n_layers=1, device=None, dtype=None):
        super().__init__()
        positive("ToeplitzMixer", d_model=d_model, max_len=max_len, kernel=kernel)
        if isinstance(heads, bool) or not isinstance(heads, int) or heads < 0:
            raise ValueError(f"ToeplitzMixer: heads must be an integer >= 0 (0 = flat), got {heads!r}")
        if heads and d_model % heads:
            raise ValueError(f"ToeplitzMixer: heads must divide d_model = {d_model}, got {heads}")
        per_group = d_model // heads if heads else d_model
        if kernel > per_group:
            raise ValueError(f"ToeplitzMixer: kernel must be in [1, channels per head = {per_group}], got {kernel}")
        chosen = [n for n, on in (("expanded", expanded), ("frozen", frozen), ("masked", masked)) if on]
        if len(chosen) > 1:
            raise ValueError(
                f"ToeplitzMixer: expanded, frozen and masked exclude each other, got {' and '.join(chosen)}")
        if masked and kernel != 1:
            raise ValueError(f"ToeplitzMixer: kernel must be 1 with masked=True, got {kernel}")
        if mixer_dropout is None:
            mixer_dropout = EXPANDED_DROPOUT if expanded else 0.0
        if isinstance(mixer_dropout, bool) or not isinstance(mixer_dropout, (int, float)) \
                or not 0.0 <= mixer_dropout < 1.0:
            raise ValueError(f"ToeplitzMixer: mixer_dropout must be in [0, 1), got {mixer_dropout!r}")
        if mixer_dropout and not expanded:
            raise ValueError(f"ToeplitzMixer: mixer_dropout applies to expanded=True only, got {mixer_dropout!r}")
        self.init = choice("ToeplitzMixer", "init", init, INITS)
        positive("ToeplitzMixer", n_layers=n_layers)
        self.d_model, self.max_len, self.heads, self.kernel = d_model, max_len, heads, kernel
        self.n_layers, self.mixer_dropout = n_layers, float(mixer_dropout)
        self.variant = chosen[0] if chosen else "toeplitz"
        G, K, N = (heads or 1), kernel, max_len
        kw = {"device": device, "dtype": dtype}
        # Registration order is the C++ mixer's, so named_parameters() lists alike.
        if heads:
            self.in_proj = make_linear(d_model, d_model, True, **kw)
        shape = (G, N, N) if masked else (G, K, N)
        if frozen:  # the authors freeze the vectors and the bias: buffers
            self.register_buffer("weight", torch.empty(shape, **kw))
            self.register_buffer("bias", torch.empty(G, N, **kw))
        else:
            self.weight = nn.Parameter(torch.empty(shape, **kw))
            self.bias = nn.Parameter(torch.empty(G, N, **kw))
        if expanded:
            self.weight2 = nn.Parameter(torch.empty(G, K, N, **kw))
            self.bias2 = nn.Parameter(torch.empty(G, N, **kw))
            self.dropout = nn.Dropout(self.mixer_dropout)
        if heads:
            self.out_proj = make_linear(d_model, d_model, True, **kw)
        self.reset_parameters()

    @classmethod
    def from_config(cls, config, device=None, dtype=None):
        """The mixer of a zoo TMM config (a dict with "d_model", "max_len" and
        optionally "heads", "kernel", "mixer", "mixer_dropout", "init",
        "n_layers")."""
        mixer = config.get("mixer", "toeplitz")
        if mixer not in VARIANTS:
            raise ValueError(
                f"ToeplitzMixer.from_config: \"mixer\" must be one of {', '.join(VARIANTS)}, got {mixer!r}")
        return cls(config["d_model"], config["max_len"], heads=config.get("heads", 0),
                   kernel=config.get("kernel", 1), expanded=mixer == "expanded", frozen=mixer == "frozen",
                   masked=mixer == "masked", mixer_dropout=config.get("mixer_dropout"),
                   init=config.get("init", "kaiming"), n_layers=config.get("n_layers", 1) or 1,
                   device=device, dtype=dtype)

    def reset_parameters(self):
        """The C++ mixer's init (the one place this layer's init lives)."""
        N = self.max_len
        if self.heads:
            reset_linear(self.in_proj)
        if self.variant == "masked":
            uniform_init_(self.weight, N)
            uniform_init_(self.bias, N)
        else:
            toeplitz_init_(self.weight, N)
            with torch.no_grad():
                self.bias.zero_()
        if self.variant == "expanded":
            toeplitz_init_(self.weight2, N)
            with torch.no_grad():
                self.bias2.zero_()
        if self.heads:
            reset_linear(self.out_proj)
        if self.init == "scaled":  # the branch's last weight, GPT-2's 1/sqrt(2 n_layers)
            with torch.no_grad():
                last = [self.out_proj.weight] if self.heads else [self.weight] + (
                    [self.weight2] if self.variant == "expanded" else [])
                for w in last:
                    w.mul_(residual_scale(self.n_layers))

    def _mix(self, x, weight, bias):
        if self.variant == "masked":
            return causal_matrix_mix(x, weight, bias)
        return torch.ops.tmm.causal_toeplitz(x, weight, bias)

    def _check_input(self, x, what="x"):
        if not isinstance(x, torch.Tensor) or x.dim() != 3 or x.shape[-1] != self.d_model:
            got = f"shape {tuple(x.shape)}" if isinstance(x, torch.Tensor) else type(x).__name__
            raise ValueError(f"ToeplitzMixer: expected {what} of shape B x L x {self.d_model}, got {got}")

    def forward(self, x):  # B x L x d -> B x L x d
        self._check_input(x)
        if x.shape[1] > self.max_len:
            raise ValueError(f"ToeplitzMixer: sequence length {x.shape[1]} exceeds max_len = {self.max_len}")
        h = self.in_proj(x) if self.heads else x
        h = self._mix(h, self.weight, self.bias)
        if self.variant == "expanded":
            h = self._mix(self.dropout(F.silu(h)), self.weight2, self.bias2)
        return self.out_proj(h) if self.heads else h

    # Incremental decoding, as the C++ decoder's "cached" method computes it.
    def start_decoding(self, batch, capacity):
        """A decoding state for `batch` sequences of at most `capacity` (<=
        max_len) positions, fed to :meth:`step`."""
        positive("ToeplitzMixer.start_decoding", batch=batch, capacity=capacity)
        if capacity > self.max_len:
            raise ValueError(f"ToeplitzMixer.start_decoding: capacity {capacity} exceeds max_len = {self.max_len}")
        stages = 2 if self.variant == "expanded" else 1
        return ToeplitzMixerState(batch, capacity, self.d_model, stages, self.weight)

    @torch.no_grad()
    def step(self, x, state):
        """x: B x T x d at the state's next T positions -> B x T x d, what
        forward() on everything fed so far gives at those positions. Any T
        (the prompt, or one token at a time); one token costs O(t d).
        Inference, as the C++ decoder: no gradients flow through a step and
        the expanded mixer's dropout is off."""
        self._check_input(x)
        if x.shape[0] != state.batch:
            raise ValueError(f"ToeplitzMixer.step: the state holds batch {state.batch}, got x of batch {x.shape[0]}")
        T, t = x.shape[1], state.position
        if t + T > state.capacity:
            raise ValueError(f"ToeplitzMixer.step: {t} + {T} positions exceed the state's capacity {state.capacity}")
        h = self.in_proj(x) if self.heads else x
        h = self._online(state.inputs[0], t, h, self.weight, self.bias)
        if self.variant == "expanded":
            h = self._online(state.inputs[1], t, F.silu(h), self.weight2, self.bias2)
        state.position = t + T
        return self.out_proj(h) if self.heads else h

    def _online(self, inputs, t, h, weight, bias):
        return online_mix(inputs, t, h, weight, bias, masked=self.variant == "masked")

    def extra_repr(self):
        text = (f"d_model={self.d_model}, max_len={self.max_len}, heads={self.heads}, kernel={self.kernel}, "
                f"variant={self.variant}")
        if self.variant == "expanded":
            text += f", mixer_dropout={self.mixer_dropout}"
        if self.init != "kaiming":
            text += f", init={self.init}, n_layers={self.n_layers}"
        return text


def online_mix(inputs, t, h, weight, bias, masked=False):
    """Causal Toeplitz (masked: full-matrix) mixing of the next T positions
    h (B x T x C) from position t, keeping every input in `inputs` (B x
    capacity x C): the C++ OnlineToeplitz "cached" method. bias may be None."""
    T = h.shape[1]
    inputs[:, t:t + T] = h.to(inputs.dtype)
    if T > 1 or t == 0:  # the prompt (or a block): the full mix over everything so far
        seen = inputs[:, :t + T]
        y = causal_matrix_mix(seen, weight, bias) if masked else torch.ops.tmm.causal_toeplitz(seen, weight, bias)
        return y[:, t:]
    B, C, G = h.shape[0], h.shape[2], weight.shape[0]
    seen = inputs[:, :t + 1].reshape(B, t + 1, G, C // G)
    if masked:  # row t of each group's matrix
        y = torch.einsum("gs,bsgc->bgc", weight[:, t, :t + 1], seen)
    else:  # row t of the Toeplitz matrix, each tap i reading the channel K-1-i below
        K = weight.shape[1]
        z = torch.einsum("gks,bsgc->bgkc", weight[:, :, :t + 1].flip(-1), seen)
        padded = F.pad(z, (K - 1, 0))
        y = sum(padded[:, :, i, i:i + C // G] for i in range(K))
    if bias is not None:
        y = y + bias[:, t].reshape(1, G, 1)
    return y.reshape(B, 1, C)


class ToeplitzMixerState:
    """What :meth:`ToeplitzMixer.step` keeps: every input so far of each
    Toeplitz stage (B x capacity x d) and the next position."""

    def __init__(self, batch, capacity, channels, stages, like):
        self.batch, self.capacity, self.position = batch, capacity, 0
        self.inputs = [like.new_zeros(batch, capacity, channels) for _ in range(stages)]
