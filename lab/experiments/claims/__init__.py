"""The paper's claims, tested: one suite of experiments with a verdict per
claim (``python -m lab.experiments.claims`` or ``scripts/claims.py``).

    from lab.experiments.claims import ClaimsSettings, run_claims
    result = run_claims(ClaimsSettings(scale="small", only=["copy"]))
    print(result.markdown)                      # also result.out / "claims.md"

Claims (``only``, in the order they run; later ones read earlier ones' checkpoints):

- ``copy`` (:mod:`.copy_claim`): claim 2's copy task at n = 256 and 512;
- ``lm`` (:mod:`.lm_claim`): claim 1, training efficiency, with a
  learning-rate sweep per architecture;
- ``in-context`` (:mod:`.in_context_claim`): claim 3 by proxy only
  (induction and in-context-learning scores of claim 1's models; no verdict);
- ``mqar`` (:mod:`.mqar_claim`): the project's own associative-recall test
  (Zoology's MQAR; the paper makes no MQAR claim), with a learning-rate
  sweep per architecture;
- ``retention`` (:mod:`.retention_claim`): claim 2's information extraction
  and capacity;
- ``ablation`` (:mod:`.ablation_claim`): claim 4;
- ``operator-index`` (:mod:`.operator_index_claim`): winding numbers of the
  trained Toeplitz vectors;
- ``step-time``: the step-time table of every model the suite trains (run
  it alone on an idle machine; it trains nothing).

Budgets are steps and tokens (:mod:`.scales`: ``small`` is a 2-3 minute
smoke run, ``default`` about 91 hours on a 2-core CPU (`--estimate` times it per claim), ``paper`` the
authors' sizes for ``device="cuda"``); every architecture of a comparison
sees the same batches. Every training run is a job in its own folder under
``out`` (default ``results/claims-<scale>/``), resumed when interrupted and
skipped when done (:mod:`.suite`), so the suite can run in parts. The plan
(jobs, tokens, estimated FLOPs; with ``estimate`` also the timed cost) is
printed before anything trains. Results: ``out/claims.md`` and
``claims.json`` (tables, verdicts, git revision, command), PNG plots
beside them; docs/experiments.md reports them. A claim that reads another
job's checkpoints runs on the machine that trained that job; ``any_machine``
runs only the rest (the jobs no later claim reads), so that a long suite can
start on one machine and end on another (docs/experiments.md, "run in parts").
"""
from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Optional

from ... import REPO
from ...bench import provenance
from ..errors import SettingsError
from . import ablation_claim, copy_claim, in_context_claim, lm_claim, mqar_claim, operator_index_claim, \
    retention_claim
from .estimate import plan_table, time_plan
from .report import save_claim, write_suite_report
from .scales import SCALES, scale
from .suite import Suite

__all__ = ["CLAIMS", "ClaimsSettings", "ClaimsResult", "run_claims", "SCALES"]

CLAIMS = {m.NAME: m for m in (copy_claim, lm_claim, in_context_claim, mqar_claim, retention_claim, ablation_claim,
                              operator_index_claim)}
STEP_TIME = "step-time"


@dataclasses.dataclass
class ClaimsSettings:
    """The command line of scripts/claims.py (field ``dry_run`` is flag ``--dry-run``)."""

    scale: str = "default"  # small, default or paper
    only: Optional[list] = None  # claim names (default: all, in order; "step-time" only when named)
    out: Optional[str] = None  # the suite's folder (default results/claims-<scale>/)
    # finished jobs' small files kept here too, and read from here (suite.py); e.g. docs/results/claims-default
    archive: Optional[str] = None
    device: str = "cpu"
    # torch threads (default: 1 at scale small, whose tiny models gain nothing from more; else all CPUs)
    threads: Optional[int] = None
    dry_run: bool = False  # print the plan and exit
    estimate: Optional[bool] = None  # time steps to estimate the cost first (default: --scale paper --device cuda)
    no_progress: bool = False
    precision: str = "float32"  # the compare jobs' autocast (bfloat16, float16): docs/training.md
    compile: object = False  # torch.compile the compare jobs' forward (a backend's name)
    # only what may run on any machine: no job whose checkpoints a later claim reads, no claim that reads them
    any_machine: bool = False

    def checked(self) -> "ClaimsSettings":
        s = dataclasses.replace(self)
        if isinstance(s.only, str):
            s.only = [x.strip() for x in s.only.split(",") if x.strip()]
        names = list(CLAIMS) + [STEP_TIME]
        bad = [x for x in (s.only or []) if x not in names]
        if bad or s.only == []:
            raise SettingsError(f"--only: expected a comma-separated subset of {', '.join(names)}, "
                                f"got {', '.join(bad) or 'nothing'}")
        if s.precision not in ("float32", "bfloat16", "float16"):
            raise SettingsError(f"--precision must be float32, bfloat16 or float16, got {s.precision!r}")
        if s.threads is not None and s.threads < 1:
            raise SettingsError(f"--threads must be >= 1, got {s.threads}")
        scale(s.scale, s.device)  # SettingsError for a bad --scale or --device
        if s.threads is None and s.scale == "small":
            s.threads = 1
        if s.estimate is None:  # timing the paper's sizes is quick on a GPU only
            s.estimate = s.scale == "paper" and s.device == "cuda"
        return s


