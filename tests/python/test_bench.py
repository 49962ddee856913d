"""lab.bench: the timing loop, the memory probes (of a call and of a block),
provenance, the report writers, and the operator benchmark on a tiny grid
(counts and files, not speed: timings are the benchmark scripts' business);
and tmm.tables' markdown table."""
import json
import time
from pathlib import Path

import pytest
import torch

from tmm import tables
from lab.bench import memory, ops, provenance, report, timing

REPO = Path(__file__).resolve().parents[2]


def test_time_calls_counts_and_fields():
    calls = []
    t = timing.time_calls(lambda: calls.append(1), warmup=2, repeats=5)
    assert t["status"] == "ok" and t["repeats"] == 5 and len(t["times_s"]) == 5 and len(t["warmup_s"]) == 2
    assert len(calls) == 7
    assert t["min_ms"] <= t["median_ms"] and "other_cpu_cores" in t


def test_time_calls_budget():
    slow = lambda: time.sleep(0.05)  # noqa: E731
    skipped = timing.time_calls(slow, warmup=1, repeats=10, budget_s=0.01)
    assert skipped["status"] == "skipped" and skipped["reason"].startswith("time (")
    fewer = timing.time_calls(slow, warmup=1, repeats=100, budget_s=0.4)
    assert fewer["status"] == "ok" and 1 <= fewer["repeats"] < 100


def test_timed_returns_the_result():
    seconds, out = timing.timed(lambda: 42)
    assert out == 42 and seconds >= 0


def test_peak_memory_of_a_known_allocation():
    n = 1 << 20  # 4 MiB of float32, returned by the call
    peak = memory.peak_alloc_bytes(lambda: torch.ones(n))
    assert n * 4 <= peak < n * 4 + (1 << 16)
    probe = memory.RssProbe()
    if probe.ok:
        assert probe.measure(lambda: torch.ones(4 * n)) >= 8 * n  # 16 MiB touched; page granularity, noise


def test_peak_memory_block_counts_what_it_allocated_and_resets():
    # CI runs on Linux, where the resident-set high-water mark can be reset.
    with memory.PeakMemory("cpu") as big:
        x = torch.ones(64 * 2 ** 20)  # 256 MiB, touched
        del x
    assert big.increase_mib is not None and 250 <= big.increase_mib < 400, big.increase_mib
    assert big.peak_mib >= big.increase_mib
    with memory.PeakMemory("cpu") as small:  # the 256 MiB peak before does not count
        torch.ones(1000).sum()
    assert small.increase_mib < 50, small.increase_mib


def test_peak_memory_block_counts_memory_an_earlier_block_freed():
    # A previous model's training leaves freed heap pages resident; the next
    # block reuses them. Without returning them to the OS first, 200 MiB
    # allocated in the block read as about 2 MiB.
    def megabytes(k):
        return [torch.ones(2 ** 18) for _ in range(k)]  # k tensors of 1 MiB, heap-sized

    torch.ones(2 ** 22)  # 16 MiB freed from mmap: glibc's threshold rises, 1 MiB tensors go on the heap
    freed = megabytes(200)
    keeper = torch.ones(1000)  # above them on the heap, so their pages are not trimmed on free
    del freed
    with memory.PeakMemory("cpu") as mem:
        again = megabytes(200)
        del again
    assert mem.increase_mib is not None and mem.increase_mib >= 150, mem.increase_mib
    del keeper


def test_peak_memory_block_on_a_device_it_cannot_measure_gives_none():
    with memory.PeakMemory("meta") as mem:
        torch.ones(10, device="meta")
    assert mem.peak_mib is None and mem.increase_mib is None


def test_provenance_says_where(tmp_path):
    env = provenance.environment("cpu")
    for key in ("torch", "python", "cpu_count", "threads", "device", "loadavg"):
        assert key in env
    here = provenance.git(REPO)  # this checkout, named by the caller
    assert len(here["revision"]) == 40 and isinstance(here["dirty"], bool)
    assert provenance.git(None) == provenance.git(tmp_path) == {"revision": None, "dirty": None}
    assert isinstance(env.get("cpu_flags", []), list)
    mark = provenance.CPU_LOAD.mark()
    assert provenance.CPU_LOAD.others(mark, min_wall=1e3) is None  # too short to tell


