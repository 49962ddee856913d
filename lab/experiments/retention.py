"""Information retention through one vector (the paper's claim 2):
information extraction from a frozen trained language model, and
information capacity of an encoder trained end to end. The models are
:mod:`lab.experiments.retention_model`'s.

    from lab.experiments.retention import RetentionSettings, run, run_retention
    result = run_retention(RetentionSettings(modes=["capacity"], archs="tmm,hyena", steps=300))
    summary = run({"mode": "authors", "modes": "extraction", "steps": 300})   # the authors' mode; a dict of fields

``scripts/retention.py`` is its command line: each flag is the field of
:class:`RetentionSettings` of the same name.

Data: windows of ``n`` tokens of the ``lm`` task (``corpus``, default the
KJV corpus; ``tokenizer`` byte or bpe), training windows from its training
split, evaluation on its held-out split. Every architecture's config is
``<arch>-cpu-small`` (``configs`` for others) with ``vocab_size`` and
``max_len`` set to the task's.

- extraction: each architecture is first trained as a language model on
  the same windows for ``pretrain_steps`` steps (or loaded: ``encoder``
  maps an arch to a checkpoint), then frozen; a decoder learns to
  regenerate the window from the model's last hidden state.
- capacity: a fresh encoder and the decoder trained together for ``steps``.
- ``none`` (``baseline``, on by default): the decoder alone on a zero
  vector: the accuracy reachable with no information about the input.

``mode`` picks the bottleneck and decoder (:mod:`.retention_model`):
"batchnorm" (the default, comparable with earlier results: the state the
head reads at position -1, a BatchNorm-standardised projection repeated
along the window, 2 TMM blocks of width 128) or "authors" (the authors'
information-extraction setup: the last block's raw output at position -2,
the unroll bottleneck, masked-mixer blocks as wide as the encoder; 4 blocks
by default on the CPU, ``decoder_layers=16`` as theirs). ``decoder_d``,
``decoder_layers`` and ``position`` left at None take the mode's defaults
(:data:`MODE_DEFAULTS`).

The decoder is the same for every encoder and is initialised from the same
seed. Training is tmm.train.train; ``time_budget_min`` caps each mode's
total training time, shared evenly among the training phases still to run.
``resume`` continues an interrupted run in ``out``: every (mode, arch) its
summary.json holds is kept (its curve from metrics.jsonl), the others run;
the settings must be the run's (threads, no_progress excepted).

Output in ``out`` (default results/retention-<timestamp>/): metrics.jsonl
(every evaluation row, with mode, arch and phase), summary.json, summary.md
(table), retention_vs_steps.png (token accuracy against decoder steps),
retention_by_position.png (final accuracy at each position), all but
metrics.jsonl written atomically and rewritten after each run.
"""
from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
from pathlib import Path
from typing import Optional

import torch

import tmm.models
import tmm.tasks
from lab.bench.report import NO_PLOTS, fresh_folder
from tmm.train import NonFiniteError, TrainConfig, train

from . import operator_index
from .budget import EvenShares
from .errors import SettingsError
from .model_configs import config_names, fit_to_task, labels_for, read_config
from .levelling import LevelOff, train_until_level
from .retention_model import (DECODER_MODES, Autoencoder, RandomTokens, RegenerateTask, bits_recovered,
                              position_metrics)
from .retention_report import markdown, write_plots, write_report
from .saved_settings import RESUME_REFUSAL, check_same
from .task_options import parse_task_options

__all__ = ["MODES", "DECODER_MODES", "MODE_DEFAULTS", "RetentionSettings", "RetentionResult", "run", "run_retention",
           "run_one"]

MODES = ("extraction", "capacity")
# Each decoder mode's defaults for the settings left at None. "authors":
# decoder_d None = each encoder's own d (their Linear(d/2, d)); 4 blocks is
# the CPU-sized depth, theirs is 16 (decoder_layers=16).
MODE_DEFAULTS = {"batchnorm": {"decoder_d": 128, "decoder_layers": 2, "position": -1, "decoder_heads": 4},
                 "authors": {"decoder_d": None, "decoder_layers": 4, "position": -2, "decoder_heads": 4}}
