#!/usr/bin/env python3
"""Baseline comparison: trains several architectures on one task, matched by
parameter count, and writes tables and plots.

    python scripts/compare.py                      # the default (scripts/run.sh)
    python scripts/compare.py --task mqar --num-kv-pairs 8 --steps 2000
    python scripts/compare.py --archs tmm,transformer --steps 500 --lr 3e-3
    python scripts/compare.py --configs models/tmm-tiny.json,models/hyena-tiny.json --steps 20

With no arguments it runs the copy task (n = 32 random tokens written twice,
so sequences of 64, scored on the second half) on the ``<arch>-cpu-small``
configs of TMM, Transformer, Hyena and Mamba2 (about 1.0-1.6 M parameters
each), batch 16, within a total time budget of 8 minutes, so that the whole
run, model builds and plots included, ends within 10 minutes on 2 cores.

Models. Each config (``--archs`` picks ``models/<arch>-cpu-small.json``;
``--configs`` takes config names or JSON paths instead) is read as a dict and
two keys are overridden before ``tmm.models.build``: ``vocab_size`` =
the task's vocabulary and ``max_len`` = the task's sequence length
(``--max-len config`` keeps the config's value when it is long enough). For
TMM, ``max_len`` is the Toeplitz length, so its parameter count depends on it.
Every model is initialised after ``torch.manual_seed(--seed)``, and every
architecture sees the same training batches and the same held-out batches.

Steps. ``--steps N`` trains every architecture for N steps (same tokens for
all). Without it, a quick timing of a few steps of each architecture sizes a
common step count that fits the time budget. The budget (``--time-budget-min``,
default 8 when ``--steps`` is not given, none otherwise) is shared among the
architectures in proportion to their measured step times, and re-shared as
each one finishes; an architecture that runs out of its share stops early
(after a final evaluation) and the summary says so.

Training is ``tmm.train.train``: AdamW, linear warm-up then linear decay,
gradient clipping at 1.0, evaluation on a fixed held-out set; a non-finite
loss, gradient or updated parameter stops that architecture with a message
naming the step and the tensor, and the run carries on with the next one.

Output, in ``--out`` (default ``results/<task>-<timestamp>/`` under the
repository root):

  metrics.jsonl  one JSON row per evaluation per architecture (arch, config,
                 params, step, tokens, wall_s, train_loss, eval_loss,
                 eval_acc, flops_est, lr), appended and flushed as they come
  config.json    the arguments, the task, each model's full config and
                 parameter count, the git revision (and whether the tree was
                 dirty), torch version, machine and its load
  summary.md     the results table and a one-line verdict
  summary.json   the same numbers, machine-readable
  vs_steps.png, vs_wall.png, vs_flops.png
                 eval loss and eval accuracy against steps, training
                 wall-clock and estimated FLOPs, one line per architecture

Every file but metrics.jsonl is written atomically (a temporary file, then
os.replace), and rewritten after each architecture, so an interrupted run
leaves a consistent partial report. The summary table is printed last.

Checkpoints and resume. ``--checkpoint-every N`` writes a training
checkpoint of each architecture every N steps and at its end into
``<out>/checkpoints/<arch>/`` (tmm.checkpointing: model, optimizer, step,
RNG states, metrics; crash-safe). ``--resume --out <out>`` continues an
interrupted run there: the same command line is required (the runtime
options --threads, --no-progress, --checkpoint-every, --no-nan-guard,
--device may change), the step count, warm-up and evaluation cadence are
the saved ones, finished architectures are not retrained, metrics.jsonl is
rewritten to the rows of each architecture's newest checkpoint (the rows
logged after it are recomputed, so no row appears twice) and training
continues from there. On the CPU the continued losses are bitwise those of
an uninterrupted run.

Numerical guard (above): on by default, ``--no-nan-guard`` turns it off.

Distributed: ``torchrun --nproc_per_node K scripts/compare.py ...`` trains
each architecture with DistributedDataParallel (gloo on the CPU, NCCL with
``--device cuda``, one GPU per process); every rank takes its shard of the
global batch ``--batch-size`` from the same seeded task generator, and only
rank 0 writes files, checkpoints and progress. ``--threads`` defaults to the
CPUs divided among the local processes.
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

# OpenMP workers that sleep when idle instead of spinning: on a machine whose
# cores are shared with other jobs, spinning workers made 2-thread training
# steps 2-20x slower than 1 thread (measured on 2 cores); passive ones cost
# little when the machine is idle. Read once, when torch loads OpenMP, so it
# only takes effect when this script is what imports torch; an explicit
# OMP_WAIT_POLICY in the environment wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch  # noqa: E402

import tmm.models  # noqa: E402
from tmm import checkpointing  # noqa: E402
from tmm.files import atomic_savefig, atomic_write_json, atomic_write_text  # noqa: E402
from tmm.train import NonFiniteError, TrainConfig, flops_per_token, train  # noqa: E402

DEFAULT_ARCHS = "tmm,transformer,hyena,mamba2"
DEFAULT_BUDGET_MIN = 8.0  # when --steps is not given
LEARNED = 0.9  # the verdict's accuracy threshold
# Options that may differ when a run is resumed: they change how, not what, it computes.
RUNTIME_ARGS = {"threads", "no_progress", "resume", "out", "checkpoint_every", "no_nan_guard", "device"}


# ---------------------------------------------------------------- arguments


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        description="Train architectures matched by parameter count on one task; write tables and plots.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--task", default="copy", choices=["copy", "mqar", "lm"])
    p.add_argument("--n", type=int, default=None, help="copy: tokens written twice (default 32)")
    p.add_argument("--num-kv-pairs", type=int, default=None, help="mqar: key-value pairs (default: the task's)")
    p.add_argument("--corpus", default=None, help="lm: a text/JSONL/Parquet file or folder (default: the KJV corpus)")
    p.add_argument("--tokenizer", choices=["byte", "bpe"], default=None, help="lm: tokenizer (default byte)")
    p.add_argument(
        "--task-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="any other option of tmm.tasks.make (VALUE parsed as JSON when it can be); repeatable",
    )
    p.add_argument("--archs", default=DEFAULT_ARCHS, help="comma-separated; uses models/<arch>-cpu-small.json")
    p.add_argument("--configs", nargs="+", default=None, help="config names or JSON paths (comma- or space-separated); replaces --archs")
    p.add_argument("--max-len", choices=["task", "config"], default="task",
                   help="max_len of every model: the task's sequence length, or the config's when >= it")
    p.add_argument("--steps", type=int, default=None, help="training steps per architecture (default: sized to the time budget)")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--betas", type=float, nargs=2, default=(0.9, 0.95))
    p.add_argument("--warmup", type=int, default=None, help="warm-up steps (default: 10%% of the steps)")
    p.add_argument("--eval-every", type=int, default=None, help="default: about 20 evaluations per run")
    p.add_argument("--eval-batches", type=int, default=4, help="held-out batches (of --batch-size) per evaluation")
    p.add_argument("--threads", type=int, default=None,
                   help="torch.set_num_threads (default: the CPUs divided among the local processes)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--time-budget-min", type=float, default=None,
                   help=f"total training time for all architectures (default {DEFAULT_BUDGET_MIN:g} without --steps, else none)")
    p.add_argument("--out", default=None, help="output folder (default results/<task>-<timestamp>/)")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.add_argument("--checkpoint-every", type=int, default=0, metavar="N",
                   help="write a training checkpoint every N steps and at the end (0: none)")
    p.add_argument("--resume", action="store_true",
                   help="continue the interrupted run in --out from its newest checkpoints")
    p.add_argument("--no-nan-guard", action="store_true",
                   help="do not stop at the first non-finite loss, gradient or parameter")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"],
                   help="where to train (cuda: under torchrun, the GPU of each process's LOCAL_RANK)")
    args = p.parse_args(argv)
    if args.configs:
        args.configs = [c for item in args.configs for c in item.split(",") if c]
    for name in ("steps", "batch_size", "eval_every", "eval_batches", "threads"):
        v = getattr(args, name)
        if v is not None and v < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1, got {v}")
    if args.time_budget_min is not None and args.time_budget_min <= 0:
        p.error("--time-budget-min must be > 0")
    if args.checkpoint_every < 0:
        p.error(f"--checkpoint-every must be >= 0, got {args.checkpoint_every}")
    if args.resume and not args.out:
        p.error("--resume needs --out, the folder of the run to continue")
    if args.threads is None:
        local = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
        args.threads = max(1, (os.cpu_count() or 1) // max(local, 1))
    return args


def task_options(args):
    opts = {}
    if args.task == "copy":
        opts["n"] = 32 if args.n is None else args.n
    elif args.n is not None:
        raise SystemExit("--n applies to --task copy only")
    if args.task == "mqar" and args.num_kv_pairs is not None:
        opts["num_kv_pairs"] = args.num_kv_pairs
    elif args.task != "mqar" and args.num_kv_pairs is not None:
        raise SystemExit("--num-kv-pairs applies to --task mqar only")
    for key in ("corpus", "tokenizer"):
        if getattr(args, key) is not None:
            if args.task != "lm":
                raise SystemExit(f"--{key} applies to --task lm only")
            opts[key] = getattr(args, key)
    for item in args.task_option:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"--task-option expects KEY=VALUE, got '{item}'")
        try:
            opts[key] = json.loads(value)
        except json.JSONDecodeError:
            opts[key] = value
    return opts


# ---------------------------------------------------------------- helpers


def check_resumable(saved_args, args):
    """SystemExit naming every option of the command line that differs from
    the run being resumed (runtime options excepted)."""
    norm = lambda v: list(v) if isinstance(v, (list, tuple)) else v  # noqa: E731  (JSON made tuples lists)
    now = vars(args)
    keys = sorted(k for k in set(saved_args) & set(now) if k not in RUNTIME_ARGS)
    diff = [f"--{k.replace('_', '-')}: the run had {saved_args[k]!r}, this command {now[k]!r}"
            for k in keys if norm(saved_args[k]) != norm(now[k])]
    if diff:
        raise SystemExit("compare.py --resume: give the command line of the run being resumed; it differs in "
                         + "; ".join(diff))


def init_distributed(device):
    """(rank, world size, torch.device) under torchrun (WORLD_SIZE > 1: a
    process group, gloo on the CPU, NCCL on CUDA), else (0, 1, device)."""
    import torch.distributed as dist

    world = int(os.environ.get("WORLD_SIZE", "1"))
    if device == "cuda":
        if not torch.cuda.is_available():
            raise SystemExit("compare.py: --device cuda, but torch sees no CUDA device")
        dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(dev)
    else:
        dev = torch.device("cpu")
    if world <= 1:
        return 0, 1, dev
    if not dist.is_initialized():
        dist.init_process_group("nccl" if dev.type == "cuda" else "gloo")
    return dist.get_rank(), dist.get_world_size(), dev


def broadcast(obj, world):
    """Rank 0's `obj` on every rank (what rank 0 alone decided: folder, steps)."""
    if world <= 1:
        return obj
    import torch.distributed as dist

    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def metrics_line(run, row):
    return json.dumps({"arch": run["label"], "config": run["config_name"], "params": run["params"], **row}) + "\n"


