"""Benchmark evaluation of tmm models with EleutherAI's lm-eval harness.

:mod:`tmm.eval.harness` is the adapter (the model type ``tmm``) and the only
module here that imports ``lm_eval`` (the extra tmm[eval]); this package,
:data:`PAPER_TASKS` and :mod:`tmm.eval.report` (the results table) import
without it. ``python -m tmm.eval`` is lm-eval's command line with ``tmm``
registered. docs/training.md, section 11, is the manual.
"""

# The benchmarks the paper reports, by their lm-eval task names: SQuAD (the
# completion form of Based / Arora et al. 2024, the form used for small
# recurrent LMs), SQuAD v2, LongBench, IFEval, ARC-Easy, GLUE and HellaSwag.
PAPER_TASKS = ("squad_completion", "squadv2", "longbench", "ifeval", "arc_easy", "glue", "hellaswag")

# What the harness's optional task dependencies are called (IFEval and LongBench need their own extras).
EXTRA = "tmm[eval]"

__all__ = ["PAPER_TASKS", "EXTRA"]
