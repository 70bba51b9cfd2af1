"""The separation sweep's figure, separation.png (the "money plot"): users needed against d for
the interactive and one-round MASKED-PARITY learners with the lower bounds for every one-round
protocol; PARITY and POINT (trusted curator against local); success against users at one d."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from ldp.core.errors import ParameterError
from ldp.simulations.reporting import data_ticks, new_figure, readable_log_axis
from ldp.simulations.separation_table import BOUNDS

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["plot", "STYLES", "MODEL_SHORT"]

STYLES = {
    "LI-corr": ("tab:blue", "o"),
    "LI": ("tab:cyan", "h"),
    "LNI": ("tab:orange", "s"),
    "LNI-shared": ("tab:red", "D"),
    "LNI-b": ("tab:pink", "d"),
    "central-A*": ("tab:green", "^"),
    "central-occam": ("tab:olive", "v"),
    "local-parity": ("tab:purple", "P"),
    "central-EM": ("tab:brown", "<"),
    "central-Adist": ("tab:gray", ">"),
}
LABELS = {
    "LI-corr": "LI-corr: interactive, correlation round 1",
    "LI": "LI: interactive, faithful to KLNRS §5.1",
    "LNI": "LNI: fair one-round",
    "LNI-shared": "LNI-shared: one round, one query for r and a",
}
BOUND_STYLES = {"BH": ("--", 1.0), "KL": ("-.", 1.0), "TV": ("-", 1.6)}
MODEL_SHORT = {"local interactive": "LI", "local non-interactive": "LNI", "central": "CNI", "central (ε, δ = 1e-06)": "CNI(δ)"}


def _users_axis(ax: Any, rows: list[dict[str, Any]], cap: int) -> None:
    """Measured users needed per learner, the search bracket as an error bar; "> cap" open markers."""
    for learner in dict.fromkeys(r["learner"] for r in rows):
        mine = [r for r in rows if r["learner"] == learner]
        color, marker = STYLES.get(learner, ("k", "x"))
        ok = [r for r in mine if r["users_needed"] is not None]
        if ok:
            d = [r["d"] for r in ok]
            n = np.array([r["users_needed"] for r in ok], dtype=float)
            low = np.array([r.get("last_failing") or r["users_needed"] for r in ok], dtype=float)
            family = mine[0]["family"].upper().replace("_", "-")
            ax.errorbar(d, n, yerr=[n - low, np.zeros_like(n)], color=color, marker=marker, capsize=3, label=f"{learner}: {family}, {MODEL_SHORT.get(mine[0]['model'], mine[0]['model'])}")
        failed = [r["d"] for r in mine if r["users_needed"] is None]
        if failed:
            ax.scatter(failed, [cap] * len(failed), color=color, marker=marker, facecolors="none", s=110, zorder=5, label=f"{learner}: fails at the cap")
    ax.axhline(cap, color="gray", ls=":", lw=1, label=f"cap: {cap:,} users, the most a search tries")
    ax.set_yscale("log")


def _masked_axes(ax: Any, result: dict[str, Any], summary: list[dict[str, Any]]) -> None:
    """MASKED-PARITY: each learner's users against d (filled: simulated, the bar spanning the
    seeds; open on a dotted line: planned), and the three lower bounds for any one-round protocol."""
    c = result["config"]
    for learner in dict.fromkeys(e["learner"] for e in summary):
        _masked_learner(ax, learner, sorted((e for e in summary if e["learner"] == learner), key=lambda e: e["d"]), c["cap"])
    dims = sorted({e["d"] for e in summary})
    if c["beta"] < 0.25:
        _masked_bounds(ax, c, np.arange(min(dims), max(dims) + 1))
    _masked_labels(ax, result, c, dims)


def _masked_learner(ax: Any, learner: str, mine: list[dict[str, Any]], cap: int) -> None:
    """One learner's cells: simulated (median, bar over the seeds), planned (open markers on a
    dotted line continuing the simulated one), and failures at the cap."""
    style = (*STYLES.get(learner, ("k", "x")), LABELS.get(learner, learner))
    sim = [e for e in mine if e["source"] == "simulated" and e["users_needed"] is not None]
    plan = [e for e in mine if e["source"] == "planned"]
    failed = [e for e in mine if e["source"] == "simulated" and e["users_needed"] is None]
    if sim:
        _draw_simulated(ax, sim, style)
    if plan:
        _draw_planned(ax, sim[-1:] + plan, len(plan), style)  # the dotted line continues the simulated one
    if failed:
        ax.scatter([e["d"] for e in failed], [e["failed_at"] or cap for e in failed], color=style[0], marker="^", s=90, zorder=5,
                   label=f"{learner}: fails at the cap (more than this)")


def _draw_simulated(ax: Any, sim: list[dict[str, Any]], style: tuple[str, str, str]) -> None:
    color, marker, label = style
    n = np.array([e["users_needed"] for e in sim], dtype=float)
    low = np.array([e["users_min"] or e["users_needed"] for e in sim], dtype=float)
    high = np.array([e["users_max"] or e["users_needed"] for e in sim], dtype=float)
    law = [e["d"] for e in sim if e.get("simulation") == "law"]
    how = f"simulated; from d = {min(law)} at its sufficient statistic" if law else "simulated"
    ax.errorbar([e["d"] for e in sim], n, yerr=[n - low, high - n], color=color, marker=marker, capsize=3, label=f"{label} ({how})")


def _draw_planned(ax: Any, joined: list[dict[str, Any]], planned: int, style: tuple[str, str, str]) -> None:
    """A dotted line through ``joined``, open markers on its last ``planned`` points only."""
    color, marker, label = style
    ax.plot([e["d"] for e in joined], [e["users_needed"] for e in joined], color=color, ls=":", lw=1.2, marker=marker, markerfacecolor="none",
            markersize=8, markevery=list(range(len(joined) - planned, len(joined))), label=f"{label} (planned)")


def _masked_bounds(ax: Any, c: dict[str, Any], grid: np.ndarray) -> None:
    """The lower bounds for any one-round protocol over the d of ``grid`` (docs/theorem51.md)."""
    lone = "_" if len(grid) < 2 else None  # a line through one point draws nothing: mark it
    for name, (what, bound) in BOUNDS.items():
        ls, lw = BOUND_STYLES[name]
        ax.plot(grid, [bound(int(d), c["epsilon"], c["beta"]) for d in grid], color="black", ls=ls, lw=lw, marker=lone, markersize=12,
                label=f"any one-round protocol needs ≥ ({name}: {what})")


def _masked_labels(ax: Any, result: dict[str, Any], c: dict[str, Any], dims: list[int]) -> None:
    """Axes, title and the legend, titled with the one-round / interactive ratios of 4 or more."""
    gaps = [f"d = {q['d']}: {'> ' if q['ratio_is_lower_limit'] else ''}×{q['ratio']:.0f}" for q in result.get("ratios") or [] if q.get("ratio") and q["ratio"] >= 4]
    data_ticks(ax.xaxis, dims)
    ax.set_yscale("log")
    readable_log_axis(ax.yaxis)
    ax.set_xlabel("d (linear axis: a straight line is exponential growth)")
    ax.set_ylabel(f"users for error ≤ {c['alpha']} w.p. ≥ {1 - c['beta']:.0%} (log scale)")
    ax.set_title("MASKED-PARITY: interactive vs one round")
    # outside, on the right: eleven entries inside would cover the data (constrained layout makes room)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), title="one-round / interactive users:\n" + ", ".join(gaps) if gaps else None,
              title_fontsize=7)


def _parity_axes(ax: Any, result: dict[str, Any], others: list[dict[str, Any]]) -> None:
    c = result["config"]
    _users_axis(ax, others, c["cap"])
    ax.set_xscale("log", base=2)
    data_ticks(ax.xaxis, sorted({r["d"] for r in others}))
    readable_log_axis(ax.yaxis)
    ax.set_xlabel("d (bits, log scale)")
    ax.set_ylabel(f"users for error ≤ {c['alpha']} (log scale)")
    ax.set_title("PARITY and POINT: trusted curator vs local")
    ax.legend(fontsize=8, loc="best")


def _curves_axes(ax: Any, result: dict[str, Any]) -> None:
    """Success rate against users at one d, per learner (slightly apart in x so that none hides another)."""
    c = result["config"]
    learners = list(dict.fromkeys(e["learner"] for e in result["curves"]))
    for k, learner in enumerate(learners):
        pts = sorted((e["users"], e["success_rate"], *e["ci"]) for e in result["curves"] if e["learner"] == learner)
        n, rate, low, high = (np.array(v, dtype=float) for v in zip(*pts))
        color, marker = STYLES.get(learner, ("k", "x"))
        dodge = 1.04 ** (k - (len(learners) - 1) / 2)  # multiplicative: the same shift at every n on a log axis
        ax.errorbar(n * dodge, rate, yerr=[rate - low, high - rate], color=color, marker=marker, capsize=3, label=learner)
    ax.axhline(1 - c["beta"], color="gray", ls="--", lw=1, label=f"target success rate {1 - c['beta']:.0%}")
    ax.set_xscale("log")
    data_ticks(ax.xaxis, sorted({e["users"] for e in result["curves"]}))
    ax.set_ylim(-0.03, 1.03)
    ax.set_xlabel("users (log scale; learners drawn slightly apart)")
    ax.set_ylabel("success rate (95 % Clopper–Pearson)")
    ax.set_title(f"MASKED-PARITY, d = {result['curves'][0]['d']}: success against users")
    ax.legend(fontsize=8, loc="best")


def plot(result: dict[str, Any]) -> Figure:
    """Up to three panels: MASKED-PARITY users against d, PARITY/POINT users against d, and the
    success curves against users (a panel is left out when its rows are absent)."""
    masked = [e for e in result.get("summary", []) if e["family"] == "masked_parity"]
    others = [r for r in result["rows"] if r["family"] != "masked_parity"]
    panels: list[Callable[[Any], None]] = []
    if masked:
        panels.append(lambda ax: _masked_axes(ax, result, masked))
    if others:
        panels.append(lambda ax: _parity_axes(ax, result, others))
    if result["curves"]:
        panels.append(lambda ax: _curves_axes(ax, result))
    if not panels:
        raise ParameterError("separation: the result has no rows and no curves: nothing to plot")
    fig, axes = new_figure(len(panels), 8.0 if masked else 6.2, 5.6)
    for ax, draw in zip(axes, panels):
        draw(ax)
    return fig
