"""The suite's runner: every training run is a job in its own folder under
the suite's root, run once, resumed when interrupted, skipped when done.

A compare job is one :func:`~lab.experiments.compare.run_comparison` (its
models' configs written into ``<job>/models/``, checkpoints in
``<job>/checkpoints/``); a retention job is one
:func:`~lab.experiments.retention.run_retention`. A finished job leaves
``<job>/claims_job.json`` (its settings); running the suite again with the
same settings reads its results instead of training, with other settings it
is an error naming the job (the suite never mixes runs of two settings).

With ``dry_run`` no job runs: each is recorded in :attr:`Suite.plan` with
its tokens and estimated FLOPs, and the claims see no results.

With an ``archive`` folder (``--archive``, e.g. ``docs/results/claims-default``
in the repository), each finished job's small files (:data:`ARCHIVED`: its
settings, summary and metrics, no checkpoints) are copied there too, and a
job finished in the archive is read from it instead of trained: the suite
runs in parts, on any machine, and its report is rebuilt from the archive.
A claim that needs another job's checkpoints (retention's extraction,
operator-index, in-context) finds none for an archived job and says so or
trains its own; what operator-index and in-context compute from them is a
derived job (:meth:`Suite.derived`), archived like the others, so their
tables too are rebuilt anywhere. With ``any_machine`` the suite runs only
what any machine may: a job whose checkpoints a later claim reads
(``read_later``) is read when finished and otherwise skipped, left to a run
without the flag on the machine that then runs its readers.
"""
from __future__ import annotations

import dataclasses
import datetime
import json
from pathlib import Path
from typing import Optional

import tmm.tasks
from tmm.files import atomic_write_bytes, atomic_write_json
from tmm.train import flops_per_token

from ... import REPO
from ...bench import provenance
from ..compare import CompareSettings, run_comparison
from ..model_configs import build_model, fit_to_task
from ..saved_settings import check_same
from ..task_options import parse_task_options
from .models import write_configs
from .results import JobResult, read_compare_job

__all__ = ["Suite", "PlannedJob", "DONE_FILE", "ARCHIVED"]

DONE_FILE = "claims_job.json"
# What a finished job is read from (compare: config, summary, metrics; retention: summary); kept in the archive.
ARCHIVED = (DONE_FILE, "config.json", "summary.json", "metrics.jsonl")


@dataclasses.dataclass
class PlannedJob:
    path: str  # relative to the suite's root
    kind: str  # compare or retention
    models: list  # (label, params, flops per token) per model
    steps: int
    tokens: int  # per model
    flops_est: float  # all models together
    settings: dict