def read_config(name_or_path):
    """(config dict, short name) for a config name in models/ or a JSON path."""
    path = Path(name_or_path)
    if not path.is_file():
        folder = tmm.models.models_dir()
        cand = folder / f"{name_or_path}.json" if folder is not None else None
        if cand is None or not cand.is_file():
            known = ", ".join(tmm.models.list_configs())
            raise SystemExit(f"compare.py: no config file or name '{name_or_path}' (known names: {known})")
        path = cand
    with open(path) as f:
        cfg = json.load(f)
    if not isinstance(cfg, dict) or "arch" not in cfg:
        raise SystemExit(f"compare.py: {path} is not a model config (a JSON object with \"arch\")")
    return cfg, path.stem


def git_info():
    def git(*a):
        return subprocess.run(["git", *a], cwd=REPO, capture_output=True, text=True, timeout=20)

    try:
        rev = git("rev-parse", "HEAD")
        if rev.returncode != 0:
            return {"revision": None, "dirty": None}
        status = git("status", "--porcelain", "--untracked-files=no")
        return {"revision": rev.stdout.strip(), "dirty": bool(status.stdout.strip())}
    except (OSError, subprocess.SubprocessError):
        return {"revision": None, "dirty": None}


def machine_info(threads):
    info = {
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cpu_count": os.cpu_count(),
        "torch_threads": threads,
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
        "hostname": platform.node(),
    }
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        info["loadavg_at_start"] = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        pass
    return info


