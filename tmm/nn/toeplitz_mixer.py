"""TMM's token mixer, whose forward is the op torch.ops.tmm.toeplitz_mixer;
configuration, init and decoding are the C++ ToeplitzMixer's
(csrc/models/tmm.cpp). Its tensors are a zoo TMM's ``blocks.<i>.mixer.*``."""
import torch
from torch import nn

from .. import _C
from .cpp_config import initialise, resolve
from .layers import Linear, check_sequence

VARIANTS = ("toeplitz", "expanded", "frozen", "masked")


class ToeplitzMixer(nn.Module):
    """Causal token mixing of B x L x d_model inputs (L <= max_len).

    ``heads=0``: flat, one Toeplitz vector ``weight`` (1 x kernel x max_len)
    and ``bias`` for all channels. ``heads=h``: ``in_proj`` and ``out_proj``
    (d -> d, with bias) around h groups of d/h channels, each with its own
    vector. ``kernel=k``: output channel c mixes channels c-k+1..c of its
    group. At most one variant: ``expanded`` (Toeplitz -> SiLU -> dropout ->
    Toeplitz: ``weight2``, ``bias2``; ``mixer_dropout`` 0.1 by default, as
    the authors'), ``frozen`` (``weight`` and ``bias`` are buffers), ``masked``
    (a full lower-triangular max_len x max_len matrix per group). ``init``:
    "kaiming" (the authors') or "scaled" (a tmm extension: the last weight
    divided by sqrt(2 n_layers)). docs/models.md has the details.
    """

    # What SequenceModel passes it per layer (tmm.nn.sequence_model.MIXER_INPUTS).
    mixer_inputs = ("max_len", "n_layers", "device", "dtype")

    def __init__(self, d_model, max_len, heads=0, kernel=1, expanded=False, frozen=False, masked=False,
                 mixer_dropout=None, init="kaiming", n_layers=1, device=None, dtype=None):
        super().__init__()
        chosen = [n for n, on in (("expanded", expanded), ("frozen", frozen), ("masked", masked)) if on]
        if len(chosen) > 1:
            raise ValueError(
                f"ToeplitzMixer: expanded, frozen and masked exclude each other, got {' and '.join(chosen)}")
        config = {"arch": "tmm", "vocab_size": 1, "d_model": d_model, "n_layers": n_layers, "max_len": max_len,
                  "heads": heads, "kernel": kernel, "mixer": chosen[0] if chosen else "toeplitz", "init": init}
        if mixer_dropout is not None:
            config["mixer_dropout"] = mixer_dropout
        c = self._config = resolve("ToeplitzMixer", config)
        self.d_model, self.max_len, self.heads, self.kernel = c["d_model"], c["max_len"], c["heads"], c["kernel"]
        self.variant, self.mixer_dropout, self.init = c["mixer"], c["mixer_dropout"], c["init"]
        G, N = max(self.heads, 1), self.max_len
        with torch.device("meta"):  # the structure; the values are the C++ init's (initialise)
            if self.heads:
                self.in_proj = Linear(d_model, d_model)
            shape = (G, N, N) if self.variant == "masked" else (G, self.kernel, N)
            for suffix in ("", "2") if self.variant == "expanded" else ("",):
                for name, size in ((f"weight{suffix}", shape), (f"bias{suffix}", (G, N))):
                    if self.variant == "frozen":
                        self.register_buffer(name, torch.empty(size))
                    else:
                        self.register_parameter(name, nn.Parameter(torch.empty(size)))
            if self.heads:
                self.out_proj = Linear(d_model, d_model)
        initialise(self, c, "mixer", device, dtype)

    @classmethod
    def from_config(cls, config, device=None, dtype=None):
        """The mixer of a zoo TMM config (a dict, validated and completed by
        the C++ config reader)."""
        c = resolve("ToeplitzMixer.from_config", config, arch="tmm")
        return cls(c["d_model"], c["max_len"], heads=c["heads"], kernel=c["kernel"], expanded=c["mixer"] == "expanded",
                   frozen=c["mixer"] == "frozen", masked=c["mixer"] == "masked", mixer_dropout=c["mixer_dropout"],
                   init=c["init"], n_layers=c["n_layers"], device=device, dtype=dtype)

    def reset_parameters(self):
        """The values of a C++ ToeplitzMixer of this configuration, freshly built."""
        initialise(self, self._config, "mixer")

    def forward(self, x):  # B x L x d -> B x L x d
        check_sequence("ToeplitzMixer", x, self.d_model)
        if x.shape[1] > self.max_len:
            raise ValueError(f"ToeplitzMixer: sequence length {x.shape[1]} exceeds max_len = {self.max_len}")
        proj = (self.in_proj.weight, self.in_proj.bias, self.out_proj.weight, self.out_proj.bias) if self.heads \
            else (None,) * 4
        second = (self.weight2, self.bias2) if self.variant == "expanded" else (None, None)
        return torch.ops.tmm.toeplitz_mixer(x, self.weight, self.bias, *proj, *second, self.variant == "masked",
                                            self.mixer_dropout, self.training)

    # Incremental decoding: the C++ decoder's OnlineToeplitz ("cached"), one per Toeplitz stage.
    @torch.no_grad()
    def start_decoding(self, batch, capacity):
        """A decoding state for `batch` sequences of at most `capacity` (<=
        max_len) positions, fed to :meth:`step`."""
        stages = [(self.weight, self.bias)] + ([(self.weight2, self.bias2)] if self.variant == "expanded" else [])
        try:
            return ToeplitzMixerState([_C._OnlineToeplitz(w, b, batch, self.d_model, capacity,
                                                          matrix=self.variant == "masked") for w, b in stages])
        except RuntimeError as e:
            raise ValueError(f"ToeplitzMixer.start_decoding: {e}") from None

    @torch.no_grad()
    def step(self, x, state):
        """x: B x T x d at the state's next T positions -> B x T x d, what
        forward() on everything fed so far gives there (dropout off). Any T
        (the prompt, or one token at a time); one token costs O(t d)."""
        check_sequence("ToeplitzMixer", x, self.d_model)
        h = self.in_proj(x) if self.heads else x
        try:
            h = state.stages[0].forward(h)
            if self.variant == "expanded":
                h = state.stages[1].forward(torch.nn.functional.silu(h))
        except RuntimeError as e:
            raise ValueError(f"ToeplitzMixer.step: {e}") from None
        return self.out_proj(h) if self.heads else h

    def extra_repr(self):
        text = f"d_model={self.d_model}, max_len={self.max_len}, heads={self.heads}, kernel={self.kernel}, " \
               f"variant={self.variant}"
        if self.variant == "expanded":
            text += f", mixer_dropout={self.mixer_dropout}"
        return text + (f", init={self.init}" if self.init != "kaiming" else "")


class ToeplitzMixerState:
    """What :meth:`ToeplitzMixer.step` keeps: a C++ OnlineToeplitz per
    Toeplitz stage (every input so far)."""

    def __init__(self, stages):
        self.stages = stages

    @property
    def position(self):
        return self.stages[0].position
