"""The claims suite's plots: the LM plot's y-axis spans where the models end
up, not TMM's initial transient (lab.experiments.claims.report.focus_limits);
an x axis whose curves end far apart is logarithmic (spans_log_x)."""
import pytest

from lab.experiments.claims.report import focus_limits, plot_curves, spans_log_x
from lab.experiments.claims.results import ModelResult, Pooled


def lm_pooled(label, start, end, steps=20):
    """bits per byte falling from start to end, fast at first (as an LM's)."""
    rows = [{"step": 10 * i, "tokens": 100 * i, "flops_est": 1e9 * i,
             "eval_bpb": end + (start - end) * 0.5 ** i} for i in range(steps)]
    return Pooled(label, 1, [ModelResult(label, 1, "done", None, end, None, rows)])


def test_focus_limits_span_where_curves_end():
    curves = [[10.8, 4.0, 2.0, 1.7, 1.6, 1.55], [12.0, 3.0, 1.9, 1.6, 1.52, 1.5]]
    low, high = focus_limits(curves)
    assert low < 1.5 and 1.7 < high < 2.0  # the tails' 1.5-1.7 fill the axis; 10.8 and 12 are clipped
    assert focus_limits([[2.0, 1.9, 1.8, 1.7]]) is None  # nothing to clip: the plain axis
    assert focus_limits([]) is None and focus_limits([[]]) is None
    assert focus_limits([[5.0, 1.0, 1.0, 1.0]]) is not None  # a flat tail still gets an axis around it


def plotted_axes(path, groups, y_key, ylabel, **kw):
    """The axes plot_curves drew (save_plot closes the figure: look at them first)."""
    plt = pytest.importorskip("matplotlib.pyplot")
    captured = {}
    real_close = plt.close

    def keep(fig=None):
        if fig is not None and hasattr(fig, "axes"):
            captured["axes"] = fig.axes
        return real_close(fig)
    plt.close = keep
    try:
        assert plot_curves(path, groups, y_key, ylabel, **kw)
    finally:
        plt.close = real_close
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    return captured["axes"]


def test_spans_log_x_where_curves_end_far_apart():
    assert spans_log_x([1e10, 3.4e12])  # the width pair's FLOPs: 340x
    assert not spans_log_x([1.2e12, 3.4e12])  # the copy models' FLOPs: 3x, a linear axis reads them
    assert not spans_log_x([300, 300]) and not spans_log_x([300]) and not spans_log_x([])
    assert not spans_log_x([0, 5e9])  # a curve that never left x = 0 decides nothing


def test_far_apart_flops_get_a_log_axis_and_steps_do_not(tmp_path):
    small, large = lm_pooled("tmm-flat-d4", 3.0, 1.0), lm_pooled("hyena-d128", 3.0, 2.0)
    for row in large.runs[0].rows:
        row["flops_est"] *= 300
    axes = plotted_axes(tmp_path / "width.png", {"width pair": {"a": small, "b": large}}, "eval_bpb", "bpb")
    assert [ax.get_xscale() for ax in axes] == ["linear", "linear", "log"]
    assert axes[2].get_xlabel().endswith("(log)")


def test_lm_plot_clips_the_transient_and_marks_it(tmp_path):
    groups = {"language modelling": {"tmm": lm_pooled("tmm", 10.8, 1.66), "hyena": lm_pooled("hyena", 9.5, 1.54)}}
    for ax in plotted_axes(tmp_path / "lm.png", groups, "eval_bpb", "eval bits per byte", focus=True):
        low, high = ax.get_ylim()
        assert low < 1.54 and high < 2.0  # the 0.12 that decides a verdict is a fifth of the axis, not 1%
        assert any("clipped above" in t.get_text() for t in ax.texts)
