"""Where a training step's time goes (``scripts/bench_step.py``): a TMM and
a Hyena language model of the zoo, at several lengths with the tokens per
step held equal, split into matmuls, the mixer op, norms, activations, the
loss, the optimizer and the rest.

    res = step.run(StepConfig(models=["tmm-cpu-small", "hyena-cpu-small"]), out_dir)

A step is forward with the loss (``model(ids, labels=ids).loss``),
backward, and an AdamW update, on random token ids. Per model and length:
the wall time of each phase (forward, backward, optimizer; medians of
``steps`` timed steps after ``warmup`` untimed ones), and one step of
forward and backward under torch.profiler, whose self CPU time per op is
grouped by the op's name (CATEGORIES) and scaled to the measured forward +
backward time. The models are built with ``tmm.models.build`` from the zoo's
configs, ``max_len`` raised to the length where it is shorter; the public
API is all this reads.
"""
from __future__ import annotations

import dataclasses
import json
import statistics
import time
import warnings
from pathlib import Path
from typing import Any, Dict, List

import torch

from tmm.files import atomic_write_text
from tmm.tables import markdown_table
from . import provenance
from .report import LiveJson

__all__ = ["StepConfig", "CATEGORIES", "category", "run", "tables"]

SCHEMA = "tmm.bench_step/1"

# Op names (the profiler's keys) per category; the first match wins. The
# mixer op is tmm's causal Toeplitz (TMM's mixer, Hyena's long convolution);
# Hyena's implicit filter (a small MLP over positions, sines) lands in
# matmuls and elementwise, its short convolution in "short conv".
CATEGORIES = [
    ("mixer op", ("tmm::causal_toeplitz", "tmm::causal_toeplitz_backward")),
    ("matmuls", ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::addmv", "aten::mv",
                 "aten::dot", "aten::_mkldnn_matmul")),
    ("short conv", ("aten::mkldnn_convolution", "aten::convolution_backward", "aten::_convolution",
                    "aten::_slow_conv2d", "aten::thnn_conv")),
    ("norms", ("aten::native_layer_norm", "aten::native_layer_norm_backward", "aten::_fused_rms_norm",
               "aten::rms_norm", "aten::_fused_rms_norm_backward")),
    ("activations", ("aten::silu", "aten::silu_backward", "aten::gelu", "aten::gelu_backward", "aten::relu",
                     "aten::threshold_backward", "aten::sigmoid", "aten::sigmoid_backward", "aten::tanh",
                     "aten::tanh_backward")),
    ("loss", ("aten::_log_softmax", "aten::_log_softmax_backward_data", "aten::nll_loss", "aten::nll_loss_forward",
              "aten::nll_loss_backward", "aten::cross_entropy_loss", "aten::nll_loss_nd")),
    ("embedding", ("aten::embedding", "aten::index_select", "aten::embedding_dense_backward",
                   "aten::embedding_backward", "aten::index_add_")),
]
OTHER = "elementwise and other"
PHASES = ("forward", "backward", "optimizer")


@dataclasses.dataclass
class StepConfig:
    models: List[str] = dataclasses.field(default_factory=lambda: ["tmm-cpu-small", "hyena-cpu-small"])
    lengths: List[int] = dataclasses.field(default_factory=lambda: [512, 4096, 16384])
    tokens: int = 16384  # per step, at every length (batch = tokens // L)
    steps: int = 3
    warmup: int = 1
    lr: float = 1e-4
    seed: int = 0


def category(op: str) -> str:
    """The category of a profiler key (OTHER for the rest, autograd's own
    bookkeeping included)."""
    for name, ops in CATEGORIES:
        if any(op == o or op.startswith(o + ".") for o in ops):
            return name
    return OTHER


def _model(name: str, L: int, seed: int):
    import tmm

    torch.manual_seed(seed)
    path = Path(name) if name.endswith(".json") else tmm.models.config_path(name)
    cfg = json.loads(Path(path).read_text())
    cfg["max_len"] = max(int(cfg.get("max_len", L)), L)
    return tmm.models.build(cfg), cfg


