"""lm-eval's own command line with the ``tmm`` model type loaded:

    python -m tmm.eval --model tmm --model_args pretrained=CKPT_DIR --tasks arc_easy --batch_size 16
    torchrun --nproc_per_node 2 -m tmm.eval --model tmm --model_args pretrained=CKPT_DIR --tasks hellaswag

Every flag and sub-command is the harness's; this imports tmm.eval.harness
first and, under torchrun (WORLD_SIZE > 1), initialises the process group
(nccl with GPUs, else gloo). docs/training.md, section 11.
"""
import os
import sys


def _init_process_group():
    """Under torchrun, the group the ranks evaluate in (True: this made it)."""
    import torch
    import torch.distributed as dist

    if int(os.environ.get("WORLD_SIZE", "1")) == 1 or dist.is_initialized():
        return False
    if torch.cuda.is_available():
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    return True


def main(argv=None):
    from . import harness  # noqa: F401  registers "tmm" (ImportError naming the extra without lm-eval)
    from lm_eval.__main__ import cli_evaluate

    if argv is not None:
        sys.argv = [sys.argv[0], *argv]
    sys.argv[0] = "python -m tmm.eval"
    owned = _init_process_group()
    try:
        cli_evaluate()
    finally:
        if owned:
            import torch.distributed as dist

            dist.destroy_process_group()


if __name__ == "__main__":
    main()