class Suite:
    """Runs (or, with ``dry_run``, plans) the jobs of the claims under ``root``."""

    def __init__(self, root, scale, *, threads: Optional[int] = None, dry_run=False, progress=True, say=print,
                 archive=None, precision="float32", compile=False, any_machine=False, repo=REPO):
        self.root = Path(root)
        self.repo = repo  # the checkout whose git revision (and dirty flag) every finished job records
        self.any_machine = any_machine  # skip the unfinished jobs whose checkpoints a later claim reads
        self.archive = Path(archive) if archive is not None else None
        self.precision, self.compile = precision, compile  # the compare jobs' (tmm.train's options)
        self.scale = scale
        self.threads = threads
        self.dry_run = dry_run
        self.progress = progress
        self.say = say
        self.plan: list = []
        self._tasks, self._per_token = {}, {}

    def task(self, name: str, options: dict):
        """The task ``name`` with ``options`` (built once per suite)."""
        key = (name, json.dumps(options, sort_keys=True))
        if key not in self._tasks:
            self._tasks[key] = tmm.tasks.make(name, **options)
        return self._tasks[key]

    def flops_per_token(self, spec, task: str, task_options: dict) -> float:
        """The estimated training FLOPs per token of ModelSpec ``spec`` fitted to the task (tmm.train's)."""
        key = (spec, task, json.dumps(task_options, sort_keys=True))
        if key not in self._per_token:
            t = self.task(task, task_options)
            cfg = fit_to_task(spec.config(), t)
            self._per_token[key] = flops_per_token(cfg, build_model(cfg).num_parameters(), t.seq_len)
        return self._per_token[key]

    # -- compare jobs -------------------------------------------------------
    def compare(self, path: str, specs: list, *, task: str, task_options: dict, steps: int, seed: int,
                lr: float, batch_size: Optional[int] = None, eval_every: Optional[int] = None,
                eval_batches: Optional[int] = None, read_later: bool = False) -> Optional[JobResult]:
        """Trains ``specs`` (ModelSpecs) on one task with the same batches;
        the job's results (None in a dry run). ``eval_batches`` None: the
        comparison's default (and no such key in the job's record, as before).
        ``read_later``: a later claim reads the job's checkpoints, so with
        ``any_machine`` it is not trained (None unless it has finished)."""
        s = self.scale
        settings = {
            "task": task, "task_option": [f"{k}={json.dumps(v)}" for k, v in sorted(task_options.items())],
            "steps": steps, "seed": seed, "lr": lr, "batch_size": batch_size or s.batch_size,
            "eval_every": eval_every, "device": s.device,
            **({"eval_batches": eval_batches} if eval_batches is not None else {}),
            # another precision changes the numbers: in the job's record (float32 keeps records as before)
            **({"precision": self.precision} if self.precision != "float32" else {}),
        }
        record = {"kind": "compare", "models": [dataclasses.asdict(m) for m in specs], **settings}
        out = self.root / path
        if read_later and self.any_machine and self._finished(path, record) is None:
            if not self.dry_run:
                self.say(f"skipping {path} (--any-machine): a later claim reads its checkpoints")
            return None
        if self.dry_run:
            self._plan_compare(path, specs, record)
            return None
        done = self._finished(path, record)
        if done is not None:
            return read_compare_job(done)
        configs = self.configs(out / "models", specs)
        resume = (out / "config.json").is_file()
        self.say(f"{'resuming' if resume else 'running'} {path} ({len(specs)} models, {steps} steps, seed {seed})")
        result = run_comparison(
            CompareSettings(configs=configs, out=str(out), resume=resume, checkpoint_every=max(steps // 2, 1),
                            threads=self.threads, no_plots=True, no_progress=not self.progress,
                            compile=self.compile, **settings),
            results_root=self.root, log_prefix=f"claims {path}", repo=self.repo)
        if result.exit_code == 130:
            raise KeyboardInterrupt
        self._mark_done(path, record)
        return read_compare_job(out)

    def _plan_compare(self, path, specs, record):
        if any(job.path == path for job in self.plan):  # one job read by two parts of a claim
            return
        task = self.task(record["task"], parse_task_options(record["task_option"]))
        models, flops = [], 0.0
        tokens = record["steps"] * record["batch_size"] * task.seq_len
        for spec in specs:
            cfg = fit_to_task(spec.config(), task)
            params = build_model(cfg).num_parameters()
            fpt = flops_per_token(cfg, params, task.seq_len)
            models.append((spec.label, params, fpt))
            flops += fpt * tokens
        self.plan.append(PlannedJob(path, "compare", models, record["steps"], tokens, flops, record))

    def configs(self, folder: Path, specs: list) -> list:
        """The config files of ``specs`` in ``folder``, written unless this is a dry run (which writes nothing)."""
        if self.dry_run:
            return [str(folder / f"{spec.label}.json") for spec in specs]
        return write_configs(folder, specs)

    # -- retention jobs -----------------------------------------------------
    def retention(self, path: str, settings) -> Optional[dict]:
        """Runs one retention job (a RetentionSettings without ``out``); its
        summary.json (None in a dry run)."""
        from ..retention import run_retention

        out = self.root / path
        record = {"kind": "retention", **{k: v for k, v in dataclasses.asdict(settings).items()
                                           if k not in ("out", "no_progress", "threads")}}
        # paths under the root written relative to it: the record must not depend on where the suite lives
        record["configs"] = ",".join(self._relative(p) for p in str(record["configs"] or "").split(",") if p) or None
        record["encoder"] = {k: self._relative(p) for k, p in record["encoder"].items()}
        # Which checkpoints the encoders came from follows from the LM jobs' settings, checked with those jobs;
        # an archived job is read on a machine without them.
        derived = ("encoder",)
        if self.dry_run:
            n_models = len([a for a in settings.archs.split(",") if a]) if not settings.configs else \
                len(str(settings.configs).split(","))
            tokens = settings.steps * settings.batch_size * settings.n
            self.plan.append(PlannedJob(path, "retention", [(f"{n_models} encoders", 0, 0.0)], settings.steps,
                                        tokens, 0.0, record))
            return None
        done = self._finished(path, record, derived)
        if done is None:
            self.say(f"running {path}")
            run_retention(dataclasses.replace(settings, out=str(out), no_progress=not self.progress,
                                              **({"threads": self.threads} if self.threads else {})))
            self._mark_done(path, record)
            done = out
        return json.loads((done / "summary.json").read_text())

    # -- derived jobs: no training, computed from other jobs' checkpoints ---
    def derived(self, path: str, record: dict, compute) -> Optional[dict]:
        """One result computed from finished jobs' checkpoints (its record names
        them, e.g. with :meth:`finished_record`): read where it was computed
        before with ``record`` (under the root, else in the archive), else
        ``compute()``, a JSON-able dict (None: its checkpoints are not on this
        machine), kept as the job's summary.json and archived. None in a dry
        run or where neither has it."""
        if self.dry_run:
            return None
        done = self._finished(path, record)
        if done is not None:
            return json.loads((done / "summary.json").read_text())
        summary = compute()
        if summary is None:
            return None
        atomic_write_json(self.root / path / "summary.json", summary)
        self._mark_done(path, record)
        return summary

    def finished_record(self, path: str) -> Optional[dict]:
        """The settings job ``path`` finished with (under the root, else in the archive); None if unfinished."""
        folder = self._done_folder(path)
        if folder is None:
            return None
        record = json.loads((folder / DONE_FILE).read_text())
        record.pop("finished", None)
        record.pop("git", None)
        return record

    def archived_jobs(self, path: str) -> list:
        """Names of the finished jobs in folder ``path`` of the archive (none without one)."""
        folder = None if self.archive is None else self.archive / path
        return sorted(p.name for p in folder.iterdir() if (p / DONE_FILE).is_file()) \
            if folder is not None and folder.is_dir() else []

    # -- bookkeeping --------------------------------------------------------
    def _relative(self, path: str) -> str:
        """``path`` relative to the suite's root when it lies under it, else as given."""
        try:
            return str(Path(path).resolve().relative_to(self.root.resolve()))
        except ValueError:
            return path

    def _finished(self, path: str, record: dict, derived=()) -> Optional[Path]:
        """The folder holding job ``path`` finished with ``record``'s settings (but the keys ``derived``):
        under the root, else in the archive; None when it has not finished. SettingsError where it finished
        with other settings."""
        folder = self._done_folder(path)
        if folder is not None:
            check_same(json.loads((folder / DONE_FILE).read_text()), record,
                       f"{folder} holds a finished job with other settings than this suite's (another --scale "
                       "or version?): remove it or give another --out / --archive",
                       runtime=("finished", "git") + tuple(derived))
        return folder

    def _done_folder(self, path: str) -> Optional[Path]:
        """Job ``path``'s folder if it finished: under the root, else in the archive; else None."""
        for folder in (self.root / path, None if self.archive is None else self.archive / path):
            if folder is not None and (folder / DONE_FILE).is_file():
                return folder
        return None

    def _mark_done(self, path: str, record: dict):
        out = self.root / path
        finished = datetime.datetime.now().isoformat(timespec="seconds")
        atomic_write_json(out / DONE_FILE, {**record, "finished": finished, "git": provenance.git(self.repo)})
        if self.archive is not None:
            for name in ARCHIVED:
                if (out / name).is_file():
                    atomic_write_bytes(self.archive / path / name, (out / name).read_bytes())

