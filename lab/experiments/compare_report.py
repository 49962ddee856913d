"""The comparison's report: one summary per architecture, the verdict, the
tables (summary.md, summary.json, the printed table) and the plots
(vs_steps.png, vs_wall.png, vs_flops.png).

A run is a dict: label, config_name, params, lr, rows (the evaluation rows of
tmm.train), status ("pending", "running", "done", "stopped", "diverged",
"interrupted"), note, and once trained steps, tokens, wall_s, flops_est."""
from __future__ import annotations

import json
import math

from ..bench.report import pyplot, save_plot
from tmm.files import atomic_write_json, atomic_write_text
from tmm.tables import markdown_table, text_table
from .formatting import fmt_flops, fmt_int, fmt_num

__all__ = ["LEARNED", "HEADER", "run_summary", "verdict", "summary_markdown", "summary_text", "write_summary",
           "write_plots", "PLOTS"]

LEARNED = 0.9  # the verdict's accuracy threshold
HEADER = [
    "arch", "params", "lr", "final eval loss", "final acc", "best acc", f"steps to {LEARNED:g} acc",
    "steps", "tokens", "train wall s", "est. FLOPs", "peak mem MiB",
]
PLOTS = ("vs_steps.png", "vs_wall.png", "vs_flops.png")


def run_summary(run) -> dict:
    rows = run["rows"]
    final = rows[-1] if rows else {}
    best = max((r["eval_acc"] for r in rows), default=None)
    reach = next((r for r in rows if r["eval_acc"] >= LEARNED), None)
    return {
        "arch": run["label"],
        "config": run["config_name"],
        "params": run["params"],
        "lr": run.get("lr"),
        "final_eval_loss": final.get("eval_loss"),
        "final_acc": final.get("eval_acc"),
        "final_bpb": final.get("eval_bpb"),  # language modelling tasks (lm, shards)
        "best_acc": best,
        "steps": run.get("steps", final.get("step", 0)),
        "tokens": run.get("tokens", final.get("tokens", 0)),
        "wall_s": run.get("wall_s", final.get("wall_s", 0.0)),
        "flops_est": run.get("flops_est", final.get("flops_est", 0.0)),
        "steps_to_learned": reach["step"] if reach else None,
        "peak_mem_mib": run.get("peak_mem_mib"),
        "status": run["status"],
        "note": run.get("note"),
    }


def chance_of(task):
    c = getattr(task, "chance", None)
    return c if isinstance(c, float) and math.isfinite(c) else None


def verdict(summaries, task) -> str:
    done = [s for s in summaries if s["final_acc"] is not None]
    if not done:
        return "No architecture finished an evaluation."
    if all(s.get("final_bpb") is not None for s in done):  # language modelling: no accuracy to reach
        ranked = sorted(done, key=lambda s: s["final_bpb"])
        return ("Held-out bits per byte, lowest first: "
                + ", ".join(f"{s['arch']} {s['final_bpb']:.3f} (loss {s['final_eval_loss']:.3f}, next-token accuracy "
                            f"{s['final_acc']:.3f})" for s in ranked) + ".")
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


def _table_rows(summaries):
    out = []
    for s in summaries:
        out.append([
            s["arch"] + ("" if s["status"] == "done" else f" ({s['status']})"),
            fmt_int(s["params"]),
            "-" if s.get("lr") is None else f"{s['lr']:g}",
            fmt_num(s["final_eval_loss"]),
            fmt_num(s["final_acc"]),
            fmt_num(s["best_acc"]),
            str(s["steps_to_learned"]) if s["steps_to_learned"] is not None else "-",
            str(s["steps"]),
            fmt_int(s["tokens"]),
            f"{s['wall_s']:.1f}",
            fmt_flops(s["flops_est"]),
            "-" if s.get("peak_mem_mib") is None else f"{s['peak_mem_mib']:.0f}",
        ])
    return out


def summary_markdown(summaries) -> str:
    return markdown_table(HEADER, _table_rows(summaries))


def summary_text(summaries) -> str:
    """The table the script prints."""
    return text_table(HEADER, _table_rows(summaries))


def write_summary(out, runs, task, meta, notes):
    """summary.md and summary.json; returns (summaries, verdict, notes)."""
    summaries = [run_summary(r) for r in runs]
    v = verdict(summaries, task)
    md = [
        f"# {task.name}: {', '.join(s['arch'] for s in summaries)}",
        "",
        f"Task `{task.name}` {json.dumps(task.options)}: sequence length {task.seq_len}, "
        f"vocabulary {task.vocab_size}. Batch {meta['batch_size']}, lr {meta['lr']}, "
        f"seed {meta['seed']}, {meta['threads']} threads. Accuracy is the task's metric on "
        f"{meta['eval_sequences']} held-out sequences.",
        "",
        summary_markdown(summaries),
        "",
        f"**Verdict:** {v}",
        "",
        "Train wall s: time in training steps (evaluation excluded). Est. FLOPs: 6 x the parameters applied to "
        "every token (the embedding lookup left out) x tokens, plus a sequence-mixing term "
        "(tmm.train.flops_per_token).",
    ]
    all_notes = list(notes) + [f"{s['arch']}: {s['note']}" for s in summaries if s["note"]]
    if all_notes:
        md += ["", "Notes:", ""] + [f"- {n}" for n in all_notes]
    plots = [p for p in PLOTS if (out / p).exists()]
    if plots:
        md += [""] + [f"![{p}]({p})" for p in plots]
    atomic_write_text(out / "summary.md", "\n".join(md) + "\n")
    atomic_write_json(out / "summary.json", {"task": task.name, "verdict": v, "notes": all_notes, "runs": summaries})
    return summaries, v, all_notes


def write_plots(out, runs, task) -> bool:
    """Eval loss and accuracy against steps, training wall-clock and
    estimated FLOPs, one line per architecture; False when matplotlib is missing."""
    plt = pyplot()
    if plt is None:
        return False
    axes_x = [("step", "training steps"), ("wall_s", "training wall-clock (s)"),
              ("flops_est", "estimated training FLOPs")]
    for (key, xlabel), fname in zip(axes_x, PLOTS):
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
        save_plot(fig, out / fname)
    return True
