"""The baseline comparison: several architectures trained on one task with
the same batches, each at its own learning rate; metrics, tables, plots.

    from lab.experiments.compare import CompareSettings, run_comparison
    result = run_comparison(CompareSettings(archs="tmm,hyena", steps=300))
    print(result.table, result.verdict, sep="\\n")          # files in result.out

``scripts/compare.py`` is its command line: each flag is the field of
:class:`CompareSettings` of the same name, documented there.

Models: each config (``archs`` picks ``<arch>-cpu-small``, ``configs``
takes names or JSON paths instead) gets the task's vocabulary and, with
``max_len`` "task", its sequence length (:func:`model_configs.fit_to_task`).
Sizes are the configs' own: the ``cpu-small`` ones are close (1.1-1.6 M
parameters with a 256-token vocabulary), not matched; the tables give each
count. Learning rates: ``lr`` for every model when given, else each
architecture's own (:data:`ARCH_LRS`); ``lrs`` sets single models by label.
``mixer`` (an import path) adds a user's own mixer in the skeleton of
the zoo config ``mixer_base`` (tmm.nn.SequenceModel.from_mixer_config;
``mixer_kwargs`` a JSON object of its arguments, ``mixer_inputs`` the
per-layer values it takes, comma-separated; no checkpoints).
Every model is initialised after ``torch.manual_seed(seed)``; every
architecture sees the same training and held-out batches.

Steps: ``steps`` for every architecture; without it, a quick timing of a
few steps of each sizes a common count that fits the time budget
(``time_budget_min``, default 8 minutes without ``steps``, none with them),
shared among the architectures in proportion to their step times and
re-shared as each finishes; one that runs out of its share stops early
(after a final evaluation) and the summary says so.

Output in ``out`` (default ``<results_root>/<task>-<timestamp>/``): metrics.jsonl
(one row per evaluation per architecture: arch, config, params, step,
tokens, wall_s, train_loss, eval_loss, eval_acc, flops_est, lr, tokens_per_s, mfu; appended and
flushed as they come), config.json (the settings, the task, each model's
config and parameter count, the git revision of the caller's checkout
``repo``, machine and load), summary.md,
summary.json, vs_steps.png, vs_wall.png, vs_flops.png. Every file but
metrics.jsonl is written atomically and rewritten after each architecture.

Checkpoints and resume: ``checkpoint_every`` N writes each architecture's
training checkpoint every N steps and at its end into
``<out>/checkpoints/<label>/``; ``resume`` continues the run in ``out`` with
its saved step count, warm-up and evaluation cadence (the other settings
must be the run's, but for :data:`RUNTIME_SETTINGS`); finished architectures
are not retrained; metrics.jsonl is rewritten to the rows of each newest
checkpoint. On the CPU the continued losses are bitwise those of an
uninterrupted run.

Distributed: under ``torchrun`` every rank trains its shard of the global
batch with DistributedDataParallel (gloo on the CPU, NCCL with ``device``
"cuda"); only rank 0 writes files, checkpoints and progress.
"""
from __future__ import annotations

import dataclasses
import datetime
import json
import sys
import time
from pathlib import Path
from typing import Optional

import torch

import tmm.models
import tmm.tasks
from tmm import train_checkpoints
from lab.bench import provenance
from lab.bench.memory import PeakMemory
from lab.bench.report import NO_PLOTS, fresh_folder
from tmm.files import atomic_write_json, atomic_write_text
from tmm.train import NonFiniteError, TrainConfig, flops_per_token, train

from . import budget, distributed, operator_index
from .compare_report import summary_text, write_plots, write_summary
from .errors import SettingsError
from .model_configs import (ablation_configs, build_model, config_names, fit_to_task, labels_for, mixer_config,
                            read_config)
from .recipe import apply_recipe, estimate, format_estimate
from .saved_settings import RESUME_REFUSAL, check_same
from .task_options import parse_task_options

__all__ = ["CompareSettings", "CompareResult", "run_comparison", "RUNTIME_SETTINGS", "DEFAULT_ARCHS",
           "DEFAULT_BUDGET_MIN", "ARCH_LRS", "OTHER_LR"]

