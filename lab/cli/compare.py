"""Baseline comparison: trains several architectures on one task with the
same batches, each at its own learning rate, and writes tables, plots and,
with --checkpoint-every, checkpoints that serve (lab.experiments.compare).

    python scripts/compare.py                      # the default (scripts/run.sh)
    python scripts/compare.py --task mqar --num-kv-pairs 8 --steps 2000
    python scripts/compare.py --task shards --task-option path=shards/ --task-option seq_len=512 --steps 2000
    python scripts/compare.py --task lm --corpus my_text.txt --tokenizer bpe --steps 1000 --checkpoint-every 500
    python scripts/compare.py --archs tmm,transformer --steps 500 --lr 3e-3          # one rate for all
    python scripts/compare.py --archs tmm,transformer --steps 500 --lrs tmm=3e-2     # one model's rate
    python scripts/compare.py --configs models/tmm-tiny.json,models/hyena-tiny.json --steps 20
    python scripts/compare.py --ablation --steps 300      # the TMM variants of models/ablation/
    python scripts/compare.py --archs tmm --mixer my_pkg.MyMixer --steps 300   # your mixer in TMM's skeleton
    torchrun --nproc_per_node 2 scripts/compare.py --task-option n=32 ...   # DistributedDataParallel
    python scripts/compare.py --recipe paper --task-option path=shards/ --device cuda   # the authors' recipe
    python scripts/compare.py --recipe paper --task-option path=shards/ --dry-run       # its estimated cost only

With no arguments it runs the copy task (n = 32 random tokens written twice,
so sequences of 64, scored on the second half) on the ``<arch>-cpu-small``
configs of TMM, Transformer, Hyena and Mamba2 (1.1-1.6 M parameters: close
in size, not matched; the table gives each count), batch 16, each at its
architecture's learning rate (tmm 1e-2, transformer 3e-3, hyena 1e-2, mamba2
1e-2: the best of the claims' LM sweep of these configs; --lr sets one for
all, --lrs single models), within a total time budget of 8 minutes, so that
the whole run, model builds and plots included, ends within 10 minutes on 2
cores.

Output in --out (default results/<task>-<timestamp>/): metrics.jsonl,
config.json, summary.md, summary.json, vs_steps.png, vs_wall.png,
vs_flops.png. --checkpoint-every N writes training checkpoints,
checkpoints/<label>/step-N/, each a model folder (config.json,
model.safetensors, and tokenizer.json with a BPE) that tmm.models.load, C++
and `tmm generate --model` read (checkpoints/<label> stands for its newest
step); --resume
--out DIR continues an interrupted run with the same command line (the
runtime options --threads, --no-progress, --no-plots, --checkpoint-every,
--no-nan-guard, --device, --grad-accum may change). --grad-accum K trains
each step's --batch-size in K micro-batches per process (gradient
accumulation: the same step to float rounding, a K-th of the activations).
--precision bfloat16|float16, --compile, --activation-checkpointing, --fsdp,
--peak-tflops (the MFU column), --recipe paper and --dry-run:
docs/training.md. What each output holds, how steps are
sized to the budget, resume and distributed training: lab/experiments/compare.py
and docs/experiments.md.
"""
import argparse
import os
import sys

# OpenMP workers that sleep when idle instead of spinning: on a machine whose
# cores are shared with other jobs, spinning workers made 2-thread training
# steps 2-20x slower than 1 thread (measured on 2 cores); passive ones cost
# little when the machine is idle. Read once, when torch loads OpenMP, so it
# only takes effect when this command is what imports torch; an explicit
# OMP_WAIT_POLICY in the environment wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from lab import REPO  # noqa: E402
from lab.experiments.compare import (ARCH_LRS, DEFAULT_BUDGET_MIN, OTHER_LR, CompareSettings,  # noqa: E402
                                    run_comparison)
from lab.experiments.errors import SettingsError  # noqa: E402

