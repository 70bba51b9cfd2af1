"""Every lab runs headless in quick mode, with solutions, and saves its figures; as a script, as a
notebook (jupytext + nbclient, in a real Jupyter kernel), and through ``ldp-sim lab N``."""

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from itertools import combinations
from pathlib import Path

import pytest

from tests.waits import PROCESS_WAIT_S

REPO = Path(__file__).parents[2]
LAB_DIR = REPO / "simulations" / "labs"
LABS = sorted(p.stem for p in LAB_DIR.glob("lab*.py"))
QUICK_ENV = {"LDP_QUICK": "1", "LDP_SOLUTIONS": "1", "LDP_TRANSPORT": "inprocess", "MPLBACKEND": "Agg"}


def test_there_are_at_least_six_labs():
    assert len(LABS) >= 6, LABS


@pytest.mark.parametrize("lab", LABS)
def test_lab_runs_in_quick_mode(lab, tmp_path):
    env = dict(os.environ, LDP_QUICK="1", LDP_LAB_OUT=str(tmp_path), MPLBACKEND="Agg")
    proc = subprocess.run(
        [sys.executable, "-m", f"ldp.simulations.labs.{lab}"], env=env, capture_output=True, text=True, timeout=PROCESS_WAIT_S
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    assert list(tmp_path.rglob("*.png")), "a lab saves at least one figure"
    assert "[exercise]" in proc.stdout


@pytest.mark.parametrize("lab", LABS[:1])
def test_solutions_switch_hides_solutions(lab, tmp_path):
    env = dict(os.environ, LDP_QUICK="1", LDP_SOLUTIONS="0", LDP_LAB_OUT=str(tmp_path), MPLBACKEND="Agg")
    proc = subprocess.run([sys.executable, "-m", f"ldp.simulations.labs.{lab}"], env=env, capture_output=True, text=True, timeout=PROCESS_WAIT_S)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "your turn" in proc.stdout


def test_lab1_states_the_sampling_error_of_its_measured_sd(tmp_path):
    """The measured sd comes from R repetitions: the printout gives its sampling error and the
    measured/predicted ratios, which must lie within 4 sampling errors of 1 (the lab asserts it)."""
    env = dict(os.environ, **QUICK_ENV, LDP_LAB_OUT=str(tmp_path))
    proc = subprocess.run([sys.executable, "-m", "ldp.simulations.labs.lab1_randomized_response"], env=env, capture_output=True, text=True, timeout=PROCESS_WAIT_S)
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = re.search(r"R = (\d+) rounds per ε: the measured sd has a sampling error of ±([\d.]+)%", proc.stdout)
    assert found, proc.stdout
    repeats, rel_se = int(found.group(1)), float(found.group(2)) / 100
    assert repeats >= 50 and rel_se <= 0.10
    rows = [line.split() for line in proc.stdout.splitlines() if re.match(r"\s*[\d.]+\s+0\.\d{5}\s", line)]
    assert len(rows) == 5, proc.stdout
    for eps, measured, error, _predicted, ratio in rows:
        assert float(error) == pytest.approx(float(measured) * rel_se, abs=1e-5)
        assert abs(float(ratio) - 1) < 4 * rel_se, (eps, ratio)


# --- figures that can be read ---------------------------------------------------------------------


def figure_problems(figures=None) -> list[str]:
    """What makes figures hard to read: an axes with data but no x or y label, tick labels of one
    axis that overlap (e.g. a log axis labelling its minor ticks "3×10⁻¹4×10⁻¹"), a legend drawn
    over a bar. ``figures``: the open pyplot figures when None."""
    from matplotlib.patches import Rectangle

    if figures is None:
        import matplotlib.pyplot as plt

        figures = [plt.figure(n) for n in plt.get_fignums()]
    problems = []
    for number, fig in enumerate(figures):
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        for i, ax in enumerate(fig.axes):
            where = f"figure {number} axes {i}"
            if not ax.has_data():
                continue
            for name, label in (("x", ax.get_xlabel()), ("y", ax.get_ylabel())):
                if not label.strip():
                    problems.append(f"{where}: no {name} label")
            for name, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
                lo, hi = sorted(axis.get_view_interval())
                slack = (hi - lo) * 1e-9
                labels = [
                    (tick.label1.get_text(), tick.label1.get_window_extent(renderer))
                    for locs, ticks in ((axis.get_majorticklocs(), axis.get_major_ticks()), (axis.get_minorticklocs(), axis.get_minor_ticks()))
                    for loc, tick in zip(locs, ticks)
                    if lo - slack <= loc <= hi + slack and tick.get_visible() and tick.label1.get_visible() and tick.label1.get_text().strip()
                ]
                for (text_a, box_a), (text_b, box_b) in combinations(labels, 2):
                    if box_a.overlaps(box_b):
                        problems.append(f"{where}: {name} tick labels {text_a!r} and {text_b!r} collide")
            legend = ax.get_legend()
            if legend is not None:
                box = legend.get_window_extent(renderer)
                bars = [p for p in ax.patches if isinstance(p, Rectangle) and p.get_width() and p.get_height()]
                if any(box.overlaps(bar.get_window_extent(renderer)) for bar in bars):
                    problems.append(f"{where}: the legend covers a bar")
    return problems


def test_figure_check_flags_the_defects_it_looks_for():
    """The check must fail on the figures the labs used to draw."""
    import numpy as np
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    def figure(**kw):
        fig = Figure(**kw)
        FigureCanvasAgg(fig)
        return fig

    logaxes = figure(figsize=(5, 3.5))  # lab 1: default log ticks over [0.25, 4] label the minor ticks
    ax = logaxes.add_subplot()
    ax.loglog([0.25, 0.5, 1, 2, 4], [0.03, 0.014, 0.007, 0.003, 0.001], "o")
    ax.set_xlabel("ε")
    ax.set_ylabel("sd")
    bars = figure(figsize=(5, 3))  # lab 2: a legend over full-height bars
    ax = bars.add_subplot()
    ax.bar(range(1, 7), [2000, 2000, 2000, 0, 0, 0], label="answered")
    ax.bar(range(1, 7), [0, 0, 0, 2000, 2000, 2000], bottom=[2000, 2000, 2000, 0, 0, 0], label="refused")
    ax.set_xlabel("round")
    ax.set_ylabel("users")
    ax.legend()
    panels = figure(figsize=(9, 3.5))  # lab 3: the second panel had no y label
    left, right = panels.subplots(1, 2)
    for a in (left, right):
        a.plot(np.arange(3), np.arange(3))
        a.set_xlabel("τ")
    left.set_ylabel("users")
    assert any("tick labels" in p for p in figure_problems([logaxes])), figure_problems([logaxes])
    assert figure_problems([bars]) == ["figure 0 axes 0: the legend covers a bar"]
    assert figure_problems([panels]) == ["figure 0 axes 1: no y label"]


_RUN_AND_CHECK = """
import json, runpy, sys
from ldp.simulations.labs.runner import run_lab
run_lab(sys.argv[1])
print("FIGURE PROBLEMS " + json.dumps(runpy.run_path(sys.argv[2])["figure_problems"]()))
"""


@pytest.mark.parametrize("lab", LABS)
def test_lab_figures_are_legible(lab, tmp_path):
    """Runs the lab through the cell-by-cell runner (what `ldp-sim lab` runs), then checks its figures."""
    # the child runs this file for figure_problems, and this file imports tests.waits: the repo on its path
    env = dict(os.environ, **QUICK_ENV, LDP_LAB_OUT=str(tmp_path), PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    proc = subprocess.run(
        [sys.executable, "-c", _RUN_AND_CHECK, str(LAB_DIR / f"{lab}.py"), __file__], env=env, capture_output=True, text=True, timeout=PROCESS_WAIT_S, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    found = re.search(r"^FIGURE PROBLEMS (.*)$", proc.stdout, re.MULTILINE)
    assert found, proc.stdout[-2000:]
    problems = json.loads(found.group(1))
    assert not problems, problems


# --- run(): asyncio.run that works in a notebook's kernel -----------------------------------------


def test_run_outside_an_event_loop_is_asyncio_run():
    from ldp.simulations.labs.common import run

    async def answer():
        await asyncio.sleep(0)
        return threading.current_thread()

    assert run(answer()) is threading.current_thread()


def test_run_inside_a_running_loop_uses_a_worker_thread_and_reraises():
    """What a Jupyter kernel does: the cell runs while the kernel's loop runs in this thread."""
    from ldp.simulations.labs.common import run

    async def answer():
        await asyncio.sleep(0)
        return threading.current_thread(), asyncio.get_running_loop()

    async def fails():
        raise KeyError("boom")

    async def cell():
        ours = asyncio.get_running_loop()
        thread, loop = run(answer())  # a plain call, as in a lab's code cell
        assert thread is not threading.current_thread() and loop is not ours
        with pytest.raises(KeyError, match="boom"):
            run(fails())
        return "done"

    assert asyncio.run(cell()) == "done"


def test_run_interrupted_in_a_running_loop_cancels_the_coroutine():
    """Interrupting the kernel (SIGINT to its main thread) while a cell waits in ``run``: the
    coroutine is cancelled, its cleanup runs, and the KeyboardInterrupt reaches the cell."""
    from ldp.simulations.labs.common import run

    started, cancelled = threading.Event(), threading.Event()

    async def forever():
        started.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    def interrupt():
        started.wait(10)
        time.sleep(0.2)  # the cell is waiting in run() by now
        signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)

    async def cell():
        threading.Thread(target=interrupt, daemon=True).start()
        run(forever())

    # A loop like the kernel's: run_until_complete leaves SIGINT to Python's default handler
    # (asyncio.run would install its own, which cancels its main task instead of raising).
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    loop = asyncio.new_event_loop()
    try:
        with pytest.raises(KeyboardInterrupt):
            loop.run_until_complete(cell())
    finally:
        loop.close()
    assert cancelled.is_set()


# --- the cell-by-cell runner ------------------------------------------------------------------------


@pytest.mark.parametrize("lab", LABS)
def test_runner_cuts_a_lab_into_the_cells_jupytext_sees(lab):
    import jupytext

    from ldp.simulations.labs.runner import split_cells

    path = LAB_DIR / f"{lab}.py"
    ours = [(c.kind, c.source.strip()) for c in split_cells(path.read_text(encoding="utf-8"))]
    theirs = [(c.cell_type, c.source.strip()) for c in jupytext.read(path).cells if c.source.strip()]
    assert ours == theirs
    lines = path.read_text(encoding="utf-8").splitlines()
    for cell in split_cells(path.read_text(encoding="utf-8")):  # line numbers point into the file
        if cell.kind == "code":
            assert lines[cell.line - 1 : cell.line - 1 + len(cell.source.splitlines())] == cell.source.splitlines()


@pytest.mark.parametrize(
    ("value", "expected"), [("", True), ("1", True), ("0", False), ("off", False), (" Yes ", True), ("FALSE", False)]
)
def test_env_switch_values(value, expected):
    from ldp.simulations.labs.runner import env_switch

    assert env_switch("LDP_SOLUTIONS", True, {"LDP_SOLUTIONS": value}) is expected
    assert env_switch("LDP_QUICK", False, {}) is False


def test_env_switch_rejects_a_typo():
    from ldp.simulations.labs.runner import env_switch

    with pytest.raises(ValueError, match=r"LDP_QUICK must be 1 or 0 .*got 'ture'"):
        env_switch("LDP_QUICK", False, {"LDP_QUICK": "ture"})


# --- ldp-sim lab N ----------------------------------------------------------------------------------


def _ldp_sim_lab(*args, env=None, timeout=PROCESS_WAIT_S):
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("LDP_")} | (env or {})
    return subprocess.run([sys.executable, "-m", "ldp.cli.main", "lab", *args], capture_output=True, text=True, timeout=timeout, env=full_env)


def test_ldp_sim_lab_runs_a_lab_over_grpc_client_processes(tmp_path):
    """The classroom way: `ldp-sim lab 2 --quick` with 2 client processes on loopback; the lab's
    numbers are the in-process ones (same seed), its figure is saved and its path printed."""
    cmd = [sys.executable, "-m", "ldp.cli.main", "lab", "2", "--quick", "--processes", "2", "--out", str(tmp_path / "g")]
    grpc_run = subprocess.run(cmd, capture_output=True, text=True, timeout=PROCESS_WAIT_S)
    assert grpc_run.returncode == 0, grpc_run.stdout[-2000:] + grpc_run.stderr[-3000:]
    assert "2 client process(es) over gRPC" in grpc_run.stdout
    assert f"figure saved: {tmp_path / 'g' / 'lab2' / 'lab2_refusals.png'}" in grpc_run.stdout
    local = subprocess.run(cmd[:-2] + ["--transport", "inprocess", "--out", str(tmp_path / "i")], capture_output=True, text=True, timeout=PROCESS_WAIT_S)
    assert local.returncode == 0, local.stderr[-3000:]
    rounds = lambda out: [line for line in out.splitlines() if line.startswith("round ")]  # noqa: E731
    assert rounds(grpc_run.stdout) == rounds(local.stdout) and len(rounds(local.stdout)) == 6
    # then the lab's result table, through the Experiment protocol (the table `ldp-sim run lab2` prints)
    table = lambda out: out[out.index("┃ round ┃ answered ┃ refused ┃") :].splitlines()[:9]  # noqa: E731
    assert table(grpc_run.stdout) == table(local.stdout)


def test_ldp_sim_lab_5_over_grpc_gives_the_in_process_numbers(tmp_path):
    """`ldp-sim lab 5 --quick` over gRPC serves its 9 local-attempt populations from one cluster of
    client processes (``common.oracle_factory``, issue 29: it launched 9 clusters and took 217 s);
    each population loaded into it starts fresh, so the lab's table is the in-process one, digit
    for digit. A factory that kept serving the first population, or kept the users' spent budget
    across loads, would change the local rows (d = 8 and 12 would be answered by d = 4's users)."""
    grpc_run = _ldp_sim_lab("5", "--quick", "--processes", "2", "--out", str(tmp_path / "g"))
    assert grpc_run.returncode == 0, grpc_run.stdout[-2000:] + grpc_run.stderr[-3000:]
    assert "2 client process(es) over gRPC" in grpc_run.stdout
    local = _ldp_sim_lab("5", "--quick", "--transport", "inprocess", "--out", str(tmp_path / "i"))
    assert local.returncode == 0, local.stdout[-2000:] + local.stderr[-3000:]
    rows = lambda out: [line for line in out.splitlines() if line.startswith(("local       d", "central A*  d")) or "│ local attempt │" in line]  # noqa: E731
    assert rows(grpc_run.stdout) == rows(local.stdout) and len(rows(local.stdout)) == 2 * 3 + 4, rows(local.stdout)


def test_a_labs_populations_share_one_cluster_of_client_processes(monkeypatch):
    """Over gRPC ``common.oracle_factory`` launches one cluster (aggregator + 2 client processes)
    for all of a lab's populations and loads each later one into it; every population's reports
    are those of a fresh in-process oracle (same seed, same coins). Catches a factory that launches
    per population (clusters == 3) or that answers a later population from an earlier one."""
    import numpy as np

    from ldp.core.concepts import concept_class
    from ldp.core.population import PopulationSpec
    from ldp.core.query_specs import label_query
    from ldp.core.randomizers import RandomizerSpec
    from ldp.local.messages import SessionKind
    from ldp.local.session import Request, Session
    from ldp.simulations.labs import common

    cc = concept_class("parity", 4)
    specs = [PopulationSpec(cc, cc.random_target(np.random.default_rng(t)), 500 + 100 * t, budget=1.0, seed=t) for t in range(3)]

    async def answers(factory):
        out = []
        for spec in specs:
            async with factory(spec) as oracle:
                session = Session(oracle, SessionKind.NON_INTERACTIVE, name="shared cluster")
                (rep,) = await session.round([Request.of(range(spec.size), RandomizerSpec("binary_rr", label_query(), 1.0))])
                out.append(np.asarray(rep.values).tolist())
        return out, getattr(factory, "clusters", None), getattr(factory, "populations", None)

    async def both():
        monkeypatch.setattr(common, "TRANSPORT", "inprocess")
        async with common.oracle_factory() as factory:
            in_process, _, _ = await answers(factory)
        monkeypatch.setattr(common, "TRANSPORT", "grpc")
        monkeypatch.setattr(common, "PROCESSES", 2)
        async with common.oracle_factory() as factory:
            over_grpc = await answers(factory)
        return in_process, over_grpc

    in_process, (over_grpc, clusters, populations) = asyncio.run(asyncio.wait_for(both(), 120))
    assert (clusters, populations) == (1, 3)
    assert over_grpc == in_process and [len(v) for v in in_process] == [500, 600, 700]


def test_ldp_sim_lab_honours_ldp_quick_from_the_environment(tmp_path):
    """`LDP_QUICK=1 ldp-sim lab 2` runs lab 2 at its quick size (2,000 users, not 20,000)."""
    proc = _ldp_sim_lab("2", "--transport", "inprocess", "--out", str(tmp_path), env={"LDP_QUICK": "1"})
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "quick sizes, solutions shown" in proc.stdout
    assert "round 1: answered   2000, refused      0" in proc.stdout, proc.stdout


@pytest.mark.parametrize("how", [("env", {"LDP_SOLUTIONS": "0"}), ("flag", {})], ids=["LDP_SOLUTIONS=0", "--no-solutions"])
def test_ldp_sim_lab_hides_the_solutions_when_asked(tmp_path, how):
    """`LDP_SOLUTIONS=0 ldp-sim lab 6 --quick` and `ldp-sim lab 6 --quick --no-solutions`: the
    exercise is set, its solution is not printed (with solutions on, the same run prints
    "true ε = ..." — see the narrative test)."""
    kind, env = how
    flag = ["--no-solutions"] if kind == "flag" else []
    proc = _ldp_sim_lab("6", "--quick", "--transport", "inprocess", "--out", str(tmp_path), *flag, env=env)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "quick sizes, solutions hidden" in proc.stdout
    assert "[exercise] audit the buggy randomizer exactly and compute its true privacy loss" in proc.stdout and "your turn" in proc.stdout
    assert "true ε =" not in proc.stdout and "buggy: max log-ratio" not in proc.stdout  # the answer stays hidden


def test_ldp_sim_lab_prints_the_narrative_between_the_outputs(tmp_path):
    proc = _ldp_sim_lab("6", "--quick", "--transport", "inprocess", "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    out = proc.stdout
    assert "# %%" not in out and "**" not in out  # rendered, not the source
    in_order = [
        "Lab 6 — Find the privacy bug",  # the title cell
        "Goals. A randomizer's privacy claim",
        "1. The exact audit",  # a heading ...
        "honest: max log-ratio",  # ... the output of the code cell after it ...
        "2. The statistical audit (black box)",  # ... and the next heading
        "Distinguishing event for inputs",
        "flagged",
        "Exercises",
        "What is its true ε?",
        "[exercise] audit the buggy randomizer exactly and compute its true privacy loss",
        "buggy: max log-ratio",  # the buggy version's exact audit is the exercise's solution ...
        "true ε =",  # ... shown by default
    ]
    positions = [out.find(text) for text in in_order]
    assert -1 not in positions, [t for t, p in zip(in_order, positions) if p < 0]
    assert positions == sorted(positions), out


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (["99"], {}, "there is no lab 99; labs are [1, 2, 3, 4, 5, 6, 7]"),
        (["2"], {"LDP_QUICK": "maybe"}, "LDP_QUICK must be 1 or 0 (or true/false, yes/no, on/off), got 'maybe'"),
        (["2", "--quick"], {"LDP_SOLUTIONS": "nope"}, "LDP_SOLUTIONS must be 1 or 0"),
    ],
)
def test_ldp_sim_lab_user_mistakes_are_one_line(args, env, message):
    proc = _ldp_sim_lab(*args, env=env, timeout=PROCESS_WAIT_S)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    assert "Lab " not in proc.stdout  # nothing started