def default_out(task_name):
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    out = REPO / "results" / f"{task_name}-{stamp}"
    k = 1
    while out.exists():
        k += 1
        out = REPO / "results" / f"{task_name}-{stamp}-{k}"
    return out


def time_steps(cfg, task, batch_size, seed, n=3, device="cpu"):
    """Seconds per training step (forward, backward, AdamW) of a throwaway
    model: the median of n timed steps after one untimed."""
    torch.manual_seed(seed)
    model = tmm.models.build(cfg).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    gen = torch.Generator().manual_seed(seed + 7)
    sync = torch.cuda.synchronize if torch.device(device).type == "cuda" else (lambda: None)
    times = []
    for i in range(n + 1):
        ids, labels = (t.to(device) for t in task.batch(batch_size, gen))
        sync()
        t0 = time.perf_counter()
        loss = model(ids, labels=labels).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sync()
        if i:
            times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2]


def fmt_int(n):
    return f"{n:,}"


def fmt_num(x, nd=3):
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "-"
    return f"{x:.{nd}f}"


def fmt_flops(x):
    if x is None:
        return "-"
    for unit, scale in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6)):
        if x >= scale:
            return f"{x / scale:.2f} {unit}"
    return f"{x:.0f}"


# ---------------------------------------------------------------- report


