"""Ledger stores: ledgers keyed by the identity of the data continue across opens, reloads,
restarts and kill -9; nonces are never reused; the SQLite log is one row per charge, not per user.

Each check is also run against a broken variant written here, and must fail on it.
"""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ldp.core.budget import Ledger, charge_units
from ldp.core.errors import LDPError, ParameterError
from ldp.local.ledger_store import LedgerStore, MemoryLedgerStore, SqliteLedgerStore, open_store
from tests.waits import PROCESS_WAIT_S

REPO = Path(__file__).resolve().parents[2]
X = "a" * 64  # identities: e.g. SHA-256 hex of the data's secret description
Y = "b" * 64
QUARTER = 2**46  # units of ε = 0.25


def crash(store: SqliteLedgerStore) -> None:
    """This process's store dies without closing: its database connection goes, and its claims
    go as the kernel drops a dead process's locks (nothing is committed or compacted)."""
    store._db.close()
    store._finalizer()


@pytest.fixture(params=["memory", "sqlite"])
def kind(request):
    return request.param


def stores(kind: str, path: Path, cls: type[SqliteLedgerStore] = SqliteLedgerStore):
    """(first store, the store a reopen uses). Memory: the same object (a reload in the same
    process); SQLite: a new store on the same file (a restart)."""
    if kind == "memory":
        store = MemoryLedgerStore()
        return store, lambda: store
    return cls(path, compact_rows=2), lambda: cls(path, compact_rows=2)


# -- continuation ----------------------------------------------------------------------------


def check_continuation(kind: str, path: Path, cls: type[SqliteLedgerStore] = SqliteLedgerStore) -> None:
    rng = np.random.default_rng(7)
    store, again = stores(kind, path, cls)
    ledger = store.open(X, 0, 100, 1.0)
    for _ in range(5):
        ledger.charge(np.sort(rng.choice(100, 40, replace=False)), 0.125)
    ledger.charge(np.arange(100), 0.25)
    ledger.charge(np.array([60, 60, 3]), 0.0625)
    spent, nonces = ledger.spent_units(), ledger.nonces()
    assert nonces.max() > 1
    if kind == "sqlite":
        store.close()
    else:  # a reload of the same data in the same process: an overlapping range closes the old ledger
        store.commit()
    store = again()
    moved = store.open(X, 50, 100, 1.0)
    assert np.array_equal(moved.spent_units()[:50], spent[50:]), "users 50..99 did not continue their spent budget"
    assert np.array_equal(moved.nonces()[:50], nonces[50:]), "users 50..99 did not continue their nonces"
    assert not moved.spent_units()[50:].any() and not moved.nonces()[50:].any()
    other = store.open(Y, 0, 100, 1.0)
    assert not other.spent_units().any() and not other.nonces().any()
    # the moved range's charges and the untouched users 0..49 all survive the next reopen
    moved.charge(np.arange(50, 150), 0.25)
    spent_moved, nonces_moved = moved.spent_units(), moved.nonces()
    if kind == "memory":
        whole = store.open(X, 0, 150, 1.0)  # closes the moved ledger and continues it
    else:
        store.close()
        store = again()
        whole = store.open(X, 0, 150, 1.0)
    assert np.array_equal(whole.spent_units()[:50], spent[:50])
    assert np.array_equal(whole.spent_units()[50:], spent_moved) and np.array_equal(whole.nonces()[50:], nonces_moved)
    store.close()


class ResettingStore(SqliteLedgerStore):
    """Broken: every open gives fresh ledgers (the audited bug: a reload resets budgets)."""

    def open(self, identity, first_user, count, budget):
        ledger = super().open(identity, first_user, count, budget)
        ledger._spent[:] = 0
        ledger._nonces[:] = 0
        return ledger


def test_an_identity_continues_across_ranges_and_reopens(kind, tmp_path):
    check_continuation(kind, tmp_path / "ledgers.sqlite")


def test_the_continuation_check_catches_a_store_that_resets(tmp_path):
    with pytest.raises(AssertionError, match="continue"):
        check_continuation("sqlite", tmp_path / "ledgers.sqlite", ResettingStore)