# --- every lab as a notebook: converted by jupytext, executed by nbclient in a real kernel ---------


@pytest.fixture(scope="module")
def lab_kernelspecs(tmp_path_factory):
    """Kernel specs with one kernel, "ldp-labs": *this* interpreter's ipykernel.

    ``kernel_name="python3"`` looks the spec up in the user's Jupyter directories first, where a
    "python3" spec may start another Python (one without ``ldp``), and a fresh machine may have
    no spec besides the venv's. So the spec is written for ``sys.executable`` (ipykernel's own
    ``write_kernel_spec``) into a temporary directory, the only one looked in.
    """
    from ipykernel.kernelspec import write_kernel_spec
    from jupyter_client.kernelspec import KernelSpecManager

    kernels = tmp_path_factory.mktemp("kernels")
    write_kernel_spec(kernels / "ldp-labs", overrides={"display_name": "ldp labs", "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]})
    specs = KernelSpecManager(kernel_dirs=[str(kernels)], ensure_native_kernel=False)
    assert specs.get_kernel_spec("ldp-labs").argv[0] == sys.executable
    return specs


def _kernel_env(out: Path) -> dict[str, str]:
    """The lab kernel's environment (its process only; this process's os.environ is untouched):
    quick mode, figures saved under ``out``, and no MPLBACKEND, so that the kernel picks the inline
    backend as a user's Jupyter does (ipykernel sets it when MPLBACKEND is unset)."""
    env = dict(os.environ, **QUICK_ENV, LDP_LAB_OUT=str(out))
    env.pop("MPLBACKEND", None)
    return env


def inline_figures(nb) -> list:
    """The figures an executed notebook shows under its cells: its PNG display outputs."""
    return [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.output_type in ("display_data", "execute_result") and "image/png" in o.get("data", {})]


@pytest.mark.parametrize("lab", LABS)
def test_lab_runs_as_a_notebook(lab, tmp_path, lab_kernelspecs):
    """The labs are jupytext percent scripts: opened as notebooks, every cell must run in a Jupyter
    kernel, which already runs an event loop (where a bare ``asyncio.run`` raises)."""
    import jupytext
    import nbclient
    from jupyter_client.manager import AsyncKernelManager

    nb = jupytext.read(LAB_DIR / f"{lab}.py")
    assert sum(c.cell_type == "markdown" for c in nb.cells) >= 2 and sum(c.cell_type == "code" for c in nb.cells) >= 3
    km = AsyncKernelManager(kernel_name="ldp-labs", kernel_spec_manager=lab_kernelspecs)
    client = nbclient.NotebookClient(nb, km=km, timeout=PROCESS_WAIT_S, startup_timeout=PROCESS_WAIT_S, resources={"metadata": {"path": str(REPO)}})
    try:
        client.execute(env=_kernel_env(tmp_path))
    except nbclient.exceptions.CellExecutionError as exc:
        plain = re.sub(r"\x1b\[[0-9;]*m", "", str(exc))  # the kernel's traceback is ANSI-coloured
        pytest.fail(f"{lab} as a notebook: {plain[-3000:]}", pytrace=False)
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]
    stderr = [o.get("text", "") for o in outputs if o.output_type == "stream" and o.get("name") == "stderr"]
    warnings = [o for o in outputs if o.output_type == "display_data" and "Warning" in str(o.get("data", {}).get("text/plain", ""))]
    assert not stderr and not warnings, (stderr, warnings)  # e.g. rich's "install ipywidgets" warning
    stdout = "".join(o.get("text", "") for o in outputs if o.output_type == "stream" and o.get("name") == "stdout")
    assert "[exercise]" in stdout and "your turn" not in stdout
    assert list(tmp_path.rglob("*.png")), "a lab saves at least one figure"
    assert inline_figures(nb), f"{lab} as a notebook shows no figure under its cells (is matplotlib's backend forced to Agg?)"


def test_the_inline_figure_check_catches_a_lab_that_forces_agg(tmp_path, lab_kernelspecs):
    """The labs used to call ``matplotlib.use("Agg")`` when imported: a notebook then showed no
    figure. Lab 2 with that call put back (a first cell) runs, saves its PNG, and shows nothing."""
    import jupytext
    import nbclient
    import nbformat
    from jupyter_client.manager import AsyncKernelManager

    nb = jupytext.read(LAB_DIR / "lab2_budgets.py")
    nb.cells.insert(0, nbformat.v4.new_code_cell('import matplotlib\nmatplotlib.use("Agg")'))
    km = AsyncKernelManager(kernel_name="ldp-labs", kernel_spec_manager=lab_kernelspecs)
    nbclient.NotebookClient(nb, km=km, timeout=PROCESS_WAIT_S, startup_timeout=PROCESS_WAIT_S, resources={"metadata": {"path": str(REPO)}}).execute(env=_kernel_env(tmp_path))
    assert list(tmp_path.rglob("*.png")) and not inline_figures(nb)


@pytest.mark.parametrize(("setup", "expected"), [("", "agg"), ("MPLBACKEND=svg", "svg"), ("use:pdf", "pdf")])
def test_the_labs_choose_agg_only_when_no_backend_is_chosen(setup, expected, tmp_path):
    """A plain run with nothing chosen gets Agg (figures saved, never shown); a backend chosen by
    MPLBACKEND or by ``matplotlib.use`` before the lab's import is kept. (MPLCONFIGDIR: an empty
    folder, so that a matplotlibrc of this machine's user chooses nothing.)"""
    env = {k: v for k, v in os.environ.items() if k != "MPLBACKEND"} | {"MPLCONFIGDIR": str(tmp_path)}
    code = "import ldp.simulations.labs.common, matplotlib; print(matplotlib.get_backend().lower())"
    if setup.startswith("MPLBACKEND="):
        env["MPLBACKEND"] = setup.split("=", 1)[1]
    elif setup:
        code = f"import matplotlib; matplotlib.use({setup.split(':')[1]!r}); " + code
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=PROCESS_WAIT_S)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == expected
