"""A training step of a small drop-in model, eager vs torch.compile
(scripts/bench_compile.py; the results in docs/benchmarks.md).

The model is ``tmm.nn.SequenceModel`` with ``ToeplitzMixer`` (plain Python
modules over the registered op, so ``fullgraph=True`` holds); a step is
forward, next-token loss, backward and an AdamW update, on fixed batches.
Both modes start from the same weights and see the same batches; the first
compiled call is the compilation (reported apart), then ``warmup`` untimed
steps, then the median of ``steps`` timed ones (lab.bench.timing). The
losses of the two modes' first steps are compared, so a compiled step that
computes something else shows.

    results = run({"d_model": 256, "n_layers": 4, ...}, out_dir)
    print(table(results))
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Dict

import torch

from tmm import nn as tnn
from tmm.testing import rel_err
from tmm.progress import Progress
from .provenance import environment, git
from tmm.files import atomic_write_json, atomic_write_text
from tmm.tables import markdown_table
from .timing import time_calls

__all__ = ["DEFAULTS", "SMOKE", "run", "table"]

SCHEMA = "tmm.bench_compile/1"
DEFAULTS: Dict[str, Any] = dict(d_model=256, n_layers=4, heads=4, vocab=512, seq=256, batch=8, steps=20, warmup=3,
                                backend="inductor", mode=None, seed=0)
# CPU smoke mode: tiny sizes, seconds (tests/python/test_bench_compile.py); not a measurement.
SMOKE: Dict[str, Any] = dict(DEFAULTS, d_model=16, n_layers=1, heads=2, vocab=32, seq=16, batch=2, steps=2,
                             warmup=1, backend="aot_eager")


def _model(cfg):
    torch.manual_seed(cfg["seed"])
    return tnn.SequenceModel(tnn.ToeplitzMixer, cfg["vocab"], cfg["d_model"], cfg["n_layers"], cfg["seq"],
                             mixer_kwargs={"heads": cfg["heads"]})


def _stepper(model, forward, batches):
    """A training step on the next of `batches` (cycled); returns the loss."""
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    state = {"i": 0}

    def step():
        ids = batches[state["i"] % len(batches)]
        state["i"] += 1
        loss = forward(ids, labels=ids, shift_labels=True).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss.detach()

    return step


def run(cfg: Dict[str, Any], out: Path, progress: bool = True, repo=None) -> Dict[str, Any]:
    """Times both modes; writes results.json and table.md to `out` (with the
    git revision of the checkout ``repo``, provenance.git)."""
    cfg = {**DEFAULTS, **cfg}
    out = Path(out)
    gen = torch.Generator().manual_seed(cfg["seed"] + 1)
    batches = [torch.randint(0, cfg["vocab"], (cfg["batch"], cfg["seq"]), generator=gen) for _ in range(4)]
    eager_model = _model(cfg)
    compiled_model = _model(cfg)  # same seed: same weights
    compiled_forward = torch.compile(compiled_model, fullgraph=True, backend=cfg["backend"], mode=cfg["mode"])
    modes = {"eager": _stepper(eager_model, eager_model, batches),
             "compiled": _stepper(compiled_model, compiled_forward, batches)}
    results: Dict[str, Any] = {"schema": SCHEMA, "config": cfg, "env": environment("cpu"), "git": git(repo), "modes": {}}
    first = {}
    bar = Progress(total=len(modes), desc="bench_compile", unit="mode", enabled=progress)
    try:
        for name, step in modes.items():
            bar.describe(f"{name}: first step")
            t0 = time.perf_counter()
            first[name] = step()
            first_s = time.perf_counter() - t0
            bar.describe(f"{name}: {cfg['warmup']} warm-up + {cfg['steps']} timed steps")
            timing = time_calls(step, "cpu", warmup=cfg["warmup"], repeats=cfg["steps"])
            results["modes"][name] = {"first_step_s": first_s, **timing}
            bar.update(1)
    finally:
        bar.close()
    results["first_loss_rel_err"] = rel_err(first["compiled"], first["eager"])
    eager, compiled = results["modes"]["eager"], results["modes"]["compiled"]
    results["speedup"] = eager["median_ms"] / compiled["median_ms"]
    results["parameters"] = sum(p.numel() for p in eager_model.parameters())
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_json(out / "results.json", results)
    atomic_write_text(out / "table.md", table(results))
    return results


def table(results: Dict[str, Any]) -> str:
    """A markdown table of both modes, with the sizes and the speedup."""
    c = results["config"]
    rows = []
    for name, m in results["modes"].items():
        rows.append([name, f"{m['median_ms']:.2f}", f"{m['min_ms']:.2f}", m["repeats"], f"{m['first_step_s']:.2f}"])
    head = (f"SequenceModel(ToeplitzMixer, heads {c['heads']}): d {c['d_model']}, {c['n_layers']} layers, "
            f"vocab {c['vocab']}, batch {c['batch']} x {c['seq']} tokens, {results['parameters']} parameters; "
            f"backend {c['backend']}, {results['env']['threads']} threads\n\n")
    foot = (f"\neager median / compiled median: {results['speedup']:.2f} (above 1: compiled is faster); "
            f"first-step loss relative difference {results['first_loss_rel_err']:.1e}\n")
    return head + markdown_table(["mode", "median ms", "min ms", "steps", "first step s"], rows) + "\n" + foot