def run_summary(run):
    rows = run["rows"]
    final = rows[-1] if rows else {}
    best = max((r["eval_acc"] for r in rows), default=None)
    reach = next((r for r in rows if r["eval_acc"] >= LEARNED), None)
    return {
        "arch": run["label"],
        "config": run["config_name"],
        "params": run["params"],
        "final_eval_loss": final.get("eval_loss"),
        "final_acc": final.get("eval_acc"),
        "best_acc": best,
        "steps": run.get("steps", final.get("step", 0)),
        "tokens": run.get("tokens", final.get("tokens", 0)),
        "wall_s": run.get("wall_s", final.get("wall_s", 0.0)),
        "flops_est": run.get("flops_est", final.get("flops_est", 0.0)),
        "steps_to_learned": reach["step"] if reach else None,
        "status": run["status"],
        "note": run.get("note"),
    }


def chance_of(task):
    c = getattr(task, "chance", None)
    return c if isinstance(c, float) and math.isfinite(c) else None


def verdict(summaries, task):
    done = [s for s in summaries if s["final_acc"] is not None]
    if not done:
        return "No architecture finished an evaluation."
    learned = [s for s in done if s["final_acc"] >= LEARNED]
    failed = [s for s in done if s["final_acc"] < LEARNED]
    c = chance_of(task)
    chance = f"; chance is {c:.3f}" if c is not None else ""
    if learned:
        fastest = min(learned, key=lambda s: (s["steps_to_learned"] or 0, s["wall_s"]))
        parts = [
            f"Learned {task.name} (final accuracy >= {LEARNED:g}): "
            + ", ".join(f"{s['arch']} ({s['final_acc']:.3f})" for s in learned)
            + f"; first to reach it: {fastest['arch']} at step {fastest['steps_to_learned']}"
        ]
    else:
        parts = [f"No architecture learned {task.name} (final accuracy >= {LEARNED:g})"]
    if failed:
        parts.append("did not: " + ", ".join(f"{s['arch']} ({s['final_acc']:.3f})" for s in failed))
    return "; ".join(parts) + chance + "."


HEADER = [
    "arch", "params", "final eval loss", "final acc", "best acc", f"steps to {LEARNED:g} acc",
    "steps", "tokens", "train wall s", "est. FLOPs",
]


def table_rows(summaries):
    out = []
    for s in summaries:
        out.append([
            s["arch"] + ("" if s["status"] == "done" else f" ({s['status']})"),
            fmt_int(s["params"]),
            fmt_num(s["final_eval_loss"]),
            fmt_num(s["final_acc"]),
            fmt_num(s["best_acc"]),
            str(s["steps_to_learned"]) if s["steps_to_learned"] is not None else "-",
            str(s["steps"]),
            fmt_int(s["tokens"]),
            f"{s['wall_s']:.1f}",
            fmt_flops(s["flops_est"]),
        ])
    return out


def markdown_table(summaries):
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(r) + " |" for r in table_rows(summaries)]
    return "\n".join(lines)


