"""What a claim reports: tables, plots and verdicts, and the suite's
summary (claims.md, claims.json) made of them."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Optional

from ...bench.report import pyplot, save_plot
from tmm.files import atomic_write_json, atomic_write_text
from tmm.tables import markdown_table
from ..formatting import fmt_int

__all__ = ["CONSISTENT", "NOT_CONSISTENT", "UNSETTLED", "UNTESTED", "Verdict", "ClaimResult", "mean_range",
           "steps_cell", "pooled_table", "focus_limits", "spans_log_x", "plot_curves", "save_claim", "saved_claims",
           "write_suite_report"]

CONSISTENT = "consistent"
NOT_CONSISTENT = "not consistent"
UNSETTLED = "unsettled"  # the margin is not clear of its seed spread (margins.py)
UNTESTED = "not tested at this scale"
_VERDICT_HEAD = ["claim", "verdict", "margin", "2 SE", "seeds", "evidence"]


@dataclasses.dataclass
class Verdict:
    claim: str  # the paper's statement tested
    verdict: str  # CONSISTENT, NOT_CONSISTENT, UNSETTLED or UNTESTED
    evidence: str  # the numbers behind it
    margin: Optional[float] = None  # the deciding margin's mean over paired seeds (positive where it holds)
    spread: Optional[float] = None  # twice its standard error (None: one seed)
    seeds: int = 0  # paired seeds behind the margin
    unit: str = ""

    def cells(self) -> list:
        """margin, 2 SE and seeds as table cells."""
        if self.margin is None:
            return ["-", "-", "-"]
        return [f"{self.margin:+.4g} {self.unit}".strip(), "-" if self.spread is None else f"{self.spread:.2g}",
                str(self.seeds)]


@dataclasses.dataclass
class ClaimResult:
    name: str  # the --only name
    title: str
    statement: str  # what the paper claims
    setup: str = ""  # models, sizes, budgets: what was run
    tables: list = dataclasses.field(default_factory=list)  # (caption, markdown table)
    plots: list = dataclasses.field(default_factory=list)  # paths relative to the suite's root
    verdicts: list = dataclasses.field(default_factory=list)
    notes: list = dataclasses.field(default_factory=list)


def mean_range(pooled, key, nd=3) -> str:
    """"mean [min-max]" of ``key`` over seeds (just the value for one seed)."""
    m, r = pooled.mean(key), pooled.range(key)
    if m is None:
        return "-"
    if len(pooled.values(key)) == 1:
        return f"{m:.{nd}f}"
    return f"{m:.{nd}f} [{r[0]:.{nd}f}-{r[1]:.{nd}f}]"


def seeds_ran(pooled: dict, planned: int) -> str:
    """"N seeds" for a table's caption, counting the runs the table holds:
    "1 of 2 seeds" where a part of the suite (``--any-machine``, ``--only``)
    left some unrun."""
    ran = max((len(p.runs) for p in pooled.values()), default=0)
    unit = "seed" if planned == 1 else "seeds"
    return f"{planned} {unit}" if ran == planned else f"{ran} of {planned} {unit}"


def steps_cell(pooled) -> str:
    """Steps to 0.9 accuracy: mean [range] over the seeds that reached it, and how many did."""
    n, k = len(pooled.runs), pooled.reached
    if not k:
        return f"not reached (0/{n})"
    vals = pooled.values("steps_to_learned")
    cell = f"{sum(vals) / k:.0f}" + (f" [{min(vals)}-{max(vals)}]" if k > 1 else "")
    return cell + f" ({k}/{n})"


def pooled_table(pooled: dict, columns: list) -> str:
    """A markdown table, one row per label: label, params, then ``columns``
    ((header, function of a Pooled) pairs)."""
    header = ["model", "params"] + [h for h, _ in columns]
    rows = [[p.label, fmt_int(p.params)] + [f(p) for _, f in columns] for p in pooled.values()]
    return markdown_table(header, rows)


def _mean_curve(runs, x_key, y_key):
    """x, mean y, min y, max y over the seeds' rows at the evaluations all seeds have."""
    per_seed = [{r["step"]: r for r in run.rows if r.get(y_key) is not None} for run in runs]
    steps = sorted(set.intersection(*(set(s) for s in per_seed))) if per_seed else []
    xs, mean, lo, hi = [], [], [], []
    for step in steps:
        ys = [s[step][y_key] for s in per_seed]
        xs.append(sum(s[step][x_key] for s in per_seed) / len(per_seed))
        mean.append(sum(ys) / len(ys))
        lo.append(min(ys))
        hi.append(max(ys))
    return xs, mean, lo, hi


