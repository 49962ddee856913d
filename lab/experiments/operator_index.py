"""The operator-index (Fredholm) analysis of a TMM as an experiment: the
winding number of every layer's and head's Toeplitz symbol
(:mod:`lab.analysis.fredholm`), a table, a count of the indices, and
fredholm.json / fredholm.png.

    from lab.experiments.operator_index import analyse
    report = analyse(checkpoint="ckpt/")        # or config="tmm-cpu-small" (untrained, seeded)
    print(report.table)
    report.write("out/")                        # fredholm.json (+ fredholm.png)

Convention (:data:`CONVENTION`): the mixer computes y = T x with
T[t, s] = w[t - s] (lower triangular, from the left); the symbol is
phi(z) = sum_k w_k z^(-k); index = winding(phi) = -(number of zeros of
sum_k w_k z^k inside the unit disk). A one-step shift has winding -1 and
index -1; a kernel dominated by its lag-0 tap has index 0. Rows flagged
"near 0" have a symbol that (nearly) vanishes on the circle: their winding
number is reported but not reliable. An untrained model's vectors are
Kaiming-normal (i.i.d. Gaussian taps): such random polynomials have about
half their zeros inside the disk, so expect indices near -n/2 before training.

How far training moved the vectors (:func:`movement`) needs their initial
values: :func:`save_initial_vectors` writes them (a few KB) before training
(lab.experiments.compare and retention do, beside their checkpoints), and
``analyse(initial=folder)`` analyses them.
"""
from __future__ import annotations

import collections
import dataclasses
import json
import os
import statistics
from pathlib import Path
from typing import Optional

import torch

import tmm.models
from lab.analysis import fredholm
from tmm.files import atomic_write_text
from tmm.io import safetensors

from .errors import SettingsError

__all__ = ["CONVENTION", "INITIAL_VECTORS", "OperatorIndexReport", "analyse", "default_out", "format_table",
           "movement", "save_initial_vectors", "summarise"]

CONVENTION = (
    "y = T x with T[t, s] = w[t - s] (lower triangular, multiplying from the left); "
    "phi(z) = sum_k w_k z^(-k) on |z| = 1; winding = phase change of phi(e^{i theta}) over theta in [0, 2 pi] / 2 pi; "
    "Fredholm index = -winding(sum_k w_k z^k) = +winding(phi). One-step shift: winding -1, index -1."
)
INITIAL_VECTORS = "initial_toeplitz.safetensors"  # a TMM's Toeplitz vectors before training


def format_table(results) -> str:
    """One line per vector: layer, param, head, tap, winding, index, min|phi|, max|phi|, note."""
    lines = [
        f"{'layer':>5} {'param':>7} {'head':>4} {'tap':>3} {'winding':>7} {'index':>5} "
        f"{'min|phi|':>10} {'max|phi|':>10}  note"
    ]
    for r in results:
        if "skipped" in r:
            dash = "-"
            lines.append(
                f"{r['layer']:>5} {r['param']:>7} {dash:>4} {dash:>3} {dash:>7} {dash:>5} {dash:>10} {dash:>10}  "
                f"{r['skipped']}"
            )
            continue
        note = "near 0: winding unreliable" if r["near_zero"] else ""
        lines.append(
            f"{r['layer']:>5} {r['param']:>7} {r['head']:>4} {r['tap']:>3} {r['winding']:>7} {r['index']:>5} "
            f"{r['min_modulus']:>10.3e} {r['max_modulus']:>10.3e}  {note}"
        )
    return "\n".join(lines)


def summarise(results) -> dict:
    """Counts: vectors, near-zero symbols, skipped layers, indices (near-zero excluded)."""
    rows = [r for r in results if "skipped" not in r]
    counts = collections.Counter(r["index"] for r in rows if not r["near_zero"])
    return {
        "vectors": len(rows),
        "near_zero": sum(r["near_zero"] for r in rows),
        "skipped_layers": sum("skipped" in r for r in results),
        "index_counts": {str(k): v for k, v in sorted(counts.items())},
        "shift_like": counts.get(-1, 0),
        "invertible_like": counts.get(0, 0),
    }


