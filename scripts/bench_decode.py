#!/usr/bin/env python3
"""Decoding benchmark: prefill time and per-token decode latency against
context length for the four architectures at matched size (d = 512, 4
layers), TMM's and Hyena's cached decoder vs the fast exact one (FutureFill)
vs recomputing the full forward; tokens/s for a 1024-token generation; and
TMM generating 8192 tokens with both exact methods (same tokens required).

    scripts/bench_decode.py                       # everything (~15 min on 2 cores)
    scripts/bench_decode.py --contexts 512,4096 --archs tmm --gen-long 0

Writes results.json, table.md and latency.png to --out (default
bench/results/decode-<timestamp>/), each atomically; prints the tables.
Timings go through the C++ generator (tmm/models/generation.h), which times
the prefill and every step itself.
"""
import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # no spinning threads on a shared machine

import torch  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
import tmm.models as M  # noqa: E402
from tmm.files import atomic_savefig, atomic_write_json, atomic_write_text  # noqa: E402
from tmm.bench.progress import Progress  # noqa: E402

ARCH_EXTRA = {"tmm": {}, "transformer": {"n_heads": 8}, "hyena": {}, "mamba2": {}}
LONG_CONV = ("tmm", "hyena")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--archs", default="tmm,transformer,hyena,mamba2")
    p.add_argument("--contexts", default="512,1024,2048,4096,8192,16384")
    p.add_argument("--d-model", type=int, default=512)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--vocab", type=int, default=256)
    p.add_argument("--steps", type=int, default=16, help="decode steps timed per context (median)")
    p.add_argument("--recompute-max", type=int, default=4096, help="largest context timed with recompute")
    p.add_argument("--max-prefill-s", type=float, default=30.0,
                   help="skip longer contexts of a model once its prefill took this long")
    p.add_argument("--gen", type=int, default=1024, help="tokens generated for the tokens/s column")
    p.add_argument("--gen-long", type=int, default=8192, help="TMM cached vs fast on this many tokens (0: skip)")
    p.add_argument("--long-batches", default="1,8", help="batch sizes of the --gen-long comparison")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    args.archs = [a for a in args.archs.split(",") if a]
    for a in args.archs:
        if a not in ARCH_EXTRA:
            p.error(f"--archs: unknown architecture {a!r}; expected some of {', '.join(ARCH_EXTRA)}")
    args.long_batches = [int(b) for b in args.long_batches.split(",") if b]
    args.contexts = sorted(int(c) for c in args.contexts.split(",") if c)
    if not args.contexts or args.contexts[0] < 1:
        p.error(f"--contexts: expected positive integers, got {args.contexts}")
    if args.out is None:
        args.out = str(REPO / "bench" / "results" / time.strftime("decode-%Y%m%d-%H%M%S"))
    return args


def build(arch, args, max_len):
    torch.manual_seed(args.seed)
    config = {"arch": arch, "vocab_size": args.vocab, "d_model": args.d_model, "n_layers": args.layers,
              "max_len": max_len, **ARCH_EXTRA[arch]}
    model = M.build(config)
    model.eval()
    return model


def methods_of(arch):
    return ["cached", "fast", "recompute"] if arch in LONG_CONV else ["cached", "recompute"]


def time_context(model, method, context, steps, rng):
    """Prefill `context` tokens, then `steps` single steps: (prefill s, median step s)."""
    prompt = torch.randint(0, model.config["vocab_size"], (context,), generator=rng).tolist()
    out = model.generate(prompt, steps + 1, temperature=0, method=method)
    return out["prefill_seconds"], statistics.median(out["step_seconds"])


