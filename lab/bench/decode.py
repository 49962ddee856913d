"""The decoding benchmark (scripts/bench_decode.py): prefill time and
per-token decode latency against context length for the four architectures
at matched size, TMM's and Hyena's cached decoder vs the fast exact one
(FutureFill) vs recomputing the full forward; tokens/s of a whole
generation; and TMM generating a long sequence with both exact methods
(same tokens required). Prefill and step times come from the C++ generator
(tmm/models/generation.h), which times them itself."""
from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any, Dict, List

import torch

from tmm.progress import Progress
from tmm.files import atomic_write_json, atomic_write_text
from tmm.tables import markdown_table
from .report import pyplot, save_plot
from .timing import timed

__all__ = ["ARCH_EXTRA", "run", "targets", "tables"]

ARCH_EXTRA = {"tmm": {}, "transformer": {"n_heads": 8}, "hyena": {}, "mamba2": {}}
LONG_CONV = ("tmm", "hyena")


def build(arch, cfg, max_len):
    import tmm.models

    torch.manual_seed(cfg["seed"])
    model = tmm.models.build({"arch": arch, "vocab_size": cfg["vocab"], "d_model": cfg["d_model"],
                              "n_layers": cfg["layers"], "max_len": max_len, **ARCH_EXTRA[arch]})
    model.eval()
    return model


def methods_of(arch):
    return ["cached", "fast", "recompute"] if arch in LONG_CONV else ["cached", "recompute"]


def time_context(model, method, context, steps, rng):
    """Prefill `context` tokens, then `steps` single steps: (prefill s, median step s)."""
    prompt = torch.randint(0, model.config["vocab_size"], (context,), generator=rng).tolist()
    out = model.generate(prompt, steps + 1, temperature=0, method=method)
    return out["prefill_seconds"], statistics.median(out["step_seconds"])


def long_generation(model, cfg, batch, rng):
    """Greedy generation of gen_long tokens for `batch` prompts, cached vs fast."""
    prompts = torch.randint(0, cfg["vocab"], (batch, 16), generator=rng).tolist()
    runs = {m: timed(lambda m=m: model.generate(prompts, cfg["gen_long"], temperature=0, method=m)["tokens"])
            for m in ("cached", "fast")}
    return {"arch": "tmm", "batch": batch, "tokens": cfg["gen_long"], "cached_s": runs["cached"][0],
            "fast_s": runs["fast"][0], "speedup": runs["cached"][0] / runs["fast"][0],
            "identical_tokens": runs["cached"][1] == runs["fast"][1]}


def run(cfg: Dict[str, Any], out: Path, progress: bool = True) -> Dict[str, Any]:
    """cfg: the command line's options (archs, contexts, d_model, layers,
    vocab, steps, recompute_max, max_prefill_s, gen, gen_long, long_batches,
    threads, seed). Writes results.json, table.md, latency.png into `out`;
    returns the results."""
    out.mkdir(parents=True, exist_ok=True)
    contexts = cfg["contexts"]
    max_len = max(contexts[-1] + cfg["steps"] + 1, cfg["gen"] + 16, cfg["gen_long"] + 16)
    rng = torch.Generator().manual_seed(cfg["seed"])
    import platform

    results = {"config": {**cfg, "max_len": max_len, "torch": torch.__version__,
                          "machine": platform.processor() or platform.machine()},
               "latency": {}, "generation": [], "long": []}
    cells = [(a, m, c) for a in cfg["archs"] for m in methods_of(a) for c in contexts
             if m != "recompute" or c <= cfg["recompute_max"]]
    n_long = len(cfg["long_batches"]) if cfg["gen_long"] and "tmm" in cfg["archs"] else 0
    slow = set()
    with Progress(len(cells) + len(cfg["archs"]) + n_long, desc="decode", enabled=progress) as bar:
        for arch in cfg["archs"]:
            model = build(arch, cfg, max_len)
            for method in methods_of(arch):
                rows = results["latency"].setdefault(f"{arch}/{method}", [])
                for c in contexts:
                    if method == "recompute" and c > cfg["recompute_max"]:
                        continue
                    if (arch, method) in slow:
                        rows.append({"context": c,
                                     "skipped": f"prefill over {cfg['max_prefill_s']} s at a shorter context"})
                    else:
                        steps = 2 if method == "recompute" else cfg["steps"]
                        prefill, step = time_context(model, method, c, steps, rng)
                        rows.append({"context": c, "prefill_s": prefill, "step_s": step})
                        if prefill > cfg["max_prefill_s"]:
                            slow.add((arch, method))
                    bar.update(1, model=arch, method=method, ctx=c)
            # tokens/s of a whole generation from a short prompt, each exact method
            prompt = torch.randint(0, cfg["vocab"], (16,), generator=rng).tolist()
            for method in [m for m in methods_of(arch) if m != "recompute"]:
                wall, _ = timed(lambda: model.generate(prompt, cfg["gen"], temperature=0, method=method))
                results["generation"].append({"arch": arch, "method": method, "tokens": cfg["gen"],
                                              "seconds": wall, "tokens_per_s": cfg["gen"] / wall})
            bar.update(1, model=arch, method="generate")
            if arch == "tmm" and cfg["gen_long"]:
                for batch in cfg["long_batches"]:
                    results["long"].append(long_generation(model, cfg, batch, rng))
                    bar.update(1, model=arch, method=f"long x{batch}")
            del model
    results["targets"] = targets(results)
    atomic_write_json(out / "results.json", results)
    atomic_write_text(out / "table.md", tables(results))
    plot(results, out / "latency.png")
    return results