def test_reloading_the_same_range_shares_the_ledger_and_overlaps_close_the_old_one(kind, tmp_path):
    store, _ = stores(kind, tmp_path / "l.sqlite")
    first = store.open(X, 0, 10, 1.0)
    assert store.open(X, 0, 10, 1.0) is first  # the same data loaded again: the same ledger
    beside = store.open(X, 10, 10, 1.0)  # disjoint users of the same data: both live
    first.charge(np.arange(10), 0.5)
    wider = store.open(X, 5, 10, 1.0)  # overlapping: the old ledgers close, nothing is lost
    assert wider.spent_units().tolist() == [QUARTER * 2] * 5 + [0] * 5
    with pytest.raises(LDPError, match="closed"):
        first.charge(np.arange(10), 0.25)
    with pytest.raises(LDPError, match="closed"):
        beside.charge(np.arange(10, 20), 0.25)
    other_budget = store.open(X, 5, 10, 2.0)  # the budget is the caller's: the allowance changes, spent continues
    assert other_budget.spent_units()[0] == 2 * QUARTER and other_budget.allowance == 2 * 2**48
    store.close()
    with pytest.raises(LDPError, match="closed"):
        store.open(X, 0, 1, 1.0)
    with pytest.raises(LDPError, match="closed"):
        other_budget.charge(np.array([5]), 0.25)


def test_bad_arguments(tmp_path):
    store = MemoryLedgerStore()
    for bad in ["", None, 5]:
        with pytest.raises(ParameterError, match="identity"):
            store.open(bad, 0, 1, 1.0)
    with pytest.raises(ParameterError):
        store.open(X, -1, 1, 1.0)
    with pytest.raises(ParameterError, match="budget"):
        store.open(X, 0, 1, float("nan"))
    assert isinstance(open_store(None), MemoryLedgerStore) and not open_store(None).durable
    durable = open_store(tmp_path / "deep" / "er" / "l.sqlite")
    assert isinstance(durable, SqliteLedgerStore) and durable.durable
    durable.close()
    assert (tmp_path / "deep" / "er" / "l.sqlite").stat().st_mode & 0o077 == 0  # the owner's only


def test_the_file_is_wal_and_full_sync(tmp_path):
    store = SqliteLedgerStore(tmp_path / "l.sqlite")
    assert store._db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert store._db.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    store.close()


# -- the one-unit boundary, across a restart -------------------------------------------------


def check_boundary_across_restart(path: Path, cls: type[SqliteLedgerStore] = SqliteLedgerStore) -> None:
    """Spend 1.0 = 2^48 units to the last unit over three processes' worth of opens; the next
    charge, one minimal unit of ε, is refused after a restart."""
    for eps in [0.25, 0.5]:  # 0.25 + 0.5 + 0.25 = 1.0 exactly
        store = cls(path)
        assert store.open(X, 0, 2, 1.0).charge(np.array([0]), eps).accepted[0]
        store.close()
    store = cls(path)
    ledger = store.open(X, 0, 2, 1.0)
    assert ledger.charge(np.array([0]), 0.25).accepted[0]
    store.commit()
    crash(store)  # a crash after the commit
    store = cls(path)
    ledger = store.open(X, 0, 2, 1.0)
    assert int(ledger.spent_units()[0]) == 2**48 and int(ledger.nonces()[0]) == 3, "a restart lost a committed charge"
    assert not ledger.charge(np.array([0]), 2.0**-30).accepted[0], "a spent user was charged again after a restart"
    store.close()


class DropsTheLastRow(SqliteLedgerStore):
    """Broken: the replay forgets the newest log row."""

    def open(self, identity, first_user, count, budget):
        self._db.execute("DELETE FROM charges WHERE seq = (SELECT MAX(seq) FROM charges)")
        return super().open(identity, first_user, count, budget)


def test_spent_to_the_last_unit_stays_spent_across_restarts(tmp_path):
    check_boundary_across_restart(tmp_path / "l.sqlite")


def test_the_restart_boundary_check_catches_a_lost_log_row(tmp_path):
    with pytest.raises(AssertionError, match="lost a committed"):
        check_boundary_across_restart(tmp_path / "l.sqlite", DropsTheLastRow)


# -- refunds and commits through a store -----------------------------------------------------


def test_a_refunded_charge_is_never_written_and_a_committed_one_cannot_be_refunded(kind, tmp_path):
    store, again = stores(kind, tmp_path / "l.sqlite")
    ledger = store.open(X, 0, 4, 1.0)
    kept = ledger.charge(np.arange(4), 0.25)
    refunded = ledger.charge(np.array([1, 3]), 0.5)
    ledger.refund(refunded)
    assert ledger.pending() == [kept]
    store.commit()
    assert ledger.pending() == []
    with pytest.raises(LDPError, match="pending"):
        ledger.refund(kept)
    if kind == "sqlite":
        crash(store)  # crash
        ledger = again().open(X, 0, 4, 1.0)
        assert ledger.spent_units().tolist() == [QUARTER] * 4 and ledger.nonces().tolist() == [1] * 4