def focus_limits(curves, share=0.5, headroom=0.5) -> Optional[tuple]:
    """(low, high) y-limits that show where the curves differ rather than
    their start: from the lowest value of any curve to the highest value in
    the last ``share`` of any curve's points, widened by ``headroom`` of that
    span above (and a twentieth below); None when there is nothing to plot
    or little to gain: the whole range of the curves less than 3x that
    window (a plain axis then shows the differences well enough)."""
    curves = [list(c) for c in curves if c]
    if not curves:
        return None
    tails = [y for c in curves for y in c[int(len(c) * (1 - share)):]]
    low, high = min(min(c) for c in curves), max(tails)
    span = (high - low) or abs(high) or 1.0
    top, bottom = high + headroom * span, low - span / 20
    if max(max(c) for c in curves) - bottom < 3 * (top - bottom):
        return None
    return bottom, top


def spans_log_x(ends, ratio=20.0) -> bool:
    """Should a panel's x axis be logarithmic? Yes where the curves end
    more than ``ratio`` apart (the width pair's FLOPs: a 9,760-parameter
    TMM beside a 441,728-parameter Hyena), where a linear axis would draw
    the smaller one as a vertical line at 0."""
    ends = [e for e in ends if e and e > 0]
    return len(ends) > 1 and max(ends) > ratio * min(ends)


