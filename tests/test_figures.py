"""Every figure a simulation writes can be read: each simulation runs its write path on a small
configuration into a tmp dir, ``reporting.captured_figures`` hands back the Figure it saved, and
the figure is inspected through matplotlib's objects (after ``fig.canvas.draw()``):

- every axes has an x-label and a y-label;
- an axes with more than one series has a legend (its own or the figure's) listing every series,
  every legend entry names an artist that is drawn, and no data line is left unlabelled;
- on each axis, no two visible tick labels overlap (their rendered bounding boxes);
- ``reporting.figure_problems`` (the rules ``save_figure`` warns about) finds nothing.

Deliberately broken figures (the old users.png's colliding log minor-tick labels, a missing
label, two series without a legend, a legend entry for nothing, an unlabelled line) must be caught
by the same inspection, and ``save_figure`` must repair the tick collision.
"""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Callable
from itertools import combinations
from pathlib import Path
from typing import Any

import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from ldp.simulations import reporting
from ldp.simulations.reporting import FigureReadabilityWarning, captured_figures, figure_problems

pytestmark = pytest.mark.timeout(60)


# --- the inspection, written against matplotlib directly ---


def _visible_tick_labels(axis: Any) -> list[Any]:
    """Tick labels drawn on an axis: visible, non-empty, at a position inside the view interval."""
    low, high = sorted(axis.get_view_interval())
    coordinate = 0 if axis.axis_name == "x" else 1
    slack = 1e-9 * (high - low)
    return [
        t for t in axis.get_ticklabels(which="both")
        if t.get_visible() and t.get_text() and low - slack <= t.get_position()[coordinate] <= high + slack
    ]  # fmt: skip


def _tick_collisions(ax: Any, renderer: Any) -> list[str]:
    found = []
    for axis in (ax.xaxis, ax.yaxis):
        boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in _visible_tick_labels(axis)]
        found += [f"{axis.axis_name} tick labels {a!r} and {b!r} overlap" for (a, ba), (b, bb) in combinations(boxes, 2) if ba.overlaps(bb)]
    return found


def _legend_gaps(ax: Any, fig: Figure) -> list[str]:
    handles, labels = ax.get_legend_handles_labels()
    all_labels = {label for other in fig.axes for label in other.get_legend_handles_labels()[1]}
    unlabelled = [line for line in ax.get_lines() if line.get_label().startswith("_child") and len(set(line.get_ydata())) > 1 and len(set(line.get_xdata())) > 1]
    found = [f"an unlabelled line among {len(labels) + len(unlabelled)} series" for _ in unlabelled if len(labels) + len(unlabelled) > 1]
    legends = [ax.get_legend(), *fig.legends]
    entries = [t.get_text() for legend in legends if legend is not None for t in legend.get_texts()]
    if len(labels) > 1:
        found += [f"series {label!r} is in no legend" for label in labels if label not in entries]
    own = [t.get_text() for t in ax.get_legend().get_texts()] if ax.get_legend() is not None else []
    found += [f"legend entry {text!r} names no drawn artist" for text in own if text not in labels]
    found += [f"figure legend entry {t.get_text()!r} names no drawn artist" for legend in fig.legends for t in legend.get_texts() if t.get_text() not in all_labels]
    return found


