"""The Python face of a C++ model: an ``nn.Module`` tree whose Parameters *are*
the C++ tensors (docs/design/cpp_models_in_python.md).

C++ owns every tensor. Each C++ submodule gets a :class:`CppNode` at the same
path; each C++ parameter's own Python object is retyped to ``nn.Parameter``
(same object, same ``TensorImpl``) and placed in its node's ``_parameters``
(buffers in ``_buffers``). Gradients, optimizer steps, ``load_state_dict``
copies and ``.to()`` conversions therefore act on the tensors C++ computes
with. What would *replace* a tensor object instead (``assign=True``,
``functional_call``, ``module.weight = Parameter(...)``) is refused, or caught
by a check before every forward, because C++ would silently keep using its own.
"""
import itertools
import json

import torch
from torch import nn

from .. import _C
from .outputs import LMOutput, ModelConfig, shifted_labels

# The C++ calls are opaque to Dynamo: one clean graph break each, and the code
# around them (loss, optimizer) still compiles.
@torch.compiler.disable
def _cpp_forward(cpp, input_ids):
    return cpp.forward(input_ids)


@torch.compiler.disable
def _cpp_forward_with(cpp, input_ids, labels, return_hidden):
    return cpp.forward_with(input_ids, labels, return_hidden)


@torch.compiler.disable
def _cpp_hidden_states(cpp, input_ids):
    return cpp.hidden_states(input_ids)


def _short_kind(kind):
    """'torch::nn::LinearImpl' -> 'Linear', 'tmm::models::TMMBlockImpl' -> 'TMMBlock'."""
    name = kind.rsplit("::", 1)[-1]
    return name[:-4] if name.endswith("Impl") and len(name) > 4 else name


class CppNode(nn.Module):
    """A C++ submodule, seen from Python: holds that submodule's own
    parameters and buffers; train()/eval() reach C++. Only the whole model
    can be called (:class:`LanguageModel`)."""

    def __init__(self, cpp, prefix, kind):
        super().__init__()
        self._cpp_root = cpp  # the whole C++ model (a tmm._C._LanguageModel)
        self._cpp_prefix = prefix  # this node's path in it ("" for the root)
        self._cpp_kind = kind  # the C++ class name

    def _get_name(self):
        return _short_kind(self._cpp_kind)

    def extra_repr(self):
        own = itertools.chain(self._parameters.items(), self._buffers.items())
        return ", ".join(f"{k}={tuple(v.shape)}" for k, v in own if v is not None)

    def forward(self, *args, **kwargs):
        raise NotImplementedError(
            f"'{self._cpp_prefix}' is a part of a C++ model and cannot be called on its own; call the whole model"
        )

    def _refuse_hook(self, what):
        raise RuntimeError(
            f"{what} on '{self._cpp_prefix}' is not supported: it is a part of a C++ model, whose forward runs "
            "in C++ and would never call the hook. Register hooks on the whole model, or build the model from "
            "the drop-in layers of tmm.nn (SequenceModel.from_config(model.config), ToeplitzMixer, MixerBlock, "
            "HyenaOperator, Mamba2Mixer; docs/interop.md), plain "
            "Python modules on which hooks, functional_call and parametrizations work"
        )

    def register_forward_hook(self, *args, **kwargs):
        if self._cpp_prefix:
            self._refuse_hook("register_forward_hook")
        return super().register_forward_hook(*args, **kwargs)

    def register_forward_pre_hook(self, *args, **kwargs):
        if self._cpp_prefix:
            self._refuse_hook("register_forward_pre_hook")
        return super().register_forward_pre_hook(*args, **kwargs)

    def register_full_backward_hook(self, *args, **kwargs):
        if self._cpp_prefix:
            self._refuse_hook("register_full_backward_hook")
        return super().register_full_backward_hook(*args, **kwargs)

    def register_full_backward_pre_hook(self, *args, **kwargs):
        if self._cpp_prefix:
            self._refuse_hook("register_full_backward_pre_hook")
        return super().register_full_backward_pre_hook(*args, **kwargs)

    def register_backward_hook(self, *args, **kwargs):
        if self._cpp_prefix:
            self._refuse_hook("register_backward_hook")
        return super().register_backward_hook(*args, **kwargs)

    def train(self, mode=True):
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self._cpp_root.train(self._cpp_prefix, mode)  # recursive in C++
        for m in self.modules():
            m.training = mode
        return self

    def _apply(self, fn, recurse=True):
        # .to() / .double() / .cuda() / .half() / share_memory(): convert with
        # `.data =` (TensorImpl::set_data), which the TensorImpl C++ holds sees.
        # Stock nn.Module would put new objects in _buffers (and, under the
        # torch.__future__ flags, in _parameters), which C++ never sees.
        with torch.no_grad():
            for t in itertools.chain(self.parameters(recurse=recurse), self.buffers(recurse=recurse)):
                new = fn(t)
                if new is not t:
                    t.data = new
                if t.grad is not None:
                    g = fn(t.grad)
                    if g is not t.grad:
                        t.grad.data = g
        return self

    def load_state_dict(self, state_dict, strict=True, assign=False):
        if assign:
            raise RuntimeError(
                "load_state_dict(assign=True) is not supported by a C++ model: it would replace its tensors with "
                "new Python objects that C++ never sees; the default (assign=False) copies into them"
            )
        if torch.__future__.get_swap_module_params_on_conversion():
            raise RuntimeError(
                "load_state_dict with torch.__future__.set_swap_module_params_on_conversion(True) is not supported "
                "by a C++ model: swapping would replace tensors that C++ holds"
            )
        _check_state_dict(self, state_dict, strict)  # everything, before anything is copied
        return super().load_state_dict(state_dict, strict=strict)

    def __reduce__(self):
        raise TypeError(
            f"'{self._cpp_prefix}' is a part of a C++ model and cannot be pickled or copied on its own; "
            "pickle or copy the whole model"
        )


