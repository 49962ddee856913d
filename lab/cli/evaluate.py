"""Evaluates a tmm checkpoint on the paper's benchmarks with EleutherAI's
lm-eval harness and writes a table (tmm.eval; docs/training.md, "Evaluation").

    python scripts/evaluate.py CKPT_DIR                               # the paper's tasks (tmm.eval.PAPER_TASKS)
    python scripts/evaluate.py CKPT_DIR --tasks arc_easy,hellaswag --limit 200 --batch-size 32 --device cuda
    python scripts/evaluate.py CKPT_DIR --tasks my_task --include-path my_tasks/ --tokenizer shards/

CKPT_DIR: a tmm checkpoint folder, a training checkpoint folder (its newest
step), or a HuggingFace folder tmm.hf reads; ``--tokenizer`` when the
checkpoint has no tokenizer.json beside it (byte, a tokenizer.json, or the
shard folder the model was trained on). The harness downloads each task's
data set on first use (HF_DATASETS_OFFLINE=1 to forbid it); IFEval and
LongBench need the harness's extras (pip install "lm-eval[ifeval,longbench]").

Output in --out (default results/eval-<timestamp>/): results.md (the table:
task, metric, filter, n-shot, samples, value ± stderr), results.json (the
same rows, the harness's results and task configs, the settings, the
checkpoint), and with --log-samples the harness's per-sample outputs.
"""
import argparse
import json
import sys
import time
from pathlib import Path

from lab import REPO
from lab.bench.report import fresh_folder
from tmm.eval import PAPER_TASKS
from tmm.eval.report import json_summary, markdown, rows
from tmm.files import atomic_write_json, atomic_write_text


def parse_args(argv=None):
    p = argparse.ArgumentParser(description="Evaluate a tmm checkpoint with lm-eval; write a table.",
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("checkpoint", help="a tmm checkpoint folder (or training checkpoint folder, or HF folder)")
    p.add_argument("--tasks", default="paper",
                   help=f"comma-separated lm-eval task names; paper = {','.join(PAPER_TASKS)}")
    p.add_argument("--tokenizer", default=None, help="byte, a tokenizer.json, or a shard folder (default: found)")
    p.add_argument("--include-path", default=None, help="a folder of your own task YAMLs (lm-eval's --include_path)")
    p.add_argument("--only-include-path", action="store_true",
                   help="index only --include-path's tasks, not the harness's built-in ones (faster: those are "
                        "thousands of files)")
    p.add_argument("--device", default=None, help="cpu or cuda (default: cuda when available)")
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    p.add_argument("--batch-size", default="16", help="rows per forward, or auto")
    p.add_argument("--max-length", type=int, default=None, help="context length (default: the model's max_len)")
    p.add_argument("--num-fewshot", type=int, default=None, help="few-shot examples (default: each task's)")
    p.add_argument("--limit", type=float, default=None, help="examples per task (a fraction when < 1)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=None, help="output folder (default results/eval-<timestamp>/)")
    p.add_argument("--log-samples", action="store_true", help="also write the harness's per-sample outputs")
    return p.parse_args(argv)


def evaluate(args):
    """(results dict of lm_eval.simple_evaluate, the output folder)."""
    import lm_eval
    from lm_eval.tasks import TaskManager

    import tmm.eval.harness  # noqa: F401  registers "tmm"

    tasks = list(PAPER_TASKS) if args.tasks == "paper" else [t for t in args.tasks.split(",") if t]
    model_args = {"pretrained": args.checkpoint, "dtype": args.dtype, "seed": args.seed}
    for key in ("tokenizer", "device", "max_length"):
        if getattr(args, key) is not None:
            model_args[key] = getattr(args, key)
    if args.only_include_path and not args.include_path:
        raise SystemExit("evaluate.py: --only-include-path needs --include-path")
    manager = TaskManager(include_path=args.include_path, include_defaults=not args.only_include_path)
    batch = args.batch_size if args.batch_size == "auto" else int(args.batch_size)
    t0 = time.monotonic()
    results = lm_eval.simple_evaluate(model="tmm", model_args=model_args, tasks=tasks, num_fewshot=args.num_fewshot,
                                      batch_size=batch, limit=args.limit, task_manager=manager,
                                      log_samples=args.log_samples, random_seed=args.seed,
                                      numpy_random_seed=args.seed, torch_random_seed=args.seed,
                                      fewshot_random_seed=args.seed)
    out = Path(args.out) if args.out else fresh_folder(REPO / "results", "eval")
    out.mkdir(parents=True, exist_ok=True)
    title = f"{args.checkpoint}: {', '.join(tasks)}"
    extra = {"checkpoint": str(args.checkpoint), "tasks": tasks, "settings": vars(args),
             "wall_s": round(time.monotonic() - t0, 1)}
    atomic_write_json(out / "results.json", json_summary(results, extra))
    atomic_write_text(out / "results.md", markdown(rows(results), title))
    if args.log_samples and results.get("samples"):
        atomic_write_text(out / "samples.json", json.dumps(results["samples"], default=str, indent=1))
    return results, out


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        results, out = evaluate(args)
    except ImportError as e:
        sys.exit(f"evaluate.py: {e}")
    print((out / "results.md").read_text())
    print(f"written to {out}")
    return 0