def inspect(fig: Figure) -> list[str]:
    """What a reader would stumble on, per axes: missing axis labels, series without a legend entry,
    legend entries without a series, unlabelled lines, overlapping tick labels."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    found = []
    for k, ax in enumerate(fig.axes):
        where = f"axes {k + 1} ({ax.get_title()!r})"
        found += [f"{where}: no {name}-label" for name, text in (("x", ax.get_xlabel()), ("y", ax.get_ylabel())) if not text.strip()]
        found += [f"{where}: {problem}" for problem in _legend_gaps(ax, fig) + _tick_collisions(ax, renderer)]
    return found


# --- the figures the simulations write ---


def _rr(out: Path) -> None:
    from ldp.simulations import randomized_response

    randomized_response.main(["--users", "2000", "--out", str(out)])


def _rr_demo(out: Path) -> None:
    from ldp.experiment import ExperimentArgs, get_experiment  # rr-demo writes the files
    from ldp.local.oracle import InProcessLROracle

    exp = get_experiment("rr-demo")
    args = ExperimentArgs(users=4000, epsilon=1.0, seed=1, out=str(out))
    asyncio.run(exp.run(InProcessLROracle(exp.population(args)), args))


def _sq_local(out: Path) -> None:
    from ldp.simulations import sq_local

    sq_local.main(["--quick", "--out", str(out)])


def _sq_sample_complexity(out: Path) -> None:
    from ldp.simulations import sq_sample_complexity

    sq_sample_complexity.main(["--quick", "--out", str(out)])


def _pure_vs_approximate(out: Path) -> None:
    from ldp.simulations import pure_vs_approximate as pva

    config = pva.Config(point_bits=(8, 16, 32, 64, 128, 256), threshold_bits=(6, 10, 14), trials=20, threshold_trials=20, include_lmm=False)
    pva.write_outputs(pva.run(config), out)


def _separation_result(out: Path) -> dict[str, Any]:
    from ldp.simulations.separation import Config, run

    config = Config(
        trials=3, cap=20_000, resolution=1.5, masked_d=(2, 4), learners=("LI", "LNI", "LNI-b", "central-A*", "central-occam", "local-parity"),
        central_parity_d=(8, 16), occam_d=(4,), local_parity_d=(4,), curve_d=2, curve_users=(500, 5_000), curve_trials=2,
        point_bits=(8, 64), point_trials=20, out=str(out),
    )  # fmt: skip
    return asyncio.run(run(config))  # writes its outputs into out


def _separation(out: Path) -> None:
    """A tiny run (all three panels, a learner failing at the cap), then its result redrawn with a
    LNI/LI gap ≥ 4, which the full run shows in the masked panel's legend."""
    from ldp.simulations.separation import write_outputs

    result = _separation_result(out / "run")
    li = next(r for r in result["rows"] if r["learner"] == "LI")
    result["ratios"] = [{"d": li["d"], "LI": li["users_needed"], "LNI": None, "LNI_failed_at": 8 * li["users_needed"], "ratio": 8.0,
                         "ratio_is_lower_limit": True, "lower_bound_ratio": 1.0, "predicted_ratio": None}]
    write_outputs(result, out)


SIMULATIONS: dict[str, tuple[Callable[[Path], None], tuple[str, ...]]] = {
    "randomized_response": (_rr, ("estimates.png",)),
    "rr-demo": (_rr_demo, ("estimates.png",)),
    "sq_local": (_sq_local, ("outputs.png",)),
    "sq_sample_complexity": (_sq_sample_complexity, ("users.png",)),
    "pure_vs_approximate": (_pure_vs_approximate, ("m90.png",)),
    "separation": (_separation, ("separation.png", "separation.png")),
}


