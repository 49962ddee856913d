"""lm-eval's own command line with the ``tmm`` model type loaded:

    python -m tmm.eval --model tmm --model_args pretrained=CKPT_DIR --tasks arc_easy,hellaswag --batch_size 16
    python -m tmm.eval run --model tmm --model_args pretrained=CKPT_DIR,tokenizer=shards/ --tasks mytask \\
        --include_path my_tasks/ --output_path results/eval
    python -m tmm.eval ls tasks

Every flag and sub-command is the harness's (``lm-eval --help``); this only
imports :mod:`tmm.eval.harness` first, which registers ``tmm``.
"""
import sys


def main(argv=None):
    from . import harness  # noqa: F401  registers "tmm" (ImportError naming the extra without lm-eval)
    from lm_eval.__main__ import cli_evaluate

    if argv is not None:
        sys.argv = [sys.argv[0], *argv]
    sys.argv[0] = "python -m tmm.eval"
    cli_evaluate()


if __name__ == "__main__":
    main()
