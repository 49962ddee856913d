"""The retention experiments' report: the table (summary.md, summary.json,
the printed table), a verdict per mode, and the plots
(retention_vs_steps.png, retention_by_position.png: accuracy;
retention_loss_by_position.png: the held-out cross-entropy at each
position, in bits, against log2 V, the uniform guess).

A result is a dict per (mode, arch) as :func:`lab.experiments.retention.run_one`
returns it: mode, arch, decoder_mode, state, status, note, encoder_params,
trainable_params, decoder_params, pretrained, rows, steps, wall_s,
final_loss, position_acc, final_acc, position_loss (nats), bits_recovered,
levelled. The report names the decoder mode
("batchnorm" or "authors") in its title, its setup line and each row."""
from __future__ import annotations

import json
import math

from ..bench.report import pyplot, save_plot
from tmm.files import atomic_write_text
from tmm.tables import markdown_table
from .formatting import fmt_any

__all__ = ["summarise", "markdown", "verdict", "setup_line", "write_plots", "write_report"]

HEADER = ["mode", "arch", "encoder params", "decoder params", "state read", "LM eval bpb", "steps", "token acc",
          "bits recovered", "eval loss", "train wall s", "status"]


def summarise(results) -> list:
    """The table's rows, one dict per result."""
    rows = []
    for r in results:
        pre = r.get("pretrained") or {}
        rows.append({
            "mode": r["mode"], "arch": r["arch"], "decoder_mode": r.get("decoder_mode"),
            "state": r.get("state"), "encoder_params": r.get("encoder_params"),
            "trainable_params": r.get("trainable_params"), "decoder_params": r.get("decoder_params"),
            "lm_eval_bpb": pre.get("eval_bpb"),
            "steps": r.get("steps"), "token_acc": r.get("final_acc"), "bits_recovered": r.get("bits_recovered"),
            "eval_loss": r.get("final_loss"), "levelled": r.get("levelled"),
            "wall_s": r.get("wall_s"), "status": r["status"], "note": r.get("note"),
        })
    return rows


def markdown(rows) -> str:
    return markdown_table(HEADER, [[
        s["mode"], s["arch"], fmt_any(s["encoder_params"]), fmt_any(s.get("decoder_params")),
        s.get("state") or "-", fmt_any(s["lm_eval_bpb"]), fmt_any(s["steps"]),
        fmt_any(s["token_acc"]), fmt_any(s.get("bits_recovered"), 2), fmt_any(s["eval_loss"]),
        fmt_any(s["wall_s"], 1), s["status"] + (" (levelled off)" if s.get("levelled") else ""),
    ] for s in rows], align="llrrlrrrrrrl")


def verdict(rows, mode) -> str:
    mine = [s for s in rows if s["mode"] == mode and s["token_acc"] is not None]
    base = next((s["token_acc"] for s in mine if s["arch"] == "none"), None)
    archs = sorted((s for s in mine if s["arch"] != "none"), key=lambda s: -s["token_acc"])
    if not archs:
        return f"{mode}: nothing finished."
    text = f"{mode}: " + " > ".join(f"{s['arch']} {s['token_acc']:.3f}" for s in archs)
    if base is not None:
        text += f" (no-information baseline {base:.3f})"
    return text + "."