class CppModuleList(CppNode):
    """A C++ ``torch::nn::ModuleList``: indexable and iterable like nn.ModuleList."""

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __getitem__(self, idx):
        items = list(self._modules.values())
        if isinstance(idx, slice):
            return items[idx]
        return items[idx]


def _check_state_dict(module, state_dict, strict):
    """Raises, naming every problem, unless load_state_dict would copy every
    tensor cleanly: stock load_state_dict copies the good tensors before it
    reports a bad one, which would leave the model half loaded."""
    own = module.state_dict(keep_vars=True)
    problems = []
    for name, t in own.items():
        if name not in state_dict:
            if strict:
                problems.append(f'missing key "{name}"')
            continue
        v = state_dict[name]
        if not isinstance(v, torch.Tensor):
            problems.append(f'"{name}" is a {type(v).__name__}, not a tensor')
        elif v.shape != t.shape:
            problems.append(
                f'size mismatch for "{name}": copying a tensor of shape {tuple(v.shape)}, '
                f"the model's is {tuple(t.shape)}"
            )
    if strict:
        problems += [f'unexpected key "{k}"' for k in state_dict if k not in own]
    if problems:
        raise RuntimeError(
            f"Error(s) in loading state_dict for {module._get_name()} (nothing was loaded):\n\t" + "\n\t".join(problems)
        )