def plot(results, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for (arch, method), rows in sorted(results["latency"].items()):
        xs = [r["context"] for r in rows]
        ax.plot(xs, [1e3 * r["step_s"] for r in rows], marker="o",
                linestyle="--" if method == "recompute" else "-", label=f"{arch} {method}")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("context (tokens)")
    ax.set_ylabel("ms per generated token")
    ax.set_title(f"decode latency, d={results['config']['d_model']}, {results['config']['layers']} layers, "
                 f"{results['config']['threads']} threads")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    atomic_savefig(fig, path)


def main(argv=None):
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    max_len = max(args.contexts[-1] + args.steps + 1, args.gen + 16, args.gen_long + 16)
    rng = torch.Generator().manual_seed(args.seed)
    results = {"config": {**vars(args), "max_len": max_len, "torch": torch.__version__,
                          "machine": platform.processor() or platform.machine()},
               "latency": {}, "generation": [], "long": []}

    cells = [(a, m, c) for a in args.archs for m in methods_of(a) for c in args.contexts
             if m != "recompute" or c <= args.recompute_max]
    n_long = len(args.long_batches) if args.gen_long and "tmm" in args.archs else 0
    bar = Progress(len(cells) + len(args.archs) + n_long, "decode")
    slow = set()
    for arch in args.archs:
        model = build(arch, args, max_len)
        for method in methods_of(arch):
            rows = results["latency"].setdefault((arch, method), [])
            for c in args.contexts:
                if method == "recompute" and c > args.recompute_max:
                    continue
                if (arch, method) in slow:
                    rows.append({"context": c, "skipped": f"prefill over {args.max_prefill_s} s at a shorter context"})
                else:
                    prefill, step = time_context(model, method, c, 2 if method == "recompute" else args.steps, rng)
                    rows.append({"context": c, "prefill_s": prefill, "step_s": step})
                    if prefill > args.max_prefill_s:
                        slow.add((arch, method))
                bar.update(1, model=arch, method=method, ctx=c)
        # tokens/s of a whole generation from a short prompt, each exact method
        prompt = torch.randint(0, args.vocab, (16,), generator=rng).tolist()
        for method in [m for m in methods_of(arch) if m != "recompute"]:
            t0 = time.perf_counter()
            model.generate(prompt, args.gen, temperature=0, method=method)
            wall = time.perf_counter() - t0
            results["generation"].append({"arch": arch, "method": method, "tokens": args.gen, "seconds": wall,
                                          "tokens_per_s": args.gen / wall})
        bar.update(1, model=arch, method="generate")
        if arch == "tmm" and args.gen_long:
            for batch in args.long_batches:
                results["long"].append(long_generation(model, args, batch, rng))
                bar.update(1, model=arch, method=f"long x{batch}")
        del model
    bar.close()

    results["latency"] = {f"{a}/{m}": rows for (a, m), rows in results["latency"].items()}
    results["targets"] = targets(results)
    text = tables(results)
    print(text)
    atomic_write_json(out / "results.json", results)
    atomic_write_text(out / "table.md", text)
    plot({**results, "latency": {tuple(k.split("/")): [r for r in v if "step_s" in r]
                                 for k, v in results["latency"].items()}}, out / "latency.png")
    print(f"\nwrote {out}/results.json, table.md, latency.png")


def long_generation(model, args, batch, rng):
    """Greedy generation of --gen-long tokens for `batch` prompts, cached vs fast."""
    prompts = torch.randint(0, args.vocab, (batch, 16), generator=rng).tolist()
    runs = {}
    for method in ("cached", "fast"):
        t0 = time.perf_counter()
        g = model.generate(prompts, args.gen_long, temperature=0, method=method)
        runs[method] = (time.perf_counter() - t0, g["tokens"])
    return {"arch": "tmm", "batch": batch, "tokens": args.gen_long, "cached_s": runs["cached"][0],
            "fast_s": runs["fast"][0], "speedup": runs["cached"][0] / runs["fast"][0],
            "identical_tokens": runs["cached"][1] == runs["fast"][1]}


def cell(results, key, context):
    for r in results["latency"].get(key, []):
        if r["context"] == context and "step_s" in r:
            return r
    return None


def targets(results):
    t = {}
    cached, recompute = cell(results, "tmm/cached", 4096), cell(results, "tmm/recompute", 4096)
    if cached and recompute:
        ratio = recompute["step_s"] / cached["step_s"]
        t["tmm cached vs recompute per token at context 4096 (target >= 20x)"] = {"ratio": ratio, "met": ratio >= 20}
    for lr in results["long"]:
        t[f"tmm fast vs cached, {lr['tokens']} tokens, batch {lr['batch']} (target >= 3x, identical tokens)"] = {
            "ratio": lr["speedup"], "identical": lr["identical_tokens"],
            "met": lr["speedup"] >= 3 and lr["identical_tokens"]}
    return t


def tables(results):
    contexts = results["config"]["contexts"]
    lines = ["## Per-token decode latency (ms; prefill s in parentheses)", "",
             "| model / method | " + " | ".join(str(c) for c in contexts) + " |",
             "|---|" + "---:|" * len(contexts)]
    for key, rows in results["latency"].items():
        by = {r["context"]: r for r in rows}
        cells = []
        for c in contexts:
            r = by.get(c)
            cells.append("-" if r is None or "step_s" not in r else f"{1e3 * r['step_s']:.2f} ({r['prefill_s']:.2f})")
        lines.append(f"| {key} | " + " | ".join(cells) + " |")
    lines += ["", f"## Generation of {results['config']['gen']} tokens (16-token prompt, greedy)", "",
              "| model | method | seconds | tokens/s |", "|---|---|---:|---:|"]
    for g in results["generation"]:
        lines.append(f"| {g['arch']} | {g['method']} | {g['seconds']:.2f} | {g['tokens_per_s']:.1f} |")
    if results["long"]:
        lines += ["", "## TMM, long generation: cached vs fast (greedy, 16-token prompts)", "",
                  "| batch | tokens | cached s | fast s | speedup | identical tokens |", "|---:|---:|---:|---:|---:|---|"]
        for lr in results["long"]:
            lines.append(f"| {lr['batch']} | {lr['tokens']} | {lr['cached_s']:.1f} | {lr['fast_s']:.1f} | "
                         f"{lr['speedup']:.2f}x | {lr['identical_tokens']} |")
    lines += ["", "## Targets", ""]
    for name, v in results["targets"].items():
        lines.append(f"- {name}: {v['ratio']:.1f}x, {'met' if v['met'] else 'missed'}")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
