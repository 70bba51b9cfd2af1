"""Private frequent itemset mining (CHS §4.1, Corollary 1): utility against the size of the itemset universe.

One transaction database (``ldp.central.frequent_itemsets.planted_baskets``: n baskets of at most B items,
ℓ* planted r-itemsets of exactly known support, Zipf noise items) is mined for its most frequent r-itemset
over catalogues of growing size |I|, so the universe K = C(|I|, r) grows from about 10^11 to 10^449 while
the data, and so its margin, stay exactly the same. For each K and each selection (``select_frequent_itemset``:
the Large Margin Mechanism at (ε, δ), the exponential mechanism at ε, report-noisy-max at ε), ``trials``
seeded runs measure

* the mean frequency gap f_max − f(I) of the selected itemset I (its true support, not a noisy one),
* P[near-max]: the share of runs that select one of the ℓ* planted near-maximizers,
* for LMM, the mean ℓ it chose (it passes its margin test at ℓ = ℓ* before reaching the tail, so its law does
  not depend on K: CHS Theorem 3 / Remark 1), and how often its scan hit its cap.

Next to them: the exponential mechanism's exact expected gap (closed form, ``exponential_probabilities`` with
the tail block), its utility bound (2/(nε))·ln(K/η) (KMMS Prop 2.5) and LMM's Theorem 3 bound
6·ln(2ℓ*/η)/(nε), which has no K in it (η = ``eta``).

Writes ``result.json``, ``itemsets.csv``, ``table.md`` and ``itemsets.png`` into ``--out`` (default
``results/frequent-itemsets``) and prints the table.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ldp.central.frequent_itemsets import MECHANISMS, itemset_supports, planted_baskets, select_frequent_itemset, universe_size
from ldp.central.large_margin import lmm_T, lmm_theorem3_error, lmm_theorem3_margin
from ldp.core.exponential_mechanism import exponential_probabilities, exponential_utility_bound
from ldp.core.rng import generator
from ldp.experiment import ExperimentResult, Simulation
from ldp.simulations import reporting
from ldp.simulations.reporting import markdown_table, new_figure, save_figure, simulation_main, write_csv, write_json

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["Config", "Result", "run", "main", "quick_config", "plot", "write_outputs", "table_rows", "print_table",
           "DEFAULT_OUT", "TABLE_HEADERS", "report", "EXPERIMENT"]

DEFAULT_OUT = "results/frequent-itemsets"
LABELS = {"lmm": "LMM (ε, δ)", "em": "exponential mechanism (ε)", "rnm": "report-noisy-max (ε)"}


@dataclass(frozen=True)
class Config:
    n: int = 4000
    active_items: int = 2000
    basket_size: int = 6
    r: int = 3
    pattern_counts: tuple[int, ...] = (700, 690, 680, 670)
    low_margin_counts: tuple[int, ...] = (300, 290, 280, 270)  # a second data set, below LMM's margin; () skips it
    zipf_exponent: float = 0.5
    catalogue_log10: tuple[int, ...] = (4, 6, 7, 8, 16, 20, 22, 24, 32, 48, 50, 51, 52, 54, 64, 100, 150)
    epsilon: float = 1.0
    delta: float = 1e-6
    eta: float = 0.05
    trials: int = 200
    seed: int = 0


def quick_config(seed: int = 0) -> Config:
    """About 10 s on 2 cores: six catalogue sizes around the thresholds, 40 trials, both data sets."""
    return Config(catalogue_log10=(4, 16, 24, 48, 52, 150), trials=40, seed=seed)


@dataclass(frozen=True)
class Result:
    config: Config
    data: dict
    rows: tuple[dict, ...]
    seconds: float


def _data_summary(cfg: Config, counts: np.ndarray, pattern_counts: tuple[int, ...]) -> dict:
    """The data's top supports and margin: what stays fixed while K grows."""
    top = np.sort(counts)[::-1]
    ell_star = len(pattern_counts)
    c1, c_next = int(top[0]), int(top[ell_star]) if top.size > ell_star else 0
    return {
        "patterns": list(pattern_counts), "observed_itemsets": int(counts.size), "top_counts": [int(c) for c in top[: ell_star + 2]],
        "f_max": c1 / cfg.n, "ell_star": ell_star, "margin_counts": c1 - c_next,
        "lmm_T_counts": float(cfg.n * lmm_T(ell_star, cfg.n, cfg.epsilon, cfg.delta)),
        "em_threshold_log10K": cfg.epsilon * c1 / 2 / math.log(10),
        "lmm_fallback_threshold_log10K": cfg.epsilon * c1 / 6 / math.log(10),
        # CHS Theorem 3's (ℓ*, γ*)-margin condition, γ* = 21·ln(3/η)/(nε) + T(ℓ*)
        "theorem3_applies": (c1 - c_next) / cfg.n >= lmm_theorem3_margin(ell_star, cfg.n, cfg.epsilon, cfg.delta, cfg.eta),
    }


