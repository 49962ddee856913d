#!/usr/bin/env python3
"""Information retention through one vector (the paper's claim 2): information
extraction from a frozen trained language model, and information capacity of
an encoder trained end to end. See tmm/retention.py for the model.

    python scripts/retention.py                                   # both modes, 4 archs, default corpus
    python scripts/retention.py --modes capacity --archs tmm,hyena --steps 300
    python scripts/retention.py --modes extraction --encoder tmm=ckpt/tmm   # a saved LM instead of pretraining

Data: windows of ``--n`` tokens of the ``lm`` task (``--corpus``, default the
KJV corpus; ``--tokenizer`` byte or bpe), training windows from its training
split, evaluation on its held-out split. Every architecture's config is
``models/<arch>-cpu-small.json`` (``--configs`` for others) with
``vocab_size`` and ``max_len`` set to the task's.

- extraction: each architecture is first trained as a language model on the
  same windows for ``--pretrain-steps`` steps (or loaded with ``--encoder
  ARCH=CHECKPOINT``), then frozen; a decoder learns to regenerate the window
  from the model's last hidden state.
- capacity: a fresh encoder and the decoder trained together for ``--steps``.
- ``none`` (``--baseline``, on by default): the decoder alone on a zero
  vector: the accuracy reachable with no information about the input.

The decoder is the same for every encoder and is initialised from the same
seed. Training is tmm.train.train (AdamW, warm-up and linear decay, clipping,
progress bar with ETA); ``--time-budget-min`` caps each mode's total training
time, shared evenly among the training phases still to run.

Output in ``--out`` (default results/retention-<timestamp>/): metrics.jsonl
(every evaluation row, with mode, arch and phase), summary.json,
summary.md (table), retention_vs_steps.png (token accuracy against decoder
steps), retention_by_position.png (final accuracy at each position), all but
metrics.jsonl written atomically and rewritten after each run.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # see scripts/compare.py

import torch  # noqa: E402

import tmm.models  # noqa: E402
import tmm.tasks  # noqa: E402
from tmm.files import atomic_savefig, atomic_write_text  # noqa: E402
from tmm.retention import Autoencoder, RegenerateTask, position_accuracy  # noqa: E402
from tmm.train import NonFiniteError, TrainConfig, train  # noqa: E402

MODES = ("extraction", "capacity")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--modes", default="extraction,capacity", help="comma-separated: extraction, capacity")
    p.add_argument("--archs", default="tmm,transformer,hyena,mamba2", help="uses models/<arch>-cpu-small.json")
    p.add_argument("--configs", default=None, help="comma-separated config names or JSON paths; replaces --archs")
    p.add_argument("--no-baseline", dest="baseline", action="store_false", help="skip the zero-vector baseline")
    p.add_argument("--encoder", action="append", default=[], metavar="ARCH=CHECKPOINT",
                   help="extraction: use this saved model as ARCH's frozen encoder instead of pretraining it")
    p.add_argument("--n", type=int, default=32, help="tokens per window (the input to regenerate)")
    p.add_argument("--corpus", default=None, help="text/JSONL/Parquet file or folder (default: the KJV corpus)")
    p.add_argument("--tokenizer", choices=["byte", "bpe"], default="byte")
    p.add_argument("--task-option", action="append", default=[], metavar="KEY=VALUE",
                   help="another option of the lm task (e.g. vocab=2048, section_bytes=4096); repeatable")
    p.add_argument("--pretrain-steps", type=int, default=300, help="extraction: language-model steps per encoder")
    p.add_argument("--steps", type=int, default=400, help="decoder (extraction) or autoencoder (capacity) steps")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--decoder-d", type=int, default=128)
    p.add_argument("--decoder-layers", type=int, default=2)
    p.add_argument("--position", type=int, default=-1, help="the encoder position read (-1: the last)")
    p.add_argument("--eval-batches", type=int, default=4, help="held-out batches per evaluation during training")
    p.add_argument("--final-eval-batches", type=int, default=16, help="held-out batches of the final per-position accuracy")
    p.add_argument("--time-budget-min", type=float, default=None, help="cap on each mode's total training time")
    p.add_argument("--save-encoders", action="store_true", help="extraction: save each pretrained LM under OUT/encoders/")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=None)
    p.add_argument("--no-progress", action="store_true")
    args = p.parse_args(argv)
    args.modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    bad = [m for m in args.modes if m not in MODES]
    if bad or not args.modes:
        p.error(f"--modes: expected a comma-separated subset of {', '.join(MODES)}, got {bad or 'nothing'}")
    for name in ("n", "pretrain_steps", "steps", "batch_size", "decoder_d", "decoder_layers", "eval_batches",
                 "final_eval_batches", "threads"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    encoders = {}
    for item in args.encoder:
        arch, sep, path = item.partition("=")
        if not sep or not arch or not path:
            p.error(f"--encoder expects ARCH=CHECKPOINT, got '{item}'")
        encoders[arch] = path
    args.encoder = encoders
    return args


def read_config(name, task):
    path = Path(name)
    if not path.is_file():
        path = (tmm.models.models_dir() or Path(".")) / f"{name}.json"
    if not path.is_file():
        raise SystemExit(f"retention.py: no config file or name '{name}' (known: {', '.join(tmm.models.list_configs())})")
    cfg = json.loads(path.read_text())
    cfg.update(vocab_size=int(task.vocab_size), max_len=int(task.seq_len))
    return cfg, path.stem


class Budget:
    """Each training phase gets an even share of the mode's time left."""

    def __init__(self, minutes, phases):
        self.total = None if minutes is None else minutes * 60.0
        self.phases, self.start = phases, time.monotonic()

    def cap(self):
        if self.total is None:
            return None
        left = self.total - (time.monotonic() - self.start)
        share = max(left / max(self.phases, 1), 1.0)
        self.phases -= 1
        return share