DEFAULT_ARCHS = "tmm,transformer,hyena,mamba2"
DEFAULT_BUDGET_MIN = 8.0  # when steps is not given
# Each architecture's learning rate when lr is not given: its best in the
# claims' LM sweep of the cpu-small configs (docs/experiments.md, the lm
# claim: 300 steps at lr 1e-3, 3e-3, 1e-2, 3e-2); OTHER_LR for the rest (a user's mixer).
ARCH_LRS = {"tmm": 1e-2, "transformer": 3e-3, "hyena": 1e-2, "mamba2": 1e-2}
OTHER_LR = 1e-3
# Settings that may differ when a run is resumed: they change how, not what, it computes.
RUNTIME_SETTINGS = {"threads", "no_progress", "resume", "out", "checkpoint_every", "no_nan_guard", "device", "no_plots",
                    "grad_accum", "compile", "activation_checkpointing", "fsdp", "peak_tflops", "dry_run"}


@dataclasses.dataclass
class CompareSettings:
    """What to compare and how (the command line of scripts/compare.py: field
    ``batch_size`` is flag ``--batch-size``)."""

    task: str = "copy"  # copy, mqar, lm or shards (token shards: task_option path=DIR)
    n: Optional[int] = None  # copy: tokens written twice (default 32)
    num_kv_pairs: Optional[int] = None  # mqar: key-value pairs (default: the task's)
    corpus: Optional[str] = None  # lm: a text/JSONL/Parquet file or folder (default: the KJV corpus)
    tokenizer: Optional[str] = None  # lm: byte or bpe (default byte)
    task_option: list = dataclasses.field(default_factory=list)  # "KEY=VALUE" options of tmm.tasks.make
    archs: str = DEFAULT_ARCHS  # comma-separated; uses models/<arch>-cpu-small.json
    configs: Optional[list] = None  # config names or JSON paths; replaces archs
    ablation: Optional[str] = None  # "all" or comma-separated TMM variants of models/ablation/; replaces archs
    max_len: str = "task"  # models' max_len: the task's sequence length, or the config's when >= it
    steps: Optional[int] = None  # per architecture (default: sized to the time budget)
    batch_size: int = 16
    grad_accum: int = 1  # micro-batches per step on each process (gradient accumulation to batch_size)
    lr: Optional[float] = None  # every model's learning rate (default: each architecture's, ARCH_LRS)
    lrs: Optional[str] = None  # single models' learning rates, "LABEL=LR,...", over lr (labels: the table's)
    weight_decay: float = 0.1
    betas: tuple = (0.9, 0.95)
    warmup: Optional[int] = None  # default: 10% of the steps
    eval_every: Optional[int] = None  # default: about 20 evaluations per run
    eval_batches: int = 4  # held-out batches (of batch_size) per evaluation
    threads: Optional[int] = None  # torch.set_num_threads (default: the CPUs divided among the local processes)
    seed: int = 0
    time_budget_min: Optional[float] = None  # total training time (default 8 without steps, else none)
    out: Optional[str] = None  # output folder (default results/<task>-<timestamp>/)
    no_progress: bool = False
    no_plots: bool = False  # no PNG plots (a caller drawing its own: each costs seconds on a loaded CPU)
    checkpoint_every: int = 0  # steps between training checkpoints (and one at the end); 0: none
    resume: bool = False  # continue the interrupted run in out from its newest checkpoints
    no_nan_guard: bool = False  # do not stop at the first non-finite loss, gradient or parameter
    device: str = "cpu"  # cpu or cuda (under torchrun: the GPU of each process's LOCAL_RANK)
    mixer: Optional[str] = None  # a user's mixer (import path), trained in the skeleton of mixer_base
    mixer_kwargs: Optional[str] = None  # JSON object of the mixer's keyword arguments
    mixer_inputs: Optional[str] = None  # the per-layer values the mixer takes (SequenceModel's), comma-separated
    mixer_base: str = "tmm-cpu-small"  # the zoo config whose sizes and block options the mixer gets
    min_lr_ratio: float = 0.1  # the linear decay ends at min_lr_ratio * lr
    precision: str = "float32"  # float32, bfloat16 or float16 (autocast; float16 with a GradScaler)
    compile: object = False  # torch.compile the forward: False, or a backend's name ("inductor")
    activation_checkpointing: bool = False  # recompute each block in backward
    fsdp: bool = False  # FSDP2 instead of DDP under torchrun
    peak_tflops: Optional[float] = None  # one device's peak TFLOP/s for the MFU column (default: the table's)
    recipe: Optional[str] = None  # "paper": the authors' training recipe (lab.experiments.recipe) for unset flags
    dry_run: bool = False  # print the plan and its estimated time (from a measured step), train nothing

    def checked(self) -> "CompareSettings":
        """A copy with the defaults that depend on the machine filled in
        (threads) and configs split at commas; SettingsError naming the
        flag for a value out of range."""
        s = dataclasses.replace(self, task_option=list(self.task_option), betas=tuple(self.betas))
        if s.recipe is not None:
            s = apply_recipe(s)
        if isinstance(s.configs, str):
            s.configs = [s.configs]
        if s.configs:
            s.configs = [c for item in s.configs for c in str(item).split(",") if c]
        if s.ablation is not None:
            paths = ablation_configs(s.ablation)
            if s.configs and s.configs != paths:
                raise SettingsError("--ablation and --configs both choose the models: give one")
            s.configs = paths
        for name in ("steps", "batch_size", "grad_accum", "eval_every", "eval_batches", "threads"):
            v = getattr(s, name)
            if v is not None and v < 1:
                raise SettingsError(f"--{name.replace('_', '-')} must be >= 1, got {v}")
        if s.lr is not None and not s.lr > 0:
            raise SettingsError(f"--lr must be > 0, got {s.lr}")
        s.model_lrs()  # checks the format
        if s.precision not in ("float32", "bfloat16", "float16"):
            raise SettingsError(f"--precision must be float32, bfloat16 or float16, got {s.precision!r}")
        if not 0.0 <= s.min_lr_ratio <= 1.0:
            raise SettingsError(f"--min-lr-ratio must be in [0, 1], got {s.min_lr_ratio}")
        if s.peak_tflops is not None and s.peak_tflops <= 0:
            raise SettingsError("--peak-tflops must be > 0")
        if s.time_budget_min is not None and s.time_budget_min <= 0:
            raise SettingsError("--time-budget-min must be > 0")
        if s.checkpoint_every < 0:
            raise SettingsError(f"--checkpoint-every must be >= 0, got {s.checkpoint_every}")
        if s.resume and not s.out:
            raise SettingsError("--resume needs --out, the folder of the run to continue")
        if s.device not in ("cpu", "cuda"):
            raise SettingsError(f"--device must be cpu or cuda, got {s.device!r}")
        if s.dry_run and s.steps is None:
            raise SettingsError("--dry-run estimates a run of --steps steps (or a --recipe's): give --steps")
        for flag, value in (("--mixer-kwargs", s.mixer_kwargs), ("--mixer-inputs", s.mixer_inputs)):
            if value is not None and not s.mixer:
                raise SettingsError(f"{flag} needs --mixer")
        if s.mixer and s.checkpoint_every:
            raise SettingsError("--checkpoint-every is not supported with --mixer: a user's mixer model has no "
                                "checkpoint format (tmm.nn.SequenceModel has no save)")
        if s.mixer_kwargs is not None:
            try:
                kwargs = json.loads(s.mixer_kwargs)
            except json.JSONDecodeError as e:
                raise SettingsError(f"--mixer-kwargs must be a JSON object, got {s.mixer_kwargs!r}: {e}") from None
            if not isinstance(kwargs, dict):
                raise SettingsError(f"--mixer-kwargs must be a JSON object, got {s.mixer_kwargs!r}")
        if s.threads is None:
            s.threads = distributed.local_threads()
        return s

    def model_lrs(self) -> dict:
        """``lrs`` as {label: lr}; SettingsError naming --lrs for a bad item."""
        out = {}
        for item in (self.lrs or "").split(","):
            if not item.strip():
                continue
            label, _, value = item.partition("=")
            try:
                lr = float(value)
            except ValueError:
                lr = None
            if not label.strip() or lr is None or not lr > 0:
                raise SettingsError(f"--lrs: expected LABEL=LR items (e.g. tmm=1e-2,transformer=3e-3) with LR > 0, "
                                    f"got {item!r}")
            out[label.strip()] = lr
        return out

    def lr_of(self, label: str, arch: str) -> float:
        """The learning rate of the model ``label`` of architecture ``arch``: lrs, else lr, else ARCH_LRS."""
        if label in self.model_lrs():
            return self.model_lrs()[label]
        return self.lr if self.lr is not None else ARCH_LRS.get(arch, OTHER_LR)

    def task_options(self) -> dict:
        """The options of ``tmm.tasks.make(self.task, ...)``; SettingsError for a flag of another task."""
        opts = {}
        if self.task == "copy":
            opts["n"] = 32 if self.n is None else self.n
        elif self.n is not None:
            raise SettingsError("--n applies to --task copy only")
        if self.num_kv_pairs is not None:
            if self.task != "mqar":
                raise SettingsError("--num-kv-pairs applies to --task mqar only")
            opts["num_kv_pairs"] = self.num_kv_pairs
        for key in ("corpus", "tokenizer"):
            if getattr(self, key) is not None:
                if self.task != "lm":
                    raise SettingsError(f"--{key} applies to --task lm only")
                opts[key] = getattr(self, key)
        opts.update(parse_task_options(self.task_option))
        return opts

    def budget_s(self) -> Optional[float]:
        """The total training time: time_budget_min, else 8 minutes without steps, else none."""
        if self.time_budget_min:
            return self.time_budget_min * 60
        return DEFAULT_BUDGET_MIN * 60 if self.steps is None else None


