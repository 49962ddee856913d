"""The distillation report (scripts/distill_report.py, docs/decoding.md): how
well trained TMM and Hyena kernels distil into small state-space models
(decode method "distilled"), what it costs in quality, and what it saves in
per-token latency and state memory against the exact decoders.

Quality (``quality``): small models trained briefly on the copy task and on
the default corpus (byte LM); for each order r and window W, the kernels'
relative L2 error, the held-out loss / accuracy (bits per byte for the LM) of
the distilled model against the exact one, and greedy agreement with the
exact decoder: teacher-forced (the distilled decoder's argmax along the exact
greedy continuation) and free-running (the first position where the two
greedy continuations differ). The distilled model's loss is its own forward:
a prefill of the whole window with decode method "distilled" runs the
causal convolution with the distilled kernels.

Speed and memory (``latency``): ``tmm bench-decode`` (the C++ decoder) on
untrained models of the same shapes with max_len covering the contexts:
per-token median latency and the state's bytes, measured on its tensors.
"""
import json
import os
import re
import subprocess
import tempfile
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from tmm.files import atomic_write_json
from tmm.tables import markdown_table
from .report import NO_PLOTS, pyplot, save_plot

MODELS = {
    "tmm": {"arch": "tmm", "d_model": 64, "n_layers": 2, "heads": 4},
    "hyena": {"arch": "hyena", "d_model": 64, "n_layers": 2, "filter_order": 32},
}
TASKS = {"copy": {"n": 64, "vocab": 16}, "lm": {"seq_len": 384}}


def _task(name, quick):
    from tmm import tasks

    opts = dict(TASKS[name])
    if quick:
        opts = {"n": 16, "vocab": 8} if name == "copy" else {"seq_len": 96, "max_bytes": 400_000}
    return tasks.make(name, **opts)


def train_model(arch, task_name, steps, seed=0, quick=False):
    """A small model of ``arch`` trained ``steps`` steps on the task: (model, task, train seconds)."""
    from tmm import models, train

    task = _task(task_name, quick)
    config = dict(MODELS[arch], vocab_size=task.vocab_size, max_len=task.seq_len)
    if quick:
        config.update(d_model=24 if arch == "hyena" else 16, n_layers=1)
        if arch == "hyena":
            config["filter_order"] = 8
    torch.manual_seed(seed)
    model = models.build(config)
    cfg = train.TrainConfig(steps=steps, batch_size=16, lr=3e-3, warmup=max(1, steps // 10),
                            eval_every=max(steps, 1), eval_batches=2, progress=False, seed=seed)
    start = time.perf_counter()
    train.train(model, task, cfg)
    return model.eval(), task, time.perf_counter() - start


def _eval_set(task, batches, batch_size, seed):
    g = torch.Generator().manual_seed(seed)
    sample = task.eval_batch if hasattr(task, "eval_batch") else task.batch
    return [sample(batch_size, g) for _ in range(batches)]


def _logits(model, ids, method):
    """The logits of the whole window: forward for "exact", one distilled prefill otherwise."""
    with torch.no_grad():
        if method == "exact":
            return model(ids)
        state = model.start_decoding(ids.shape[0], ids.shape[1], method=method)
        return model.decode(state, ids)


def _metrics(model, task, eval_set, method):
    losses, accs = [], []
    for ids, labels in eval_set:
        logits = _logits(model, ids, method)
        losses.append(float(F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=-100)))
        accs.append(task.accuracy(logits, labels))
    loss = sum(losses) / len(losses)
    out = {"loss": loss, "acc": sum(accs) / len(accs)}
    if hasattr(task, "bits_per_byte"):
        out["bpb"] = task.bits_per_byte(loss, eval_set)
    return out


def _greedy(model, prompt, new, method):
    return model.generate(prompt, max_new_tokens=new, temperature=0, method=method)["tokens"]


def _agreement(model, prompt, exact_tokens, method):
    """Teacher-forced argmax agreement of `method` along the exact greedy continuation."""
    seq = torch.tensor([list(prompt) + list(exact_tokens)])
    logits = _logits(model, seq[:, :-1], method)
    pred = logits[0, len(prompt) - 1:].argmax(-1)
    return float((pred == torch.tensor(exact_tokens)).float().mean())


