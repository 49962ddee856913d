"""What a language model returns and reads: the output of a forward pass, a
model's config as transformers-style code reads it, and next-token labels."""
import torch


class LMOutput(dict):
    """Output of ``model(input_ids, labels=..., return_hidden=...)``, in the
    manner of transformers' ``ModelOutput``: fields by name (``.logits``
    B x L x V; ``.hidden`` B x L x d, the states the LM head reads, None
    unless asked; ``.loss``, the mean cross-entropy against labels, -100
    ignored, None without labels) and a mapping of the fields that are set,
    in the order loss, logits, hidden (so ``out["loss"]``, ``dict(out)``,
    ``transformers.Trainer`` work); ``out[0]`` indexes those present values.
    Built as ``LMOutput(logits, hidden, loss)``."""

    _fields = ("loss", "logits", "hidden")

    def __init__(self, logits=None, hidden=None, loss=None):
        values = {"loss": loss, "logits": logits, "hidden": hidden}
        super().__init__((k, values[k]) for k in self._fields if values[k] is not None)

    logits = property(lambda self: self.get("logits"))
    hidden = property(lambda self: self.get("hidden"))
    loss = property(lambda self: self.get("loss"))

    def to_tuple(self):
        return tuple(self.values())

    def __getitem__(self, key):
        if isinstance(key, (int, slice)):
            return self.to_tuple()[key]
        return super().__getitem__(key)

    def __repr__(self):
        return f"LMOutput({', '.join(f'{k}=' + _describe(v) for k, v in self.items())})"


class ModelConfig(dict):
    """A model's configuration: a dict whose keys also read as attributes
    (``config.d_model``), as code written for transformers' configs reads
    them (``transformers.Trainer`` does). It is a copy: changing it does not
    change the model."""

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(f"the model config has no key '{name}'") from None

    def __setattr__(self, name, value):  # a copy: what Trainer sets (use_cache) changes nothing
        self[name] = value


def _describe(v):
    return f"<tensor {tuple(v.shape)} {v.dtype}>" if isinstance(v, torch.Tensor) else repr(v)


def shifted_labels(labels):
    """labels[:, 1:] padded with -100 at the end: position t is scored against
    token t+1, as transformers' causal LMs shift ``labels=input_ids``."""
    if not isinstance(labels, torch.Tensor) or labels.dim() != 2:
        got = f"shape {tuple(labels.shape)}" if isinstance(labels, torch.Tensor) else type(labels).__name__
        raise ValueError(f"labels: expected a B x L tensor, got {got}")
    return torch.nn.functional.pad(labels[:, 1:], (0, 1), value=-100)
