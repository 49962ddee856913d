"""Claim 3, by proxy only: the paper's retrieval and in-context-learning
benchmarks (SQuAD, LongBench, ...) need models trained at its scale and
the benchmarks' data, neither of which this suite has. On the language
models of claim 1 (the matched-compute runs, seed 0) it measures two proxies instead
(:mod:`lab.experiments.in_context`): the induction score (loss on the
first copy of a random-token span minus loss on its second copy, later in
the same held-out window) and the in-context-learning score (loss late in
the context minus loss early in it). The numbers stand beside the paper's
statement; no verdict is drawn from them. Each model's scores are a
derived job (``in-context/scores/<model>``, archived), so the table is
rebuilt where the checkpoints are not.
"""
from __future__ import annotations

import dataclasses
import functools
import math

import tmm.models
import tmm.tasks
from tmm.tables import markdown_table

from ..in_context import in_context_scores
from . import lm_claim
from .models import lm_models
from .report import UNTESTED, ClaimResult, Verdict

NAME = "in-context"
ONE_MACHINE = True  # reads claim 1's checkpoints: not run with --any-machine
TITLE = "Claim 3 (proxy only): retrieval and in-context learning"
STATEMENT = ("TMM matches or beats the baselines on retrieval and in-context-learning benchmarks (SQuAD, SQuAD v2, "
             "LongBench, IFEval, ARC-Easy, GLUE, HellaSwag).")
WINDOWS = 256  # held-out windows per model, the same for every model
MAX_SPAN = 16  # random tokens per copy (at most a quarter of the context)


def span_for(seq_len: int) -> int:
    return max(2, min(MAX_SPAN, seq_len // 4))


def run(suite) -> ClaimResult:
    s = suite.scale
    span = span_for(s.lm_seq_len)
    c = ClaimResult(NAME, TITLE, STATEMENT, setup=(
        f"Proxies on claim 1's language models (matched-compute runs, seed 0, context {s.lm_seq_len}), {WINDOWS} "
        f"held-out "
        f"windows per model, the same for every model: induction = loss on the first copy of {span} random tokens "
        f"minus loss on their second copy later in the window (nats per token, the first token of each copy not "
        f"counted; about ln V when the model retrieves the earlier copy, about 0 when it does not); in-context "
        f"learning = mean loss over the last quarter of the positions minus the second eighth (negative: more "
        f"context helps)."))
    if suite.dry_run:
        return c
    task = functools.cache(lambda: tmm.tasks.make("lm", **lm_claim.task_options(s)))
    scores = {}
    for spec in lm_models(s.lm_d, s.lm_seq_len):
        source = lm_claim.matched_path(suite, spec.label)
        source_record = suite.finished_record(source)
        if source_record is None:
            continue

        def compute(label=spec.label):
            path = lm_claim.matched_checkpoint(suite, label)
            return None if path is None else {"vocab_size": task().vocab_size, **dataclasses.asdict(
                in_context_scores(tmm.models.load(str(path)), task(), windows=WINDOWS, span=span))}

        record = {"kind": "in-context", "source": source, "source_record": source_record, "windows": WINDOWS,
                  "span": span}
        r = suite.derived(f"in-context/scores/{spec.label}", record, compute)
        if r is not None:
            scores[spec.label] = r
    claim = "retrieval and in-context learning benchmarks"
    note = "proxy scores only (table above), not the paper's benchmarks: no claim-3 verdict is drawn from them"
    if not scores:
        c.verdicts.append(Verdict(claim, UNTESTED, "no language-model checkpoints (run --only lm first); " + note))
        return c
    head = ["model", "induction", "first copy loss", "second copy loss", "in-context learning", "early loss",
            "late loss"]
    rows = [[label] + [f"{r[k]:.3f}" for k in ("induction", "first_copy_loss", "second_copy_loss", "icl",
                                                "early_loss", "late_loss")] for label, r in scores.items()]
    vocab = next(iter(scores.values()))["vocab_size"]
    c.tables.append((f"Proxy scores (nats per token; ln V = {math.log(vocab):.2f} for the vocabulary of "
                     f"{vocab}):", markdown_table(head, rows, left=len(head))))
    c.verdicts.append(Verdict(claim, UNTESTED, note))
    return c