def test_a_failed_commit_leaves_the_charges_pending(tmp_path):
    store = SqliteLedgerStore(tmp_path / "l.sqlite")
    ledger = store.open(X, 0, 4, 1.0)
    charge = ledger.charge(np.arange(4), 0.25)
    real = store._db

    class Failing:
        def __getattr__(self, name):
            return getattr(real, name)

        def executemany(self, *args):
            raise sqlite3.OperationalError("disk I/O error")

    store._db = Failing()
    with pytest.raises(sqlite3.OperationalError):
        store.commit()
    store._db = real
    assert ledger.pending() == [charge] and not real.in_transaction
    ledger.refund(charge)  # the caller sends nothing and gives the budget back
    assert not ledger.spent_units().any()
    store.close()


def test_one_small_row_per_charge_not_per_user(tmp_path):
    store = SqliteLedgerStore(tmp_path / "l.sqlite")
    ledger = store.open(X, 0, 100_000, 1.0)
    ledger.charge(np.arange(100_000), 0.25)  # everyone pays: no ids, no bitmap
    ledger.charge(np.arange(0, 100_000, 2), 0.75)  # ids, everyone pays
    ledger.charge(np.arange(100_000), 0.25)  # half refused: a bitmap
    ledger.charge(np.arange(10), 1.0)  # nobody pays: no row
    store.commit()
    rows = store._db.execute("SELECT first_user, stop, length(ids), length(accepted), units FROM charges ORDER BY seq").fetchall()
    assert rows == [
        (0, 100_000, None, None, QUARTER),
        (0, 99_999, 50_000 * 8, None, 3 * QUARTER),
        (0, 100_000, None, 100_000 // 8, QUARTER),
    ]
    store.close()


def test_compaction_keeps_every_charge_and_trims_the_log(tmp_path):
    """Many ranges, identities and compactions (every 3 rows); a reference of plain Ledgers."""
    rng = np.random.default_rng(3)
    path = tmp_path / "l.sqlite"
    universe = {X: Ledger(0, 300, 4.0), Y: Ledger(0, 300, 4.0)}
    for _session in range(6):
        store = SqliteLedgerStore(path, compact_rows=3)
        identity = X if rng.random() < 0.7 else Y
        lo = int(rng.integers(0, 200))
        hi = int(rng.integers(lo + 1, 301))
        ledger = store.open(identity, lo, hi - lo, 4.0)
        reference = universe[identity]
        assert np.array_equal(ledger.spent_units(), reference.spent_units(np.arange(lo, hi)))
        assert np.array_equal(ledger.nonces(), reference.nonces(np.arange(lo, hi)))
        for _ in range(int(rng.integers(1, 12))):
            shape = rng.integers(3)
            if shape == 0:
                a = int(rng.integers(lo, hi))
                users = np.arange(a, int(rng.integers(a + 1, hi + 1)))
            elif shape == 1:
                users = np.sort(rng.choice(np.arange(lo, hi), int(rng.integers(1, hi - lo + 1)), replace=False))
            else:
                users = rng.integers(lo, hi, int(rng.integers(1, 20)))
            eps = float(rng.choice([0.125, 0.25, 1 / 3]))
            mine, theirs = ledger.charge(users, eps), reference.charge(users, eps)
            assert np.array_equal(mine.accepted, theirs.accepted) and np.array_equal(mine.nonces, theirs.nonces)
            store.commit()
        if rng.random() < 0.5:
            store.close()
        else:
            crash(store)  # a crash: no compaction at close
    store = SqliteLedgerStore(path)
    for identity, reference in universe.items():
        ledger = store.open(identity, 0, 300, 4.0)
        assert np.array_equal(ledger.spent_units(), reference.spent_units())
        assert np.array_equal(ledger.nonces(), reference.nonces())
    store.close()
    db = sqlite3.connect(path)
    assert db.execute("SELECT COUNT(*) FROM charges").fetchone()[0] == 0  # both ranges snapshotted at close
    spans = db.execute("SELECT identity_id, first_user, stop FROM snapshots ORDER BY identity_id, first_user").fetchall()
    for (i1, _, stop1), (i2, first2, _) in zip(spans, spans[1:]):
        assert i1 != i2 or stop1 <= first2  # snapshots never overlap
    db.close()


# -- nonces are never reused: a model-based property test ------------------------------------


def run_operations(kind: str, directory: str, operations, cls: type[SqliteLedgerStore] = SqliteLedgerStore) -> None:
    """Apply charges, refunds, commits, reloads of other ranges and (SQLite) crashes; check every
    charge against a model (the committed state plus the pending charges) and that no nonce of a
    report that may have left (a committed charge's) is ever handed out again."""
    path = os.path.join(directory, "l.sqlite")
    n, budget = 12, 1.0
    store: LedgerStore = MemoryLedgerStore() if kind == "memory" else cls(path, compact_rows=3)
    ledger = store.open(X, 0, n, budget)
    live = [ledger]  # the store's open ledgers (disjoint ranges)
    committed_spent, committed_nonces = [0] * n, [0] * n
    pending: list = []  # (ledger, users, units, charge), oldest first
    used: list[set[int]] = [set() for _ in range(n)]  # nonces of committed reports

    def current():
        spent, nonces = list(committed_spent), list(committed_nonces)
        for _, users, units, charge in pending:
            for u in np.array(users)[charge.accepted]:
                spent[u] += units
                nonces[u] += 1
        return spent, nonces

    def commit_model():
        for _, users, units, charge in pending:
            for u, nonce in zip(np.array(users)[charge.accepted], charge.nonces):
                committed_spent[u] += units
                committed_nonces[u] += 1
                used[u].add(int(nonce))
        pending.clear()

    for op in operations:
        if op[0] == "charge":
            users = [u for u in op[1] if ledger.first_user <= u < ledger.stop] or [ledger.first_user]
            units = charge_units(op[2])
            spent, nonces = current()
            charge = ledger.charge(np.array(users), op[2])
            for u, ok in zip(users, charge.accepted):
                assert bool(ok) == (spent[u] + units <= ledger.allowance)
                if ok:
                    spent[u] += units
            for u, nonce in zip(np.array(users)[charge.accepted], charge.nonces.tolist()):
                assert nonce == nonces[u], "a nonce is not the user's counter"
                assert nonce not in used[u] and all(nonce > m for m in used[u]), "a nonce was reused"
                nonces[u] += 1
            pending.append((ledger, users, units, charge))
        elif op[0] == "refund" and pending:
            owner, _, _, charge = pending.pop()
            owner.refund(charge)
        elif op[0] == "commit":
            store.commit()
            commit_model()
        elif op[0] == "reload":
            lo = min(op[1], n - 1)
            hi = min(max(op[2], lo + 1), n)
            reopened = store.open(X, lo, hi - lo, budget)
            if all(reopened is not x for x in live):
                closing = [x for x in live if x.first_user < hi and lo < x.stop]
                if closing:  # the store committed everything, then closed them
                    commit_model()
                    assert all(x.closed for x in closing)
                live = [x for x in live if x not in closing] + [reopened]
            ledger = reopened
        elif op[0] == "crash" and kind == "sqlite":
            crash(store)  # nothing more from this process: pending charges never left
            pending.clear()
            store = cls(path, compact_rows=3)
            ledger = store.open(X, 0, n, budget)
            live = [ledger]
        spent, nonces = current()
        assert ledger.spent_units().tolist() == spent[ledger.first_user : ledger.stop]
        assert ledger.nonces().tolist() == nonces[ledger.first_user : ledger.stop], "nonces differ from the model"
    store.close()


operation = st.one_of(
    st.tuples(st.just("charge"), st.lists(st.integers(0, 11), min_size=1, max_size=6), st.sampled_from([0.125, 0.25, 0.1, 1 / 3])),
    st.tuples(st.just("refund")),
    st.tuples(st.just("commit")),
    st.tuples(st.just("reload"), st.integers(0, 11), st.integers(1, 12)),
    st.tuples(st.just("crash")),
)


@settings(max_examples=150, deadline=None)
@given(kind=st.sampled_from(["memory", "sqlite"]), operations=st.lists(operation, max_size=30))
def test_nonces_are_never_reused(kind, operations):
    with tempfile.TemporaryDirectory() as directory:
        run_operations(kind, directory, operations)


class ForgetsNonces(SqliteLedgerStore):
    """Broken: spent budgets survive a restart, nonces start again at 0."""

    def open(self, identity, first_user, count, budget):
        ledger = super().open(identity, first_user, count, budget)
        ledger._nonces[:] = 0
        return ledger


def test_the_nonce_check_catches_a_store_that_forgets_nonces(tmp_path):
    operations = [("charge", [1, 2], 0.125), ("commit",), ("crash",), ("charge", [2], 0.125)]
    run_operations("sqlite", str(tmp_path), operations)
    with pytest.raises(AssertionError, match="nonce"):
        run_operations("sqlite", str(tmp_path / "broken"), operations, ForgetsNonces)


# -- kill -9 -----------------------------------------------------------------------------------

PATTERN = """
import numpy as np

N = 400
COUNTER = N - 1  # charged once per iteration: its nonce counts the committed iterations
BUDGET = 8.0


def pattern(j):
    rng = np.random.default_rng(j)
    kind = j % 4
    if kind == 0:
        return np.arange(0, 300), 0.25
    if kind == 1:
        return rng.integers(0, 300, 200), 0.125  # repeats
    if kind == 2:
        return np.arange(100, 250), 0.0625
    return np.sort(rng.choice(300, 120, replace=False)), 1 / 3


def iterate(ledger, j):
    users, eps = pattern(j)
    ledger.charge(users, eps)
    ledger.charge(np.array([COUNTER]), 2.0**-20)
"""

CHILD = (
    PATTERN
    + """
import sys
from ldp.local.ledger_store import SqliteLedgerStore


class NeverWrites(SqliteLedgerStore):  # broken: "commits" without writing anything
    def commit(self):
        for held in self._live:
            held.ledger.mark_committed()


def main(path, broken):
    store = (NeverWrites if broken == "broken" else SqliteLedgerStore)(path, compact_rows=5)
    ledger = store.open("kill-test", 0, N, BUDGET)
    j = int(ledger.nonces(np.array([COUNTER]))[0])
    print("start", j, flush=True)
    while True:
        iterate(ledger, j)
        store.commit()
        j += 1
        print(j, flush=True)


main(sys.argv[1], sys.argv[2])
"""
)


def expected_after(iterations: int) -> Ledger:
    namespace: dict = {}
    exec(PATTERN, namespace)  # noqa: S102 - the test's own code, shared with the child
    reference = Ledger(0, namespace["N"], namespace["BUDGET"])
    for j in range(iterations):
        namespace["iterate"](reference, j)
    return reference


def check_kill_9(directory: Path, *, broken: bool, kills: int = 3, seed: int = 11) -> None:
    """Run a child that charges and commits in a loop, printing after each commit how many
    iterations are committed; SIGKILL it at a random moment; reopen: every iteration it printed
    is on the ledger (spent units and nonces of every user), and at most the one it was in
    beyond. Repeated, each child continuing the ledger the previous one left."""
    rnd = random.Random(seed)
    path = str(directory / "ledgers.sqlite")
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    for _ in range(kills):
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, path, "broken" if broken else "ok"], stdout=subprocess.PIPE, text=True, env=env, cwd=REPO
        )
        try:
            first_line = child.stdout.readline()
            assert first_line.startswith("start"), first_line
            started = int(first_line.split()[1])
            target = started + rnd.randint(3, 40)
            printed = started
            deadline = time.monotonic() + PROCESS_WAIT_S
            while printed < target and time.monotonic() < deadline:
                line = child.stdout.readline()
                if not line:
                    break
                printed = int(line)
            time.sleep(rnd.random() * 0.004)
            child.send_signal(signal.SIGKILL)
            rest = child.stdout.read()
            child.wait(timeout=PROCESS_WAIT_S)
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
        assert child.returncode == -signal.SIGKILL
        printed = max([printed] + [int(x) for x in rest.split()])
        assert printed > started
        store = SqliteLedgerStore(path)
        ledger = store.open("kill-test", 0, 400, 8.0)
        committed = int(ledger.nonces(np.array([399]))[0])
        assert printed <= committed <= printed + 1, f"printed {printed} committed iterations, the ledger holds {committed}"
        reference = expected_after(committed)
        assert np.array_equal(ledger.spent_units(), reference.spent_units())
        assert np.array_equal(ledger.nonces(), reference.nonces())
        if rnd.random() < 0.5:
            store.close()  # a clean restart (compacts)...
        else:
            crash(store)  # ...or the checker dies too