def measure(name: str, L: int, cfg: StepConfig) -> Dict[str, Any]:
    from torch.profiler import ProfilerActivity, profile

    batch = max(1, cfg.tokens // L)
    model, model_cfg = _model(name, L, cfg.seed)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr)
    gen = torch.Generator().manual_seed(cfg.seed + 1)
    ids = torch.randint(0, int(model_cfg["vocab_size"]), (batch, L), generator=gen)

    def step() -> Dict[str, float]:
        t0 = time.perf_counter()
        loss = model(ids, labels=ids).loss
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        opt.step()
        opt.zero_grad(set_to_none=True)
        t3 = time.perf_counter()
        return {"forward": t1 - t0, "backward": t2 - t1, "optimizer": t3 - t2}

    for _ in range(cfg.warmup):
        step()
    timed = [step() for _ in range(cfg.steps)]
    phases_ms = {p: statistics.median(t[p] for t in timed) * 1e3 for p in PHASES}
    step_ms = statistics.median(sum(t.values()) for t in timed) * 1e3
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the profiler's notes about its cycles
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            model(ids, labels=ids).loss.backward()
    opt.zero_grad(set_to_none=True)
    self_us: Dict[str, float] = {}
    for e in prof.key_averages():
        key = category(e.key)
        self_us[key] = self_us.get(key, 0.0) + e.self_cpu_time_total
    total_us = sum(self_us.values()) or 1.0
    fwd_bwd_ms = phases_ms["forward"] + phases_ms["backward"]
    shares = {k: v / total_us for k, v in self_us.items()}
    cats_ms = {k: s * fwd_bwd_ms for k, s in shares.items()}
    cats_ms["optimizer"] = phases_ms["optimizer"]
    return {"model": name, "arch": model_cfg["arch"], "L": L, "batch": batch, "tokens": batch * L,
            "d_model": model_cfg.get("d_model"), "n_layers": model_cfg.get("n_layers"),
            "parameters": sum(p.numel() for p in model.parameters()), "step_ms": step_ms,
            "phases_ms": phases_ms, "steps_ms": [sum(t.values()) * 1e3 for t in timed],
            "fwd_bwd_shares": shares, "categories_ms": cats_ms,
            "tokens_per_s": batch * L / (step_ms * 1e-3)}


COLUMNS = [name for name, _ in CATEGORIES] + [OTHER, "optimizer"]


def _num(v: float) -> str:
    return f"{v:.0f}" if v >= 100 else f"{v:.3g}"


def tables(res: Dict[str, Any]) -> str:
    env, c = res["env"], res["config"]
    lines = [f"CPU: {env.get('cpu_model')} ({env.get('cpu_count')} cores), {env.get('threads')} threads, float32; "
             f"{c['tokens']} tokens per step; medians of {c['steps']} steps after {c['warmup']}", ""]
    rows = []
    for r in res["rows"]:
        cells = [r["model"], r["L"], r["batch"], _num(r["step_ms"]), f"{r['tokens_per_s']:.0f}"]
        cells += [_num(r["phases_ms"][p]) for p in PHASES]
        rows.append(cells)
    lines.append(markdown_table(["model", "L", "batch", "step ms", "tokens/s", "forward ms", "backward ms",
                                 "optimizer ms"], rows, left=1))
    lines += ["", "Share of the step (%); forward + backward split by the profiler's self time per op:", ""]
    rows = []
    for r in res["rows"]:
        total = sum(r["categories_ms"].values()) or 1.0
        rows.append([r["model"], r["L"]] + [f"{100 * r['categories_ms'].get(k, 0.0) / total:.1f}" for k in COLUMNS])
    lines.append(markdown_table(["model", "L"] + COLUMNS, rows, left=1))
    return "\n".join(lines)


def run(cfg: StepConfig, out_dir: Path, progress: bool = True, repo=None) -> Dict[str, Any]:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    live = LiveJson(out_dir / "results.json", {
        "schema": SCHEMA, "config": dataclasses.asdict(cfg), "env": provenance.environment("cpu"),
        "git": provenance.git(repo), "load_start": provenance.loadavg()})
    t_start = time.perf_counter()
    for name in cfg.models:
        for L in cfg.lengths:
            rec = measure(name, L, cfg)
            live.add("rows", rec)
            if progress:
                print(f"step {name} L={L} batch={rec['batch']}: {rec['step_ms']:.0f} ms, mixer op "
                      f"{rec['categories_ms'].get('mixer op', 0.0):.0f} ms, matmuls "
                      f"{rec['categories_ms'].get('matmuls', 0.0):.0f} ms", flush=True)
    live.set("load_end", provenance.loadavg())
    live.set("wall_s", time.perf_counter() - t_start)
    live.finish()
    table = tables(live.data)
    atomic_write_text(out_dir / "table.md", table + "\n")
    return {"results": live.data, "table": table}
