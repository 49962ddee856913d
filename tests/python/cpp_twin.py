"""The C++ model computing with a Python zoo model's own tensors (the model's
engine): what the tests compare the Python tree against, so that each model
is one definition in two languages."""
import torch

from tmm.nn.outputs import LMOutput


class CppTwin:
    """twin(ids, labels=None, return_hidden=False) -> LMOutput, as the C++
    LanguageModel::forward_with computes it (labels per position); the
    gradients land on the C++ tensors (grads())."""

    def __init__(self, model):
        self.model = model
        self._training = model.training

    def train(self, mode=True):
        self._training = mode
        return self

    def eval(self):
        return self.train(False)

    def __call__(self, ids, labels=None, return_hidden=False):
        with self.model.engine() as e:
            e.train(self._training)
            logits, hidden, loss = e.forward_with(ids, labels, return_hidden)
        return LMOutput(logits, hidden, loss) if labels is not None or return_hidden else logits

    def hidden_states(self, ids):
        with self.model.engine() as e:
            e.train(self._training)
            return e.hidden_states(ids)

    def tensors(self):
        with self.model.engine() as e:
            return dict(e.named_tensors())

    def grads(self):
        return {n: t.grad for n, t in self.tensors().items() if t.grad is not None}

    def zero_grad(self):
        for t in self.tensors().values():
            t.grad = None


def nonzero_biases(model, std=0.1):
    """Every bias drawn N(0, std^2), so that every parameter is exercised."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias") or name.endswith("bias2"):
                p.normal_(0, std)
    return model