def _datasets(cfg: Config) -> list[tuple[str, tuple[int, ...]]]:
    out = [("above", cfg.pattern_counts)]
    return out + [("below", cfg.low_margin_counts)] if cfg.low_margin_counts else out


def _sweep(cfg: Config, name: str, pattern_counts: tuple[int, ...]) -> tuple[dict, list[dict]]:
    baskets = planted_baskets(cfg.n, cfg.active_items, cfg.basket_size, cfg.r, pattern_counts, cfg.zipf_exponent, cfg.seed)
    sup = itemset_supports(baskets, cfg.r)
    data = _data_summary(cfg, sup.counts, pattern_counts)
    c1 = int(sup.counts.max())
    near = min(pattern_counts)
    ell_star = len(pattern_counts)
    rows: list[dict] = []
    for lg in cfg.catalogue_log10:
        catalogue = max(10**lg, cfg.active_items)
        K = universe_size(catalogue, cfg.r)
        em_p = exponential_probabilities(sup.counts.astype(float), cfg.epsilon, tail_size=K - sup.counts.size, tail_score=0.0)
        em_exact_gap = float(np.sum(em_p[:-1] * (c1 - sup.counts)) + em_p[-1] * c1) / cfg.n
        for mech in MECHANISMS:
            rng = generator(cfg.seed, "frequent-itemsets", name, mech, lg)
            sel = [select_frequent_itemset(sup, catalogue, mech, cfg.epsilon, cfg.delta, rng) for _ in range(cfg.trials)]
            gaps = np.array([(c1 - s.count) / cfg.n for s in sel])
            passed = [s.ell for s in sel if s.ell is not None and s.ell < K]  # LMM's margin test passed at ℓ < K
            rows.append({
                "data": name, "f_max": c1 / cfg.n, "catalogue_log10": lg, "log10_K": math.log10(K), "mechanism": mech, "trials": cfg.trials,
                "mean_gap": float(gaps.mean()), "near_max": float(np.mean([s.count >= near for s in sel])),
                "unobserved": float(np.mean([not s.observed for s in sel])),
                "lmm_passed": len(passed) / cfg.trials if mech == "lmm" else None,
                "mean_ell": float(np.mean(passed)) if mech == "lmm" and passed else None,
                "truncated": float(np.mean([s.truncated for s in sel])) if mech == "lmm" else None,
                "em_exact_gap": em_exact_gap if mech == "em" else None,
                "bound": (lmm_theorem3_error(ell_star, cfg.n, cfg.epsilon, cfg.eta) if mech == "lmm" and data["theorem3_applies"]
                          else None if mech == "lmm"
                          else exponential_utility_bound(K, cfg.epsilon, cfg.eta) / cfg.n if mech == "em" else None),
            })
    return data, rows


def run(config: Config) -> Result:
    t0 = time.perf_counter()
    data: dict = {}
    rows: list[dict] = []
    for name, counts in _datasets(config):
        data[name], part = _sweep(config, name, counts)
        rows += part
    return Result(config, data, tuple(rows), time.perf_counter() - t0)


CSV_COLUMNS = ("data", "f_max", "catalogue_log10", "log10_K", "mechanism", "trials", "mean_gap", "near_max", "unobserved", "lmm_passed",
               "mean_ell", "truncated", "em_exact_gap", "bound")
TABLE_HEADERS = ("data", "log10 |I|", "log10 K", "mechanism", "mean gap f_max − f(I)", "P[near-max]", "P[unobserved]", "LMM passed",
                 "mean ℓ", "EM exact gap", "bound")