def write_plots(out, results, modes, vocab_size=None) -> bool:
    """Token accuracy against decoder steps, the final accuracy at each
    position, and (where the runs measured it) the held-out loss at each
    position in bits with log2 ``vocab_size`` marked, one panel per mode;
    False when matplotlib is missing."""
    plt = pyplot()
    if plt is None:
        return False
    plots = [("retention_vs_steps.png", "steps"), ("retention_by_position.png", "position")]
    if any(r.get("position_loss") for r in results):
        plots.append(("retention_loss_by_position.png", "loss"))
    for fname, kind in plots:
        fig, axes = plt.subplots(1, len(modes), figsize=(5.5 * len(modes), 3.8), squeeze=False)
        for ax, mode in zip(axes[0], modes):
            for r in (r for r in results if r["mode"] == mode):
                style = {"linestyle": ":", "color": "grey"} if r["arch"] == "none" else {}
                if kind == "steps" and r.get("rows"):
                    ax.plot([x["step"] for x in r["rows"]], [x["eval_acc"] for x in r["rows"]], marker=".",
                            label=r["arch"], **style)
                elif kind == "position" and r.get("position_acc"):
                    ax.plot(range(len(r["position_acc"])), r["position_acc"], label=r["arch"], **style)
                elif kind == "loss" and r.get("position_loss"):
                    bits = [ce / math.log(2) for ce in r["position_loss"]]
                    ax.plot(range(len(bits)), bits, label=f"{r['arch']} ({r.get('bits_recovered', 0):.1f} bits)",
                            **style)
            decoder = next((r.get("decoder_mode") for r in results if r.get("decoder_mode")), None)
            ax.set_title(f"{mode} (decoder mode {decoder})" if decoder else mode)
            ax.set_xlabel("decoder training steps" if kind == "steps" else "position in the input")
            if kind == "loss":
                ax.set_ylabel("held-out cross-entropy (bits per token)")
                if vocab_size:
                    ax.axhline(math.log2(vocab_size), color="black", linewidth=0.8, linestyle="--",
                               label=f"log2 V = {math.log2(vocab_size):.2f} (uniform guess)")
            else:
                ax.set_ylabel("held-out token accuracy")
                ax.set_ylim(-0.02, 1.02)
            ax.grid(True, alpha=0.3)
            if ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize=8)
        fig.tight_layout()
        save_plot(fig, out / fname, dpi=100)
    return True


def setup_line(settings, task) -> str:
    """One sentence: the decoder mode and what it reads, builds and scores."""
    d = settings.decoder_d if settings.decoder_d is not None else "d"
    width = f"{d} (the encoder's)" if d == "d" else f"{d}"
    if settings.mode == "authors":
        how = (f"decoder mode authors: the raw output of the encoder's last block at position {settings.position} "
               f"(the state after the final norm where the table says so), unrolled (position i reads the d/2 "
               f"entries from i mod d) through one Linear(d/2, {d}), then {settings.decoder_layers} masked-mixer "
               f"blocks of width {width} and a head")
    else:
        how = (f"decoder mode batchnorm: the state the encoder's head reads at position {settings.position}, "
               f"standardised (BatchNorm), projected, repeated with a learned position embedding, then "
               f"{settings.decoder_layers} TMM blocks of width {d} and a head")
    return (f"{task.describe()}. Windows of {task.seq_len} tokens; {how} ({settings.decoder_heads or 'flat, no'} "
            f"heads). Token accuracy: argmax regeneration accuracy over "
            f"{settings.final_eval_batches * settings.batch_size} held-out windows; bits recovered: the sum over "
            f"positions of log2 {task.vocab_size} - cross-entropy / ln 2 on them"
            + ("; each decoder trained until its held-out loss levelled off (lab.experiments.levelling), "
               f"at most {settings.steps} steps" if getattr(settings, "level_off", False) else "") + ".")


def write_report(out, settings, task, results, notes):
    """summary.md and summary.json; returns (table rows, verdicts)."""
    rows = summarise(results)
    verdicts = [verdict(rows, m) for m in settings.modes]
    md = [
        f"# Information retention through one vector ({', '.join(settings.modes)}; decoder mode {settings.mode})",
        "", setup_line(settings, task), "", markdown(rows), "", *[f"**{v}**" for v in verdicts],
    ]
    if notes:
        md += ["", "Notes:", ""] + [f"- {n}" for n in notes]
    md += ["", "![accuracy vs steps](retention_vs_steps.png)", "![accuracy by position](retention_by_position.png)",
           "![loss by position](retention_loss_by_position.png)"]
    atomic_write_text(out / "summary.md", "\n".join(md) + "\n")
    slim = [{k: v for k, v in r.items() if k != "rows"} for r in results]
    args = {k: getattr(settings, k) for k in settings.__dataclass_fields__}
    atomic_write_text(out / "summary.json", json.dumps(
        {"args": args, "decoder_mode": settings.mode, "task": task.options, "verdicts": verdicts,
         "table": rows, "runs": slim, "notes": notes}, indent=2, default=str) + "\n")
    return rows, verdicts