@dataclasses.dataclass
class CompareResult:
    out: Path  # the output folder
    summaries: list  # one dict per architecture (summary.json's "runs")
    verdict: str
    notes: list
    table: str  # the summary table as text
    exit_code: int  # 0, or 130 when interrupted (Ctrl-C)


def _metrics_line(run, row):
    return json.dumps({"arch": run["label"], "config": run["config_name"], "params": run["params"], **row}) + "\n"


def _sized_note(steps, budget_s, est):
    return (f"{steps} steps sized to the {budget_s / 60:g}-minute budget from timed steps: "
            + ", ".join(f"{k} {v * 1000:.0f} ms" for k, v in est.items()))


class _Comparison:
    """One run_comparison call. The constructor sets everything up (settings,
    processes, task, models, output folder, steps, config.json, what a
    resumed run keeps); then :meth:`train_all` and :meth:`finish`."""

    def __init__(self, settings, results_root, say, command, repo):
        self.t_begin = time.monotonic()
        self.s = s = settings.checked()
        self.say, self.command, self.repo = say, command, repo
        torch.set_num_threads(s.threads)
        self.rank, self.world, self.device = distributed.init(s.device)
        self.is_main = self.rank == 0
        if s.batch_size % (self.world * s.grad_accum):
            raise SettingsError(f"--batch-size {s.batch_size} does not divide among {self.world} processes x "
                                f"{s.grad_accum} micro-batches (--grad-accum)")
        self.task = tmm.tasks.make(s.task, **s.task_options())
        self.runs = self._plan_runs()
        self.estimate_lines = []
        if s.recipe or s.dry_run:  # the time and tokens it will take, before it starts
            self.estimate_lines = self._estimate()
        if s.dry_run:
            return
        fresh = fresh_folder(results_root, self.task.name) if self.is_main else None
        self.out = distributed.broadcast(Path(s.out) if s.out else fresh, self.world)
        self.saved = None
        if s.resume and (self.out / "config.json").is_file():
            self.saved = json.loads((self.out / "config.json").read_text())
            check_same(self.saved.get("args", {}), dataclasses.asdict(s), RESUME_REFUSAL, RUNTIME_SETTINGS)
        self.notes = []
        if self.is_main:
            self.out.mkdir(parents=True, exist_ok=True)
            task = self.task
            what = "resuming" if self.saved else "writing"
            say(f"task {task.name} {json.dumps(task.options)} (seq_len {task.seq_len}, vocab {task.vocab_size}); "
                f"{what} {self.out}" + (f" ({self.world} processes)" if self.world > 1 else ""))
            for r in self.runs:
                say(f"  {r['label']:<14} {r['config_name']:<24} {r['params']:>12,} parameters", prefix=False)
        self.budget_s, self.est, self.steps, self.eval_every, self.warmup = self._plan_steps()
        loaded = provenance.loaded_note()
        if loaded:
            self.notes.append(loaded)
        self.config_json = self._record()
        self.ckpt_dirs = {r["label"]: self.out / "checkpoints" / r["label"] for r in self.runs}
        self.spent = self._restore()

    def _estimate(self):
        """Lines of the recipe's estimate, measured by rank 0 (lab.experiments.recipe), printed on stderr."""
        lines = None
        if self.is_main:
            dev = self.device
            name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else f"CPU ({torch.get_num_threads()} threads)"
            rows = estimate(self.runs, self.task, self.s, dev, self.world)
            lines = format_estimate(rows, self.s, name, self.world, self.task.seq_len)
            for line in lines:
                self.say(line, prefix=False)
        return distributed.broadcast(lines, self.world)

    def _plan_runs(self):
        """One run dict per config, fitted to the task, with its parameter count."""
        s = self.s
        read = [read_config(name) for name in config_names(s.archs, s.configs)]
        if s.mixer:  # the user's mixer, in the skeleton of mixer_base
            base, short = read_config(s.mixer_base)
            inputs = None if s.mixer_inputs is None else [n.strip() for n in s.mixer_inputs.split(",") if n.strip()]
            read.append((mixer_config(s.mixer, json.loads(s.mixer_kwargs or "{}"), base, inputs), f"mixer-{short}"))
        runs = []
        for (cfg, short), label in zip(read, labels_for(read)):
            torch.manual_seed(s.seed)
            model = build_model(fit_to_task(cfg, self.task, s.max_len))
            runs.append({"label": label, "config_name": short, "config": model.config,
                         "params": model.num_parameters(), "lr": s.lr_of(label, cfg["arch"]), "rows": [],
                         "status": "pending"})
            del model
        unknown = sorted(set(s.model_lrs()) - {r["label"] for r in runs})
        if unknown:
            raise SettingsError(f"--lrs: no model labelled {', '.join(unknown)} (the models: "
                                f"{', '.join(r['label'] for r in runs)})")
        return runs

    def _plan_steps(self):
        """(time budget, timed step seconds, steps, eval_every, warmup): the
        steps given, sized by a quick timing to fit the budget (by rank 0),
        or the resumed run's; then the evaluation cadence and warm-up."""
        s, saved = self.s, self.saved
        budget_s, est = s.budget_s(), None
        if saved is not None:
            steps, budget_s, est = saved["steps"], saved["time_budget_s"], saved["timed_step_s"]
            if est:
                self.notes.append(_sized_note(steps, budget_s, est))
        elif s.steps is None and not self.is_main:
            steps = None  # rank 0's, below
        elif s.steps is None:
            est = {r["label"]: budget.time_steps(r["config"], self.task, s.batch_size, s.seed, device=self.device,
                                                 grad_accum=s.grad_accum, world=self.world, precision=s.precision)
                   for r in self.runs}
            steps = budget.size_steps(budget_s, est, s.eval_batches)
            self.say(_sized_note(steps, budget_s, est))
            self.notes.append(_sized_note(steps, budget_s, est))
        else:
            steps = s.steps
        steps, est = distributed.broadcast((steps, est), self.world)
        if saved is not None:
            return budget_s, est, steps, saved["eval_every"], saved["warmup"]
        eval_every = s.eval_every or max(1, steps // 20)
        warmup = s.warmup if s.warmup is not None else max(1, steps // 10)
        return budget_s, est, steps, eval_every, warmup

    def _where(self):
        now = datetime.datetime.now().isoformat(timespec="seconds")
        return now, {"git": provenance.git(self.repo), "machine": provenance.environment(str(self.device)),
                     "command": self.command, "world_size": self.world}

    def _record(self):
        """config.json's content: the run's own record, or the resumed one plus when and where it continued."""
        now, where = self._where()
        if self.saved is not None:
            record = dict(self.saved)
            record.pop("finished", None)
            record.setdefault("resumed", []).append({"at": now, **where})
            return record
        task = self.task
        return {
            "args": dataclasses.asdict(self.s),
            "task": {"name": task.name, "options": task.options, "seq_len": task.seq_len,
                     "vocab_size": task.vocab_size},
            "steps": self.steps,
            "eval_every": self.eval_every,
            "warmup": self.warmup,
            "time_budget_s": self.budget_s,
            "timed_step_s": self.est,
            "models": [{"label": r["label"], "config_name": r["config_name"], "params": r["params"], "lr": r["lr"],
                        "flops_per_token": flops_per_token(r["config"], r["params"], task.seq_len),
                        "config": r["config"]} for r in self.runs],
            "git": where["git"],
            "machine": where["machine"],
            "command": self.command,
            "started": now,
            "world_size": self.world,
        }

    def _restore(self):
        """The training time each architecture spent already: a resumed run
        keeps, per architecture, the rows of its newest checkpoint (rows
        logged after it are recomputed) and its time. Then config.json and
        metrics.jsonl are written."""
        spent = {r["label"]: 0.0 for r in self.runs}
        if self.s.resume:
            for r in self.runs:
                path = train_checkpoints.latest(self.ckpt_dirs[r["label"]])
                if path is not None:
                    state = train_checkpoints.read_state(path)
                    r["rows"], spent[r["label"]] = list(state["rows"]), state["total_s"]
        if self.is_main:
            atomic_write_json(self.out / "config.json", self.config_json)
            if self.s.resume:
                atomic_write_text(self.out / "metrics.jsonl",
                                  "".join(_metrics_line(r, row) for r in self.runs for row in r["rows"]))
        return spent

    def _train_config(self, run, cap):
        s = self.s
        return TrainConfig(
            steps=self.steps, batch_size=s.batch_size, grad_accum=s.grad_accum, lr=run["lr"],
            weight_decay=s.weight_decay, betas=tuple(s.betas), warmup=self.warmup, seed=s.seed, eval_every=self.eval_every,
            eval_batches=s.eval_batches, threads=s.threads, time_budget_s=cap,
            progress=not s.no_progress, desc=f"{run['label']:<11}",
            nan_guard=not s.no_nan_guard, checkpoint_dir=str(self.ckpt_dirs[run["label"]]),
            checkpoint_every=s.checkpoint_every, resume=s.resume, min_lr_ratio=s.min_lr_ratio,
            precision=s.precision, compile=s.compile, activation_checkpointing=s.activation_checkpointing,
            fsdp=s.fsdp, peak_flops=s.peak_tflops * 1e12 if s.peak_tflops else None,
        )

    def _train_one(self, run, cap, metrics):
        def log(row):  # called on rank 0 only
            run["rows"].append(row)
            metrics.write(_metrics_line(run, row))
            metrics.flush()

        torch.manual_seed(self.s.seed)
        model = build_model(run["config"]).to(self.device)
        ckpt = self.ckpt_dirs[run["label"]]
        if self.is_main and self.s.checkpoint_every and not (ckpt / operator_index.INITIAL_VECTORS).is_file():
            # the starting point, so that the operator-index analysis can tell whether training moved the vectors
            operator_index.save_initial_vectors(model, ckpt)
        run["status"] = "running"
        mem = PeakMemory(self.device)
        try:
            with mem:
                res = train(model, self.task, self._train_config(run, cap), log=log)
        except NonFiniteError as e:
            run.update(status="diverged", note=str(e), steps=e.step - 1)
            if self.is_main:
                self.say(f"{run['label']}: {e}")
        else:
            run["status"] = "done" if res.stopped_early is None else "stopped"
            run["note"] = res.stopped_early
            run.update(steps=res.steps, tokens=res.tokens, wall_s=res.wall_s, flops_est=res.flops_est)
        finally:
            run["peak_mem_mib"] = mem.increase_mib

    def train_all(self):
        """Trains every architecture in turn, each capped by its share of the
        budget left; rewrites the report after each. Returns False when
        interrupted (Ctrl-C)."""
        metrics = open(self.out / "metrics.jsonl", "a") if self.is_main else None
        t_train = time.monotonic() - sum(self.spent.values())
        try:
            for i, run in enumerate(self.runs):
                cap = None
                if self.budget_s is not None:
                    left = self.budget_s - (time.monotonic() - t_train)
                    rest = [r["label"] for r in self.runs[i:]]
                    # + the time a resumed run spent already: train() counts it too
                    cap = budget.proportional_share(left, run["label"], rest, self.est) + self.spent[run["label"]]
                self._train_one(run, cap, metrics)
                if self.is_main:
                    if not self.s.no_plots:
                        write_plots(self.out, self.runs, self.task)
                    write_summary(self.out, self.runs, self.task, self.meta(), self.notes)
        except KeyboardInterrupt:
            for run in self.runs:
                if run["status"] in ("running", "pending"):
                    run["status"] = "interrupted"
            self.notes.append("interrupted (Ctrl-C)")
            return False
        finally:
            if metrics is not None:
                metrics.close()
        return True

    def meta(self):
        s = self.s
        return {"batch_size": s.batch_size, "lr": ", ".join(f"{r['label']} {r['lr']:g}" for r in self.runs),
                "seed": s.seed, "threads": s.threads,
                "eval_sequences": s.batch_size * s.eval_batches}

    def finish(self, exit_code):
        """Plots, summary and the finished config.json (rank 0)."""
        if not self.s.no_plots and not write_plots(self.out, self.runs, self.task):
            self.notes.append(NO_PLOTS)
        total = time.monotonic() - self.t_begin
        self.notes.append(f"total wall time {total:.0f} s (timing, builds, training, evaluation, plots)")
        summaries, v, notes = write_summary(self.out, self.runs, self.task, self.meta(), self.notes)
        self.config_json["finished"] = datetime.datetime.now().isoformat(timespec="seconds")
        self.config_json["total_wall_s"] = round(total, 1)
        atomic_write_json(self.out / "config.json", self.config_json)
        return CompareResult(self.out, summaries, v, notes, summary_text(summaries), exit_code)


def _stderr(name):
    """Progress messages on stderr, after ``name``: (``prefix=False``: as they are)."""
    def say(message, prefix=True):
        print(f"{name}: {message}" if prefix else message, file=sys.stderr)

    return say


def run_comparison(settings: CompareSettings, *, results_root="results", log_prefix="lab.experiments.compare",
                   command=None, repo=None) -> CompareResult:
    """Runs the comparison (see the module docstring). ``results_root``: where
    the default output folder goes (default: results/ of the working
    directory); ``log_prefix``: the name before progress messages on stderr;
    ``command``: recorded in config.json (default: this process's argv);
    ``repo``: the checkout whose git revision config.json records (none: no revision).
    Raises SettingsError for bad settings or a resume that does not fit.
    On ranks other than 0 the result holds no summaries."""
    command = command if command is not None else [sys.executable, *sys.argv]
    created_group = not _group_exists()
    try:
        c = _Comparison(settings, results_root, _stderr(log_prefix), command, repo)
        if c.s.dry_run:
            return CompareResult(None, [], "dry run: nothing trained", list(c.estimate_lines),
                                 "\n".join(c.estimate_lines) if c.is_main else "", 0)
        finished = c.train_all()
        code = 0 if finished else 130
        if not c.is_main:
            return CompareResult(c.out, [], "", list(c.notes), "", code)
        return c.finish(code)
    finally:
        if created_group:
            distributed.shutdown()


def _group_exists():
    import torch.distributed as dist

    return dist.is_available() and dist.is_initialized()
