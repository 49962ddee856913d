"""The claims suite (lab.experiments.claims): the smoke scale end to end,
resume and skip, the plan and settings errors (each verdict rule on results
made up for the test: test_claims_verdicts.py)."""
import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from lab.experiments import claims, operator_index
from lab.experiments.claims import ClaimsSettings, run_claims
from lab.experiments.claims.report import CONSISTENT, NOT_CONSISTENT, UNSETTLED, UNTESTED
from lab.experiments.claims import suite as suite_mod
from lab.experiments.claims.scales import scale
from lab.experiments.claims.suite import DONE_FILE, Suite
from lab.experiments.errors import SettingsError

REPO = Path(__file__).resolve().parents[2]
VERDICTS = {CONSISTENT, NOT_CONSISTENT, UNSETTLED, UNTESTED}


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
    # every training run is a finished job with its settings and the revision of the lab's checkout
    jobs = list(out.rglob(DONE_FILE))
    assert (out / "copy" / "n16" / "lr0.003" / DONE_FILE) in jobs and len(jobs) > 20
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    for job in jobs:
        git = json.loads(job.read_text())["git"]
        assert git["revision"] == head and isinstance(git["dirty"], bool), job
    assert json.loads((out / "copy" / "n16" / "lr0.003" / "config.json").read_text())["git"]["revision"] == head
    assert (out / "copy" / "copy_accuracy.png").is_file()
    # the trained TMMs' initial vectors are kept, so the operator-index rule can tell whether they moved
    assert (out / "copy" / "n16" / "lr0.003" / "checkpoints" / "tmm" / operator_index.INITIAL_VECTORS).is_file()
    assert list((out / "retention").glob(f"*/capacity-random/seed0/capacity-encoders/tmm/"
                                         f"{operator_index.INITIAL_VECTORS}"))
    index = next(c for c in result.claims if c.name == "operator-index")
    assert "initial vectors not saved" not in index.verdicts[0].evidence


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
    done = out / "mqar" / "kv2-len16" / "lr0.003" / DONE_FILE
    saved = done.read_text()
    try:
        done.write_text(json.dumps({**json.loads(saved), "steps": 999}))
        with pytest.raises(SettingsError, match="kv2-len16/lr0.003 holds a finished job with other settings"):
            run_claims(ClaimsSettings(scale="small", out=str(out), only="mqar", no_progress=True),
                       say=lambda m: None)
    finally:
        done.write_text(saved)


def test_the_archive_keeps_finished_jobs_and_a_new_folder_reads_them(tmp_path):
    archive = tmp_path / "archive"
    first = run_claims(ClaimsSettings(scale="small", out=str(tmp_path / "a"), only="mqar", archive=str(archive),
                                      no_progress=True), say=lambda m: None)
    job = archive / "mqar" / "kv2-len16" / "lr0.003"
    assert sorted(p.name for p in job.iterdir()) == sorted(suite_mod.ARCHIVED)  # small files, no checkpoints
    said = []
    again = run_claims(ClaimsSettings(scale="small", out=str(tmp_path / "b"), only="mqar", archive=str(archive),
                                      no_progress=True), say=said.append)
    assert not [m for m in said if m.startswith(("running", "resuming"))]
    assert [v.evidence for v in again.claims[0].verdicts] == [v.evidence for v in first.claims[0].verdicts]


def test_a_derived_job_is_computed_once_archived_and_read_anywhere(tmp_path):
    archive = tmp_path / "archive"
    calls = []

    def compute():
        calls.append(1)
        return {"score": 0.5}

    here = Suite(tmp_path / "a", scale("small"), archive=archive)
    assert here.derived("x/scores/m", {"kind": "x", "source": "j"}, lambda: None) is None  # no checkpoints here
    assert here.derived("x/scores/m", {"kind": "x", "source": "j"}, compute) == {"score": 0.5}
    assert here.derived("x/scores/m", {"kind": "x", "source": "j"}, compute) == {"score": 0.5}
    assert len(calls) == 1
    elsewhere = Suite(tmp_path / "b", scale("small"), archive=archive)
    assert elsewhere.derived("x/scores/m", {"kind": "x", "source": "j"}, lambda: None) == {"score": 0.5}
    assert elsewhere.archived_jobs("x/scores") == ["m"]
    assert elsewhere.finished_record("x/scores/m") == {"kind": "x", "source": "j"}
    with pytest.raises(SettingsError, match="other settings"):
        elsewhere.derived("x/scores/m", {"kind": "x", "source": "k"}, compute)