def test_kill_9_loses_no_committed_charge(tmp_path):
    check_kill_9(tmp_path, broken=False)


def test_the_kill_9_check_catches_a_store_that_does_not_write_at_commit(tmp_path):
    with pytest.raises(AssertionError, match="committed iterations"):
        check_kill_9(tmp_path, broken=True, kills=1)


def test_kill_9_between_charge_and_commit_leaves_nothing(tmp_path):
    code = f"""
import sys, time, numpy as np
from ldp.local.ledger_store import SqliteLedgerStore
store = SqliteLedgerStore(sys.argv[1])
ledger = store.open({X!r}, 0, 10, 1.0)
ledger.charge(np.arange(10), 0.25)
store.commit()
ledger.charge(np.arange(10), 0.5)  # never committed: its reports never left
print("charged", flush=True)
time.sleep(60)
"""
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    child = subprocess.Popen([sys.executable, "-c", code, str(tmp_path / "l.sqlite")], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert child.stdout.readline().strip() == "charged"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=PROCESS_WAIT_S)
    store = SqliteLedgerStore(tmp_path / "l.sqlite")
    ledger = store.open(X, 0, 10, 1.0)
    assert ledger.spent_units().tolist() == [QUARTER] * 10 and ledger.nonces().tolist() == [1] * 10
    store.close()


