"""A pre-norm residual block around any token mixer, as a plain nn.Module:
x += FFN(norm(x)); x += Mixer(norm(x)) (feed-forward first by default), the
C++ TMMBlock's mathematics and names (ffn_norm, ffn_in, ffn_out, mixer_norm,
mixer, drop); its default mixer is TMM's ToeplitzMixer. Its options are
checked and completed by the C++ config reader, its FFN initialised by the
C++ block of the init's model."""
from torch import nn

from ._cpp import load_initial_values, resolve
from .layers import ACTIVATIONS, choice, make_norm
from .toeplitz_mixer import ToeplitzMixer

BLOCK_ORDERS = ("ffn_first", "mixer_first")
# The FFN's init, and the C++ block (of the model "arch") whose FFN init it is:
# TMM's "kaiming" and "scaled" (ffn_out.weight / sqrt(2 n_layers)), Hyena's
# "torch" (nn.Linear's default) and "safari" (N(0, 0.02^2), ffn_out
# N(0, (0.02 / sqrt(2 n_layers))^2)).
INIT_ARCH = {"kaiming": "tmm", "scaled": "tmm", "torch": "hyena", "safari": "hyena"}
INITS = tuple(INIT_ARCH)


def block_config(owner, d_model, max_len, n_layers, options):
    """A zoo TMM config holding the block options given (None: the C++
    default), resolved by the C++ reader; "init" may be any of INITS."""
    init = choice(owner, "init", options.get("init") or "kaiming", INITS)
    given = {k: v for k, v in options.items() if v is not None and k != "init"}
    config = resolve(owner, {"arch": "tmm", "vocab_size": 1, "d_model": d_model, "n_layers": n_layers,
                             "max_len": max_len or 1, **given, "init": init if INIT_ARCH[init] == "tmm" else "kaiming"})
    config["init"] = init
    return config


