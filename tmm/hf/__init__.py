"""HuggingFace checkpoints in and out of tmm (docs/interop.md): the
Transformer as LlamaForCausalLM, the Mamba2 as Mamba2ForCausalLM, TMM and
Hyena in the same layout with a config only tmm reads; the weight-name maps
live in :mod:`tmm.hf.llama` and :mod:`tmm.hf.mamba2`.

    model = tmm.hf.from_pretrained("llama-dir")    # LlamaForCausalLM / Mamba2ForCausalLM / tmm's layout
    tmm.hf.save_pretrained(model, "out")           # a zoo model -> a HF directory
"""
from .pretrained import convert, from_pretrained, save_pretrained

__all__ = ["from_pretrained", "save_pretrained", "convert"]