@dataclasses.dataclass
class OperatorIndexReport:
    label: str  # the checkpoint folder's name, or the config's
    source: dict  # {"checkpoint": path} or {"config": name, "untrained": True, "seed": s}
    config: dict  # the model's full config
    rel_tol: float
    results: list  # fredholm.analyse_model's rows (with the vectors "w")
    summary: dict

    @property
    def header(self) -> str:
        cfg = self.config
        return (f"# {self.label}: {cfg.get('n_layers')} layers, heads={cfg.get('heads')}, kernel={cfg.get('kernel')}, "
                f"mixer={cfg.get('mixer')}, n={cfg.get('max_len')}\n# convention: {CONVENTION}")

    @property
    def table(self) -> str:
        return format_table(self.results)

    @property
    def counts_line(self) -> str:
        s = self.summary
        return (f"# index counts (excluding near-zero symbols): {s['index_counts']}; "
                f"near-zero: {s['near_zero']} of {s['vectors']}")

    def payload(self) -> dict:
        """fredholm.json's content."""
        return {"source": self.source, "config": self.config, "convention": CONVENTION, "rel_tol": self.rel_tol,
                "summary": self.summary, "results": fredholm.to_jsonable(self.results)}

    def write(self, out, plot=True) -> list:
        """fredholm.json and (with plot, when there are vectors) fredholm.png in
        ``out``, each atomically; returns the paths written."""
        out = Path(out)
        written = [out / "fredholm.json"]
        atomic_write_text(written[0], json.dumps(self.payload(), indent=1) + "\n")
        if plot and self.summary["vectors"]:
            written.append(out / "fredholm.png")
            fredholm.plot_symbols(self.results, written[1], title=f"{self.label}: Toeplitz symbols (index per head)")
        return written


def analyse(checkpoint=None, config=None, seed=0, points=None, rel_tol=fredholm.DEFAULT_REL_TOL,
            initial=None) -> OperatorIndexReport:
    """The analysis of a checkpoint folder; of ``config`` (a zoo name, a JSON
    path or JSON text) built untrained after ``torch.manual_seed(seed)``; or
    of the initial vectors :func:`save_initial_vectors` wrote into the folder
    ``initial``. SettingsError unless exactly one is given or when the model
    is not a TMM."""
    if sum(x is not None for x in (checkpoint, config, initial)) != 1:
        raise SettingsError("give exactly one of a checkpoint folder, a config and a folder of initial vectors")
    if initial is not None:
        path = Path(initial) / INITIAL_VECTORS
        if not path.is_file():
            raise SettingsError(f"{path}: no initial Toeplitz vectors saved there")
        vectors, meta = safetensors.load_file(path)
        cfg = json.loads(meta["config"])
        results = fredholm.analyse_model(vectors, points=points, rel_tol=rel_tol)
        return OperatorIndexReport(Path(initial).name, {"initial": str(path)}, cfg, rel_tol, results,
                                   summarise(results))
    if checkpoint is not None:
        model = tmm.models.load(checkpoint)
        source = {"checkpoint": os.path.abspath(checkpoint)}
        label = os.path.basename(os.path.normpath(checkpoint))
    else:
        torch.manual_seed(seed)
        model = tmm.models.build(config)
        source = {"config": config, "untrained": True, "seed": seed}
        label = "config" if str(config).lstrip().startswith("{") else Path(config).stem
    cfg = model.config
    if cfg.get("arch") != "tmm":
        raise SettingsError(f"only TMM models have explicit Toeplitz vectors (this is '{cfg.get('arch')}')")
    results = fredholm.analyse_model(model, points=points, rel_tol=rel_tol)
    return OperatorIndexReport(label, source, cfg, rel_tol, results, summarise(results))


def save_initial_vectors(model, folder) -> Optional[Path]:
    """Writes ``model``'s Toeplitz vectors as they are now (call it before
    training) to ``folder/INITIAL_VECTORS``, with its config; the path, or
    None for a model without Toeplitz vectors (not a TMM, or the masked mixer)."""
    cfg = getattr(model, "config", None)
    if not isinstance(cfg, dict) or cfg.get("arch") != "tmm" or cfg.get("mixer") == "masked":
        return None
    vectors = {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()
               if fredholm.MIXER_KEY.match(k)}
    path = Path(folder) / INITIAL_VECTORS
    path.parent.mkdir(parents=True, exist_ok=True)
    safetensors.save_file(vectors, path, {"config": json.dumps(cfg)})
    return path


def movement(trained: OperatorIndexReport, initial: OperatorIndexReport) -> Optional[float]:
    """How far training turned the vectors: the median over the vectors of
    the sine of the angle between each trained vector and its initial one
    (0: the same direction; 1: orthogonal). The index ignores a vector's
    scale (weight decay shrinks a vector without changing its index), so
    the angle, not the distance, is what can change it. None without vectors."""
    start = {(r["layer"], r["param"], r["head"], r["tap"]): r["w"] for r in initial.results if "w" in r}
    sines = []
    for r in trained.results:
        w0 = start.get((r["layer"], r["param"], r["head"], r["tap"])) if "w" in r else None
        if w0 is None or w0.shape != r["w"].shape:
            continue
        cos = float(r["w"] @ w0) / max(float(r["w"].norm() * w0.norm()), 1e-300)
        sines.append(max(0.0, 1.0 - cos * cos) ** 0.5)
    return statistics.median(sines) if sines else None


def default_out(report: OperatorIndexReport, checkpoint: Optional[str], results_root) -> Path:
    """CHECKPOINT/fredholm, or results_root/fredholm-<config> without a checkpoint."""
    if checkpoint is not None:
        return Path(checkpoint) / "fredholm"
    return Path(results_root) / f"fredholm-{report.label}"