def test_the_tables_computed_from_checkpoints_are_rebuilt_from_the_archive(tmp_path):
    archive = tmp_path / "archive"
    names = ("in-context", "operator-index")
    first = run_claims(ClaimsSettings(scale="small", out=str(tmp_path / "a"), archive=str(archive),
                                      only="lm,retention," + ",".join(names), no_progress=True), say=lambda m: None)
    first = [c for c in first.claims if c.name in names]
    assert "no language-model checkpoints" not in first[0].verdicts[0].evidence
    assert "no trained TMM checkpoints" not in first[1].verdicts[0].evidence
    said = []
    again = run_claims(ClaimsSettings(scale="small", out=str(tmp_path / "b"), archive=str(archive),
                                      only=",".join(names), no_progress=True), say=said.append)
    assert not [m for m in said if m.startswith(("running", "resuming"))]
    for a, b in zip(first, again.claims):
        assert [v.evidence for v in b.verdicts] == [v.evidence for v in a.verdicts]
        assert sorted(b.tables[0][1].splitlines()) == sorted(a.tables[0][1].splitlines())


def test_an_unfinished_job_is_resumed(tmp_path, monkeypatch):
    seen = []

    def fake_run_comparison(settings, **kw):  # records the call; the real one is tested above
        seen.append(settings.resume)
        raise KeyboardInterrupt

    monkeypatch.setattr(suite_mod, "run_comparison", fake_run_comparison)
    s = ClaimsSettings(scale="small", out=str(tmp_path), only="mqar", no_progress=True)
    with pytest.raises(KeyboardInterrupt):
        run_claims(s, say=lambda m: None)
    (tmp_path / "mqar" / "kv2-len16" / "lr0.003").mkdir(parents=True, exist_ok=True)
    (tmp_path / "mqar" / "kv2-len16" / "lr0.003" / "config.json").write_text("{}")
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


def test_the_timed_plan_gives_hours_per_claim_adding_up_to_the_total(tmp_path):
    said = []
    run_claims(ClaimsSettings(scale="small", only="copy,mqar", out=str(tmp_path / "d"), dry_run=True, estimate=True),
               say=said.append)
    timed = next(m for m in said if m.startswith("estimated training time"))
    rows = {line.split("|")[1].strip(): line.split("|")[-2].strip() for line in timed.splitlines()[3:]}
    assert set(rows) == {"copy", "mqar", "total"}
    assert float(rows["total"]) == pytest.approx(float(rows["copy"]) + float(rows["mqar"]), abs=0.011)
    assert not (tmp_path / "d").exists()
    # the hours column from given seconds (the small plan's timed hours round to 0.00)
    dry = Suite(tmp_path / "d", scale("small", "cpu"), dry_run=True, say=lambda m: None)
    for name in ("copy", "mqar"):
        claims.CLAIMS[name].run(dry)
    table = claims.estimate.plan_table(dry.plan, {"copy": 3600.0, "mqar": 1800.0})
    hours = {line.split("|")[1].strip(): line.split("|")[-2].strip() for line in table.splitlines()[2:]}
    assert hours == {"copy": "1.00", "mqar": "0.50", "total": "1.50"}


def test_any_machine_leaves_out_what_reads_checkpoints(tmp_path):
    """--any-machine plans no job a later claim reads the checkpoints of (the LM's matched-compute runs) and
    runs no claim that reads checkpoints; the copy sweep, read by none, runs anywhere."""
    two_seeds = dataclasses.replace(scale("small", "cpu"), seeds=(0, 1), lm_seeds=(0, 1))

    def planned(any_machine):
        dry = Suite(tmp_path / "d", two_seeds, dry_run=True, say=lambda m: None, any_machine=any_machine)
        for name in ("copy", "lm"):
            claims.CLAIMS[name].run(dry)
        return {job.path for job in dry.plan}

    everything, portable = planned(False), planned(True)
    dry = Suite(tmp_path / "d", two_seeds, dry_run=True)
    matched = {claims.lm_claim.matched_path(dry, m.label, seed) for m in claims.lm_claim.models(two_seeds)
               for seed in ((0,) if m.label == claims.lm_claim.EXTENSION else (0, 1))}
    assert everything - portable == matched
    assert {"copy/n16/lr0.003", "copy/n16/tmm/lr0.003-seed1", "lm/sweep/lr0.001"} <= portable
    said = []
    run_claims(ClaimsSettings(scale="small", only="copy,retention,in-context,operator-index", dry_run=True,
                              any_machine=True, out=str(tmp_path / "e")), say=said.append)
    assert any(m.startswith("--any-machine: not running retention, in-context, operator-index") for m in said)


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
