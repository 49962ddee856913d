"""A language model's skeleton: embed -> blocks -> [final norm] -> head, B x L
token ids -> logits, with transformers' conventions (``labels=input_ids``
trains next-token prediction; an LMOutput). The zoo's models (tmm.models)
and SequenceModel (any mixer) are this skeleton with their own blocks."""
import torch
import torch.utils.checkpoint
from torch import nn
from torch.nn import functional as F

from .outputs import LMOutput, shifted_labels


class LanguageModel(nn.Module):
    """``model(input_ids)``: B x L int64 -> logits B x L x V.
    ``model(input_ids, labels=..., return_hidden=True)``: an LMOutput (.loss,
    the mean cross-entropy, -100 ignored; .logits; .hidden, the states the
    head reads). Labels are shifted as in transformers (position t is scored
    against labels[t+1]) unless ``shift_labels=False`` (the attribute or the
    argument): then labels[t] is position t's own target.
    ``activation_checkpointing``: each block's activations are recomputed in
    backward instead of kept (torch.utils.checkpoint)."""

    shift_labels = True
    activation_checkpointing = False

    def __init__(self, vocab_size, d_model, max_len, blocks, final_norm=None, final_norm_name="final_norm",
                 tie_embeddings=False):
        super().__init__()
        self.vocab_size, self.d_model, self.max_len = vocab_size, d_model, max_len
        with torch.device("meta"):  # the values are the caller's to give
            self.embed = nn.Embedding(vocab_size, d_model)
        self.blocks = nn.ModuleList(blocks)
        self._final_norm_name = final_norm_name if final_norm is not None else None
        if final_norm is not None:
            self.add_module(final_norm_name, final_norm)
        with torch.device("meta"):
            self.head = None if tie_embeddings else nn.Linear(d_model, vocab_size, bias=False)

    def _check_ids(self, input_ids):
        if not isinstance(input_ids, torch.Tensor) or input_ids.dim() != 2 or input_ids.dtype != torch.int64:
            got = (f"a {input_ids.dim()}-D {input_ids.dtype} tensor" if isinstance(input_ids, torch.Tensor)
                   else type(input_ids).__name__)
            raise ValueError(f"input_ids: expected a B x L int64 tensor, got {got}")
        if input_ids.shape[1] > self.max_len:
            raise ValueError(
                f"input_ids: sequence length {input_ids.shape[1]} exceeds the model's maximum {self.max_len}")
        if not torch.compiler.is_compiling() and input_ids.numel() and input_ids.device.type != "meta":
            lo, hi = int(input_ids.min()), int(input_ids.max())
            if lo < 0 or hi >= self.vocab_size:
                raise ValueError(f"input_ids: expected token ids in [0, {self.vocab_size}), got values in [{lo}, {hi}]")

    def final_norm_module(self):
        return getattr(self, self._final_norm_name) if self._final_norm_name else None

    def hidden_states(self, input_ids):
        """B x L int64 -> B x L x d: the states the head reads."""
        self._check_ids(input_ids)
        h = self.embed(input_ids)
        recompute = self.activation_checkpointing and self.training and torch.is_grad_enabled()
        for block in self.blocks:
            h = torch.utils.checkpoint.checkpoint(block, h, use_reentrant=False) if recompute else block(h)
        norm = self.final_norm_module()
        return norm(h) if norm is not None else h

    def _head(self, hidden):
        return F.linear(hidden, self.embed.weight) if self.head is None else self.head(hidden)

    def forward(self, input_ids, labels=None, return_hidden=False, shift_labels=None):
        hidden = self.hidden_states(input_ids)
        logits = self._head(hidden)
        if labels is None and not return_hidden:
            return logits
        loss = None
        if labels is not None:
            if self.shift_labels if shift_labels is None else shift_labels:
                labels = shifted_labels(labels)
            if not isinstance(labels, torch.Tensor) or labels.shape != input_ids.shape or labels.dtype != torch.int64:
                got = (f"{tuple(labels.shape)} {labels.dtype}" if isinstance(labels, torch.Tensor)
                       else type(labels).__name__)
                raise ValueError(
                    f"labels: expected int64 of the shape of input_ids {tuple(input_ids.shape)}, got {got}")
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), labels.reshape(-1), ignore_index=-100)
        return LMOutput(logits, hidden if return_hidden else None, loss)

    def start_decoding(self, batch, capacity):
        """Python-level decoding through the blocks' own step(): one state per
        block (every mixer must offer start_decoding/step)."""
        if capacity > self.max_len:
            raise ValueError(f"start_decoding: capacity {capacity} exceeds max_len = {self.max_len}")
        return [block.start_decoding(batch, capacity) for block in self.blocks]

    @torch.no_grad()
    def step(self, input_ids, states):
        """B x T token ids at the states' next positions -> their logits
        B x T x V, as forward() on everything fed so far gives them."""
        h = self.embed(input_ids)
        for block, state in zip(self.blocks, states):
            h = block.step(h, state)
        norm = self.final_norm_module()
        return self._head(norm(h) if norm is not None else h)

    def load_state_dict(self, state_dict, strict=True, assign=False):
        """As nn.Module's, but every problem is reported before anything is
        loaded (the stock method copies the good tensors before it raises on a
        bad one, leaving the model half loaded)."""
        own = self.state_dict(keep_vars=True)
        problems = []
        for name, t in own.items():
            v = state_dict.get(name)
            if v is None:
                problems += [f'missing key "{name}"'] if strict else []
            elif not isinstance(v, torch.Tensor):
                problems.append(f'"{name}" is a {type(v).__name__}, not a tensor')
            elif v.shape != t.shape:
                problems.append(f'size mismatch for "{name}": copying a tensor of shape {tuple(v.shape)}, '
                                f"the model's is {tuple(t.shape)}")
        problems += [f'unexpected key "{k}"' for k in state_dict if k not in own] if strict else []
        if problems:
            raise RuntimeError(f"Error(s) in loading state_dict for {type(self).__name__} (nothing was loaded):\n\t"
                               + "\n\t".join(problems))
        return super().load_state_dict(state_dict, strict=strict, assign=assign)

    def num_parameters(self, trainable_only=False, exclude_embeddings=False, only_trainable=None):
        """Every parameter's count; trainable_only (transformers' spelling:
        only_trainable) counts those that require grad, exclude_embeddings
        leaves embed.weight out."""
        trainable_only = trainable_only or bool(only_trainable)
        return sum(p.numel() for n, p in self.named_parameters()
                   if (p.requires_grad or not trainable_only) and not (exclude_embeddings and n == "embed.weight"))