def _cell(x: float | None, fmt: str) -> str:
    return reporting.MISSING if x is None else fmt.format(x)


def table_rows(result: Result) -> list[tuple[object, ...]]:
    """One row per (data set, catalogue size, mechanism): mean gap, near-max and unobserved rates, the share of
    LMM runs whose margin test passed and their mean ℓ, EM's exact gap, the bound."""
    return [(r["data"], r["catalogue_log10"], f"{r['log10_K']:.1f}", r["mechanism"], f"{r['mean_gap']:.4f}", f"{r['near_max']:.2f}",
             f"{r['unobserved']:.2f}", _cell(r["lmm_passed"], "{:.2f}"), _cell(r["mean_ell"], "{:.2f}"), _cell(r["em_exact_gap"], "{:.4f}"),
             _cell(r["bound"], "{:.3f}"))
            for r in result.rows]


def _describe(name: str, d: dict) -> str:
    return (f"* **{name}**: patterns {d['patterns']}: {d['observed_itemsets']} observed itemsets, top counts {d['top_counts']}, "
            f"f_max = {d['f_max']:.4f}; margin f^(1) − f^(ℓ*+1) = {d['margin_counts']}/n at ℓ* = {d['ell_star']} against LMM's "
            f"n·T(ℓ*) = {d['lmm_T_counts']:.1f}. Thresholds: EM fails past log10 K ≈ {d['em_threshold_log10K']:.1f} "
            f"(ln K = ε·n·f_max/2); LMM's fallback (EM at ε/3 over all K) past log10 K ≈ {d['lmm_fallback_threshold_log10K']:.1f}.")


def _markdown(result: Result) -> str:
    cfg = result.config
    return "\n".join([
        f"# Private frequent {cfg.r}-itemsets (CHS §4.1, Cor. 1): utility against the universe size (ε = {cfg.epsilon:g}, δ = {cfg.delta:g})",
        "",
        f"Data: planted_baskets(n = {cfg.n}, active items = {cfg.active_items}, B = {cfg.basket_size}, r = {cfg.r}, "
        f"Zipf s = {cfg.zipf_exponent:g}, seed = {cfg.seed}); the same data for every K = C(|I|, {cfg.r}).",
        "",
        *[_describe(name, d) for name, d in result.data.items()],
        "",
        f"{cfg.trials} seeded runs per cell. Gap: true f_max − f(I). P[near-max]: I is one of the ℓ* planted itemsets. "
        "P[unobserved]: I has support 0 (a uniform member of the tail). LMM passed: share of runs whose margin test passed "
        "at some ℓ < K (mean ℓ over those). Bound: LMM's Theorem 3 error 6·ln(2ℓ*/η)/(nε) (no K in it; shown only where the data meet its "
        f"margin condition γ* = 21·ln(3/η)/(nε) + T(ℓ*)), the exponential mechanism's (2/(nε))·ln(K/η) (η = {cfg.eta:g}).",
        "",
        markdown_table(TABLE_HEADERS, table_rows(result)),
        "",
        f"Run time: {result.seconds:.1f} s",
    ]) + "\n"