# The decoder heads of runs saved before the setting existed (summary.json without it): the
# batchnorm decoder always had 4, the authors' masked mixer was flat. Such a run resumes only as that.
_FORMER_DECODER_HEADS = {"batchnorm": 4, "authors": 0}
# Likewise the other settings added since: what every run before them did.
_FORMER = {"source": "corpus", "random_vocab": 16, "level_off": False}
SOURCES = ("corpus", "random")
AUTHORS_DECODER_LAYERS = 16  # their information_extraction.py
# Settings that may differ when a run is resumed: they change how, not what, it computes.
RUNTIME_SETTINGS = {"threads", "no_progress", "resume", "out", "save_encoders"}
# The baseline's bottleneck width in authors mode when decoder_d is None and
# no encoder sets it (its input is a zero vector: the width only sizes the unroll).
_BASELINE_D = 128


@dataclasses.dataclass
class RetentionSettings:
    """The command line of scripts/retention.py (field ``pretrain_steps`` is flag ``--pretrain-steps``)."""

    modes: list = dataclasses.field(default_factory=lambda: list(MODES))  # extraction and/or capacity
    mode: str = "batchnorm"  # the bottleneck and decoder: batchnorm (the default) or authors
    archs: str = "tmm,transformer,hyena,mamba2"  # uses models/<arch>-cpu-small.json
    configs: Optional[str] = None  # comma-separated config names or JSON paths; replaces archs
    baseline: bool = True  # the zero-vector baseline ("none")
    encoder: dict = dataclasses.field(default_factory=dict)  # extraction: arch -> checkpoint, instead of pretraining
    n: int = 32  # tokens per window (the input to regenerate)
    # corpus: windows of the lm task; random: uniform random tokens out of random_vocab (capacity only)
    source: str = "corpus"
    random_vocab: int = 16
    corpus: Optional[str] = None  # text/JSONL/Parquet file or folder (default: the KJV corpus)
    tokenizer: str = "byte"  # byte or bpe
    task_option: list = dataclasses.field(default_factory=list)  # "KEY=VALUE" options of the lm task
    pretrain_steps: int = 300  # extraction: language-model steps per encoder
    steps: int = 400  # decoder (extraction) or autoencoder (capacity) steps
    batch_size: int = 16
    lr: float = 1e-3
    decoder_d: Optional[int] = None  # decoder width (None: the mode's, MODE_DEFAULTS)
    decoder_layers: Optional[int] = None  # decoder blocks (None: the mode's; authors' own value 16)
    decoder_heads: Optional[int] = None  # decoder mixer heads (None: the mode's, 4; authors mode 0 = flat)
    # train each decoder until its held-out loss levels off (lab.experiments.levelling), steps the cap
    level_off: bool = False
    position: Optional[int] = None  # the encoder position read (None: the mode's, -1 or -2)
    eval_batches: int = 4  # held-out batches per evaluation during training
    final_eval_batches: int = 16  # held-out batches of the final per-position accuracy
    time_budget_min: Optional[float] = None  # cap on each mode's total training time
    # save each pretrained LM under OUT/encoders/ and each capacity encoder under OUT/capacity-encoders/ (a TMM's
    # with its Toeplitz vectors before training: operator_index.INITIAL_VECTORS)
    save_encoders: bool = False
    threads: int = dataclasses.field(default_factory=lambda: os.cpu_count() or 1)
    seed: int = 0
    out: Optional[str] = None
    no_progress: bool = False
    resume: bool = False  # continue the run in out: its finished (mode, arch) runs are kept

    def checked(self) -> "RetentionSettings":
        """A copy with modes as a list; SettingsError naming the flag for a value out of range."""
        s = dataclasses.replace(self, encoder=dict(self.encoder), task_option=list(self.task_option))
        if isinstance(s.modes, str):
            s.modes = [m.strip() for m in s.modes.split(",") if m.strip()]
        s.modes = list(s.modes)
        bad = [m for m in s.modes if m not in MODES]
        if bad or not s.modes:
            raise SettingsError(f"--modes: expected a comma-separated subset of {', '.join(MODES)}, "
                                f"got {bad or 'nothing'}")
        if s.mode not in DECODER_MODES:
            raise SettingsError(f"--mode: expected one of {', '.join(DECODER_MODES)}, got {s.mode!r}")
        for name, value in MODE_DEFAULTS[s.mode].items():
            if getattr(s, name) is None:
                setattr(s, name, value)
        if s.source not in SOURCES:
            raise SettingsError(f"--source: expected one of {', '.join(SOURCES)}, got {s.source!r}")
        if s.source == "random" and "extraction" in s.modes:
            raise SettingsError("--source random applies to --modes capacity only: extraction reads a language "
                                "model, which random tokens cannot train")
        if isinstance(s.decoder_heads, bool) or not isinstance(s.decoder_heads, int) or s.decoder_heads < 0 or \
                (s.mode == "batchnorm" and s.decoder_heads < 1):
            raise SettingsError(f"--decoder-heads must be an integer >= {1 if s.mode == 'batchnorm' else 0} "
                                f"(mode {s.mode}), got {s.decoder_heads!r}")
        for name in ("n", "pretrain_steps", "steps", "batch_size", "decoder_layers", "eval_batches",
                     "final_eval_batches", "threads", "random_vocab") + \
                (("decoder_d",) if s.decoder_d is not None else ()):
            value, flag = getattr(s, name), f"--{name.replace('_', '-')}"
            if isinstance(value, bool) or not isinstance(value, int):
                raise SettingsError(f"{flag} must be an integer, got {value!r}")
            if value < 1:
                raise SettingsError(f"{flag} must be >= 1, got {value}")
        if s.resume and not s.out:
            raise SettingsError("--resume needs --out, the folder of the run to continue")
        if isinstance(s.position, bool) or not isinstance(s.position, int) or not -s.n <= s.position < s.n:
            raise SettingsError(f"--position must be an integer in [-{s.n}, {s.n - 1}] (--n {s.n}), "
                                f"got {s.position!r}")
        return s

    def task(self):
        """The source of the windows: the lm task, or random tokens."""
        if self.source == "random":
            return RandomTokens(self.n, self.random_vocab)
        return tmm.tasks.make("lm", **self.task_options())

    def task_options(self) -> dict:
        opts = {"seq_len": self.n, "tokenizer": self.tokenizer}
        if self.corpus:
            opts["corpus"] = self.corpus
        opts.update(parse_task_options(self.task_option))
        return opts