def run_one(args, mode, label, cfg, task, regen, budget, eval_set, log):
    """Trains one (mode, arch) and returns its result dict."""
    res = {"mode": mode, "arch": label, "status": "done", "note": None}

    def tcfg(steps, desc):
        return TrainConfig(steps=steps, batch_size=args.batch_size, lr=args.lr, warmup=max(1, steps // 10),
                           seed=args.seed, eval_every=max(1, steps // 10), eval_batches=args.eval_batches,
                           threads=args.threads, time_budget_s=budget.cap(), progress=not args.no_progress,
                           desc=desc)

    encoder = None
    if cfg is not None:
        if mode == "extraction" and label in args.encoder:
            encoder = tmm.models.load(args.encoder[label])
            res["pretrained"] = {"checkpoint": args.encoder[label]}
            budget.cap()  # this phase is skipped: give its share to the others
        else:
            torch.manual_seed(args.seed)
            encoder = tmm.models.build(cfg)
        res["encoder_params"] = encoder.num_parameters()
        if mode == "extraction" and label not in args.encoder:
            lm = train(encoder, task, tcfg(args.pretrain_steps, f"{label} LM"),
                       log=lambda r: log({"phase": "pretrain", **r}))
            fin = lm.final
            res["pretrained"] = {"steps": lm.steps, "eval_loss": fin["eval_loss"], "eval_bpb": fin.get("eval_bpb"),
                                 "wall_s": lm.wall_s}
            if args.save_encoders:
                encoder.save(Path(args.out) / "encoders" / label)
    torch.manual_seed(args.seed + 1)  # the same decoder initialisation for every encoder
    model = Autoencoder(encoder, task.vocab_size, task.seq_len, frozen=(mode == "extraction"),
                        position=args.position, d_in=int(cfg["d_model"]) if cfg else args.decoder_d,
                        d=args.decoder_d, layers=args.decoder_layers)
    res["trainable_params"] = model.num_parameters()
    res["decoder_params"] = sum(p.numel() for p in model.decoder.parameters())
    res["rows"] = []

    def log_row(r):
        res["rows"].append(r)
        log({"phase": mode, **r})

    try:
        out = train(model, regen, tcfg(args.steps, f"{label} {mode[:4]}"), log=log_row)
    except NonFiniteError as e:
        res.update(status="diverged", note=str(e), steps=e.step - 1)
        return res
    res.update(steps=out.steps, wall_s=out.wall_s, final_loss=out.final["eval_loss"])
    if out.stopped_early:
        res.update(status="stopped", note=out.stopped_early)
    res["position_acc"] = position_accuracy(model, eval_set)
    res["final_acc"] = sum(res["position_acc"]) / len(res["position_acc"])
    return res


def summarise(results):
    rows = []
    for r in results:
        pre = r.get("pretrained") or {}
        rows.append({
            "mode": r["mode"], "arch": r["arch"], "encoder_params": r.get("encoder_params"),
            "trainable_params": r.get("trainable_params"), "lm_eval_bpb": pre.get("eval_bpb"),
            "steps": r.get("steps"), "token_acc": r.get("final_acc"), "eval_loss": r.get("final_loss"),
            "wall_s": r.get("wall_s"), "status": r["status"], "note": r.get("note"),
        })
    return rows


def fmt(x, nd=3):
    if x is None:
        return "-"
    if isinstance(x, int):
        return f"{x:,}"
    return f"{x:.{nd}f}"


def markdown(rows):
    head = ["mode", "arch", "encoder params", "LM eval bpb", "steps", "token acc", "eval loss", "train wall s", "status"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for s in rows:
        lines.append("| " + " | ".join([
            s["mode"], s["arch"], fmt(s["encoder_params"]), fmt(s["lm_eval_bpb"]), fmt(s["steps"]),
            fmt(s["token_acc"]), fmt(s["eval_loss"]), fmt(s["wall_s"], 1), s["status"],
        ]) + " |")
    return "\n".join(lines)


def verdict(rows, mode):
    mine = [s for s in rows if s["mode"] == mode and s["token_acc"] is not None]
    base = next((s["token_acc"] for s in mine if s["arch"] == "none"), None)
    archs = sorted((s for s in mine if s["arch"] != "none"), key=lambda s: -s["token_acc"])
    if not archs:
        return f"{mode}: nothing finished."
    text = f"{mode}: " + " > ".join(f"{s['arch']} {s['token_acc']:.3f}" for s in archs)
    if base is not None:
        text += f" (no-information baseline {base:.3f})"
    return text + "."


def write_plots(out, results, modes):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    for fname, kind in (("retention_vs_steps.png", "steps"), ("retention_by_position.png", "position")):
        fig, axes = plt.subplots(1, len(modes), figsize=(5.5 * len(modes), 3.8), squeeze=False)
        for ax, mode in zip(axes[0], modes):
            for r in (r for r in results if r["mode"] == mode):
                style = {"linestyle": ":", "color": "grey"} if r["arch"] == "none" else {}
                if kind == "steps" and r.get("rows"):
                    ax.plot([x["step"] for x in r["rows"]], [x["eval_acc"] for x in r["rows"]], marker=".",
                            label=r["arch"], **style)
                elif kind == "position" and r.get("position_acc"):
                    ax.plot(range(len(r["position_acc"])), r["position_acc"], label=r["arch"], **style)
            ax.set_title(mode)
            ax.set_xlabel("decoder training steps" if kind == "steps" else "position in the input")
            ax.set_ylabel("held-out token accuracy")
            ax.set_ylim(-0.02, 1.02)
            ax.grid(True, alpha=0.3)
            if ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize=8)
        fig.tight_layout()
        atomic_savefig(fig, out / fname, dpi=100)
        plt.close(fig)
    return True


def write_report(out, args, task, results, notes):
    rows = summarise(results)
    verdicts = [verdict(rows, m) for m in args.modes]
    md = [
        f"# Information retention through one vector ({', '.join(args.modes)})", "",
        task.describe() + f". Windows of {task.seq_len} tokens; the encoder's hidden state at position "
        f"{args.position}; decoder d={args.decoder_d}, {args.decoder_layers} layers. Token accuracy: argmax "
        f"regeneration accuracy over {args.final_eval_batches * args.batch_size} held-out windows.", "",
        markdown(rows), "", *[f"**{v}**" for v in verdicts],
    ]
    if notes:
        md += ["", "Notes:", ""] + [f"- {n}" for n in notes]
    md += ["", "![accuracy vs steps](retention_vs_steps.png)", "![accuracy by position](retention_by_position.png)"]
    atomic_write_text(out / "summary.md", "\n".join(md) + "\n")
    slim = [{k: v for k, v in r.items() if k != "rows"} for r in results]
    atomic_write_text(out / "summary.json", json.dumps(
        {"args": {k: v for k, v in vars(args).items()}, "task": task.options, "verdicts": verdicts,
         "table": rows, "runs": slim, "notes": notes}, indent=2, default=str) + "\n")
    return rows, verdicts


def main(argv=None):
    t0 = time.monotonic()
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    opts = {"seq_len": args.n, "tokenizer": args.tokenizer}
    if args.corpus:
        opts["corpus"] = args.corpus
    for item in args.task_option:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"retention.py: --task-option expects KEY=VALUE, got '{item}'")
        opts[key] = value  # converted to the option's type by the task
    task = tmm.tasks.make("lm", **opts)
    regen = RegenerateTask(task)
    names = ([c for c in args.configs.split(",") if c] if args.configs
             else [f"{a.strip()}-cpu-small" for a in args.archs.split(",") if a.strip()])
    read = [read_config(name, task) for name in names]
    archs = [cfg["arch"] for cfg, _ in read]
    # label: the arch, or the config's name when two configs share an arch
    configs = [(cfg["arch"] if archs.count(cfg["arch"]) == 1 else stem, cfg) for cfg, stem in read]
    if args.baseline:
        configs.append(("none", None))

    out = Path(args.out) if args.out else REPO / "results" / f"retention-{datetime.datetime.now():%Y%m%d-%H%M%S}"
    out.mkdir(parents=True, exist_ok=True)
    args.out = str(out)
    print(f"retention.py: {task.describe()}; writing {out}", file=sys.stderr)
    gen = torch.Generator().manual_seed(args.seed + 2_000_003)
    eval_set = [regen.eval_batch(args.batch_size, gen) for _ in range(args.final_eval_batches)]

    results, notes = [], []
    metrics = open(out / "metrics.jsonl", "a")
    try:
        for mode in args.modes:
            phases = sum(2 if (mode == "extraction" and cfg is not None) else 1 for _, cfg in configs)
            budget = Budget(args.time_budget_min, phases)
            for label, cfg in configs:
                def log(row, mode=mode, label=label):
                    metrics.write(json.dumps({"mode": mode, "arch": label, **row}) + "\n")
                    metrics.flush()

                results.append(run_one(args, mode, label, cfg, task, regen, budget, eval_set, log))
                write_report(out, args, task, results, notes)
                write_plots(out, results, args.modes)
    finally:
        metrics.close()
    if not write_plots(out, results, args.modes):
        notes.append("no plots: matplotlib is not installed")
    notes.append(f"total wall time {time.monotonic() - t0:.0f} s")
    rows, verdicts = write_report(out, args, task, results, notes)
    print(f"\nResults in {out}\n\n{markdown(rows)}\n")
    print("\n".join(verdicts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