def text_table(summaries):
    rows = [HEADER] + table_rows(summaries)
    widths = [max(len(r[i]) for r in rows) for i in range(len(HEADER))]
    fmt = lambda r: "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))  # noqa: E731
    return "\n".join([fmt(rows[0]), "  ".join("-" * w for w in widths)] + [fmt(r) for r in rows[1:]])


def write_summary(out, runs, task, meta, notes):
    summaries = [run_summary(r) for r in runs]
    v = verdict(summaries, task)
    md = [
        f"# {task.name}: {', '.join(s['arch'] for s in summaries)}",
        "",
        f"Task `{task.name}` {json.dumps(task.options)}: sequence length {task.seq_len}, "
        f"vocabulary {task.vocab_size}. Batch {meta['batch_size']}, lr {meta['lr']:g}, "
        f"seed {meta['seed']}, {meta['threads']} threads. Accuracy is the task's metric on "
        f"{meta['eval_sequences']} held-out sequences.",
        "",
        markdown_table(summaries),
        "",
        f"**Verdict:** {v}",
        "",
        "Train wall s: time in training steps (evaluation excluded). Est. FLOPs: 6 x parameters x tokens "
        "plus a sequence-mixing term (tmm.train.flops_per_token).",
    ]
    all_notes = list(notes) + [f"{s['arch']}: {s['note']}" for s in summaries if s["note"]]
    if all_notes:
        md += ["", "Notes:", ""] + [f"- {n}" for n in all_notes]
    plots = [p for p in ("vs_steps.png", "vs_wall.png", "vs_flops.png") if (out / p).exists()]
    if plots:
        md += [""] + [f"![{p}]({p})" for p in plots]
    atomic_write_text(out / "summary.md", "\n".join(md) + "\n")
    atomic_write_json(out / "summary.json", {"task": task.name, "verdict": v, "notes": all_notes, "runs": summaries})
    return summaries, v, all_notes


