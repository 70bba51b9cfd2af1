"""The separation sweep's numbers and tables (``ldp.simulations.separation`` measures them).

``summarize`` turns the searches (one row per learner, d and seed) and the planned sizes into
one entry per (learner, d): the median of the seeds' users needed with their range, or the
learner's analytic plan where it was not simulated, marked as such. ``separation_ratios`` puts
the MASKED-PARITY learners side by side with the three lower bounds for every non-interactive
protocol (docs/theorem51.md) and says from which d the separation is proven. ``markdown_table``
writes table.md; ``write_tables`` the CSV files.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ldp.learners.success_rule import min_successes
from ldp.learners.theorem51 import lni_users_lower_bound, lni_users_lower_bound_kl, lni_users_lower_bound_tv
from ldp.simulations import reporting
from ldp.simulations.reporting import write_csv

__all__ = [
    "INTERACTIVE",
    "ONE_ROUND",
    "BOUNDS",
    "growth",
    "summarize",
    "separation_ratios",
    "proven_from",
    "markdown_table",
    "write_tables",
    "USERS_CSV",
    "CURVES_CSV",
    "SUMMARY_CSV",
    "SEPARATION_CSV",
]

INTERACTIVE = ("LI-corr", "LI")  # strongest first
ONE_ROUND = ("LNI-shared", "LNI")
BOUNDS = {
    "BH": ("Thm 5.1 corrected (Bretagnolle–Huber)", lni_users_lower_bound),
    "KL": ("binary-KL data processing", lni_users_lower_bound_kl),
    "TV": ("binary KL + per-user TV budget", lni_users_lower_bound_tv),
}
"""The lower bounds on the users of ANY non-interactive protocol, loosest first
(``ldp.learners.theorem51``; docs/theorem51.md proves each)."""


def growth(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Least-squares fits of n(d) over the rows with a number (``users_needed``): log n against
    log d (slope = the polynomial degree) and log2 n against d (slope = doublings per unit of d,
    1 for 2^d). R² says which describes the data; None with fewer than 3 points."""
    pts = [(r["d"], r["users_needed"]) for r in rows if r["users_needed"] is not None]
    if len(pts) < 3:
        return None
    d = np.array([p[0] for p in pts], dtype=np.float64)
    n = np.array([p[1] for p in pts], dtype=np.float64)

    def fit(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
        slope, intercept = np.polyfit(x, y, 1)
        residual = y - (slope * x + intercept)
        total = float(np.sum((y - y.mean()) ** 2))
        return float(slope), (1.0 - float(np.sum(residual**2)) / total) if total > 0 else 1.0

    loglog, loglog_r2 = fit(np.log(d), np.log(n))
    loglin, loglin_r2 = fit(d, np.log2(n))
    sources = sorted({"law" if r.get("simulation") == "law" else r.get("source", "simulated") for r in rows if r["users_needed"] is not None})
    return {"d": [int(v) for v in d], "loglog_slope": loglog, "loglog_r2": loglog_r2, "log2_per_d": loglin, "log2_per_d_r2": loglin_r2, "sources": sources}


def summarize(rows: list[dict[str, Any]], planned: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per (learner, d), in the order the sweep ran them.

    A simulated entry's ``users_needed`` is the median over its seeds (None when a seed failed at
    the cap), with ``users_min``/``users_max`` over seeds; a planned entry (``source`` "planned")
    carries the learner's analytic plan for success 1 − β instead: not a measurement."""
    out: list[dict[str, Any]] = []
    keys = list(dict.fromkeys((r["learner"], r["d"]) for r in [*rows, *planned]))
    for learner, d in keys:
        sims = [r for r in rows if r["learner"] == learner and r["d"] == d]
        if sims:
            out.append(_simulated_entry(learner, d, sims))
        else:
            plan = next(p for p in planned if p["learner"] == learner and p["d"] == d)
            out.append(plan | {"source": "planned", "users_needed": plan["planned"], "users_min": None, "users_max": None, "seeds": []})
    return out


def _simulated_entry(learner: str, d: int, sims: list[dict[str, Any]]) -> dict[str, Any]:
    """The seeds' searches of one (learner, d): the median users, their range, or where it failed."""
    needed = [r["users_needed"] for r in sims]
    ok = [n for n in needed if n is not None]
    failed = len(ok) < len(needed)
    first = sims[0]
    return {
        "learner": learner,
        "family": first["family"],
        "model": first["model"],
        "d": d,
        "source": "simulated",
        # "law": drawn at the learner's sufficient statistic (ldp.learners.masked_parity_law), not through the protocol
        "simulation": "law" if any(r.get("simulation") == "law" for r in sims) else first.get("simulation", "protocol"),
        "seeds": [r.get("seed") for r in sims],
        "users_needed": None if failed else int(np.median(ok)),
        "users_min": min(ok) if ok else None,
        "users_max": max(ok) if ok and not failed else None,
        "failed_at": max(r["last_failing"] or 0 for r in sims) if failed else None,
        "planned": first.get("planned"),
        "bound": first.get("bound"),
        "bound_source": first.get("bound_source"),
    }


def _entry(summary: list[dict[str, Any]], learner: str, d: int) -> dict[str, Any] | None:
    return next((e for e in summary if e["learner"] == learner and e["d"] == d), None)


def _best(summary: list[dict[str, Any]], names: tuple[str, ...], d: int) -> dict[str, Any] | None:
    """The entry of ``names`` at d with the fewest users (an entry failing at the cap counts as its cap)."""
    entries = [e for e in (_entry(summary, n, d) for n in names) if e is not None]
    if not entries:
        return None
    return min(entries, key=lambda e: e["users_needed"] if e["users_needed"] is not None else float("inf"))


def separation_ratios(summary: list[dict[str, Any]], epsilon: float, beta: float) -> list[dict[str, Any]]:
    """Per MASKED-PARITY d with an interactive entry: the strongest interactive and one-round
    learners there, their ratio, and each lower bound for any non-interactive protocol against
    the interactive learner's users.

    The bound is compared with ``LI_worst``: the most users the strongest interactive learner
    needed over its seeds (its plan where it was not simulated): the separation is *proven* at
    d when a bound exceeds it. Keys ``d``, ``ratio`` and ``ratio_is_lower_limit`` are what the
    plot reads."""
    out = []
    dims = sorted({e["d"] for e in summary if e["family"] == "masked_parity"})
    for d in dims:
        li = _best(summary, INTERACTIVE, d)
        if li is None or li["users_needed"] is None:
            continue
        lni = _best(summary, ONE_ROUND, d)
        worst = li["users_max"] if li["users_max"] is not None else li["users_needed"]
        bounds = {name: f(d, epsilon, beta) for name, (_, f) in BOUNDS.items()} if beta < 0.25 else {}
        at_least = lni is not None and lni["users_needed"] is None
        numerator = None if lni is None else (lni["users_needed"] if not at_least else lni["failed_at"])
        out.append(
            {
                "d": d,
                "LI": li["users_needed"],
                "LI_learner": li["learner"],
                "LI_source": li["source"],
                "LI_worst": worst,
                "LNI": None if lni is None else lni["users_needed"],
                "LNI_learner": None if lni is None else lni["learner"],
                "LNI_source": None if lni is None else lni["source"],
                "LNI_failed_at": lni["failed_at"] if at_least and lni is not None else None,
                "ratio": numerator / li["users_needed"] if numerator else None,
                "ratio_is_lower_limit": at_least,
                "bounds": bounds,
                "bound_over_LI": {name: b / worst for name, b in bounds.items()},
                "proven": {name: b > worst for name, b in bounds.items()},
            }
        )
    return out


def proven_from(ratios: list[dict[str, Any]]) -> dict[str, int | None]:
    """Per bound: the first d from which the bound exceeds the interactive learner's users at
    every larger d of the sweep (None if never)."""
    out: dict[str, int | None] = {}
    for name in BOUNDS:
        first = None
        for q in sorted(ratios, key=lambda q: q["d"], reverse=True):
            if not q["proven"].get(name):
                break
            first = q["d"]
        out[name] = first
    return out


# --- markdown ---


def _n(value: int | None) -> str:
    return "—" if value is None else f"{value:,}"


def _x(ratio: float) -> str:
    """A ratio: three significant digits, whole numbers with separators from 100 on (no 1.09e+03)."""
    return f"{ratio:,.0f}" if ratio >= 100 else f"{ratio:.3g}"


def _cell(e: dict[str, Any] | None, cap: int) -> str:
    """users (median [min–max] over seeds), or "≈ n (planned)", or "> cap"."""
    if e is None:
        return "—"
    if e["source"] == "planned":
        return f"≈ {e['users_needed']:,} (planned)"
    if e["users_needed"] is None:
        return f"> {e['failed_at'] or cap:,} (fails at the cap)"
    law = " (law)" if e.get("simulation") == "law" else ""
    if len(e["seeds"]) > 1:
        return f"{e['users_needed']:,} [{e['users_min']:,}–{e['users_max']:,}]{law}"
    return f"{e['users_needed']:,}{law}"


def _headline(result: dict[str, Any]) -> str:
    """The separation table: the four learners, the ratio, the three bounds against LI's users."""
    c = result["config"]
    summary, ratios = result["summary"], result["ratios"]
    rows = []
    for q in ratios:
        d = q["d"]
        ratio = "—" if q["ratio"] is None else f"{'> ' if q['ratio_is_lower_limit'] else ''}{_x(q['ratio'])}"
        if q["ratio"] is not None and "planned" in (q["LI_source"], q["LNI_source"]):
            ratio += " (planned)"
        bounds = [_n(q["bounds"].get(name)) for name in BOUNDS]
        tv = q["bound_over_LI"].get("TV")
        over = "—" if tv is None else (f"**{_x(tv)}**" if tv > 1 else _x(tv))
        rows.append((d, *(_cell(_entry(summary, name, d), c["cap"]) for name in (*INTERACTIVE, "LNI", "LNI-shared")), ratio, *bounds, over))
    headers = ("d", "LI-corr (interactive, sharpest)", "LI (faithful, KLNRS §5.1)", "LNI (fair one-round)", "LNI-shared (one round)",
               "best one-round / best interactive", "any LNI ≥ (BH)", "any LNI ≥ (KL)", "any LNI ≥ (TV)", "TV bound / LI worst seed")
    return reporting.markdown_table(headers, rows, align="r" * len(headers))


def _per_seed(result: dict[str, Any]) -> str:
    """Every search: users needed, the bracket, successes with their 95 % intervals, the plan."""
    c = result["config"]
    rows = []
    for r in result["rows"]:
        bound = f"{r['bound']:,} ({r['bound_source']})" if r.get("bound") else "—"
        needed = _n(r["users_needed"]) if r["users_needed"] is not None else f"> {c['cap']:,}"
        needed += " (law)" if r.get("simulation") == "law" else ""
        success = _fmt_success(r) if r.get("ci") else _point_rule(c, r["trials"])
        rows.append((r["family"], r["learner"], r["d"], r.get("seed", "—"), needed, _n(r.get("last_failing")), success,
                     _fmt_success(r.get("below")), _n(r.get("planned")), bound))
    headers = ("class", "learner", "d", "seed", "users needed", "last failing", "successes at users needed [95 % CI]",
               "successes at last failing", f"planned ({1 - c['beta']:.0%} predicted)", "bound (source)")
    return reporting.markdown_table(headers, rows, align="llrrrrllrl")


def _point_rule(c: dict[str, Any], trials: int) -> str:
    """The POINT rows' verdict (``central_point_baselines``: the sweep's success rule at their own
    number of trials, or all of them when they are too few for it): "≥ k of T"."""
    k = min_successes(int(trials), c["beta"], 1 - c.get("confidence", 0.95))
    return f"≥ {k if k is not None else trials} of {trials}"


def _fmt_success(entry: dict[str, Any] | None) -> str:
    if not entry or entry.get("successes") is None:
        return "—"
    low, high = entry["ci"]
    early = ", stopped early" if entry.get("stopped_early") else ""
    return f"{entry['successes']}/{entry['trials']} [{low:.3f}, {high:.3f}]{early}"


def _growth_table(fits: dict[str, Any]) -> str:
    rows = []
    for name, g in fits.items():
        kind = "polynomial" if g["loglog_r2"] >= g["log2_per_d_r2"] else "exponential"
        rows.append((name, ", ".join(map(str, g["d"])), " + ".join(g.get("sources", ["simulated"])), f"{g['loglog_slope']:.2f} ({g['loglog_r2']:.3f})",
                     f"{g['log2_per_d']:.3f} ({g['log2_per_d_r2']:.3f})", kind))
    return reporting.markdown_table(("learner", "d fitted", "numbers", "log-log slope (R²)", "log2 n per unit d (R²)", "growth"), rows, align="lllrrl")


def _tried_table(searched: list[dict[str, Any]]) -> str:
    rows = []
    for r in searched:
        tried = "; ".join(
            f"{e['users']:,}: {e['successes']}/{e['trials']}{'*' if e.get('stopped_early') else ''}" for e in r["evaluations"]
        )
        rows.append((r["learner"], r["d"], r.get("seed", "—"), tried))
    return reporting.markdown_table(("learner", "d", "seed", "sizes tried: successes/trials (* stopped early)"), rows, align="lrrl")


def _curves_table(curves: list[dict[str, Any]]) -> str:
    users = sorted({e["users"] for e in curves})
    rows = []
    for learner in dict.fromkeys(e["learner"] for e in curves):
        by_n = {e["users"]: e for e in curves if e["learner"] == learner}
        rows.append((learner, *(f"{_fmt_success(by_n[u])}, error {by_n[u]['mean_error']:.3f}" if u in by_n else "—" for u in users)))
    return reporting.markdown_table(("learner", *(f"{u:,}" for u in users)), rows)


def rule_text(result: dict[str, Any]) -> str:
    """One sentence: the success rule the searches used."""
    c, rule = result["config"], result["rule"]
    if rule["clopper_pearson"]:
        return (f"A size passes when its successes k of T = {c['trials']} trials give a one-sided {c['confidence']:.0%} Clopper–Pearson "
                f"lower bound ≥ 1 − β = {1 - c['beta']:g} (here k ≥ {rule['min_successes']}), so a learner whose true success is below "
                f"{1 - c['beta']:g} passes a size with probability ≤ {1 - c['confidence']:.2g} (ldp.learners.success_rule).")
    return (f"{c['trials']} trials are too few for a {c['confidence']:.0%} lower bound ≥ {1 - c['beta']:g} (that needs ≥ {rule['trials_needed']}): "
            f"a size passes only when all {c['trials']} trials succeed (its lower bound is {rule['lower_bound']:.3f}).")


def markdown_table(result: dict[str, Any]) -> str:
    """table.md: the separation table, the proof's first d, the growth fits, every search per
    seed, every size tried, the success curves."""
    c = result["config"]
    lines = [
        f"Users needed for error ≤ α = {c['alpha']} with success ≥ 1 − β = {1 - c['beta']:g} (ε = {c['epsilon']} per user; cap {c['cap']:,} "
        f"users; seeds {', '.join(map(str, result['seeds']))} at MASKED-PARITY d ≤ {c['multi_seed_max_d']}, seed {c['seed']} elsewhere). "
        + rule_text(result)
        + f" The search starts at the learner's plan (or {c['start_users']} users), steps ×1.5 (×2 without a plan) until the verdict changes, "
        f"then bisects geometrically until first passing n / last failing n ≤ {c['resolution']}.",
        "",
    ]
    if result["ratios"]:
        proven = result["proven_from"]
        said = ", ".join(f"{name}: {'d = ' + str(d) if d is not None else 'not in this sweep'}" for name, d in proven.items())
        lines += [
            "MASKED-PARITY: simulated cells are the median [min–max] of the seeds' users needed; \"≈ n (planned)\" cells are the "
            f"learner's analytic plan for predicted success {1 - c['beta']:g} (not simulated: its planned users exceed "
            f"simulate_users_max = {c['simulate_users_max']:,}); \"(law)\" cells are simulated at the learner's sufficient statistic, each "
            "trial's counts of 1-reports drawn from their exact law (ldp.learners.masked_parity_law: the protocol's output law, "
            f"not the protocol; its plan exceeds protocol_users_max = {c.get('protocol_users_max', 2**40):,}). \"any LNI ≥\" are lower bounds for every non-interactive protocol at "
            f"β = {c['beta']} (docs/theorem51.md): Bretagnolle–Huber 4·2^d·ln(1/(4β))/(e^ε−1)², binary-KL 4·2^d·kl(β‖1−β)/(e^ε−1)², "
            "and binary KL with the per-user TV budget 2(e^ε+1)·2^d·kl(β‖1−β)/(e^ε−1)². The last column divides the TV bound by the "
            "most users the strongest interactive learner needed over its seeds: above 1, no one-round protocol can do what the "
            "interactive learner did.",
            "",
            _headline(result),
            "",
            f"**The separation is proven** (bound > the interactive learner's users at this d and every larger d of the sweep) from {said}.",
        ]
    fits = {k: v for k, v in (result.get("growth") or {}).items() if v}
    if fits:
        lines += [
            "",
            "Fitted growth (least squares over the d with a number; \"numbers\" says whether the fit used simulated medians, plans, "
            "or both): log n against log d (slope = polynomial degree) and log2 n against d (slope 1 = doubling with every unit of d).",
            "",
            _growth_table(fits),
        ]
    if result["rows"]:
        lines += ["", "Every search, per seed (the threshold lies in (last failing, users needed]):", "", _per_seed(result)]
        searched = [r for r in result["rows"] if r.get("evaluations")]
        if searched:
            lines += ["", "Every size each search tried, in order:", "", _tried_table(searched)]
    if result["curves"]:
        lines += ["", f"Success rate and mean error against users at d = {result['curves'][0]['d']} ({c['curve_trials']} trials each):", "",
                  _curves_table(result["curves"])]
    return "\n".join(lines) + "\n"


USERS_CSV = ("family", "learner", "model", "d", "seed", "users_needed", "last_failing", "status", "successes", "trials", "ci_low", "ci_high",
             "mean_error", "planned", "bound", "bound_source", "measured_over_bound", "seconds")
CURVES_CSV = ("learner", "d", "users", "trials", "successes", "ci_low", "ci_high", "mean_error")
SUMMARY_CSV = ("family", "learner", "model", "d", "source", "users_needed", "users_min", "users_max", "failed_at", "planned", "bound")
SEPARATION_CSV = ("d", "LI", "LI_learner", "LI_source", "LI_worst", "LNI", "LNI_learner", "LNI_source", "ratio", "bound_BH", "bound_KL", "bound_TV",
                  "TV_over_LI_worst", "proven_TV")


def _csv_rows(entries: list[dict[str, Any]], columns: tuple[str, ...]) -> list[dict[str, Any]]:
    rows = []
    for e in entries:
        low, high = e.get("ci") or (None, None)
        rows.append({k: e.get(k) for k in columns} | {"ci_low": low, "ci_high": high})
    return rows


def write_tables(result: dict[str, Any], out: Path) -> list[Path]:
    """users_needed.csv (every search), summary.csv (per learner and d), separation.csv (the
    headline) and curves.csv in ``out``; their paths."""
    separation = [
        {k: q.get(k) for k in SEPARATION_CSV}
        | {f"bound_{name}": q.get("bounds", {}).get(name) for name in BOUNDS}
        | {"TV_over_LI_worst": q.get("bound_over_LI", {}).get("TV"), "proven_TV": q.get("proven", {}).get("TV")}
        for q in result["ratios"]
    ]
    return [
        write_csv(out / "users_needed.csv", _csv_rows(result["rows"], USERS_CSV), USERS_CSV),
        write_csv(out / "summary.csv", [{k: e.get(k) for k in SUMMARY_CSV} for e in result["summary"]], SUMMARY_CSV),
        write_csv(out / "separation.csv", separation, SEPARATION_CSV),
        write_csv(out / "curves.csv", _csv_rows(result["curves"], CURVES_CSV), CURVES_CSV),
    ]
