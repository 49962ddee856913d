"""Distillation report (lab/bench/distill_report.py, docs/decoding.md): trained TMM
and Hyena kernels fitted by small state-space models for decode method
"distilled": kernel error, held-out loss and greedy agreement per order and
window (--part quality); per-token latency and state bytes against context
from the C++ decoder, vs cached and fast (--part latency: time it alone,
e.g. under flock -x on a shared machine).

    scripts/distill_report.py --part quality --out bench/results/distill
    flock -x /tmp/lock scripts/distill_report.py --part latency --out bench/results/distill
    scripts/distill_report.py --quick --out /tmp/d    # seconds: tiny models, a smoke test

Merges into --out/results.json; writes table.md and latency.png there (and
the plot to --plot when given).
"""
import argparse
import os
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # no spinning threads on a shared machine

import torch  # noqa: E402

from lab import REPO  # noqa: E402
from lab.bench import distill_report as report  # noqa: E402
from tmm.files import atomic_write_text  # noqa: E402


def ints(text):
    return [int(x) for x in text.split(",") if x]


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--part", choices=["quality", "latency", "all"], default="all")
    p.add_argument("--archs", default="tmm,hyena")
    p.add_argument("--tasks", default="copy,lm")
    p.add_argument("--train-steps", type=int, default=300)
    p.add_argument("--orders", default="4,8,16,32,64")
    p.add_argument("--windows", default="0,16,64")
    p.add_argument("--fit-steps", type=int, default=100, help="Adam steps of each fit")
    p.add_argument("--eval-batches", type=int, default=4)
    p.add_argument("--new-tokens", type=int, default=256, help="greedy tokens compared (at most the room left)")
    p.add_argument("--prompts", type=int, default=4)
    p.add_argument("--contexts", default="512,1024,2048,4096,8192,16384")
    p.add_argument("--latency-settings", default="16:16,64:64", help="order:window pairs timed")
    p.add_argument("--steps", type=int, default=16, help="decode steps timed per context (median)")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    p.add_argument("--cli", default=str(REPO / "build" / "bin" / "tmm"))
    p.add_argument("--quick", action="store_true", help="tiny models and settings (a smoke test, seconds)")
    p.add_argument("--out", required=True)
    p.add_argument("--plot", default=None, help="also write the latency plot here")
    args = p.parse_args(argv)
    if args.quick:
        args.train_steps, args.orders, args.windows, args.fit_steps = 5, "2,4", "0,4", 5
        args.eval_batches, args.new_tokens, args.prompts, args.contexts = 1, 16, 1, "64,128"
        args.latency_settings, args.steps = "4:4", 2
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    out = Path(args.out)
    archs, tasks = [a for a in args.archs.split(",") if a], [t for t in args.tasks.split(",") if t]
    results = {}
    if args.part in ("quality", "all"):
        for arch in archs:
            for task_name in tasks:
                model, task, train_s = report.train_model(arch, task_name, args.train_steps, quick=args.quick)
                q = report.quality(model, task, ints(args.orders), ints(args.windows), fit_steps=args.fit_steps,
                                   eval_batches=args.eval_batches, batch_size=8, new_tokens=args.new_tokens,
                                   prompts=args.prompts)
                q.update(train_steps=args.train_steps, train_s=train_s, config=model.config)
                results = report.merge(out / "results.json", {"quality": {f"{arch}-{task_name}": q}})
                print(f"{arch} {task_name}: trained {args.train_steps} steps in {train_s:.0f} s", flush=True)
    if args.part in ("latency", "all"):
        for arch in archs:
            for i, setting in enumerate(args.latency_settings.split(",")):
                order, window = map(int, setting.split(":"))
                methods = ["distilled"] if i else ["cached", "fast", "distilled"]
                rows = report.latency(args.cli, arch, ints(args.contexts), methods=methods, order=order,
                                      window=window, steps=args.steps, threads=args.threads, quick=args.quick)
                results = report.merge(out / "results.json", {"latency": rows})
                print(f"{arch} latency r={order} W={window}: {len(rows)} rows", flush=True)
    atomic_write_text(out / "table.md", report.table(results))
    report.plot(results, out / "latency.png")
    if args.plot:
        report.plot(results, args.plot)
    print(report.table(results))
    return 0