@dataclasses.dataclass
class RetentionResult:
    out: Path
    table: list  # summary.json's "table": one row dict per (mode, arch)
    verdicts: list  # one line per mode
    markdown: str  # the table as markdown
    notes: list


def _train_config(s, steps, desc, cap, evaluations=10):
    return TrainConfig(steps=steps, batch_size=s.batch_size, lr=s.lr, warmup=max(1, steps // 10),
                       seed=s.seed, eval_every=max(1, steps // evaluations), eval_batches=s.eval_batches,
                       threads=s.threads, time_budget_s=cap, progress=not s.no_progress, desc=desc)


def _encoder(s, mode, label, cfg, task, budget, log, res):
    """The encoder of (mode, label): loaded, or built (and for extraction
    pretrained as a language model); None for the baseline."""
    if cfg is None:
        return None
    if mode == "extraction" and label in s.encoder:
        encoder = tmm.models.load(s.encoder[label])
        res["pretrained"] = {"checkpoint": s.encoder[label]}
        budget.cap()  # this phase is skipped: give its share to the others
    else:
        torch.manual_seed(s.seed)
        encoder = tmm.models.build(cfg)
    res["encoder_params"] = encoder.num_parameters()
    if mode == "extraction" and label not in s.encoder:
        lm = train(encoder, task, _train_config(s, s.pretrain_steps, f"{label} LM", budget.cap()),
                   log=lambda r: log({"phase": "pretrain", **r}))
        fin = lm.final
        res["pretrained"] = {"steps": lm.steps, "eval_loss": fin["eval_loss"], "eval_bpb": fin.get("eval_bpb"),
                             "wall_s": lm.wall_s}
        if s.save_encoders:
            encoder.save(Path(s.out) / "encoders" / label)
    return encoder


def run_one(s, mode, label, cfg, task, regen, budget, eval_set, log, baseline_d=None) -> dict:
    """Trains one (mode, arch) and returns its result dict (cfg None: the
    baseline, whose zero vector is ``baseline_d`` wide where decoder_d is None)."""
    res = {"mode": mode, "arch": label, "decoder_mode": s.mode, "status": "done", "note": None}
    encoder = _encoder(s, mode, label, cfg, task, budget, log, res)
    torch.manual_seed(s.seed + 1)  # the same decoder initialisation for every encoder
    d_in = int(cfg["d_model"]) if cfg else (s.decoder_d or baseline_d or _BASELINE_D)
    model = Autoencoder(encoder, task.vocab_size, task.seq_len, frozen=(mode == "extraction"),
                        position=s.position, d_in=d_in, mode=s.mode, d=s.decoder_d, layers=s.decoder_layers,
                        heads=s.decoder_heads)
    saved = s.save_encoders and mode == "capacity" and hasattr(model.encoder, "save")  # not a Python twin
    if saved:  # the starting point, so that the operator-index analysis can tell whether training moved the vectors
        operator_index.save_initial_vectors(model.encoder, Path(s.out) / "capacity-encoders" / label)
    res["state"] = model.state  # which state the decoder reads (None: the baseline)
    res["trainable_params"] = model.num_parameters()
    res["decoder_params"] = sum(p.numel() for p in model.decoder.parameters())
    res["rows"] = []

    def log_row(r):
        res["rows"].append(r)
        log({"phase": mode, **r})

    desc = f"{label} {mode[:4]}"
    try:
        if s.level_off:  # evaluations often enough for the detector to see the plateau
            out = train_until_level(model, regen, _train_config(s, s.steps, desc, budget.cap(), evaluations=50),
                                    LevelOff(min_step=2 * max(1, s.steps // 10)), log=log_row)  # twice the warm-up
            res["levelled"] = out.levelled
        else:
            out = train(model, regen, _train_config(s, s.steps, desc, budget.cap()), log=log_row)
    except NonFiniteError as e:
        res.update(status="diverged", note=str(e), steps=e.step - 1)
        return res
    res.update(steps=out.steps, wall_s=out.wall_s, final_loss=out.final["eval_loss"])
    if out.stopped_early:
        res.update(status="stopped", note=out.stopped_early)
    res["position_acc"], res["position_loss"] = position_metrics(model, eval_set)
    res["final_acc"] = sum(res["position_acc"]) / len(res["position_acc"])
    res["bits_recovered"] = bits_recovered(res["position_loss"], task.vocab_size)
    if saved:
        model.encoder.save(Path(s.out) / "capacity-encoders" / label)
    return res


def _finished_runs(out, s) -> dict:
    """(mode, arch) -> the result dict of each run the summary.json in ``out``
    holds, its evaluation rows restored from metrics.jsonl (the last
    sequence of each, should an interrupted attempt have logged rows too);
    SettingsError if that run's settings differ from ``s``."""
    path = out / "summary.json"
    if not path.is_file():
        return {}
    saved = json.loads(path.read_text())
    args = dict(saved.get("args", {}))
    args.setdefault("decoder_heads", _FORMER_DECODER_HEADS.get(args.get("mode", "batchnorm")))
    for key, value in _FORMER.items():
        args.setdefault(key, value)
    check_same(args, dataclasses.asdict(s), RESUME_REFUSAL, RUNTIME_SETTINGS)
    rows = {}
    metrics = out / "metrics.jsonl"
    for line in (metrics.read_text().splitlines() if metrics.is_file() else []):
        r = json.loads(line)
        if r.get("phase") != r.get("mode"):
            continue  # pretraining rows
        seq = rows.setdefault((r["mode"], r["arch"]), [])
        if seq and r["step"] <= seq[-1]["step"]:
            seq.clear()  # a later attempt of the same run
        seq.append({k: v for k, v in r.items() if k not in ("mode", "arch", "phase")})
    return {(r["mode"], r["arch"]): {**r, "rows": rows.get((r["mode"], r["arch"]), [])}
            for r in saved.get("runs", [])}


def run_retention(settings: RetentionSettings, *, results_root="results",
                  log_prefix="lab.experiments.retention") -> RetentionResult:
    """Runs every mode for every architecture (and the baseline); see the
    module docstring. ``results_root``: where the default output folder goes
    (default: results/ of the working directory). Raises SettingsError for
    bad settings."""
    t0 = time.monotonic()
    s = settings.checked()
    torch.set_num_threads(s.threads)
    task = s.task()
    regen = RegenerateTask(task)
    read = [read_config(name) for name in config_names(s.archs, s.configs.split(",") if s.configs else None)]
    configs = [(label, fit_to_task(cfg, task)) for (cfg, _), label in zip(read, labels_for(read))]
    if s.baseline:
        configs.append(("none", None))
    baseline_d = max((int(cfg["d_model"]) for _, cfg in configs if cfg), default=None)

    out = Path(s.out) if s.out else fresh_folder(results_root, "retention")
    out.mkdir(parents=True, exist_ok=True)
    s.out = str(out)
    print(f"{log_prefix}: {task.describe()}; writing {out}", file=sys.stderr)
    gen = torch.Generator().manual_seed(s.seed + 2_000_003)
    eval_set = [regen.eval_batch(s.batch_size, gen) for _ in range(s.final_eval_batches)]

    done = _finished_runs(out, s) if s.resume else {}
    results, notes = [], []
    if done:
        notes.append(f"resumed: {len(done)} finished run(s) kept from the earlier attempt")
    with open(out / "metrics.jsonl", "a") as metrics:
        for mode in s.modes:
            phases = sum(2 if (mode == "extraction" and cfg is not None) else 1 for _, cfg in configs)
            budget = EvenShares(s.time_budget_min, phases)
            for label, cfg in configs:
                def log(row, mode=mode, label=label):
                    metrics.write(json.dumps({"mode": mode, "arch": label, **row}) + "\n")
                    metrics.flush()

                if (mode, label) in done:
                    for _ in range(2 if (mode == "extraction" and cfg is not None) else 1):
                        budget.cap()  # its phases are skipped: their shares go to the others
                    results.append(done[(mode, label)])
                    continue
                results.append(run_one(s, mode, label, cfg, task, regen, budget, eval_set, log, baseline_d))
                write_report(out, s, task, results, notes)
                write_plots(out, results, s.modes, task.vocab_size)
    if not write_plots(out, results, s.modes, task.vocab_size):
        notes.append(NO_PLOTS)
    notes.append(f"total wall time {time.monotonic() - t0:.0f} s")
    rows, verdicts = write_report(out, s, task, results, notes)
    return RetentionResult(out, rows, verdicts, markdown(rows), notes)


def run(settings) -> dict:
    """The library entry point of claim suites: ``settings`` a
    :class:`RetentionSettings` or a dict of its fields (``mode``,
    ``modes``, ``steps``, ``pretrain_steps``, ...; every budget in steps,
    ``time_budget_min`` None unless asked; ``resume=True`` with ``out``
    continues an interrupted run, run by run). Returns summary.json's content
    (args, task, verdicts, table, runs, notes) plus ``out`` (the results
    folder) and ``markdown`` (the table). SettingsError for a bad setting."""
    if isinstance(settings, dict):
        unknown = sorted(set(settings) - set(RetentionSettings.__dataclass_fields__))
        if unknown:
            raise SettingsError(f"retention.run: unknown setting(s) {', '.join(unknown)} "
                                f"(known: {', '.join(RetentionSettings.__dataclass_fields__)})")
        settings = RetentionSettings(**settings)
    elif not isinstance(settings, RetentionSettings):
        raise SettingsError(f"retention.run: expected RetentionSettings or a dict, got {type(settings).__name__}")
    result = run_retention(settings)
    summary = json.loads((result.out / "summary.json").read_text())
    return {**summary, "out": str(result.out), "markdown": result.markdown}
