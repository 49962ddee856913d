"""The claims suite (tmm.experiments.claims): the smoke scale end to end,
resume and skip, the plan, settings errors, and each verdict rule on
results made up for the test."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tmm.experiments import claims
from tmm.experiments.claims import ClaimsSettings, ablation_claim, copy_claim, lm_claim, retention_claim, run_claims
from tmm.experiments.claims.report import CONSISTENT, NOT_CONSISTENT, UNTESTED
from tmm.experiments.claims.results import ModelResult, Pooled, value_at
from tmm.experiments.claims.suite import DONE_FILE
from tmm.experiments.errors import SettingsError

REPO = Path(__file__).resolve().parents[2]
VERDICTS = {CONSISTENT, NOT_CONSISTENT, UNTESTED}


def _pooled(label, finals, steps, bpb=None):
    runs = []
    for i, (acc, st) in enumerate(zip(finals, steps)):
        rows = [{"step": 10, "tokens": 100, "flops_est": 1e6, "eval_acc": acc, "eval_loss": 1.0,
                 **({"eval_bpb": bpb[i]} if bpb else {})}]
        runs.append(ModelResult(label, 100, "done", acc, 1.0, st, rows))
    return Pooled(label, 100, runs)


@pytest.fixture(scope="module")
def small_suite(tmp_path_factory):
    out = tmp_path_factory.mktemp("claims-small")
    said = []
    result = run_claims(ClaimsSettings(scale="small", out=str(out), no_progress=True), say=said.append,
                        command=["test"], repo=REPO)
    return out, result, said


def test_small_scale_runs_every_claim(small_suite):
    out, result, _ = small_suite
    assert [c.name for c in result.claims] == list(claims.CLAIMS)
    md = (out / "claims.md").read_text()
    assert "smoke test" in md
    for c in result.claims:
        assert f"## {c.title}" in md
        assert c.verdicts, c.name
        assert {v.verdict for v in c.verdicts} <= VERDICTS
        for plot in c.plots:
            assert (out / plot).stat().st_size > 1000, plot
    saved = json.loads((out / "claims.json").read_text())
    assert [c["name"] for c in saved["claims"]] == list(claims.CLAIMS)
    assert saved["scale"] == "small" and saved["git"]["revision"]
    # every training run is a finished job with its settings
    assert (out / "copy" / "n16" / "seed0" / DONE_FILE).is_file()
    assert (out / "copy" / "copy_accuracy.png").is_file()


def test_a_second_run_trains_nothing_and_keeps_the_report(small_suite):
    out, first, _ = small_suite
    said = []
    again = run_claims(ClaimsSettings(scale="small", out=str(out), only="copy,mqar", no_progress=True),
                       say=said.append, command=["test"])
    assert not [m for m in said if m.startswith(("running", "resuming"))]
    assert [v.evidence for v in again.claims[0].verdicts] == [v.evidence for v in first.claims[0].verdicts]
    # the summary still holds the claims run before (in other parts of the suite)
    assert "## Claim 4: ablations" in (out / "claims.md").read_text()


def test_a_job_with_other_settings_is_an_error(small_suite, tmp_path):
    out, _, _ = small_suite
    done = out / "mqar" / "kv2-len16" / DONE_FILE
    saved = done.read_text()
    try:
        done.write_text(json.dumps({**json.loads(saved), "steps": 999}))
        with pytest.raises(SettingsError, match="kv2-len16 holds a finished job with other settings"):
            run_claims(ClaimsSettings(scale="small", out=str(out), only="mqar", no_progress=True),
                       say=lambda m: None)
    finally:
        done.write_text(saved)


def test_an_unfinished_job_is_resumed(tmp_path, monkeypatch):
    from tmm.experiments.claims import suite as suite_mod

    seen = []

    def fake_run_comparison(settings, **kw):  # records the call; the real one is tested above
        seen.append(settings.resume)
        raise KeyboardInterrupt

    monkeypatch.setattr(suite_mod, "run_comparison", fake_run_comparison)
    s = ClaimsSettings(scale="small", out=str(tmp_path), only="mqar", no_progress=True)
    with pytest.raises(KeyboardInterrupt):
        run_claims(s, say=lambda m: None)
    (tmp_path / "mqar" / "sizing" / "lr0.003").mkdir(parents=True, exist_ok=True)
    (tmp_path / "mqar" / "sizing" / "lr0.003" / "config.json").write_text("{}")
    with pytest.raises(KeyboardInterrupt):
        run_claims(s, say=lambda m: None)
    assert seen == [False, True]


def test_dry_run_plans_every_claim_and_trains_nothing(tmp_path):
    said = []
    result = run_claims(ClaimsSettings(scale="default", out=str(tmp_path / "d"), dry_run=True), say=said.append)
    for name in ("copy", "lm", "mqar", "retention", "ablation", "total"):
        assert f"| {name} |" in result.plan
    assert not (tmp_path / "d").exists()
    assert result.claims == []


@pytest.mark.parametrize("kwargs, needle", [
    ({"only": "copy,nope"}, "--only: expected a comma-separated subset"),
    ({"scale": "huge"}, "--scale must be one of small, default, quick, paper"),
    ({"device": "tpu"}, "--device must be cpu or cuda"),
    ({"threads": 0}, "--threads must be >= 1"),
])
def test_bad_settings_name_the_flag(kwargs, needle):
    with pytest.raises(SettingsError, match=needle):
        ClaimsSettings(**kwargs).checked()


def test_command_line_dry_run_and_error():
    script = str(REPO / "scripts" / "claims.py")
    ok = subprocess.run([sys.executable, script, "--scale", "small", "--dry-run"], capture_output=True, text=True,
                        timeout=300)
    assert ok.returncode == 0, ok.stderr
    assert "| total |" in ok.stderr
    bad = subprocess.run([sys.executable, script, "--only", "nope", "--dry-run"], capture_output=True, text=True,
                         timeout=300)
    assert bad.returncode == 2 and "--only" in bad.stderr


# -- the verdict rules ----------------------------------------------------------------------------------

def test_copy_efficiency_rule():
    tmm = _pooled("tmm", [1.0, 1.0], [100, 120])
    fast = _pooled("transformer", [1.0, 1.0], [100, 100])
    slow = _pooled("transformer", [1.0, 1.0], [50, 50])
    never = _pooled("transformer", [0.3, 0.3], [None, None])
    assert copy_claim.efficiency(tmm, fast, 2, "tmm", "transformer")[0] == CONSISTENT  # ratio 1.1
    assert copy_claim.efficiency(tmm, slow, 2, "tmm", "transformer")[0] == NOT_CONSISTENT  # ratio 2.2
    assert copy_claim.efficiency(tmm, never, 2, "tmm", "transformer")[0] == CONSISTENT
    assert copy_claim.efficiency(never, tmm, 2, "a", "b")[0] == NOT_CONSISTENT
    assert copy_claim.efficiency(never, never, 2, "a", "b")[0] == UNTESTED


def test_copy_verdicts_struggle_and_frozen():
    pooled = {"tmm": _pooled("tmm", [1.0], [100]), "transformer": _pooled("transformer", [1.0], [90]),
              "hyena": _pooled("hyena", [0.4], [None]), "mamba2": _pooled("mamba2", [0.95], [150]),
              "tmm-frozen-flat": _pooled("tmm-frozen-flat", [0.1], [None]),
              "tmm-frozen": _pooled("tmm-frozen", [0.2], [None])}
    v = {x.claim.split(": ", 1)[1]: x.verdict for x in copy_claim.verdicts(pooled, 256, 1, (32, 128))}
    assert v["TMM matches the Transformer's training efficiency"] == CONSISTENT
    assert v["Mamba2 and Hyena struggle"] == NOT_CONSISTENT  # mamba2 learns within 2x
    assert v["frozen Toeplitz vectors make copying fail (flat; 4 heads with trained projections)"] == CONSISTENT
    pooled["mamba2"] = _pooled("mamba2", [0.95], [250])
    v = {x.claim.split(": ", 1)[1]: x.verdict for x in copy_claim.verdicts(pooled, 256, 1, (32, 128))}
    assert v["Mamba2 and Hyena struggle"] == CONSISTENT


def test_value_at_interpolates_between_evaluations():
    rows = [{"flops_est": 0.0, "eval_bpb": 8.0}, {"flops_est": 10.0, "eval_bpb": 4.0},
            {"flops_est": 20.0, "eval_bpb": 2.0}]
    assert value_at(rows, "flops_est", "eval_bpb", 5.0) == 6.0
    assert value_at(rows, "flops_est", "eval_bpb", 20.0) == 2.0
    assert value_at(rows, "flops_est", "eval_bpb", 25.0) is None


def test_lm_best_lr_skips_diverged_runs():
    def job(loss, status="done"):
        return {"tmm": ModelResult("tmm", 1, status, None, loss, None, [])}
    assert lm_claim.best_lrs({1e-3: job(2.0), 3e-3: job(1.5), 1e-2: job(0.1, "diverged")}, ()) == {"tmm": 3e-3}


def test_ablation_rules():
    lm = {k: _pooled(k, [0.0], [None], bpb=[b]) for k, b in [
        ("heads1", 2.0), ("heads4", 1.9), ("heads16", 1.85), ("flat-kernel1", 2.0), ("flat-kernel4", 2.0),
        ("flat-kernel8", 2.1), ("expanded", 1.95)]}
    assert [v.verdict for v in ablation_claim.verdicts(lm)] == [CONSISTENT, CONSISTENT, CONSISTENT]
    lm["heads16"] = _pooled("heads16", [0.0], [None], bpb=[2.5])
    assert ablation_claim.verdicts(lm)[0].verdict == NOT_CONSISTENT


def test_retention_rules():
    def rows(mode, **acc):
        return [{"mode": mode, "arch": a, "token_acc": v} for a, v in acc.items()]
    good = rows("extraction", tmm=0.6, transformer=0.4, hyena=0.3, mamba2=0.3, none=0.2) + \
        rows("capacity", tmm=0.7, hyena=0.5, mamba2=0.4, none=0.2)
    assert [v.verdict for v in retention_claim.verdicts(good, "h")] == [CONSISTENT, CONSISTENT]
    flat = rows("extraction", tmm=0.2, transformer=0.2, hyena=0.2, mamba2=0.2, none=0.2)
    assert retention_claim.verdicts(flat, "h")[0].verdict == UNTESTED
    assert retention_claim.verdicts(flat, "h")[1].verdict == UNTESTED  # capacity not run