def quality(model, task, orders, windows, *, fit_steps, eval_batches, batch_size, new_tokens, prompts, seed=0):
    """Rows of kernel error, held-out metrics and greedy agreement for each (order, window)."""
    from tmm import distill

    eval_set = _eval_set(task, eval_batches, batch_size, seed + 1)
    exact = _metrics(model, task, eval_set, "exact")
    # Prompts: the start of held-out windows (the copy task: its first copy).
    prompt_len = task.seq_len // 2 if task.name == "copy" else max(1, min(64, task.seq_len - new_tokens))
    new = min(new_tokens, task.seq_len - prompt_len)
    prompt_ids = [eval_set[i % len(eval_set)][0][i // len(eval_set)][:prompt_len].tolist() for i in range(prompts)]
    exact_tokens = [_greedy(model, p, new, "cached") for p in prompt_ids]
    rows = []
    for r in orders:
        for w in windows:
            start = time.perf_counter()
            d = distill.distill(model, order=r, window=w, steps=fit_steps)
            fit_s = time.perf_counter() - start
            errors = torch.cat([d.kernel(n)["error"].flatten() for n in d.names()])
            radius = max(float(d.kernel(n)["lambda"].abs().max()) for n in d.names())
            got = _metrics(model, task, eval_set, "distilled")
            agree, diverge = [], []
            for p, ref in zip(prompt_ids, exact_tokens):
                agree.append(_agreement(model, p, ref, "distilled"))
                mine = _greedy(model, p, new, "distilled")
                diverge.append(next((i for i, (a, b) in enumerate(zip(mine, ref)) if a != b), len(ref)))
            rows.append({
                "order": r, "window": w, "fit_s": fit_s,
                "kernel_error_mean": float(errors.mean()), "kernel_error_median": float(errors.median()),
                "kernel_error_max": float(errors.max()), "max_radius": radius,
                **{f"distilled_{k}": v for k, v in got.items()},
                "greedy_agreement": sum(agree) / len(agree),
                "first_divergence_mean": sum(diverge) / len(diverge), "generated": new,
            })
    distill.attach(model, None)
    return {"exact": exact, "rows": rows}


_ROW = re.compile(r"^(\w+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\d+)\s*$")


def latency(cli, arch, contexts, *, methods, order, window, steps, threads, fit_steps=0, quick=False):
    """``tmm bench-decode`` on an untrained ``arch`` model: rows (method, context, prefill ms, ms/token, bytes)."""
    config = dict(MODELS[arch], vocab_size=256, max_len=max(contexts) + steps + 1)
    if quick:
        config.update(d_model=24 if arch == "hyena" else 16, n_layers=1)
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(config, f)
    try:
        cmd = [str(cli), "bench-decode", "--config", f.name, "--contexts", ",".join(map(str, contexts)),
               "--methods", ",".join(methods), "--steps", str(steps), "--threads", str(threads),
               "--order", str(order), "--window", str(window), "--fit-steps", str(fit_steps)]
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    finally:
        os.unlink(f.name)
    rows = []
    for line in out.splitlines():
        m = _ROW.match(line.strip())
        if m:
            rows.append({"arch": arch, "method": m[1], "context": int(m[2]), "prefill_ms": float(m[3]),
                         "ms_per_token": float(m[4]), "state_bytes": int(m[6]), "order": order, "window": window})
    return rows


def table(results):
    """Markdown tables of the quality rows and the latency rows."""
    lines = []
    for key, q in sorted(results.get("quality", {}).items()):
        ex = q["exact"]
        metric = "bpb" if "bpb" in ex else "acc"
        head = ["r", "W", "kernel err median", "max", "loss", metric, "teacher-forced agreement", "first divergence"]
        rows = [[r["order"], r["window"], f"{r['kernel_error_median']:.3g}", f"{r['kernel_error_max']:.3g}",
                 f"{r['distilled_loss']:.3f}", f"{r['distilled_' + metric]:.3f}", f"{r['greedy_agreement']:.3f}",
                 f"{r['first_divergence_mean']:.0f} / {r['generated']}"] for r in q["rows"]]
        lines += [f"### {key} (exact: loss {ex['loss']:.3f}, {metric} {ex[metric]:.3f})", "",
                  markdown_table(head, rows, left=len(head)), ""]
    if results.get("latency"):
        head = ["arch", "method", "r", "W", "context", "ms/token", "state bytes"]
        rows = []
        for r in results["latency"]:
            rw = (r["order"], r["window"]) if r["method"] == "distilled" else ("", "")
            rows.append([r["arch"], r["method"], *rw, r["context"], f"{r['ms_per_token']:.3f}", f"{r['state_bytes']:,}"])
        lines.append(markdown_table(head, rows, left=len(head)))
    return "\n".join(lines) + "\n"


def plot(results, path):
    """Per-token latency and state bytes against context (one line per arch and method); written atomically.
    Returns why there is no plot, or None."""
    plt = pyplot()
    if plt is None:
        return NO_PLOTS
    rows = results.get("latency", [])
    if not rows:
        return "no plot: no latency rows"
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    keys = sorted({(r["arch"], r["method"], r["order"] if r["method"] == "distilled" else 0,
                    r["window"] if r["method"] == "distilled" else 0) for r in rows})
    for arch, method, order, window in keys:
        sel = sorted((r for r in rows if (r["arch"], r["method"]) == (arch, method)
                      and (method != "distilled" or (r["order"], r["window"]) == (order, window))),
                     key=lambda r: r["context"])
        label = f"{arch} {method}" + (f" r={order} W={window}" if method == "distilled" else "")
        style = "-" if arch == "tmm" else "--"
        axes[0].plot([r["context"] for r in sel], [r["ms_per_token"] for r in sel], style, marker="o", label=label)
        axes[1].plot([r["context"] for r in sel], [r["state_bytes"] for r in sel], style, marker="o", label=label)
    for ax, ylabel in zip(axes, ["ms per token (median)", "decode state bytes"]):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("context (tokens)")
        ax.set_ylabel(ylabel)
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    save_plot(fig, path, dpi=90)
    return None


def merge(path, update):
    """Reads the JSON results at ``path`` (if any), merges ``update`` in, writes it back."""
    path = Path(path)
    results = json.loads(path.read_text()) if path.exists() else {}
    for key, value in update.items():
        if isinstance(value, dict):
            results.setdefault(key, {}).update(value)
        elif isinstance(value, list):
            done = {(r["arch"], r["method"], r["context"], r["order"], r["window"]) for r in value}
            results[key] = [r for r in results.get(key, [])
                            if (r["arch"], r["method"], r["context"], r["order"], r["window"]) not in done] + value
        else:
            results[key] = value
    atomic_write_json(path, results, indent=1)
    return results


__all__ = ["train_model", "quality", "latency", "table", "plot", "merge", "MODELS", "TASKS"]