def test_markdown_table_alignment():
    text = tables.markdown_table(["a", "b", "c"], [[1, 2, 3]], left=1)
    assert text == "| a | b | c |\n|---|---:|---:|\n| 1 | 2 | 3 |"
    assert tables.markdown_table(["a", "b"], [], align="rl").splitlines()[1] == "|---:|---|"


def test_live_json_is_readable_after_every_change(tmp_path):
    path = tmp_path / "r.json"
    live = report.LiveJson(path, {"schema": "x"})
    assert json.loads(path.read_text()) == {"complete": False, "schema": "x"}
    live.add("cells", {"a": 1})
    assert json.loads(path.read_text())["cells"] == [{"a": 1}]
    live.finish()
    assert json.loads(path.read_text())["complete"] is True
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]  # no temporary files left


def tiny(tmp_path, **kw):
    cfg = ops.OpsBenchConfig(lengths=[16, 64], batch=2, channels=8, gk=[(1, 1), (8, 1)], repeats=2, warmup=1,
                             cell_budget=5.0, **kw)
    return ops.run(cfg, tmp_path, progress=False)


def test_ops_bench_tiny_grid(tmp_path):
    out = tiny(tmp_path, paths=["direct", "fft"])
    res = json.loads((tmp_path / "results.json").read_text())
    assert res["schema"] == "tmm.bench_ops/1" and res["complete"] and not res.get("truncated")
    assert {c["impl"] for c in res["cells"]} == {"ours", "ours_direct", "ours_fft", "fft", "dense"}
    assert len(res["cells"]) == 2 * 2 * 2 * 5 and all(c["status"] == "ok" for c in res["cells"])
    assert all(c["ok"] for c in res["checks"]) and len(res["checks"]) == 4
    assert {"peak_alloc_bytes", "median_ms", "times_s", "bytes"} <= set(res["cells"][0])
    assert [t["target"][:8] for t in res["targets"]]  # verdicts present
    head = out["table"].splitlines()[0]
    assert head == ("| mode | G | K | L | ours ms | ours:direct ms | ours:fft ms | fft ms | dense ms | fft/ours | dense/ours "
                    "| ours peak MiB | fft peak MiB | mem ratio |")
    md = (tmp_path / "table.md").read_text()
    assert "## Targets" in md and "correctness: ours vs fft matches on 4/4 configs" in md
    assert (tmp_path / "plot.png").stat().st_size > 1000


def test_ops_bench_table_without_paths_keeps_its_columns(tmp_path):
    out = tiny(tmp_path, modes=["fwd"], no_memory=True)
    assert out["table"].splitlines()[0] == ("| mode | G | K | L | ours ms | fft ms | dense ms | fft/ours | dense/ours "
                                            "| ours peak MiB | fft peak MiB | mem ratio |")


def test_ops_bench_deadline_marks_truncated(tmp_path):
    tiny(tmp_path, deadline=time.time() - 1, no_memory=True)
    res = json.loads((tmp_path / "results.json").read_text())
    assert res["truncated"] and res["complete"]
    assert res["cells"] and all(c["reason"] == "deadline" for c in res["cells"])


def test_ops_bench_max_len_and_dense_guard(tmp_path):
    tiny(tmp_path, paths=["fft"], max_len={"ours_fft": 16}, dense_max_len=16, modes=["fwd"], no_memory=True)
    cells = json.loads((tmp_path / "results.json").read_text())["cells"]
    at64 = {c["impl"]: c for c in cells if c["L"] == 64 and c["G"] == 1}
    assert at64["ours_fft"]["reason"] == "L > 16" and at64["dense"]["reason"] == "L > 16"
    assert at64["ours"]["status"] == "ok"