@dataclasses.dataclass
class ClaimsResult:
    out: Path
    claims: list  # ClaimResult per claim run
    markdown: str  # claims.md
    plan: str  # the plan table


def _say(message):
    print(f"claims: {message}", file=sys.stderr, flush=True)


def run_claims(settings: ClaimsSettings, *, say=_say, command=None, results_root="results",
               repo=REPO) -> ClaimsResult:
    """Plans, then runs, the claims of ``settings`` (see the module docstring)
    into ``settings.out`` (default ``<results_root>/claims-<scale>``),
    recording in every job the git revision of the checkout ``repo`` (the lab's own: lab.REPO);
    SettingsError for bad settings or a folder holding other settings' results."""
    s = settings.checked()
    sc = scale(s.scale, s.device)
    out = Path(s.out) if s.out else Path(results_root) / f"claims-{s.scale}"
    names = s.only or list(CLAIMS)
    claims = [CLAIMS[n] for n in names if n in CLAIMS]
    if s.any_machine:
        skipped = [c.NAME for c in claims if getattr(c, "ONE_MACHINE", False)]
        claims = [c for c in claims if c.NAME not in skipped]
        if skipped:
            say(f"--any-machine: not running {', '.join(skipped)} (they read other jobs' checkpoints)")
    # The dry run of the claims asked for (all of them for the step-time table): jobs, tokens, FLOPs.
    dry = Suite(out, sc, threads=s.threads, dry_run=True, say=say, precision=s.precision, compile=s.compile,
                any_machine=s.any_machine)
    for claim in (CLAIMS.values() if STEP_TIME in names else claims):
        claim.run(dry)
    plan = plan_table(dry.plan)
    say(f"scale {s.scale} on {s.device}, writing {out}; the plan:\n{plan}")
    if s.estimate or STEP_TIME in names:
        table, seconds = time_plan(dry.plan, s.device, say=say)
        say(f"estimated training time {sum(seconds.values()) / 3600:.2f} h on this machine (from timed steps; "
            f"evaluation extra):\n{plan_table(dry.plan, seconds)}")
        if STEP_TIME in names and not s.dry_run:
            from tmm.files import atomic_write_text

            out.mkdir(parents=True, exist_ok=True)
            atomic_write_text(out / "step_time.md", f"Step times ({s.device}, scale {s.scale}):\n\n{table}\n")
            say(f"step times:\n{table}")
    if s.dry_run:
        return ClaimsResult(out, [], "", plan)
    suite = Suite(out, sc, threads=s.threads, progress=not s.no_progress, say=say, archive=s.archive,
                  precision=s.precision, compile=s.compile, any_machine=s.any_machine, repo=repo)
    meta = {"scale": s.scale, "device": s.device, "seeds": list(sc.seeds), "git": provenance.git(repo),
            "command": " ".join(command if command is not None else [sys.executable, *sys.argv]),
            "settings": dataclasses.asdict(sc)}
    results = []
    for claim in claims:
        results.append(claim.run(suite))
        save_claim(out, results[-1], meta)
    md = write_suite_report(out, list(CLAIMS), meta) if results else ""
    return ClaimsResult(out, results, md, plan)