class MixerBlock(nn.Module):
    """A pre-norm residual block around a token mixer (B x L x d -> same).

    The mixer is a :class:`ToeplitzMixer` built from ``max_len`` and
    ``mixer_kwargs`` (heads, kernel, expanded, frozen, masked), or any module
    given as ``mixer`` (B x L x d -> B x L x d). FFN: Linear(d, ffn_mult*d),
    ``activation`` (silu | gelu | relu), Linear back; ``norm`` layernorm |
    rmsnorm; dropout on each branch's output in training mode. ``init``
    (with ``n_layers`` for "scaled" and "safari") initialises the FFN as the
    C++ models do: "kaiming" (TMM), "scaled" (TMM's extension), "torch"
    (Hyena's default), "safari" (Hyena's "safari"); the mixer keeps its own.
    Options left None take the C++ TMM block's defaults.
    ``registration``: the order of the submodules in named_parameters() and
    state_dict(): "ffn_first" (the C++ TMMBlock's, whatever its
    block_order) or "mixer_first" (the C++ HyenaBlock's).
    """

    def __init__(self, d_model, max_len=None, *, mixer=None, ffn_mult=None, activation=None, block_order=None,
                 norm=None, dropout=None, init=None, n_layers=1, registration="ffn_first", device=None, dtype=None,
                 **mixer_kwargs):
        super().__init__()
        choice("MixerBlock", "registration", registration, BLOCK_ORDERS)
        c = self._config = block_config("MixerBlock", d_model, max_len, n_layers, {
            "ffn_mult": ffn_mult, "activation": activation, "block_order": block_order, "norm": norm,
            "dropout": dropout, "init": init})
        self.activation, self.block_order, self.init, self.n_layers = c["activation"], c["block_order"], c["init"], \
            c["n_layers"]
        if mixer is None:
            if max_len is None:
                raise ValueError("MixerBlock: give max_len (for its ToeplitzMixer) or a mixer module")
            if INIT_ARCH[self.init] == "tmm":  # the block's TMM init reaches its ToeplitzMixer
                mixer_kwargs = {"init": self.init, "n_layers": n_layers, **mixer_kwargs}
            mixer = ToeplitzMixer(d_model, max_len, device=device, dtype=dtype, **mixer_kwargs)
        elif mixer_kwargs:
            raise ValueError(f"MixerBlock: {', '.join(sorted(mixer_kwargs))} configure the ToeplitzMixer; "
                             "a given mixer module takes no such arguments")
        elif not isinstance(mixer, nn.Module):
            raise TypeError(f"MixerBlock: mixer must be an nn.Module, got {type(mixer).__name__}")
        kw = {"device": device, "dtype": dtype}
        d, norm = c["d_model"], c["norm"]
        # Registration order is the C++ block's (TMMBlock's or HyenaBlock's).
        if registration == "mixer_first":
            self.mixer_norm = make_norm(norm, d, **kw)
            self.mixer = mixer
        self.ffn_norm = make_norm(norm, d, **kw)
        self.ffn_in = nn.Linear(d, c["ffn_mult"] * d, **kw)
        self.ffn_out = nn.Linear(c["ffn_mult"] * d, d, **kw)
        if registration == "ffn_first":
            self.mixer_norm = make_norm(norm, d, **kw)
            self.mixer = mixer
        self.drop = nn.Dropout(c["dropout"])
        self.reset_parameters()

    def reset_parameters(self):
        """The FFN's and norms' init, as the C++ block of ``init``'s model
        initialises its own (the values of one, freshly built). The mixer's
        own init is its reset_parameters."""
        arch = INIT_ARCH[self.init]
        if arch == "tmm":
            load_initial_values(self, self._config, "block", skip=("mixer.",))
            return
        c = self._config
        hyena = resolve("MixerBlock", {"arch": "hyena", "vocab_size": 1, "d_model": c["d_model"],
                                       "n_layers": c["n_layers"], "max_len": 1, "ffn_mult": c["ffn_mult"],
                                       "init": self.init})
        # The Hyena block's norms are LayerNorms: an RMSNorm here keeps its ones.
        load_initial_values(self, hyena, "block", skip=("mixer.", "ffn_norm.", "mixer_norm."))
        for norm in (self.ffn_norm, self.mixer_norm):
            norm.reset_parameters()

    def _ffn(self, h):
        return self.ffn_out(ACTIVATIONS[self.activation](self.ffn_in(self.ffn_norm(h))))

    def _run(self, x, mix):
        if self.block_order == "ffn_first":
            h = x + self.drop(self._ffn(x))
            return h + self.drop(mix(self.mixer_norm(h)))
        h = x + self.drop(mix(self.mixer_norm(x)))
        return h + self.drop(self._ffn(h))

    def forward(self, x):
        return self._run(x, self._mixer_out)

    def _mixer_out(self, h):
        y = self.mixer(h)
        if isinstance(y, tuple):  # mixers that also return a state (mamba_ssm style): the output first
            y = y[0]
        if not hasattr(y, "shape") or y.shape != h.shape:
            got = tuple(y.shape) if hasattr(y, "shape") else type(y).__name__
            raise ValueError(f"MixerBlock: the mixer {type(self.mixer).__name__} must map B x L x d to the same "
                             f"shape {tuple(h.shape)}, got {got}")
        return y

    def start_decoding(self, batch, capacity):
        """The mixer's decoding state (the FFN and norms act per position)."""
        if not hasattr(self.mixer, "start_decoding"):
            raise TypeError(f"MixerBlock: the mixer {type(self.mixer).__name__} has no start_decoding/step")
        return self.mixer.start_decoding(batch, capacity)

    def step(self, x, state):
        """B x T x d at the state's next positions -> B x T x d, as forward()
        on everything fed so far gives them (dropout off, as the C++ decoder)."""
        if self.block_order == "ffn_first":
            h = x + self._ffn(x)
            return h + self.mixer.step(self.mixer_norm(h), state)
        h = x + self.mixer.step(self.mixer_norm(x), state)
        return h + self._ffn(h)