# -- two processes sharing one file (disjoint users) ------------------------------------------

SHARER = (
    PATTERN
    + """
import sys
from ldp.local.ledger_store import SqliteLedgerStore

path, lo, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
store = SqliteLedgerStore(path, compact_rows=3)
ledger = store.open("shared", lo, N, BUDGET)
for j in range(rounds):
    users, eps = pattern(j)
    ledger.charge(users + lo, eps)
    store.commit()
store.close()
"""
)


def test_two_processes_share_a_file(tmp_path):
    path = str(tmp_path / "shared.sqlite")
    SqliteLedgerStore(path).close()  # create it first, so both children find a ready file
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    children = [subprocess.Popen([sys.executable, "-c", SHARER, path, str(lo), "40"], env=env) for lo in (0, 400)]
    for child in children:
        assert child.wait(timeout=PROCESS_WAIT_S) == 0
    namespace: dict = {}
    exec(PATTERN, namespace)  # noqa: S102
    reference = Ledger(0, 800, namespace["BUDGET"])
    for j in range(40):
        users, eps = namespace["pattern"](j)
        reference.charge(users, eps)
        reference.charge(users + 400, eps)
    store = SqliteLedgerStore(path)
    ledger = store.open("shared", 0, 800, namespace["BUDGET"])
    assert np.array_equal(ledger.spent_units(), reference.spent_units())
    assert np.array_equal(ledger.nonces(), reference.nonces())
    store.close()


