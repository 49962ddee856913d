"""lab.bench.compile (scripts/bench_compile.py) in its CPU smoke mode: tiny
sizes, the aot_eager backend; it runs and writes its table and JSON (no
timing is asserted: performance lives in the benchmark, run alone)."""
import json

import pytest

from lab.bench import compile as bench

pytestmark = [pytest.mark.compile, pytest.mark.usefixtures("one_thread")]


def test_smoke_mode_writes_table_and_json(tmp_path):
    results = bench.run(dict(bench.SMOKE), tmp_path, progress=False)
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved["schema"] == "tmm.bench_compile/1" and saved["config"]["backend"] == "aot_eager"
    for mode in ("eager", "compiled"):
        m = saved["modes"][mode]
        assert m["status"] == "ok" and m["repeats"] == bench.SMOKE["steps"] and len(m["times_s"]) == m["repeats"]
        assert m["median_ms"] > 0 and m["first_step_s"] > 0
    assert results["first_loss_rel_err"] <= 1e-5  # same weights, same batch: the same loss
    md = (tmp_path / "table.md").read_text()
    assert md.splitlines()[2] == "| mode | median ms | min ms | steps | first step s |"
    assert "eager median / compiled median:" in md
