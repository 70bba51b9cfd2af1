"""What the simulations write, in one place: JSON, CSV, markdown and terminal tables, and figures
a person can read.

What:
- ``write_json``, ``write_csv``, ``markdown_table``, ``print_table``: the files and tables every
  simulation writes; ``Column`` and ``format_rows`` turn result rows (dicts) into table cells.
- ``simulation_main``: the ``--quick / --seed / --out`` command line the simulations share.
- ``new_figure`` makes a Figure (Agg canvas, constrained layout, no pyplot state); ``data_ticks``
  puts an axis's ticks at the data with plain labels; ``readable_log_axis`` labels a log axis in
  plain numbers (1-2-5 steps) or decades, without minor-tick labels; ``save_figure`` applies the
  shared readability rules and writes the PNG (``captured_figures`` hands tests what it wrote).
- ``figure_problems`` audits a drawn figure against the readability rules.

Readability rules (what ``figure_problems`` checks): every axes has an x-label and a y-label; with
more than one series in an axes, every series is labelled and listed in a legend (the axes' own or
the figure's), and every legend entry names a series that is drawn; an unlabelled line is allowed
only as a horizontal or vertical reference line in an axes that carries an annotation; on each axis
no two drawn tick labels overlap; no two texts (tick labels, axis labels, titles, annotations,
legends) overlap; no legend or annotation inside an axes covers a data point; no legend entry
names a line that draws nothing (one point, no marker); everything lies inside the figure.

Guarantee: ``save_figure`` leaves no axes legend over a data point (it moves such a legend under
its axes) and no two drawn tick labels of one axis overlapping (it drops minor-tick labels on a
crowded axis, then hides every second, third, … major label until none collide), writes the
figure, and warns (``FigureReadabilityWarning``) with every rule still broken.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import inspect
import json
import math
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from ldp.core.errors import ParameterError
from ldp.experiment import ExperimentArgs, Simulation

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.axis import Axis
    from matplotlib.figure import Figure
    from matplotlib.transforms import Bbox

__all__ = [
    "Column",
    "captured_figures",
    "FigureReadabilityWarning",
    "data_ticks",
    "figure_problems",
    "format_cell",
    "format_rows",
    "legend_below",
    "log_decades",
    "markdown_table",
    "new_figure",
    "plain_number",
    "print_table",
    "readable_log_axis",
    "save_figure",
    "simulation_main",
    "write_csv",
    "write_json",
]

DPI = 120
MISSING = "—"  # the cell of a value that was not measured (None)


# --- tables and files ---


class Column(NamedTuple):
    """One table column: the row key, the header a reader sees, the format of a cell."""

    key: str
    header: str
    fmt: str = "{}"


def format_cell(value: object, fmt: str = "{}") -> str:
    """``value`` formatted with ``fmt``; None is "—" and a float under the plain "{}" gets 4 decimals."""
    if value is None:
        return MISSING
    if isinstance(value, float) and fmt == "{}":
        return f"{value:.4f}"
    return fmt.format(value)


def format_rows(rows: Iterable[Mapping[str, Any]], columns: Sequence[Column]) -> list[tuple[str, ...]]:
    """The cells of ``rows`` under ``columns`` (a missing key is a ParameterError naming it)."""
    out = []
    for k, row in enumerate(rows):
        missing = [c.key for c in columns if c.key not in row]
        if missing:
            raise ParameterError(f"table row {k} has no value for column(s) {missing}; it has {sorted(row)}")
        out.append(tuple(format_cell(row[c.key], c.fmt) for c in columns))
    return out


def _markdown_cell(value: object) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def markdown_table(headers: Sequence[str], rows: Iterable[Sequence[object]], align: str | None = None) -> str:
    """A GitHub markdown table (no trailing newline). ``align`` has one letter per column: "l"
    (plain ``---``) or "r" (``---:``); default all plain. A "|" inside a cell is escaped."""
    align = align or "l" * len(headers)
    if len(align) != len(headers) or set(align) - {"l", "r"}:
        raise ParameterError(f"markdown_table: align must be one 'l' or 'r' per column ({len(headers)}), got {align!r}")
    lines = ["| " + " | ".join(map(_markdown_cell, headers)) + " |", "|" + "".join("---:|" if a == "r" else "---|" for a in align)]
    for k, row in enumerate(rows):
        if len(row) != len(headers):
            raise ParameterError(f"markdown_table: row {k} has {len(row)} cells for {len(headers)} columns")
        lines.append("| " + " | ".join(map(_markdown_cell, row)) + " |")
    return "\n".join(lines)


def write_json(path: Path, payload: Mapping[str, Any]) -> Path:
    """``payload`` as indented JSON at ``path`` (values JSON cannot hold are written as strings)."""
    path.write_text(json.dumps(payload, indent=1, default=str))
    return path


def write_csv(path: Path, rows: Sequence[Mapping[str, Any]], columns: Sequence[str] | None = None) -> Path:
    """``rows`` as CSV with the header ``columns`` (default: the first row's keys); None is an
    empty cell. A row with a key outside ``columns`` is a ParameterError (nothing is dropped)."""
    if columns is None:
        if not rows:
            raise ParameterError(f"write_csv({path}): no rows and no columns, so there is no header to write")
        columns = list(rows[0])
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(columns))
        writer.writeheader()
        for k, row in enumerate(rows):
            extra = sorted(set(row) - set(columns))
            if extra:
                raise ParameterError(f"write_csv({path}): row {k} has keys {extra} outside the columns {list(columns)}")
            writer.writerow(row)
    return path


def print_table(title: str, headers: Sequence[str], rows: Iterable[Sequence[object]], width: int | None = None) -> None:
    """The table on the terminal (rich), every cell as ``str``."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title)
    for header in headers:
        table.add_column(header)
    for row in rows:
        table.add_row(*map(str, row))
    Console(width=width).print(table)


C = TypeVar("C")
R = TypeVar("R")


def simulation_main(argv: list[str] | None, experiment: Simulation[Any, R], *, description: str, quick_help: str, show: Callable[[R], None]) -> R:
    """``python -m ldp.simulations.NAME [--quick] [--seed S] [--out DIR]``: the experiment's config
    for those settings (as ``ldp-sim run NAME`` builds it), its computation in process, its files
    written to ``DIR`` (default: the experiment's folder), the table shown; returns the result."""
    default_out = experiment.output_folder(ExperimentArgs(users=0, epsilon=1.0))
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--quick", action="store_true", help=quick_help)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=Path(default_out), help=f"output directory (default {default_out})")
    args = ap.parse_args(argv)
    config = experiment.config(ExperimentArgs(users=0, epsilon=experiment.default_epsilon or 1.0, seed=args.seed, quick=args.quick))
    result = experiment.compute(config)  # in process: a factory experiment's compute defaults to InProcessLROracle users
    if inspect.isawaitable(result):
        result = asyncio.run(result)  # type: ignore[arg-type]
    if experiment.write is not None:
        experiment.write(result, args.out)
    show(result)
    return result


# --- figures: making them ---


def new_figure(columns: int, width: float = 5.6, height: float = 4.4) -> tuple[Figure, list[Axes]]:
    """A Figure of ``columns`` side-by-side axes, ``width`` × ``height`` inches each, with an Agg
    canvas and constrained layout (labels and an ``outside`` legend get room); no pyplot state."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    if columns < 1:
        raise ParameterError(f"new_figure: columns must be ≥ 1, got {columns}")
    fig = Figure(figsize=(width * columns, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig, list(fig.subplots(1, columns, squeeze=False)[0])


def plain_number(x: float) -> str:
    """A tick label without exponents: 0.025, 0.5, 4, 1,000, 250,000."""
    if x == 0 or not math.isfinite(x):
        return f"{x:g}"
    if abs(x) >= 1000 and float(x).is_integer():
        return f"{int(x):,}"
    return f"{x:.6g}"


def data_ticks(axis: Axis, values: Iterable[float], labels: Sequence[str] | None = None) -> None:
    """Ticks exactly at ``values`` (sorted, distinct), labelled ``labels`` or as plain numbers,
    and no minor ticks on this axis: nothing a log scale could crowd."""
    from matplotlib.ticker import NullLocator

    ticks = sorted(set(float(v) for v in values))
    if labels is not None and len(labels) != len(ticks):
        raise ParameterError(f"data_ticks: {len(labels)} labels for {len(ticks)} distinct values")
    axis.set_ticks(ticks, labels=list(labels) if labels is not None else [plain_number(t) for t in ticks])
    axis.set_minor_locator(NullLocator())


def log_decades(axis: Axis) -> float:
    """How many decades a log axis's view spans (call after plotting)."""
    low, high = sorted(axis.get_view_interval())
    if low <= 0:
        raise ParameterError(f"the axis must be log-scaled with positive limits, got [{low}, {high}]")
    return math.log10(high / low)


def readable_log_axis(axis: Axis, plain: bool | None = None) -> None:
    """Label a log axis (call after plotting): ``plain`` (default: when it spans ≤ 3 decades),
    ticks at 1, 2, 5 × 10^k in plain numbers; else one tick per decade as 10^k. Minor ticks
    stay, unlabelled. Pass the same ``plain`` to panels that should read alike."""
    from matplotlib.ticker import FuncFormatter, LogFormatterSciNotation, LogLocator, NullFormatter

    if plain is None:
        plain = log_decades(axis) <= 3.0
    if plain:
        axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        axis.set_major_formatter(FuncFormatter(lambda x, pos: plain_number(x)))
    else:
        axis.set_major_locator(LogLocator(base=10, subs=(1.0,)))
        axis.set_major_formatter(LogFormatterSciNotation())
    axis.set_minor_formatter(NullFormatter())


# --- figures: the audit ---


class FigureReadabilityWarning(UserWarning):
    """A saved figure breaks a readability rule (the message lists each one)."""


def _overlap(a: Bbox, b: Bbox, slack: float = 0.5) -> bool:
    """True when the two boxes share more than ``slack`` pixels in both directions."""
    return a.x0 < b.x1 - slack and b.x0 < a.x1 - slack and a.y0 < b.y1 - slack and b.y0 < a.y1 - slack


def _flatten(item: object) -> Iterator[Any]:
    if item is None:
        return
    if isinstance(item, (list, tuple)):
        for sub in item:
            yield from _flatten(sub)
    else:
        yield item


def _labelled(label: object) -> bool:
    return isinstance(label, str) and bool(label) and not label.startswith("_")


@dataclass
class _Series:
    label: str
    artist: Any  # a Container, Line2D or Collection
    parts: list[Any]  # the artists it draws


def _series(ax: Axes) -> list[_Series]:
    """What an axes draws as data: its containers (bars, error bars) and the lines and collections
    that belong to none, each with its label."""
    out: list[_Series] = []
    members: set[int] = set()
    for container in ax.containers:
        parts = list(_flatten(list(container)))
        members.update(id(p) for p in parts)
        out.append(_Series(str(container.get_label() or ""), container, parts))
    for artist in [*ax.get_lines(), *ax.collections]:
        if id(artist) not in members:
            out.append(_Series(str(artist.get_label() or ""), artist, [artist]))
    return out


def _draws(s: _Series) -> bool:
    """False for a line that shows nothing: no marker and fewer than two finite points, or invisible."""
    import numpy as np
    from matplotlib.lines import Line2D

    if not isinstance(s.artist, Line2D):
        return True
    line = s.artist
    xy = np.asarray(line.get_xydata(), dtype=float).reshape(-1, 2)
    finite = int(np.isfinite(xy).all(axis=1).sum())
    marked = line.get_marker() not in (None, "", " ", "None", "none")
    drawn_line = line.get_linestyle() not in ("None", "none", "", " ") and finite >= 2
    return line.get_visible() and finite > 0 and (marked or drawn_line)


def _is_reference_line(s: _Series) -> bool:
    import numpy as np
    from matplotlib.lines import Line2D

    if not isinstance(s.artist, Line2D):
        return False
    xy = np.asarray(s.artist.get_xydata(), dtype=float).reshape(-1, 2)
    return len(xy) > 0 and (len(set(xy[:, 0])) == 1 or len(set(xy[:, 1])) == 1)


def _drawn_tick_labels(axis: Axis) -> list[Any]:
    """The tick labels an axis draws: visible, non-empty, at a tick inside the view interval."""
    low, high = sorted(axis.get_view_interval())
    slack = (high - low) * 1e-9
    labels = []
    for locs, ticks in ((axis.get_majorticklocs(), axis.get_major_ticks), (axis.get_minorticklocs(), axis.get_minor_ticks)):
        for loc, tick in zip(locs, ticks(len(locs))):
            if tick.get_visible() and low - slack <= loc <= high + slack:
                labels += [t for t in (tick.label1, tick.label2) if t.get_visible() and t.get_text()]
    return labels


def _where(ax: Axes) -> str:
    return f"axes {ax.get_title()!r}" if ax.get_title() else f"axes #{ax.figure.axes.index(ax) + 1}"


def _label_problems(ax: Axes) -> list[str]:
    return [f"{_where(ax)}: no {name}" for name, text in (("x-label", ax.get_xlabel()), ("y-label", ax.get_ylabel())) if not text.strip()]


def _entry_problems(ax: Axes) -> tuple[list[str], set[str]]:
    """Each entry of the legends that cover ``ax`` (its own, the figure's) must name a series that
    is drawn (in ``ax``; for a figure legend, in any axes); returns the problems and the entries."""
    fig = ax.figure
    everywhere = [s for other in fig.axes for s in _series(other)]
    legends = [(ax.get_legend(), _series(ax)), *((legend, everywhere) for legend in fig.legends)]
    problems, entries = [], set()
    for legend, known in legends:
        for text in legend.get_texts() if legend is not None else []:
            label = text.get_text()
            entries.add(label)
            if label not in {s.label for s in known}:
                problems.append(f"{_where(ax)}: legend entry {label!r} names no drawn series")
            elif not any(_draws(s) for s in known if s.label == label):
                problems.append(f"{_where(ax)}: legend entry {label!r} names a series that draws nothing")
    return problems, entries


def _legend_problems(ax: Axes) -> list[str]:
    """With several series, each is labelled and in a legend; legend entries name drawn series;
    an unlabelled reference line needs an annotation."""
    problems, entries = _entry_problems(ax)
    references = [s for s in _series(ax) if not _labelled(s.label) and _is_reference_line(s)]
    data = [s for s in _series(ax) if s not in references]
    if references and not ax.texts:
        problems.append(f"{_where(ax)}: an unlabelled reference line with no annotation to explain it")
    if len(data) > 1:
        problems += [f"{_where(ax)}: an unlabelled {type(s.artist).__name__} among {len(data)} series" for s in data if not _labelled(s.label)]
        problems += [f"{_where(ax)}: series {s.label!r} is in no legend" for s in data if _labelled(s.label) and s.label not in entries]
    return problems


def _data_points(s: _Series) -> Iterator[tuple[float, float]]:
    """Display coordinates of a series' points (line vertices, scatter offsets, error-bar ends, bar tops)."""
    import numpy as np
    from matplotlib.collections import Collection, LineCollection
    from matplotlib.lines import Line2D
    from matplotlib.patches import Rectangle

    for part in s.parts:
        if isinstance(part, Line2D):
            xy = np.asarray(part.get_xydata(), dtype=float)
            pts = part.get_transform().transform(xy) if len(xy) else xy
        elif isinstance(part, LineCollection):
            segs = [seg for seg in part.get_segments() if len(seg)]
            pts = part.get_transform().transform(np.concatenate(segs)) if segs else np.empty((0, 2))
        elif isinstance(part, Collection):
            offsets = np.asarray(part.get_offsets(), dtype=float)
            pts = part.get_offset_transform().transform(offsets) if len(offsets) else offsets
        elif isinstance(part, Rectangle):
            x, y, w, h = part.get_x(), part.get_y(), part.get_width(), part.get_height()
            pts = part.get_data_transform().transform([(x + w / 2, y + h)])
        else:
            continue
        yield from ((float(a), float(b)) for a, b in pts if math.isfinite(a) and math.isfinite(b))


def _texts(fig: Figure) -> list[tuple[str, Any]]:
    """Every text and legend drawn, with what it is: tick labels, axis labels, titles,
    annotations, figure texts, legends."""
    items: list[tuple[str, Any]] = []
    for ax in fig.axes:
        items += [("x tick label", t) for t in _drawn_tick_labels(ax.xaxis)] + [("y tick label", t) for t in _drawn_tick_labels(ax.yaxis)]
        titles = [getattr(ax, name, None) for name in ("_left_title", "_right_title")]  # set_title(loc="left"/"right")
        items += [("text", t) for t in (ax.xaxis.label, ax.yaxis.label, ax.title, *titles, *ax.texts) if t is not None]
        items += [("legend", ax.get_legend())] if ax.get_legend() is not None else []
    items += [("text", t) for t in (*fig.texts, *(getattr(fig, name, None) for name in ("_suptitle", "_supxlabel", "_supylabel"))) if t is not None]
    items += [("legend", legend) for legend in fig.legends]
    unique = {id(obj): (kind, obj) for kind, obj in items}  # once each: the suptitle is also in fig.texts
    return [(kind, obj) for kind, obj in unique.values() if kind == "legend" or (obj.get_visible() and obj.get_text())]


def _renderer(fig: Figure) -> Any:
    """The renderer of the figure's (Agg) canvas, after a draw."""
    return fig.canvas.get_renderer()  # type: ignore[attr-defined]


def _describe(kind: str, obj: Any) -> str:
    where = f" ({_where(obj.axes)})" if getattr(obj, "axes", None) is not None else ""
    return (f"{kind} {obj.get_text()!r}" if kind != "legend" else "a legend") + where


def _layout_problems(fig: Figure) -> list[str]:
    """Overlapping texts, legends over data points, anything outside the figure."""
    fig.canvas.draw()
    renderer = _renderer(fig)
    items = [(kind, obj, obj.get_window_extent(renderer)) for kind, obj in _texts(fig)]
    problems = [f"{_describe(ka, a)} overlaps {_describe(kb, b)}" for (ka, a, ba), (kb, b, bb) in combinations(items, 2) if _overlap(ba, bb)]
    whole = fig.bbox
    for kind, obj, box in items:
        if box.x0 < whole.x0 - 1 or box.y0 < whole.y0 - 1 or box.x1 > whole.x1 + 1 or box.y1 > whole.y1 + 1:
            problems.append(f"{_describe(kind, obj)} is cut off at the edge of the figure")
    for ax in fig.axes:
        covers: list[tuple[str, Any]] = [("the legend", ax.get_legend())] if ax.get_legend() is not None else []
        covers += [(f"text {t.get_text()!r}", t) for t in ax.texts if t.get_visible() and t.get_text()]
        for what, obj in covers:
            problems += [f"{_where(ax)}: {what} covers data of {label!r}" for label in _covered(ax, obj.get_window_extent(renderer))]
    return problems


def _covered(ax: Axes, box: Bbox) -> list[str]:
    """The labels of the series of ``ax`` with a data point inside ``box`` (display coordinates)."""
    covered = [s.label for s in _series(ax) if any(box.x0 < x < box.x1 and box.y0 < y < box.y1 for x, y in _data_points(s))]
    return list(dict.fromkeys(covered))


def figure_problems(fig: Figure) -> list[str]:
    """Every readability rule ``fig`` breaks (see the module docstring), one line each; [] when
    it follows them all. Draws the figure."""
    problems: list[str] = []
    for ax in fig.axes:
        if ax.get_visible() and ax.axison:
            problems += _label_problems(ax) + _legend_problems(ax)
    return problems + _layout_problems(fig)


# --- figures: fixing ticks, saving ---


def _collisions(labels: list[Any], renderer: Any) -> bool:
    boxes = [t.get_window_extent(renderer) for t in labels]
    return any(_overlap(a, b) for a, b in combinations(boxes, 2))


def _every_nth(inner: Any, step: int) -> Any:
    """A major-tick formatter that keeps ``inner``'s label of every ``step``-th tick and blanks the rest."""
    from matplotlib.ticker import Formatter

    class EveryNth(Formatter):
        def __call__(self, x: float, pos: int | None = None) -> str:
            return str(inner(x, pos))

        def format_ticks(self, values: Any) -> list[str]:
            return [text if k % step == 0 else "" for k, text in enumerate(inner.format_ticks(values))]

        def get_offset(self) -> str:
            return str(inner.get_offset())

    return EveryNth()


def declutter_ticks(fig: Figure) -> None:
    """On every axis whose drawn tick labels collide: drop the minor-tick labels, then keep every
    2nd, 3rd, … major label until no two collide."""
    from matplotlib.ticker import NullFormatter

    fig.canvas.draw()
    renderer = _renderer(fig)
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            if not _collisions(_drawn_tick_labels(axis), renderer):
                continue
            axis.set_minor_formatter(NullFormatter())
            fig.canvas.draw()
            inner, step = axis.get_major_formatter(), 2
            while _collisions(_drawn_tick_labels(axis), renderer) and step <= len(axis.get_majorticklocs()):
                axis.set_major_formatter(_every_nth(inner, step))
                fig.canvas.draw()
                step += 1


def legend_below(ax: Axes, columns: int = 2) -> None:
    """Move the legend of ``ax`` under its x-axis (tick labels and label), where it covers no data;
    the figure's constrained layout makes room for it."""
    from matplotlib.transforms import ScaledTranslation

    old = ax.get_legend()
    if old is None:
        raise ParameterError(f"legend_below: {_where(ax)} has no legend to move")
    fig: Any = ax.figure
    fig.canvas.draw()
    shown = [t.get_text() for t in old.get_texts()]
    pairs = dict(zip(*reversed(ax.get_legend_handles_labels())))  # label → handle
    under = ax.xaxis.get_tightbbox(_renderer(fig))  # tick labels and the x-label
    drop = (ax.bbox.y0 - (under.y0 if under is not None else ax.bbox.y0) + 4) / fig.dpi  # inches under the axes
    ax.legend([pairs[label] for label in shown if label in pairs], [label for label in shown if label in pairs], loc="upper center",
              bbox_to_anchor=(0.5, 0), bbox_transform=ax.transAxes + ScaledTranslation(0, -drop, fig.dpi_scale_trans),
              ncols=columns, fontsize=old.get_texts()[0].get_fontsize() if shown else None)


def uncover_data(fig: Figure) -> None:
    """Move every axes legend that covers a data point under its axes (``legend_below``)."""
    fig.canvas.draw()
    for ax in fig.axes:
        legend = ax.get_legend()
        if legend is not None and _covered(ax, legend.get_window_extent(_renderer(fig))):
            legend_below(ax)


_SAVE_HOOKS: list[Callable[[Figure, Path], None]] = []


@contextmanager
def captured_figures() -> Iterator[list[tuple[Path, Figure]]]:
    """Within the block, every figure ``save_figure`` writes is appended (path, figure) to the
    list it yields: how tests inspect what a simulation really saved."""
    seen: list[tuple[Path, Figure]] = []
    hook: Callable[[Figure, Path], None] = lambda fig, path: seen.append((path, fig))  # noqa: E731
    _SAVE_HOOKS.append(hook)
    try:
        yield seen
    finally:
        _SAVE_HOOKS.remove(hook)


def save_figure(fig: Figure, path: Path, dpi: int = DPI) -> Figure:
    """Move legends off the data, declutter the ticks, write ``fig`` to ``path`` as PNG, and warn
    with any readability rule still broken; returns ``fig`` (still drawable, for inspection)."""
    uncover_data(fig)
    declutter_ticks(fig)
    problems = figure_problems(fig)
    if problems:
        warnings.warn(f"{path.name}: " + "; ".join(problems), FigureReadabilityWarning, stacklevel=2)
    fig.savefig(path, dpi=dpi)
    for hook in _SAVE_HOOKS:
        hook(fig, path)
    return fig