def plot_curves(path: Path, groups: dict, y_key: str, ylabel: str, *, chance: Optional[float] = None,
                floors: Optional[dict] = None, x_keys=(("step", "training steps"), ("tokens", "training tokens"),
                                                       ("flops_est", "estimated training FLOPs")),
                log_y=False, focus=False) -> bool:
    """One row of plots per group (title -> {label: Pooled}), one column per
    x axis: the mean over seeds with the range shaded; False without
    matplotlib. ``chance``: a dotted line in every panel; ``floors``: group
    title -> a dashed line in that row (MQAR's 1/pairs). ``focus``: the y-axis spans where the curves end up
    (:func:`focus_limits`), not their initial transient: points above it are
    drawn as triangles on the top edge and the clipping is written in the
    panel."""
    plt = pyplot()
    if plt is None:
        return False
    groups = {t: g for t, g in groups.items() if g}
    if not groups:
        return False
    fig, axes = plt.subplots(len(groups), len(x_keys), figsize=(4.6 * len(x_keys), 3.4 * len(groups)),
                             squeeze=False)
    for row, (title, pooled) in zip(axes, groups.items()):
        limits = focus_limits(_mean_curve(p.runs, "step", y_key)[1] for p in pooled.values()) if focus else None
        for ax, (x_key, xlabel) in zip(row, x_keys):
            clipped, ends = [], []
            for p in pooled.values():
                xs, mean, lo, hi = _mean_curve(p.runs, x_key, y_key)
                if not xs:
                    continue
                ends.append(xs[-1])
                line, = ax.plot(xs, mean, marker=".", markersize=3, label=p.label)
                if len(p.runs) > 1:
                    ax.fill_between(xs, lo, hi, color=line.get_color(), alpha=0.15, linewidth=0)
                if limits is not None:
                    over = [(x, y) for x, y in zip(xs, mean) if y > limits[1]]
                    if over:
                        ax.plot([x for x, _ in over], [limits[1]] * len(over), linestyle="none", marker="^",
                                markersize=5, color=line.get_color(), clip_on=False)
                        clipped.append(max(y for _, y in over))
            if limits is not None:
                ax.set_ylim(*limits)
                if clipped:
                    ax.text(0.99, 0.97, f"clipped above {limits[1]:.3g} (triangles; the start reaches "
                            f"{max(clipped):.3g})", transform=ax.transAxes, ha="right", va="top", fontsize=6,
                            color="dimgrey")
            if chance is not None:
                ax.axhline(chance, color="grey", linestyle=":", linewidth=1, label="chance")
            if floors and title in floors:
                ax.axhline(floors[title], color="black", linestyle="--", linewidth=1, label="floor 1/pairs")
            if log_y:
                ax.set_yscale("log")
            if spans_log_x(ends):  # the first evaluation, at x = 0, drops out of a log axis
                ax.set_xscale("log")
                xlabel += " (log)"
            ax.set_xlabel(xlabel)
            ax.set_ylabel(ylabel)
            ax.set_title(title, fontsize=9)
            ax.grid(True, alpha=0.3)
        row[-1].legend(loc="best", fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    save_plot(fig, path)
    return True


def claim_markdown(c: ClaimResult) -> str:
    md = [f"## {c.title}", "", f"**The paper:** {c.statement}", ""]
    if c.setup:
        md += [c.setup, ""]
    for caption, table in c.tables:
        md += [f"{caption}", "", table, ""]
    if c.verdicts:
        md += [markdown_table(_VERDICT_HEAD, [[v.claim, f"**{v.verdict}**", *v.cells(), v.evidence]
                                              for v in c.verdicts], align="llrrrl"), ""]
    md += [f"![{p}]({p})" for p in c.plots]
    if c.notes:
        md += ["", "Notes:", ""] + [f"- {n}" for n in c.notes]
    return "\n".join(md) + "\n"


def save_claim(root: Path, claim: ClaimResult, meta: dict):
    """``root/<claim>/claim.json``: one claim's report, kept for the suite's summary."""
    atomic_write_json(root / claim.name / "claim.json", {"meta": meta, "claim": dataclasses.asdict(claim)})


def saved_claims(root: Path, names) -> list:
    """(meta, ClaimResult) of every claim of ``names`` (in that order) that has a claim.json under ``root``."""
    found = []
    for name in names:
        path = root / name / "claim.json"
        if path.is_file():
            d = json.loads(path.read_text())
            c = d["claim"]
            c["verdicts"] = [Verdict(**v) for v in c["verdicts"]]
            c["tables"] = [tuple(t) for t in c["tables"]]
            found.append((d["meta"], ClaimResult(**c)))
    return found


def write_suite_report(root: Path, names, meta: dict) -> str:
    """claims.md and claims.json under ``root`` from every saved claim
    (claims run earlier, in other parts of the suite, included); returns the markdown."""
    saved = saved_claims(root, names)
    claims = [c for _, c in saved]
    head = [f"# The paper's claims at scale `{meta['scale']}`", "",
            f"Git {(meta['git'].get('revision') or '?')[:12]}{' (dirty)' if meta['git'].get('dirty') else ''}, "
            f"device {meta['device']}, seeds {', '.join(map(str, meta['seeds']))}. "
            f"Command: `{meta['command']}`.", ""]
    if meta["scale"] == "small":
        head += ["Scale `small` is a smoke test of the suite's code: its models are far too small and its runs far "
                 "too short for any verdict below to say anything about the claims.", ""]
    head.append(markdown_table(_VERDICT_HEAD, [[f"{c.name}: {v.claim}", f"**{v.verdict}**", *v.cells(), v.evidence]
                                               for c in claims for v in c.verdicts], align="llrrrl"))
    md = "\n".join(head) + "\n\n" + "\n".join(claim_markdown(c) for c in claims)
    revisions = sorted({(m["git"].get("revision") or "?")[:12] for m, _ in saved})
    if len(revisions) > 1:
        md += (f"\nThe claims above were run at different revisions: {', '.join(revisions)} "
               "(each claim.json has its own).\n")
    atomic_write_text(root / "claims.md", md)
    atomic_write_json(root / "claims.json",
                      {**meta, "claims": [{"meta": m, **dataclasses.asdict(c)} for m, c in saved]})
    return md