D = CompareSettings()


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        description="Train several architectures on one task with the same batches, each at its own learning "
                    "rate; write tables, plots and checkpoints.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--task", default=D.task, choices=["copy", "mqar", "lm", "shards"],
                   help="shards: token shards of scripts/prepare_corpus.py --out (--task-option path=DIR)")
    p.add_argument("--n", type=int, default=None, help="copy: tokens written twice (default 32)")
    p.add_argument("--num-kv-pairs", type=int, default=None, help="mqar: key-value pairs (default: the task's)")
    p.add_argument("--corpus", default=None, help="lm: a text/JSONL/Parquet file or folder (default: the KJV corpus)")
    p.add_argument("--tokenizer", choices=["byte", "bpe"], default=None, help="lm: tokenizer (default byte)")
    p.add_argument("--task-option", action="append", default=[], metavar="KEY=VALUE",
                   help="any other option of tmm.tasks.make (VALUE parsed as JSON when it can be); repeatable")
    p.add_argument("--archs", default=D.archs, help="comma-separated; uses models/<arch>-cpu-small.json")
    p.add_argument("--configs", nargs="+", default=None,
                   help="config names or JSON paths (comma- or space-separated); replaces --archs")
    p.add_argument("--ablation", nargs="?", const="all", default=None, metavar="VARIANTS",
                   help="the TMM ablation: models/ablation/tmm-<variant>.json for each comma-separated variant "
                        "(all: heads4,flat,heads16,kernel8,expanded,frozen,masked); replaces --archs")
    p.add_argument("--mixer", default=None, metavar="IMPORT.PATH",
                   help="also train your own mixer (e.g. my_pkg.MyMixer: an nn.Module class or factory called as "
                        "factory(d_model, **kwargs), B x L x d -> B x L x d) in the blocks of --mixer-base "
                        "(tmm.nn.SequenceModel; docs/interop.md)")
    p.add_argument("--mixer-kwargs", default=None, metavar="JSON", help="the mixer's keyword arguments, a JSON object")
    p.add_argument("--mixer-inputs", default=None, metavar="NAMES",
                   help="the per-layer values the mixer takes, comma-separated, out of max_len, l_max, seq_len, "
                        "layer_idx, n_layers, device, dtype (default: the mixer's own mixer_inputs attribute, else "
                        "none)")
    p.add_argument("--mixer-base", default=D.mixer_base,
                   help="the zoo config whose sizes and block options the mixer's model takes")
    p.add_argument("--max-len", choices=["task", "config"], default=D.max_len,
                   help="max_len of every model: the task's sequence length, or the config's when >= it")
    p.add_argument("--steps", type=int, default=None,
                   help="training steps per architecture (default: sized to the time budget)")
    p.add_argument("--batch-size", type=int, default=D.batch_size)
    p.add_argument("--grad-accum", type=int, default=D.grad_accum,
                   help="micro-batches per step on each process: the gradients of --batch-size accumulated")
    p.add_argument("--lr", type=float, default=D.lr,
                   help="every model's learning rate (default: each architecture's: " +
                        ", ".join(f"{a} {lr:g}" for a, lr in ARCH_LRS.items()) + f", others {OTHER_LR:g})")
    p.add_argument("--lrs", default=D.lrs, metavar="LABEL=LR,...",
                   help="single models' learning rates, over --lr (labels: the table's, e.g. tmm=3e-2,hyena=3e-3)")
    p.add_argument("--weight-decay", type=float, default=D.weight_decay)
    p.add_argument("--betas", type=float, nargs=2, default=D.betas)
    p.add_argument("--warmup", type=int, default=None, help="warm-up steps (default: 10%% of the steps)")
    p.add_argument("--eval-every", type=int, default=None, help="default: about 20 evaluations per run")
    p.add_argument("--eval-batches", type=int, default=D.eval_batches,
                   help="held-out batches (of --batch-size) per evaluation")
    p.add_argument("--threads", type=int, default=None,
                   help="torch.set_num_threads (default: the CPUs divided among the local processes)")
    p.add_argument("--seed", type=int, default=D.seed)
    p.add_argument("--time-budget-min", type=float, default=None,
                   help=f"total training time for all architectures (default {DEFAULT_BUDGET_MIN:g} without "
                        "--steps, else none)")
    p.add_argument("--out", default=None, help="output folder (default results/<task>-<timestamp>/)")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.add_argument("--no-plots", action="store_true", help="no PNG plots (metrics and tables only)")
    p.add_argument("--checkpoint-every", type=int, default=0, metavar="N",
                   help="write a training checkpoint every N steps and at the end (0: none)")
    p.add_argument("--resume", action="store_true",
                   help="continue the interrupted run in --out from its newest checkpoints")
    p.add_argument("--no-nan-guard", action="store_true",
                   help="do not stop at the first non-finite loss, gradient or parameter")
    p.add_argument("--device", default=D.device, choices=["cpu", "cuda"],
                   help="where to train (cuda: under torchrun, the GPU of each process's LOCAL_RANK)")
    p.add_argument("--min-lr-ratio", type=float, default=D.min_lr_ratio,
                   help="the linear decay ends at this fraction of --lr")
    p.add_argument("--precision", default=D.precision, choices=["float32", "bfloat16", "float16"],
                   help="autocast of the forward (float16 with a GradScaler); parameters and AdamW stay float32")
    p.add_argument("--compile", nargs="?", const="inductor", default=False, metavar="BACKEND",
                   help="torch.compile the forward (with the backend named, default inductor)")
    p.add_argument("--activation-checkpointing", action="store_true",
                   help="recompute each block in backward instead of keeping its activations")
    p.add_argument("--fsdp", action="store_true",
                   help="FSDP2 (fully_shard) instead of DDP under torchrun")
    p.add_argument("--peak-tflops", type=float, default=None,
                   help="one device's peak TFLOP/s for the MFU column (default: tmm.train.PEAK_FLOPS for known GPUs)")
    p.add_argument("--recipe", default=None, choices=["paper"],
                   help="the authors' recipe (lab.experiments.recipe) for every flag left at its default; prints "
                        "the estimated time and tokens first")
    p.add_argument("--dry-run", action="store_true", help="print the estimate (from a measured step) and exit")
    args = p.parse_args(argv)
    try:
        return CompareSettings(**vars(args)).checked()
    except SettingsError as e:
        p.error(str(e))


def main(argv=None) -> int:
    settings = parse_args(argv)
    try:
        result = run_comparison(settings, results_root=REPO / "results", log_prefix="compare.py", repo=REPO)
    except SettingsError as e:
        sys.exit(f"compare.py: {e}")
    if result.out is None:  # --dry-run: the estimate (on stderr already)
        return result.exit_code
    if result.table:  # rank 0 alone reports
        print(f"\nResults in {result.out}\n")
        print(result.table)
        print(f"\n{result.verdict}")
    return result.exit_code