def test_one_load_memory_ledgers_drop_other_data_and_refuse_it_back() -> None:
    """Sweeps load thousands of populations into one client: one-load ledgers keep only the live
    data's ledgers. A reload of discarded data would restart its budget, so it is refused (a
    broken variant that simply forgets, without refusing, would let A → B → A spend A twice)."""
    import numpy as np
    import pytest

    from ldp.core.errors import LDPError
    from ldp.local.ledger_store import MemoryLedgerStore, open_store

    store = MemoryLedgerStore(one_load=True)
    a = store.open("data-A", 0, 100, 1.0)
    a.charge(np.arange(100), 1.0)
    store.commit()
    b = store.open("data-B", 0, 100, 1.0)
    assert b.charge(np.arange(100), 1.0).accepted.all()
    with pytest.raises(LDPError, match="refused"):
        store.open("data-A", 0, 100, 1.0)
    with pytest.raises(LDPError):
        a.charge(np.arange(10), 0.5)  # A's ledger is closed, not merely hidden
    assert store.open("data-B", 0, 100, 1.0) is b  # the live data is unaffected
    assert not b.charge(np.arange(100), 0.5).accepted.any()  # and its budget is still spent
    keep = MemoryLedgerStore()
    keep.open("data-A", 0, 10, 1.0).charge(np.arange(10), 1.0)
    keep.commit()
    keep.open("data-B", 0, 10, 1.0)
    assert not keep.open("data-A", 0, 10, 1.0).charge(np.arange(10), 0.5).accepted.any()  # the default keeps A
    with pytest.raises(Exception, match="in memory only"):
        open_store("/tmp/never.sqlite", one_load=True)