class LanguageModel(CppNode):
    """A tmm C++ language model as a ``torch.nn.Module`` (build with
    :func:`tmm.models.build` or :func:`tmm.models.load`).

    ``model(input_ids)``: B x L int64 token ids -> logits B x L x V.
    ``model(input_ids, labels=..., return_hidden=True)``: an :class:`LMOutput`;
    with ``shift_labels`` (the attribute or the argument) ``labels=input_ids``
    trains next-token prediction, as in transformers.
    Parameter names are the C++ module paths ("embed.weight",
    "blocks.0.mixer.weight", ...), identical in checkpoints of both languages.
    """

    def __init__(self, cpp):
        super().__init__(cpp, "", cpp.module_kind(""))
        nodes = {"": self}
        for name in cpp.named_modules():  # parents before children
            if name == "":
                continue
            parent, _, leaf = name.rpartition(".")
            kind = cpp.module_kind(name)
            node = (CppModuleList if _short_kind(kind) == "ModuleList" else CppNode)(cpp, name, kind)
            nodes[parent].add_module(leaf, node)
            nodes[name] = node
            node.training = cpp.is_training(name)
        self.training = cpp.is_training("")
        slots = []  # (name, the dict holding it, key, the C++ tensor's object)
        for name, t in cpp.named_parameters():
            owner, _, leaf = name.rpartition(".")
            if type(t) is not nn.Parameter:
                t.__class__ = nn.Parameter  # same object, same TensorImpl (a wrapper would detach)
            nodes[owner]._parameters[leaf] = t
            slots.append((name, nodes[owner]._parameters, leaf, t))
        for name, t in cpp.named_buffers():
            owner, _, leaf = name.rpartition(".")
            nodes[owner]._buffers[leaf] = t
            slots.append((name, nodes[owner]._buffers, leaf, t))
        self._cpp_slots = slots

    def _check_tensors(self):
        """C++ computes with its own tensors; raises if Python's were replaced."""
        for name, d, leaf, t in self._cpp_slots:
            if d.get(leaf) is not t:
                raise RuntimeError(
                    f"tmm.models: the tensor '{name}' was replaced by another object, which the C++ model would "
                    "silently ignore. Change values in place instead: load_state_dict, p.copy_(x) under "
                    "torch.no_grad(), or .to() for dtype and device (functional_call, parametrizations and "
                    "assigning new Parameters are not supported)"
                )

    # True: labels are shifted as transformers' causal LMs do (labels=input_ids
    # trains next-token prediction); False (the default): labels are the
    # targets of each position as given. forward(shift_labels=...) overrides it.
    shift_labels = False

    def forward(self, input_ids, labels=None, return_hidden=False, shift_labels=None):
        self._check_tensors()
        if labels is None and not return_hidden:
            return _cpp_forward(self._cpp_root, input_ids)
        shift = self.shift_labels if shift_labels is None else shift_labels
        if labels is not None and shift:
            labels = shifted_labels(labels)
        return LMOutput(*_cpp_forward_with(self._cpp_root, input_ids, labels, bool(return_hidden)))

    def hidden_states(self, input_ids):
        """B x L int64 -> B x L x d: the states the LM head reads."""
        self._check_tensors()
        return _cpp_hidden_states(self._cpp_root, input_ids)

    def start_decoding(self, batch, capacity, method="auto", *, order=None, window=None):
        """A state for incremental decoding of `batch` sequences of at most
        `capacity` tokens; method: auto | recompute | cached | fast (TMM,
        Hyena) | distilled (TMM, Hyena: approximate, fixed state; order and
        window fit a distillation unless the attached one has them, see
        tmm.distill). ``state.state_bytes``: what the state holds."""
        self._check_tensors()
        self._distillation_for(method, order, window)
        return self._cpp_root.start_decoding(int(batch), int(capacity), str(method))

    def _distillation_for(self, method, order, window):
        if order is None and window is None:
            return
        if method != "distilled":
            raise ValueError(f'order and window are options of method="distilled", not of method="{method}"')
        from .. import distill

        d = distill.of(self)
        if d is None or (order is not None and d.order != order) or (window is not None and d.window != window):
            distill.distill(self, order=16 if order is None else order, window=0 if window is None else window)

    def decode(self, state, input_ids):
        """Feeds B x T tokens at the state's next positions; returns their
        logits B x T x V, as forward() on everything fed so far gives them."""
        self._check_tensors()
        return self._cpp_root.decode(state, input_ids)

    def generate(self, prompts, max_new_tokens=64, *, temperature=1.0, top_k=0, top_p=1.0, seed=0,
                 stop_tokens=(), method="auto", on_tokens=None, order=None, window=None):
        """Generates from token-id prompts (a list of lists, or one list) with
        the C++ generator (tmm/models/generation.h): temperature 0 = greedy.
        Generation is inference: it runs with dropout off in any mode (no
        eval() needed) and leaves each module's train/eval flag as it was.
        Returns a dict: tokens (new ids per prompt), finish_reasons, method,
        prefill_seconds, step_seconds. on_tokens(list) is called after each
        round with each sequence's new token (-1: none); return False to stop.
        order, window: for method "distilled", as start_decoding."""
        self._check_tensors()
        self._distillation_for(method, order, window)
        if hasattr(prompts, "tolist"):  # a tensor or array of ids: 1-D one prompt, 2-D a batch
            prompts = prompts.tolist()
        single = len(prompts) > 0 and not isinstance(prompts[0], (list, tuple))
        batch = [list(map(int, prompts))] if single else [list(map(int, p)) for p in prompts]
        out = self._cpp_root.generate(batch, int(max_new_tokens), float(temperature), int(top_k), float(top_p),
                                      int(seed), [int(t) for t in stop_tokens], str(method), on_tokens)
        if single:
            out["tokens"], out["finish_reasons"] = out["tokens"][0], out["finish_reasons"][0]
        return out

    @property
    def config(self):
        """The full validated configuration (a fresh dict, "arch" included;
        keys also read as attributes, as transformers' configs are)."""
        return ModelConfig(json.loads(self._cpp_root.config_json()))

    @property
    def arch(self):
        return self.config["arch"]

    def num_parameters(self, trainable_only=False, exclude_embeddings=False, only_trainable=None):
        """Every parameter's count; trainable_only (transformers' spelling:
        only_trainable) counts those that require grad, exclude_embeddings
        leaves embed.weight out."""
        trainable_only = trainable_only or bool(only_trainable)
        if not trainable_only and not exclude_embeddings:
            return self._cpp_root.parameter_count()
        return sum(p.numel() for n, p in self.named_parameters()
                   if (p.requires_grad or not trainable_only) and not (exclude_embeddings and n == "embed.weight"))

    def save(self, checkpoint_dir):
        """Writes checkpoint_dir/config.json and checkpoint_dir/model.safetensors
        (created if missing; each file replaced atomically). Tensors are saved
        in their current dtype."""
        import os

        self._check_tensors()
        _C._save_checkpoint(self._cpp_root, os.fspath(checkpoint_dir))

    def __reduce__(self):
        # pickle, copy.deepcopy, torch.save(model): rebuilt from the config,
        # the tensors (dtype and device kept), frozen flags and training modes.
        self._check_tensors()
        frozen = [n for n, p in self.named_parameters() if not p.requires_grad]
        modes = {n: m.training for n, m in self.named_modules()}
        return _rebuild, (type(self), self.config, self.state_dict(), frozen, modes, self.shift_labels)


def _rebuild(cls, config, state, frozen, modes, shift_labels=False):
    model = cls(_C._build_model(json.dumps(config)))
    _check_state_dict(model, state, strict=True)
    own = model.state_dict(keep_vars=True)
    with torch.no_grad():
        for name, t in own.items():
            t.data = state[name].detach()  # takes its dtype and device
    params = dict(model.named_parameters())
    for name in frozen:
        params[name].requires_grad_(False)
    for name, m in model.named_modules():
        if name in modes and m.training != modes[name]:
            m.train(modes[name])
    if shift_labels:
        model.shift_labels = True
    return model
