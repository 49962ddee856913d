"""The child process of lab.bench.revisions: one checkout's training-step
times and greedy tokens per second for one zoo config. It imports tmm from
wherever the child's PYTHONPATH points and nothing of the lab, so that two
revisions of tmm run this same code."""
import statistics
import time

import torch

import tmm.models


def child(spec):
    """One checkout's times for one config."""
    torch.set_num_threads(spec["threads"])
    out = {}
    for mode in ("eager", "compiled"):
        torch.manual_seed(0)
        model = tmm.models.build(spec["config"])
        vocab = model.config["vocab_size"]
        ids = torch.randint(0, vocab, (spec["batch"], spec["seq"]), generator=torch.Generator().manual_seed(1))
        forward = torch.compile(model, backend=spec["compile_backend"]) if mode == "compiled" else model
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        times = []
        for i in range(spec["warmup"] + spec["steps"]):
            t0 = time.perf_counter()
            loss = forward(ids, labels=ids, shift_labels=False).loss
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            if i >= spec["warmup"]:
                times.append(time.perf_counter() - t0)
        out[f"{mode}_step_ms"] = 1e3 * statistics.median(times)
    model.eval()
    prompt = ids[0, :spec["prompt"]].tolist()
    model.generate(prompt, max_new_tokens=2, temperature=0)  # warm-up
    t0 = time.perf_counter()
    model.generate(prompt, max_new_tokens=spec["new_tokens"], temperature=0)
    out["generate_tok_s"] = spec["new_tokens"] / (time.perf_counter() - t0)
    return out