def write_plots(out, runs, task):
    """vs_steps.png, vs_wall.png, vs_flops.png; False when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    axes_x = [("step", "training steps", "vs_steps.png"), ("wall_s", "training wall-clock (s)", "vs_wall.png"),
              ("flops_est", "estimated training FLOPs", "vs_flops.png")]
    for key, xlabel, fname in axes_x:
        fig, (ax_loss, ax_acc) = plt.subplots(1, 2, figsize=(11, 4))
        for run in runs:
            rows = run["rows"]
            if not rows:
                continue
            xs = [r[key] for r in rows]
            label = f"{run['label']} ({run['params'] / 1e6:.2f}M)"
            ax_loss.plot(xs, [r["eval_loss"] for r in rows], marker=".", label=label)
            ax_acc.plot(xs, [r["eval_acc"] for r in rows], marker=".", label=label)
        ax_loss.set_ylabel("eval loss")
        ax_loss.set_yscale("log")
        ax_acc.set_ylabel("eval accuracy")
        ax_acc.set_ylim(-0.02, 1.02)
        if chance_of(task) is not None:
            ax_acc.axhline(chance_of(task), color="grey", linestyle=":", linewidth=1, label="chance")
        fig.suptitle(f"{task.name} {json.dumps(task.options)}", fontsize=9)
        for ax in (ax_loss, ax_acc):
            ax.set_xlabel(xlabel)
            ax.grid(True, alpha=0.3)
        ax_acc.legend(loc="best", fontsize=8)
        fig.tight_layout()
        atomic_savefig(fig, out / fname)
        plt.close(fig)
    return True


# ---------------------------------------------------------------- main


def main(argv=None):
    t_begin = time.monotonic()
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    rank, world, device = init_distributed(args.device)
    is_main = rank == 0
    if world > 1 and args.batch_size % world:
        raise SystemExit(f"compare.py: --batch-size {args.batch_size} does not divide among {world} processes")

    import tmm.tasks  # imported late: it is another module of the package

    task = tmm.tasks.make(args.task, **task_options(args))

    # Configs, adapted to the task, and the models' parameter counts.
    names = args.configs or [f"{a.strip()}-cpu-small" for a in args.archs.split(",") if a.strip()]
    if not names:
        raise SystemExit("compare.py: no architectures given")
    runs = []
    for name in names:
        cfg, short = read_config(name)
        cfg = dict(cfg)
        cfg["vocab_size"] = int(task.vocab_size)
        if args.max_len == "task" or int(cfg.get("max_len", 0)) < task.seq_len:
            cfg["max_len"] = int(task.seq_len)
        torch.manual_seed(args.seed)
        model = tmm.models.build(cfg)
        runs.append({"label": cfg["arch"], "config_name": short, "config": model.config,
                     "params": model.num_parameters(), "rows": [], "status": "pending"})
        del model
    labels = [r["label"] for r in runs]
    for r in runs:
        if labels.count(r["label"]) > 1:
            r["label"] = r["config_name"]

    out = broadcast(Path(args.out) if args.out else (default_out(task.name) if is_main else None), world)
    saved = None
    if args.resume and (out / "config.json").is_file():
        saved = json.loads((out / "config.json").read_text())
        check_resumable(saved.get("args", {}), args)
    if is_main:
        out.mkdir(parents=True, exist_ok=True)
        what = "resuming" if saved else "writing"
        print(f"compare.py: task {task.name} {json.dumps(task.options)} (seq_len {task.seq_len}, "
              f"vocab {task.vocab_size}); {what} {out}" + (f" ({world} processes)" if world > 1 else ""),
              file=sys.stderr)
        for r in runs:
            print(f"  {r['label']:<14} {r['config_name']:<24} {r['params']:>12,} parameters", file=sys.stderr)

    notes = []
    budget_s = args.time_budget_min * 60 if args.time_budget_min else (
        DEFAULT_BUDGET_MIN * 60 if args.steps is None else None)

    # Step count: given, sized by a quick timing to fit the budget (by rank 0),
    # or the resumed run's.
    est = None
    if saved is not None:
        steps, budget_s, est = saved["steps"], saved["time_budget_s"], saved["timed_step_s"]
        if est:
            notes.append(f"{steps} steps sized to the {budget_s / 60:g}-minute budget from timed steps: "
                         + ", ".join(f"{k} {v * 1000:.0f} ms" for k, v in est.items()))
    elif args.steps is None and not is_main:
        steps = None  # rank 0's, below
    elif args.steps is None:
        est = {}
        for r in runs:
            est[r["label"]] = time_steps(r["config"], task, args.batch_size, args.seed, device=device)
        # Per architecture: steps * t + evaluations (~22 of eval_batches forward
        # passes at ~1/3 of a step each); leave 15% for noise.
        evals_cost = 22 * args.eval_batches / 3
        steps = int(0.85 * budget_s / sum(est.values()) - evals_cost)
        steps = max(steps, 10)
        steps_note = (f"{steps} steps sized to the {budget_s / 60:g}-minute budget from timed steps: "
                      + ", ".join(f"{k} {v * 1000:.0f} ms" for k, v in est.items()))
        print(f"compare.py: {steps_note}", file=sys.stderr)
        notes.append(steps_note)
    else:
        steps = args.steps
    steps, est = broadcast((steps, est), world)
    eval_every = args.eval_every or max(1, steps // 20)
    warmup = args.warmup if args.warmup is not None else max(1, steps // 10)
    if saved is not None:
        eval_every, warmup = saved["eval_every"], saved["warmup"]
    try:
        load = os.getloadavg()[0]
        if load > 0.75 * (os.cpu_count() or 1) + 0.5:
            notes.append(f"the machine was loaded at the start (1-minute load average {load:.1f} on "
                         f"{os.cpu_count()} CPUs): wall times are inflated and noisy")
    except OSError:
        pass

    meta = {"batch_size": args.batch_size, "lr": args.lr, "seed": args.seed, "threads": args.threads,
            "eval_sequences": args.batch_size * args.eval_batches}
    config_json = {
        "args": vars(args),
        "task": {"name": task.name, "options": task.options, "seq_len": task.seq_len, "vocab_size": task.vocab_size},
        "steps": steps,
        "eval_every": eval_every,
        "warmup": warmup,
        "time_budget_s": budget_s,
        "timed_step_s": est,
        "models": [{"label": r["label"], "config_name": r["config_name"], "params": r["params"],
                    "flops_per_token": flops_per_token(r["config"], r["params"], task.seq_len),
                    "config": r["config"]} for r in runs],
        "git": git_info(),
        "machine": machine_info(args.threads),
        "command": [sys.executable, *sys.argv],
        "started": datetime.datetime.now().isoformat(timespec="seconds"),
        "world_size": world,
    }
    if saved is not None:  # the run's own record, plus when and where it was continued
        config_json = dict(saved)
        config_json.pop("finished", None)
        config_json.setdefault("resumed", []).append({
            "at": datetime.datetime.now().isoformat(timespec="seconds"), "git": git_info(),
            "machine": machine_info(args.threads), "command": [sys.executable, *sys.argv], "world_size": world})

    # A resumed run keeps, per architecture, the rows of its newest checkpoint
    # (rows logged after it are recomputed), and the training time already spent.
    ckpt_dirs = {r["label"]: out / "checkpoints" / r["label"] for r in runs}
    spent = {r["label"]: 0.0 for r in runs}
    if args.resume:
        for r in runs:
            path = checkpointing.latest(ckpt_dirs[r["label"]])
            if path is not None:
                state = checkpointing.read_state(path)
                r["rows"], spent[r["label"]] = list(state["rows"]), state["total_s"]
    if is_main:
        atomic_write_json(out / "config.json", config_json)
        if args.resume:
            atomic_write_text(out / "metrics.jsonl", "".join(metrics_line(r, row) for r in runs for row in r["rows"]))
    metrics = open(out / "metrics.jsonl", "a") if is_main else None
    t_train = time.monotonic() - sum(spent.values())
    interrupted = False
    try:
        for i, run in enumerate(runs):
            cap = None
            if budget_s is not None:
                left = budget_s - (time.monotonic() - t_train)
                rest = runs[i:]
                if est:
                    cap = left * est[run["label"]] / sum(est[r["label"]] for r in rest)
                else:
                    cap = left / len(rest)
                cap = max(cap, 1.0) + spent[run["label"]]  # train() counts a resumed run's earlier time too
            tcfg = TrainConfig(
                steps=steps, batch_size=args.batch_size, lr=args.lr, weight_decay=args.weight_decay,
                betas=tuple(args.betas), warmup=warmup, seed=args.seed, eval_every=eval_every,
                eval_batches=args.eval_batches, threads=args.threads, time_budget_s=cap,
                progress=not args.no_progress, desc=f"{run['label']:<11}",
                nan_guard=not args.no_nan_guard, checkpoint_dir=str(ckpt_dirs[run["label"]]),
                checkpoint_every=args.checkpoint_every, resume=args.resume,
            )

            def log(row, run=run):  # called on rank 0 only
                run["rows"].append(row)
                metrics.write(metrics_line(run, row))
                metrics.flush()

            torch.manual_seed(args.seed)
            model = tmm.models.build(run["config"]).to(device)
            run["status"] = "running"
            try:
                res = train(model, task, tcfg, log=log)
            except NonFiniteError as e:
                run["status"] = "diverged"
                run["note"] = str(e)
                run["steps"] = e.step - 1
                if is_main:
                    print(f"compare.py: {run['label']}: {e}", file=sys.stderr)
            else:
                run["status"] = "done" if res.stopped_early is None else "stopped"
                run["note"] = res.stopped_early
                run.update(steps=res.steps, tokens=res.tokens, wall_s=res.wall_s, flops_est=res.flops_est)
            del model
            if is_main:
                write_plots(out, runs, task)
                write_summary(out, runs, task, meta, notes)
    except KeyboardInterrupt:
        interrupted = True
        for run in runs:
            if run["status"] in ("running", "pending"):
                run["status"] = "interrupted"
        notes.append("interrupted (Ctrl-C)")
    finally:
        if metrics is not None:
            metrics.close()

    if not is_main:
        return 130 if interrupted else 0
    has_plots = write_plots(out, runs, task)
    if not has_plots:
        notes.append("no plots: matplotlib is not installed")
    total = time.monotonic() - t_begin
    notes.append(f"total wall time {total:.0f} s (timing, builds, training, evaluation, plots)")
    summaries, v, _ = write_summary(out, runs, task, meta, notes)
    config_json["finished"] = datetime.datetime.now().isoformat(timespec="seconds")
    config_json["total_wall_s"] = round(total, 1)
    atomic_write_json(out / "config.json", config_json)

    print(f"\nResults in {out}\n")
    print(text_table(summaries))
    print(f"\n{v}")
    return 130 if interrupted else 0


if __name__ == "__main__":
    try:
        code = main()
    finally:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            dist.destroy_process_group()
    sys.exit(code)