def plot(result: Result) -> Figure:
    """Mean frequency gap against log10 K, one panel per data set, one line per mechanism; EM's closed form dashed."""
    cfg = result.config
    fig, axes = new_figure(len(result.data), 5.2, 4.2)
    # EM's squares hollow and larger: report-noisy-max's law is close to EM's here, its triangles sit inside them
    styles = {"lmm": ("o", "#1f77b4", 6), "em": ("s", "#d62728", 9), "rnm": ("^", "#2ca02c", 5)}
    for ax, (name, d) in zip(axes, result.data.items()):
        for mech in MECHANISMS:
            rows = [r for r in result.rows if r["mechanism"] == mech and r["data"] == name]
            marker, color, size = styles[mech]
            ax.plot([r["log10_K"] for r in rows], [r["mean_gap"] for r in rows], marker=marker, markersize=size, color=color,
                    label=LABELS[mech], markerfacecolor="none" if mech == "em" else color)
        em = [r for r in result.rows if r["mechanism"] == "em" and r["data"] == name]
        ax.plot([r["log10_K"] for r in em], [r["em_exact_gap"] for r in em], linestyle="--", color="gray", label="exponential mechanism, exact")
        ax.axvline(d["em_threshold_log10K"], color="black", linewidth=0.8, linestyle=":")
        ax.annotate("EM: ln K = εn·f_max/2", (d["em_threshold_log10K"], 0.45 * d["f_max"]), textcoords="offset points", xytext=(4, 0), fontsize=8)
        if d["margin_counts"] < d["lmm_T_counts"]:  # LMM cannot pass its test: its fallback's threshold matters
            ax.axvline(d["lmm_fallback_threshold_log10K"], color="#1f77b4", linewidth=0.8, linestyle=":")
            # above every data point (the gaps are at most f_max): LMM's own line crosses the panel lower down
            ax.annotate("LMM fallback: ln K = εn·f_max/6", (d["lmm_fallback_threshold_log10K"], 1.08 * d["f_max"]), textcoords="offset points",
                        xytext=(4, 0), fontsize=8, color="#1f77b4")
        ax.set_xlabel(f"log10 K, K = C(|I|, {cfg.r}) itemsets in the universe")
        ax.set_ylabel("mean frequency gap f_max − f(I)")
        ax.set_ylim(-0.04 * d["f_max"], 1.16 * d["f_max"])
        verdict = "above" if d["margin_counts"] >= d["lmm_T_counts"] else "below"
        ax.set_title(f"f_max = {d['f_max']:.3f}: margin {d['margin_counts']} {verdict} LMM's n·T(ℓ*) = {d['lmm_T_counts']:.0f}", fontsize=9)
        ax.grid(True, alpha=0.3)
    handles, labels = axes[0].get_legend_handles_labels()  # the same four lines in every panel
    fig.legend(handles, labels, loc="outside lower center", ncol=4, fontsize=8)
    fig.suptitle(f"Most frequent {cfg.r}-itemset of the same data as the universe grows (n = {cfg.n}, ε = {cfg.epsilon:g}, δ = {cfg.delta:g})",
                 fontsize=10)
    return fig


def write_outputs(result: Result, out: Path) -> None:
    """result.json, itemsets.csv, table.md and itemsets.png in ``out`` (created if missing)."""
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "result.json", {"config": asdict(result.config), "data": result.data, "rows": list(result.rows), "seconds": result.seconds})
    write_csv(out / "itemsets.csv", result.rows, CSV_COLUMNS)
    (out / "table.md").write_text(_markdown(result))
    save_figure(plot(result), out / "itemsets.png")


def print_table(result: Result) -> None:
    reporting.print_table("private frequent itemsets: utility against the universe size K", TABLE_HEADERS, table_rows(result))


def report(result: Result, config: Config) -> ExperimentResult:
    """``ldp-sim run frequent-itemsets``'s table: utility of LMM / EM / report-noisy-max against log10 K."""
    sets = "; ".join(f"{name}: f_max = {d['f_max']:.4f}, margin {d['margin_counts']} vs n·T(ℓ*) = {d['lmm_T_counts']:.0f}"
                     for name, d in result.data.items())
    notes = f"same data for every K ({sets}); ε = {config.epsilon:g}, δ = {config.delta:g}; {config.trials} trials per cell"
    title = f"Private frequent itemsets (CHS §4.1, Cor. 1): utility against the universe size ({result.seconds:.1f} s)"
    return ExperimentResult(title, TABLE_HEADERS, tuple(table_rows(result)), notes=notes)


EXPERIMENT = Simulation.of(__name__, "frequent-itemsets",
                           "private frequent itemsets (CHS Cor. 1): LMM vs exponential mechanism vs report-noisy-max against the universe size",
                           files=("result.json", "itemsets.csv", "table.md", "itemsets.png"))  # entry point ldp_sim.experiments: frequent-itemsets (not registered yet)


def main(argv: list[str] | None = None) -> Result:
    return simulation_main(argv, EXPERIMENT, description=__doc__.splitlines()[0], quick_help="6 universe sizes, 40 trials, both data sets (about 10 s)", show=print_table)


if __name__ == "__main__":
    main()