# -- exclusive claims: one live holder per user of a durable ledger (invariants I1, I2) --------

HOLDER = """
import sys, numpy as np
from ldp.local.ledger_store import SqliteLedgerStore
store = SqliteLedgerStore(sys.argv[1])
ledger = store.open(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), 1.0)
print("holding", flush=True)
sys.stdin.read()  # until the test closes the pipe (or kills this process)
store.close()
"""


def _holder(path: Path, identity: str, first: int, count: int) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    child = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(path), identity, str(first), str(count)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
    )
    assert child.stdout is not None and child.stdout.readline().strip() == "holding"
    return child


def twin_overspend(path: Path) -> int:
    """Two holders of users 0..9 (budget 1) on one file, each spending ε = 1 from the state it
    read: how many ε = 1 reports user 0 got in all. Refused holders report nothing."""
    reports = 0
    stores = [SqliteLedgerStore(path), SqliteLedgerStore(path)]
    ledgers = []
    for store in stores:
        try:
            ledgers.append(store.open(X, 0, 10, 1.0))
        except LDPError:
            pass
    for ledger, store in zip(ledgers, stores):
        reports += int(ledger.charge(np.arange(10), 1.0).accepted[0])
        store.commit()
    for store in stores:
        store.close()
    return reports


def test_a_second_live_holder_of_the_same_users_is_refused(tmp_path: Path) -> None:
    """In this process: a second store may not open users another store holds (disjoint users
    of the same data, and the same users of other data, may); once the first closes, it may."""
    path = tmp_path / "l.sqlite"
    first = SqliteLedgerStore(path)
    first.open(X, 0, 100, 1.0)
    second = SqliteLedgerStore(path)
    with pytest.raises(LDPError, match=r"users 50\.\.99 of this data .* already open in another ledger store"):
        second.open(X, 50, 100, 1.0)
    second.open(X, 100, 50, 1.0)  # disjoint: the P processes of one launch
    second.open(Y, 0, 100, 1.0)  # other data
    first.close()
    assert second.open(X, 0, 100, 1.0).spent_units().tolist() == [0] * 100
    second.close()
    assert twin_overspend(tmp_path / "twins.sqlite") == 1


def test_the_twin_check_catches_a_store_without_claims(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The broken variant: claims switched off. Both twins read user 0's unspent budget and each
    answers at ε = 1: two reports against a budget of 1."""
    import ldp.local.ledger_store as module

    monkeypatch.setattr(module, "_claim", lambda ledger, identity, first, stop: ("", next(module._TOKENS)))
    monkeypatch.setattr(module, "_unclaim", lambda claims, token: claims.pop(token, None))
    assert twin_overspend(tmp_path / "twins.sqlite") == 2


def test_another_process_holding_the_users_is_refused_until_it_dies(tmp_path: Path) -> None:
    """Across processes the kernel's record locks decide: refused while the holder lives,
    free again as soon as it is killed with SIGKILL (no stale claim to clean up)."""
    path = tmp_path / "l.sqlite"
    SqliteLedgerStore(path).close()
    child = _holder(path, X, 0, 100)
    try:
        store = SqliteLedgerStore(path)
        with pytest.raises(LDPError, match=r"another live process holds users of 90\.\.109 of this data in the ledger"):
            store.open(X, 90, 20, 1.0)
        store.open(X, 100, 20, 1.0)  # the holder's neighbours are free
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=PROCESS_WAIT_S)
        store.open(X, 0, 100, 1.0)
        store.close()
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        for stream in (child.stdin, child.stdout):
            if stream is not None:
                stream.close()


def test_a_ledger_that_is_not_sqlite_is_one_clear_line(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("these are my notes, not a ledger\n" * 20)
    with pytest.raises(LDPError, match=r"notes\.txt cannot be used: file is not a database \(name a new file"):
        SqliteLedgerStore(path)
    assert path.read_text().startswith("these are my notes")  # untouched
    proc = subprocess.run(
        [sys.executable, "-m", "ldp.cli.main", "clients", "--connect", "127.0.0.1:9", "--population", str(path), "--ledger", str(path)],
        capture_output=True, text=True, timeout=PROCESS_WAIT_S, cwd=REPO,
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "exists and is not an SQLite ledger" in proc.stderr and len(proc.stderr.strip().splitlines()) <= 2, proc.stderr