@pytest.mark.parametrize("name", SIMULATIONS)
def test_every_simulation_figure_is_readable(name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write, pngs = SIMULATIONS[name]
    with warnings.catch_warnings():
        warnings.simplefilter("error", FigureReadabilityWarning)  # save_figure found nothing to warn about
        with captured_figures() as saved:
            write(tmp_path)
    capsys.readouterr()
    assert sorted(path.name for path, _ in saved) == sorted(pngs)
    for path, fig in saved:
        assert path.stat().st_size > 10_000, path  # a real image was written
        assert fig.axes and all(ax.has_data() for ax in fig.axes), path
        assert inspect(fig) == [], path
        assert figure_problems(fig) == [], path


# --- deliberately broken figures must be caught ---


def _figure(columns: int = 1) -> tuple[Figure, list[Any]]:
    fig = Figure(figsize=(5.3 * columns, 4.6), layout="tight")
    FigureCanvasAgg(fig)
    return fig, list(fig.subplots(1, columns, squeeze=False)[0])


def _labelled(ax: Any) -> None:
    ax.set_xlabel("x")
    ax.set_ylabel("y")


def colliding_log_ticks() -> Figure:
    """The old users.png: log axes over 0.025–0.4 and 0.25–4, default formatters, whose minor-tick
    labels run together ("2×10⁻¹3×10⁻¹4×10⁻¹")."""
    fig, axes = _figure(3)
    for ax, xs in zip(axes, ([1, 4, 16, 64, 256], [0.4, 0.2, 0.1, 0.05, 0.025], [0.25, 0.5, 1.0, 2.0, 4.0])):
        ax.loglog(xs, [1e3 * x for x in xs], "o", label="local")
        ax.loglog(xs, [2e3 * x for x in xs], "x", label="central")
        _labelled(ax)
        ax.legend()
    return fig


def missing_label() -> Figure:
    fig, (ax,) = _figure()
    ax.plot([1, 2, 3], [1, 4, 9], label="squares")
    ax.set_xlabel("n")
    return fig


def two_series_no_legend() -> Figure:
    fig, (ax,) = _figure()
    ax.plot([1, 2, 3], [1, 4, 9], label="squares")
    ax.plot([1, 2, 3], [1, 8, 27], label="cubes")
    _labelled(ax)
    return fig


def legend_entry_for_nothing() -> Figure:
    fig, (ax,) = _figure()
    ax.plot([1, 2, 3], [1, 4, 9], label="squares")
    ax.plot([1, 2, 3], [1, 8, 27], label="cubes")
    ax.legend(handles=[*ax.get_legend_handles_labels()[0], Line2D([], [], label="ghost")])
    _labelled(ax)
    return fig


def unlabelled_line() -> Figure:
    fig, (ax,) = _figure()
    ax.plot([1, 2, 3], [1, 4, 9], label="squares")
    ax.plot([1, 2, 3], [1, 8, 27])
    ax.legend()
    _labelled(ax)
    return fig


BROKEN: dict[str, tuple[Callable[[], Figure], str]] = {
    "colliding log minor-tick labels": (colliding_log_ticks, "overlap"),
    "missing y-label": (missing_label, "y-label"),
    "two series, no legend": (two_series_no_legend, "in no legend"),
    "legend entry for nothing": (legend_entry_for_nothing, "'ghost'"),
    "unlabelled line": (unlabelled_line, "unlabelled"),
}


@pytest.mark.parametrize("name", BROKEN)
def test_a_broken_figure_is_caught(name: str) -> None:
    make, fragment = BROKEN[name]
    found = inspect(make())
    assert found and any(fragment in line for line in found), found
    audit = figure_problems(make())
    assert audit and any(fragment in line for line in audit), audit


def test_save_figure_repairs_colliding_tick_labels_and_warns_about_the_rest(tmp_path: Path) -> None:
    fig = colliding_log_ticks()
    with warnings.catch_warnings():
        warnings.simplefilter("error", FigureReadabilityWarning)
        reporting.save_figure(fig, tmp_path / "ticks.png")
    assert inspect(fig) == [] and figure_problems(fig) == []
    with pytest.warns(FigureReadabilityWarning, match="no y-label"):
        reporting.save_figure(missing_label(), tmp_path / "label.png")


def test_a_legend_over_the_data_is_moved_under_the_axes(tmp_path: Path) -> None:
    fig, (ax,) = _figure()
    ax.plot([0, 1, 2], [0, 0, 0], "o", label="on the floor")
    ax.plot([0, 1, 2], [1, 1, 1], "s", label="on the ceiling")
    ax.plot([0, 1, 2], [0.5, 0.5, 0.5], "^", label="in between")
    ax.legend(loc="center")
    _labelled(ax)
    assert any("covers data" in line for line in figure_problems(fig))
    with warnings.catch_warnings():
        warnings.simplefilter("error", FigureReadabilityWarning)
        reporting.save_figure(fig, tmp_path / "legend.png")
    assert figure_problems(fig) == [] and ax.get_legend().get_window_extent().y1 < ax.bbox.y0
