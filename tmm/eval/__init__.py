"""Benchmark evaluation of tmm models with EleutherAI's lm-eval harness.

    import tmm.eval.harness                      # registers the model type "tmm" (needs the extra tmm[eval])
    import lm_eval
    results = lm_eval.simple_evaluate(model="tmm", model_args="pretrained=CKPT_DIR", tasks=["arc_easy"])

    python -m tmm.eval --model tmm --model_args pretrained=CKPT_DIR --tasks arc_easy   # lm-eval's own CLI
    python scripts/evaluate.py CKPT_DIR --out results/eval                               # the paper's tasks, a table

:mod:`tmm.eval.harness` is the adapter (``TMMLM``: loglikelihood, rolling
loglikelihood and generate_until, batched, through the zoo model's C++
forward and decoder); it imports ``lm_eval`` and is the only module here
that does. This package itself, :data:`PAPER_TASKS` and :mod:`tmm.eval.report`
(the table) import without it. docs/training.md, "Evaluation", has the details.
"""

# The benchmarks the paper reports, by their lm-eval task names: SQuAD (the
# completion form of Based / Arora et al. 2024, the form used for small
# recurrent LMs), SQuAD v2, LongBench, IFEval, ARC-Easy, GLUE and HellaSwag.
PAPER_TASKS = ("squad_completion", "squadv2", "longbench", "ifeval", "arc_easy", "glue", "hellaswag")

# What the harness's optional task dependencies are called (IFEval and LongBench need their own extras).
EXTRA = "tmm[eval]"

__all__ = ["PAPER_TASKS", "EXTRA"]
