"""The ``tmm`` model type of EleutherAI's lm-eval harness (importing this
module registers it): :class:`TMMLM`, with loglikelihood, rolling
loglikelihood and generate_until batched through the zoo model's C++ forward
and decoder, split over the ranks of an initialised torch.distributed group.

    lm_eval.simple_evaluate(model="tmm", model_args="pretrained=CKPT_DIR,batch_size=16", tasks=["hellaswag"])

docs/training.md, section 11, is the manual (every model_args key and its default).
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import torch

from ..progress import Progress
from . import EXTRA

try:
    import lm_eval  # noqa: F401
    import lm_eval.models  # noqa: F401  the harness's own model types (registered lazily) before ours
    from lm_eval import utils as _lm_utils
    from lm_eval.api.model import TemplateLM
    from lm_eval.api.registry import register_model
except ImportError as e:  # pragma: no cover - the fresh-venv test checks the message
    raise ImportError(f"tmm.eval.harness needs EleutherAI's lm-eval harness (pip install lm-eval, or tmm's extra: "
                      f"pip install '{EXTRA}'), which is not installed: {e}") from None

__all__ = ["TMMLM", "load_model", "load_tokenizer"]

AUTO_TOKENS = 32768  # batch_size=auto: rows per forward such that rows x length stays within this
_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16, "float64": torch.float64}


# ---------------------------------------------------------------- loading


def _checkpoint_folder(path: Path) -> Path:
    """The model folder ``path`` names: itself, or the newest step of a training checkpoint folder."""
    from .. import train_checkpoints

    if (path / train_checkpoints.LATEST).is_file():
        newest = train_checkpoints.latest(path)
        if newest is None:
            raise FileNotFoundError(f"tmm: {path} has a 'latest' pointer but no complete checkpoint")
        return Path(newest)
    if not (path / "config.json").is_file():
        raise FileNotFoundError(f"tmm: {path} is not a model folder (no config.json) nor a training checkpoint folder "
                                "(no 'latest')")
    return path


def load_model(pretrained, device=None, dtype=None):
    """(model in eval mode, its folder or None) from a folder (docs/training.md, section 11) or a built model."""
    if isinstance(pretrained, torch.nn.Module):
        model, folder = pretrained, None
        if device is not None or dtype is not None:
            model.to(device=device, dtype=dtype)
    else:
        from .. import hf

        folder = _checkpoint_folder(Path(os.fspath(pretrained)))
        model = hf.from_pretrained(folder, device=device, dtype=dtype)
    return model.eval(), folder


def _shard_tokenizer(folder: Path):
    manifest = json.loads((folder / "manifest.json").read_text())
    if manifest.get("tokenizer") == "byte":
        return "byte"
    return folder / manifest["tokenizer"]


def _run_task_tokenizer(model_folder: Path):
    """The tokenizer of the scripts/compare.py run a checkpoint lies in (its config.json's task), or None."""
    for parent in list(model_folder.resolve().parents)[:4]:
        cfg = parent / "config.json"
        if not cfg.is_file():
            continue
        try:
            task = json.loads(cfg.read_text()).get("task") or {}
        except (json.JSONDecodeError, AttributeError):
            continue
        if not isinstance(task, dict):
            continue
        opts = task.get("options") or {}
        if task.get("name") == "shards" and opts.get("path"):
            for base in (Path.cwd(), parent):
                p = base / opts["path"]
                if (p / "manifest.json").is_file():
                    return _shard_tokenizer(p)
        if task.get("name") == "lm" and opts.get("tokenizer", "byte") == "byte":
            return "byte"
    return None


def load_tokenizer(spec, model_folder=None, vocab_size=None):
    """A ``tmm.text.Tokenizer`` from ``spec`` (``byte``, a tokenizer.json, a folder holding one, a shard
    folder, a Tokenizer) or, when None, found for the model (docs/training.md, section 11)."""
    from .. import text

    if isinstance(spec, text.Tokenizer):
        return spec
    if spec is None and model_folder is not None:
        if (model_folder / "tokenizer.json").is_file():
            spec = model_folder / "tokenizer.json"
        else:
            spec = _run_task_tokenizer(model_folder)
    if spec is None:
        if vocab_size is not None and vocab_size <= 256:
            return text.Tokenizer.byte_level()
        raise ValueError(f"tmm: no tokenizer found for the model (vocabulary {vocab_size}): none beside the checkpoint "
                         f"({model_folder}); pass model_args tokenizer=byte|PATH (a tokenizer.json, or the shard "
                         "folder the model was trained on)")
    if str(spec) == "byte":
        return text.Tokenizer.byte_level()
    path = Path(os.fspath(spec))
    if path.is_dir():
        if (path / "manifest.json").is_file():
            found = _shard_tokenizer(path)
            return text.Tokenizer.byte_level() if found == "byte" else text.Tokenizer.from_file(os.fspath(found))
        path = path / "tokenizer.json"
    if not path.is_file():
        raise FileNotFoundError(f"tmm: tokenizer {spec!r}: no such tokenizer.json ({path})")
    return text.Tokenizer.from_file(os.fspath(path))


def _as_int(value, name):
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ValueError(f"tmm: {name} must be an int, got {value!r}") from None


# ---------------------------------------------------------------- the model type


@register_model("tmm")
class TMMLM(TemplateLM):
    """A tmm model for lm-eval (docs/training.md, section 11, has the arguments)."""

    backend = "causal"

    def __init__(self, pretrained=None, tokenizer=None, device=None, dtype=None, batch_size=16, max_batch_size=None,
                 max_length=None, max_gen_toks=256, eot_token=None, method="auto", seed=0, **kwargs):
        super().__init__()
        if pretrained is None:
            raise ValueError("tmm: model_args needs pretrained=CKPT_DIR (a tmm checkpoint folder)")
        unknown = sorted(k for k, v in kwargs.items() if v is not None)
        if unknown:
            raise TypeError(f"tmm: unknown model_args {', '.join(unknown)} (known: pretrained, tokenizer, device, "
                            "dtype, batch_size, max_batch_size, max_length, max_gen_toks, eot_token, method, seed)")
        from ..distributed import rank_and_world_size

        self._rank, self._world_size = rank_and_world_size()
        if device is None or device == "auto":
            device = f"cuda:{int(os.environ.get('LOCAL_RANK', 0))}" if torch.cuda.is_available() else "cpu"
        self._device = torch.device(device)
        if isinstance(dtype, str):
            if dtype not in _DTYPES:
                raise ValueError(f"tmm: dtype must be one of {', '.join(_DTYPES)}, got {dtype!r}")
            dtype = _DTYPES[dtype]
        self.model, folder = load_model(pretrained, device=self._device, dtype=dtype)
        config = dict(getattr(self.model, "config", {}) or {})
        self.vocab_size = int(config.get("vocab_size", 0)) or None
        self.tok = load_tokenizer(tokenizer, folder, self.vocab_size)
        if self.vocab_size is not None and self.tok.vocab_size > self.vocab_size:
            raise ValueError(f"tmm: the tokenizer has {self.tok.vocab_size} ids, the model's vocabulary only "
                             f"{self.vocab_size}")
        model_len = int(config.get("max_len", 0)) or None
        self._max_length = _as_int(max_length, "max_length") if max_length is not None else model_len
        if self._max_length is None:
            raise ValueError("tmm: the model has no max_len in its config; pass max_length")
        if model_len is not None and self._max_length > model_len:
            raise ValueError(f"tmm: max_length {self._max_length} exceeds the model's max_len {model_len}")
        self.max_gen_toks = _as_int(max_gen_toks, "max_gen_toks")
        self.method, self.seed = str(method), _as_int(seed, "seed")
        if isinstance(batch_size, str) and batch_size.startswith("auto"):
            self.batch_size = "auto"
        else:
            self.batch_size = _as_int(batch_size, "batch_size")
        self.max_batch_size = _as_int(max_batch_size, "max_batch_size") if max_batch_size is not None else 64
        # Generation stops at the end-of-text token only when it is one (a special token, or named): a
        # newline standing in for it separates documents but may well occur inside an answer.
        self._eot_stops = eot_token is not None
        if eot_token is None:
            eot = self.tok.token_to_id("<|endoftext|>")
            self._eot_stops = eot is not None
            if eot is None:
                eot_token = "\n"
        if eot_token is not None:
            ids = self.tok.encode(eot_token, add_special_tokens=False)
            if len(ids) != 1:
                raise ValueError(f"tmm: eot_token {eot_token!r} is {len(ids)} tokens, not one")
            eot = ids[0]
        self._eot = int(eot)
        self.pretrained = str(folder) if folder is not None else type(self.model).__name__

    # -- what TemplateLM asks for

    @property
    def eot_token_id(self):
        return self._eot

    @property
    def max_length(self):
        return self._max_length

    @property
    def device(self):
        return self._device

    @property
    def tokenizer_name(self):
        return f"tmm-{self.tok.kind}-{self.tok.vocab_size}"

    # -- data parallel: the harness's collectives over the torch.distributed group (one process: no-ops)

    def all_gather(self, tensor):
        """Every rank's ``tensor`` (on this model's device), concatenated along dim 0 (a 0-d tensor: stacked)."""
        if self._world_size == 1:
            return tensor
        import torch.distributed as dist

        parts = [torch.empty_like(tensor) for _ in range(self._world_size)]
        dist.all_gather(parts, tensor.contiguous())
        return torch.stack(parts) if tensor.dim() == 0 else torch.cat(parts)

    def gather_object(self, obj, dst=0):
        """Every rank's ``obj`` as a list on rank ``dst``, None elsewhere."""
        if self._world_size == 1:
            return [obj]
        import torch.distributed as dist

        out = [None] * self._world_size if self._rank == dst else None
        dist.gather_object(obj, out, dst=dst)
        return out

    def barrier(self):
        if self._world_size > 1:
            import torch.distributed as dist

            dist.barrier()

    def tok_encode(self, string, add_special_tokens=None, left_truncate_len=None, **kwargs):
        ids = list(self.tok.encode(string, add_special_tokens=bool(add_special_tokens)))
        if left_truncate_len:
            ids = ids[-left_truncate_len:]
        return ids

    def tok_decode(self, tokens, **kwargs):
        return self.tok.decode([int(t) for t in tokens])

    # -- scoring

    def _rows_per_batch(self, length):
        if self.batch_size == "auto":
            return max(1, min(self.max_batch_size, AUTO_TOKENS // max(length, 1)))
        return max(1, self.batch_size)

    @torch.inference_mode()
    def _logits(self, rows):
        """Float32 logits of right-padded rows (lists of ids): B x max length x V."""
        width = max(len(r) for r in rows)
        ids = torch.zeros(len(rows), width, dtype=torch.long)
        for b, r in enumerate(rows):
            ids[b, :len(r)] = torch.tensor(r, dtype=torch.long)
        out = self.model(ids.to(self._device))
        logits = out.logits if hasattr(out, "logits") else out
        return logits.float()

    def _loglikelihood_tokens(self, requests, disable_tqdm=False, **kwargs):
        """[(sum of the continuation's log-probabilities, is greedy)] of ((context, continuation), context ids,
        continuation ids) requests, in their order."""
        limit = self._max_length
        prepared = []
        for key, context, continuation in requests:
            if len(continuation) > limit:
                raise ValueError(f"tmm: a continuation of {len(continuation)} tokens exceeds max_length {limit}")
            whole = (list(context) + list(continuation))[-(limit + 1):]
            prepared.append((whole[:-1], list(continuation), key))
        order = sorted(range(len(prepared)), key=lambda i: -len(prepared[i][0]))
        results = [None] * len(prepared)
        bar = Progress(len(order), desc="tmm loglikelihood", unit="request",
                       enabled=not (disable_tqdm or len(order) < 2))
        start = 0
        while start < len(order):
            n = self._rows_per_batch(len(prepared[order[start]][0]))
            batch = order[start:start + n]
            start += n
            logits = self._logits([prepared[i][0] for i in batch])
            for b, i in enumerate(batch):
                inputs, cont, key = prepared[i]
                if not cont:
                    results[i] = (0.0, True)
                    continue
                end = len(inputs)
                logp = torch.log_softmax(logits[b, end - len(cont):end], dim=-1)
                target = torch.tensor(cont, dtype=torch.long, device=logp.device)
                score = float(logp.gather(-1, target[:, None]).sum())
                greedy = bool((logp.argmax(-1) == target).all())
                results[i] = (score, greedy)
                if key is not None:
                    self.cache_hook.add_partial("loglikelihood", key, results[i])
            bar.update(len(batch))
        bar.close()
        return results

    def loglikelihood_rolling(self, requests, disable_tqdm=False):
        windows, owner = [], []
        for index, (string,) in enumerate(req.args for req in requests):
            for context, continuation in map(_lm_utils.make_disjoint_window, _lm_utils.get_rolling_token_windows(
                    token_list=self.tok_encode(string), prefix_token=self.prefix_token_id,
                    max_seq_len=self._max_length, context_len=1)):
                windows.append((None, context, continuation))
                owner.append(index)
        scores = self._loglikelihood_tokens(windows, disable_tqdm=disable_tqdm)
        totals = [0.0] * len(requests)
        for index, (score, _) in zip(owner, scores):
            totals[index] += score
        for req, total in zip(requests, totals):
            self.cache_hook.add_partial("loglikelihood_rolling", (req.args[0],), total)
        return totals

    # -- generation

    def _stops(self, gen_kwargs):
        until = gen_kwargs.get("until")
        if until is None:
            until = [self.tok_decode([self._eot])] if self._eot_stops else []
        elif isinstance(until, str):
            until = [until]
        elif not isinstance(until, (list, tuple)):
            raise ValueError(f"tmm: gen_kwargs 'until' must be a str or a list of str, got {until!r}")
        return [s for s in until if s]

    def _generate_batch(self, prompts, max_new, stops, temperature, top_k, top_p):
        """Lists of new ids per prompt."""
        texts = [[] for _ in prompts]

        def stopped(ids):
            text = self.tok_decode(ids)
            return any(s in text for s in stops)

        if hasattr(self.model, "generate"):
            def on_tokens(round_ids):
                for b, t in enumerate(round_ids):
                    if t >= 0:
                        texts[b].append(int(t))
                return not all(stopped(ids) or (self._eot_stops and ids and ids[-1] == self._eot) for ids in texts)

            out = self.model.generate(prompts, max_new, temperature=temperature, top_k=top_k, top_p=top_p,
                                      seed=self.seed, stop_tokens=[self._eot] if self._eot_stops else [],
                                      method=self.method,
                                      on_tokens=on_tokens if stops else None)
            return [list(t) for t in out["tokens"]]
        # A model without the C++ decoder (tmm.nn): greedy, recomputing the forward.
        rows = [list(p) for p in prompts]
        done = [False] * len(rows)
        for _ in range(max_new):
            logits = self._logits(rows)
            for b, r in enumerate(rows):
                if not done[b]:
                    t = int(logits[b, len(r) - 1].argmax())
                    r.append(t)
                    texts[b].append(t)
                    done[b] = (self._eot_stops and t == self._eot) or stopped(texts[b])
            if all(done):
                break
        return texts

    def generate_until(self, requests, disable_tqdm=False):
        groups = {}
        for i, req in enumerate(requests):
            context, gen_kwargs = req.args
            groups.setdefault(json.dumps(gen_kwargs, sort_keys=True, default=str), []).append((i, context))
        results = [None] * len(requests)
        bar = Progress(len(requests), desc="tmm generate_until", unit="request",
                       enabled=not (disable_tqdm or len(requests) < 2))
        for key, items in groups.items():
            gen_kwargs = dict(json.loads(key))
            stops = self._stops(gen_kwargs)
            max_new = _as_int(gen_kwargs.pop("max_gen_toks", self.max_gen_toks), "max_gen_toks")
            max_new = max(1, min(max_new, self._max_length - 1))
            sample = bool(gen_kwargs.get("do_sample", False))
            temperature = float(gen_kwargs.get("temperature", 0.0) or 0.0) if sample else 0.0
            top_k = int(gen_kwargs.get("top_k", 0) or 0)
            top_p = float(gen_kwargs.get("top_p", 1.0) or 1.0)
            room = self._max_length - max_new
            encoded = [(i, self.tok_encode(ctx)[-room:] or [self.prefix_token_id]) for i, ctx in items]
            encoded.sort(key=lambda item: -len(item[1]))
            start = 0
            while start < len(encoded):
                n = self._rows_per_batch(len(encoded[start][1]) + max_new)
                batch = encoded[start:start + n]
                start += n
                new = self._generate_batch([p for _, p in batch], max_new, stops, temperature, top_k, top_p)
                for (i, _), ids in zip(batch, new):
                    if self._eot_stops and self._eot in ids:
                        ids = ids[:ids.index(self._eot)]
                    text = self.tok_decode(ids)
                    for s in stops:
                        text = text.split(s)[0]
                    results[i] = text
                    self.cache_hook.add_partial("generate_until", requests[i].args, text)
                bar.update(len(batch))
        bar.close()
        return results