def test_floor_bench_tiny(tmp_path, capsys):
    """scripts/bench_ops.py --floor --tiny: the floor benchmark's whole code
    path in seconds (the FFT pair through pyfftw when installed, else
    scipy.fft; at L = 33, 2L = 66 = 2 * 3 * 11 takes the size candidates),
    with two forced transform sizes."""
    from lab.bench import floor
    from lab.cli import bench_ops

    threads = torch.get_num_threads()
    try:
        assert bench_ops.main(["--floor", "--tiny", "--sizes", "12,40", "--out", str(tmp_path)]) == 0
    finally:
        torch.set_num_threads(threads)
    res = json.loads((tmp_path / "results.json").read_text())
    assert res["schema"] == "tmm.bench_floor/2" and res["complete"] and res["floor_lib"] in ("fftw", "scipy")
    assert [r["L"] for r in res["lengths"]] == [16, 33]
    assert floor.fftw_size_candidates(16) == [32] and floor.fftw_size_candidates(33) == [70, 72, 128]
    for r in res["lengths"]:
        assert all(r[k]["status"] == "ok" for k in ("memcpy", "strided_pair", "fwd", "fwdbwd"))
        assert sorted(r["pairs"]) == sorted(str(n) for n in floor.fftw_size_candidates(r["L"]))
        assert r["n"] in floor.fftw_size_candidates(r["L"]) and r["n"] >= 2 * r["L"] - 1
        for way in ("in", "out"):
            assert all(t["status"] == "ok" for t in r[f"transpose_{way}"].values())
        assert r["floor_fwd_ms"] == pytest.approx(r["pair_ms"] + r["transposes_ms"])
        assert r["floor_fwdbwd_ms"] == pytest.approx(2.5 * r["pair_ms"] + 2 * r["transposes_ms"])
        assert r["fwd_vs_floor"] > 0 and r["fwdbwd_vs_floor"] > 0
    assert [r["L"] for r in res["sweep"]] == [20, 30, 40] and res["sweep_jump_auto"] > 0
    assert [r["n"] for r in res["sizes"]["rows"]] == [12, 40]
    table = (tmp_path / "table.md").read_text()
    assert "fwd / floor" in table and "strided pair ms" in table and "Smooth-L sweep" in table
    assert (tmp_path / "plot.png").stat().st_size > 1000
    assert "x floor), fwd+bwd" in capsys.readouterr().out


def test_floor_transposes_are_transposes():
    """The floor's transposes move x to B x C x L and back exactly, both ways
    of copying."""
    from lab.bench import floor

    x = torch.randn(3, 50, 24)
    xt = torch.empty(3, 24, 50)
    y = torch.empty_like(x)
    calls = floor.transposes(x, threads=2, out=(xt, y))
    for way in ("copy", "blocked"):
        xt.zero_()
        y.zero_()
        calls["in"][way]()
        calls["out"][way]()
        assert torch.equal(xt, x.transpose(1, 2)) and torch.equal(y, x)


def test_bench_revisions_smoke(tmp_path):
    """The revisions benchmark's code path, tiny models, the same checkout twice."""
    from lab.cli import bench_revisions

    assert bench_revisions.main(["--checkout", f"a={REPO}", "--checkout", f"b={REPO}", "--smoke",
                                 "--out", str(tmp_path)]) == 0
    res = json.loads((tmp_path / "results.json").read_text())
    for config in ("tmm-tiny", "mamba2-tiny"):
        for label in ("a", "b"):
            cell = res["cells"][config][label]
            assert cell["eager_step_ms"] > 0 and cell["compiled_step_ms"] > 0 and cell["generate_tok_s"] > 0
    assert "tmm-tiny" in (tmp_path / "table.md").read_text()


def test_step_breakdown_tiny(tmp_path, capsys):
    """scripts/bench_step.py --tiny: a TMM and a Hyena training step split
    by op category in seconds; the categories cover the measured step and
    the mixer op is seen in both models (their long convolutions)."""
    from lab.bench import step
    from lab.cli import bench_step

    assert bench_step.main(["--tiny", "--out", str(tmp_path)]) == 0
    res = json.loads((tmp_path / "results.json").read_text())
    assert res["schema"] == "tmm.bench_step/1" and res["complete"]
    assert [(r["model"], r["L"], r["batch"]) for r in res["rows"]] == [
        ("tmm-tiny", 16, 4), ("tmm-tiny", 32, 2), ("hyena-tiny", 16, 4), ("hyena-tiny", 32, 2)]
    for r in res["rows"]:
        assert sum(r["fwd_bwd_shares"].values()) == pytest.approx(1.0)
        assert sum(r["categories_ms"].values()) == pytest.approx(
            r["phases_ms"]["forward"] + r["phases_ms"]["backward"] + r["phases_ms"]["optimizer"])
        assert r["fwd_bwd_shares"]["mixer op"] > 0 and r["fwd_bwd_shares"]["matmuls"] > 0
    assert (step.category("tmm::causal_toeplitz_backward"), step.category("aten::addmm"),
            step.category("aten::add_")) == ("mixer op", "matmuls", step.OTHER)
    table = (tmp_path / "table.md").read_text()
    assert "| mixer op | matmuls |" in table and "hyena-tiny" in capsys.readouterr().out
