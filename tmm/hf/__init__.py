"""HuggingFace checkpoints in and out of tmm (docs/interop.md).

    model = tmm.hf.from_pretrained("llama-dir")    # LlamaForCausalLM / Mamba2ForCausalLM / tmm's layout
    model.save("tmm-ckpt")                          # a tmm checkpoint, loadable from C++
    tmm.hf.convert("llama-dir", "tmm-ckpt")         # the same, with the checkpoint's tokenizer.json
    tmm.hf.save_pretrained(model, "out")           # a zoo model -> a HF directory

A HF directory is config.json plus model.safetensors or a sharded
model.safetensors.index.json. The Transformer is written as
LlamaForCausalLM and the Mamba2 as Mamba2ForCausalLM (loadable by
``transformers.AutoModelForCausalLM.from_pretrained``); TMM and Hyena in the
same layout with a config naming their architecture (``TMMForCausalLM``,
``HyenaForCausalLM``, ``model_type`` "tmm" / "hyena") that only tmm reads.
The weight-name maps live in :mod:`tmm.hf.llama` and :mod:`tmm.hf.mamba2`.
transformers is optional: only reading a Llama or Mamba2 config needs it.
"""
from .pretrained import convert, from_pretrained, save_pretrained

__all__ = ["from_pretrained", "save_pretrained", "convert"]