def plot(results, path):
    plt = pyplot()
    if plt is None:
        return
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for key, rows in sorted(results["latency"].items()):
        rows = [r for r in rows if "step_s" in r]
        ax.plot([r["context"] for r in rows], [1e3 * r["step_s"] for r in rows], marker="o",
                linestyle="--" if key.endswith("/recompute") else "-", label=key.replace("/", " "))
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("context (tokens)")
    ax.set_ylabel("ms per generated token")
    cfg = results["config"]
    ax.set_title(f"decode latency, d={cfg['d_model']}, {cfg['layers']} layers, {cfg['threads']} threads")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    save_plot(fig, path)


def _cell(results, key, context):
    for r in results["latency"].get(key, []):
        if r["context"] == context and "step_s" in r:
            return r
    return None


def targets(results):
    t = {}
    cached, recompute = _cell(results, "tmm/cached", 4096), _cell(results, "tmm/recompute", 4096)
    if cached and recompute:
        ratio = recompute["step_s"] / cached["step_s"]
        t["tmm cached vs recompute per token at context 4096 (target >= 20x)"] = {"ratio": ratio, "met": ratio >= 20}
    for lr in results["long"]:
        t[f"tmm fast vs cached, {lr['tokens']} tokens, batch {lr['batch']} (target >= 3x, identical tokens)"] = {
            "ratio": lr["speedup"], "identical": lr["identical_tokens"],
            "met": lr["speedup"] >= 3 and lr["identical_tokens"]}
    return t


def tables(results) -> str:
    contexts = results["config"]["contexts"]
    rows: List[List[str]] = []
    for key, cells in results["latency"].items():
        by = {r["context"]: r for r in cells}
        rows.append([key] + ["-" if c not in by or "step_s" not in by[c]
                             else f"{1e3 * by[c]['step_s']:.2f} ({by[c]['prefill_s']:.2f})" for c in contexts])
    text = ["## Per-token decode latency (ms; prefill s in parentheses)", "",
            markdown_table(["model / method"] + [str(c) for c in contexts], rows), "",
            f"## Generation of {results['config']['gen']} tokens (16-token prompt, greedy)", "",
            markdown_table(["model", "method", "seconds", "tokens/s"],
                           [[g["arch"], g["method"], f"{g['seconds']:.2f}", f"{g['tokens_per_s']:.1f}"]
                            for g in results["generation"]], left=2)]
    if results["long"]:
        text += ["", "## TMM, long generation: cached vs fast (greedy, 16-token prompts)", "",
                 markdown_table(["batch", "tokens", "cached s", "fast s", "speedup", "identical tokens"],
                                [[lr["batch"], lr["tokens"], f"{lr['cached_s']:.1f}", f"{lr['fast_s']:.1f}",
                                  f"{lr['speedup']:.2f}x", lr["identical_tokens"]] for lr in results["long"]],
                                align="rrrrrl")]
    text += ["", "## Targets", ""]
    for name, v in results["targets"].items():
        text.append(f"- {name}: {v['ratio']:.1f}x, {'met' if v['met'] else 'missed'}")
    return "\n".join(text)
