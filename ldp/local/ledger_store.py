"""Where the users' ledgers live: keyed by the identity of the data, in memory or on disk.

A hostile aggregator must not be able to reset budgets or nonces, so ledgers are keyed by the
**identity of the data** (a string the users' side computes, e.g. a SHA-256 of the population's
secret description), never by a session, a load or anything the aggregator chooses:
``store.open(identity, first_user, count, budget)`` continues every user's spent units and nonce
from whatever was opened before under that identity, whatever ranges were opened then (users
seen before continue, new users start at 0).

Two stores:

- ``MemoryLedgerStore`` (the default, for fast sweeps): a reopen in the same process, through the
  same store object, continues; nothing survives the process.
- ``SqliteLedgerStore(path)``: durable. ``commit()`` returns only once every pending charge of
  every ledger the store opened is in the database file, fsync'd (WAL, synchronous=FULL). The
  ledgers survive kill -9 and restarts: reopening continues spent units and nonces exactly.

**The caller's protocol** (a shard answering a round): charge, sample the reports with the
charge's nonces, then ``store.commit()``, and only then let the reports leave. If sampling fails
before anything left, ``ledger.refund(charge)`` (most recent first) instead. A crash before the
commit loses only charges whose reports never left; a crash after loses nothing.

Opening rules within one store: opening the range of a ledger that is still open (same identity,
same first user, count and budget) returns that same ``Ledger`` object; opening a range that
*overlaps* an open ledger of the identity otherwise first commits the store (every pending
charge) and closes that ledger (its object then refuses to charge), so no user ever has two live
ledgers in one store. Two processes
may share one SQLite file (a busy timeout serializes their writes) provided their users of each
identity are disjoint. The budget is the caller's: opening with another budget changes the
allowance, never the spent units. Stores are guarded by a lock; a ``Ledger`` is not thread-safe.

**Exclusive claims** (invariants I1 and I2, docs/design.md §4): two live holders of the same
users of one SQLite ledger would both charge them from the same state (each spends the whole
budget, and with the same report key each draws the same coins). So an SQLite store claims the
users of every ledger it opens, for as long as the ledger is open: an OS byte-range lock
(``fcntl.lockf``, POSIX record locks) on bytes first_user..stop−1 of a sidecar lock file, one
per identity (``PATH.claims/<sha256(identity)[:32]>.lock``). A second live holder, in another
process or in this one, is refused with a ``LedgerClaimError`` naming the users and the file.
The kernel drops a process's locks when it exits, kill -9 included, so a restart never finds a
stale claim. Disjoint users of one identity (the P processes of one launch) do not conflict.

**SQLite layout** (no row per user per charge; ``PRAGMA user_version`` = 1):

- ``identities(id, identity)``: the identity strings, numbered.
- ``charges(seq AUTOINCREMENT, identity_id, first_user, stop, ids, accepted, units)``: an
  append-only log, one row per charge that accepted someone, written in one transaction per
  commit. ``ids`` is NULL for a contiguous ascending range first_user..stop−1 (else int64 LE per
  occurrence; first_user/stop then bound them); ``accepted`` is NULL when everyone named was
  accepted (else ``np.packbits`` of the mask over occurrences). A round charging 10^6 users who
  can all pay is a row of a few dozen bytes. Each accepted occurrence adds ``units`` to its user's
  spent units and 1 to its nonce: replay is a sum, order-free and vectorized (difference arrays
  for ranges).
- ``snapshots(identity_id, first_user, stop, as_of, spent, nonces)``: non-overlapping ranges of
  packed int64 LE arrays; a snapshot holds its users' state including every log row with
  ``seq ≤ as_of`` (seqs are never reused: AUTOINCREMENT). A ledger's range is snapshotted
  ("compacted") when the store closes and whenever its log grows past ``compact_rows`` rows or
  ``compact_bytes`` bytes (default: the snapshot's size, 16 bytes per user, at least 1 MiB), in
  one transaction that also deletes the log rows every user of which is covered by a snapshot at
  least as recent. Reopening reads the snapshots overlapping the range and replays the log rows
  after them. (A compaction runs inside ``commit()``: at 10^6 users, a ~16 MiB write once per
  ``compact_rows`` rounds, or about every 128 rounds of partly refused users.)

Every write is one transaction, so a kill at any point leaves either the state before it or the
state after it.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import itertools
import os
import sqlite3
import threading
import weakref
from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

import numpy as np

from ldp.core.budget import NONCE_LIMIT, Charge, Ledger, contiguous_span
from ldp.core.errors import LDPError, ParameterError, require_epsilon

__all__ = ["LedgerClaimError", "LedgerStore", "MemoryLedgerStore", "SqliteLedgerStore", "open_store"]

_FORMAT = 1
_I8 = np.dtype("<i8")


def _check_identity(identity: object) -> str:
    if not isinstance(identity, str) or not identity or len(identity) > 4096:
        raise ParameterError(f"a ledger identity must be a non-empty string of at most 4096 characters, got {identity!r}")
    return identity


def _check_range(first_user: object, count: object) -> tuple[int, int]:
    first, n = int(first_user), int(count)  # type: ignore[call-overload]
    if first < 0 or n < 0 or first + n > 1 << 62:
        raise ParameterError(f"ledger needs first_user ≥ 0 and count ≥ 0, got {first_user}, {count}")
    return first, n


class LedgerClaimError(LDPError):
    """Another live holder (a process, or another store in this one) holds some of these users."""


# -- claims: who may charge which users of a durable ledger ------------------------------------
#
# POSIX record locks belong to a (process, file) pair: a second lock by the same process never
# conflicts, and closing *any* descriptor of the file drops all of the process's locks on it.
# So this process opens each lock file once, keeps what it holds in a registry, refuses overlaps
# between its own stores there, and leaves the kernel to refuse other processes.


@dataclass
class _ClaimFile:
    fd: int
    held: dict[int, tuple[int, int]]  # claim token → (first user, stop)


_CLAIMS: dict[str, _ClaimFile] = {}
_CLAIMS_LOCK = threading.Lock()
_TOKENS = itertools.count(1)


def _claim_path(ledger: Path, identity: str) -> str:
    folder = Path(str(ledger) + ".claims")
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
    except OSError as exc:
        raise LDPError(f"cannot make the ledger's claims folder {folder}: {exc.strerror or exc}") from None
    name = hashlib.sha256(identity.encode()).hexdigest()[:32]
    return os.path.realpath(folder / f"{name}.lock")


def _claim(ledger: Path, identity: str, first: int, stop: int) -> tuple[str, int]:
    """Claim users first..stop−1 of ``identity`` in the ledger file ``ledger``; (lock file, token)."""
    path = _claim_path(ledger, identity)
    with _CLAIMS_LOCK:
        entry = _CLAIMS.get(path)
        if entry is not None:
            for lo, hi in entry.held.values():
                if lo < stop and first < hi:
                    raise LedgerClaimError(
                        f"users {max(lo, first)}..{min(hi, stop) - 1} of this data in the ledger {ledger} are already open in another "
                        "ledger store of this process: close it first (two holders would spend the same budget twice)"
                    )
        else:
            try:
                entry = _ClaimFile(os.open(path, os.O_RDWR | os.O_CREAT, 0o600), {})
            except OSError as exc:
                raise LDPError(f"cannot open the ledger's claim file {path}: {exc.strerror or exc}") from None
            _CLAIMS[path] = entry
        try:
            fcntl.lockf(entry.fd, fcntl.LOCK_EX | fcntl.LOCK_NB, stop - first, first, os.SEEK_SET)
        except OSError as exc:
            if not entry.held:
                del _CLAIMS[path]
                os.close(entry.fd)
            if exc.errno in (errno.EACCES, errno.EAGAIN):
                raise LedgerClaimError(
                    f"another live process holds users of {first}..{stop - 1} of this data in the ledger {ledger}: "
                    "two processes charging the same users from one ledger would spend their budget twice; stop the other one first"
                ) from None
            raise LDPError(f"cannot claim users {first}..{stop - 1} in the ledger {ledger}: {exc.strerror or exc}") from None
        token = next(_TOKENS)
        entry.held[token] = (first, stop)
        return path, token


def _unclaim(claims: dict[int, str], token: int) -> None:
    """Release one claim (tokens map to their lock files in ``claims``, the store's own dict)."""
    path = claims.pop(token, None)
    if path is None:
        return
    with _CLAIMS_LOCK:
        entry = _CLAIMS.get(path)
        if entry is None or token not in entry.held:
            return
        first, stop = entry.held.pop(token)
        if entry.held:  # other claims of this process stay locked: unlock exactly this range (claims never overlap)
            fcntl.lockf(entry.fd, fcntl.LOCK_UN, stop - first, first, os.SEEK_SET)
        else:  # nothing left: closing the descriptor drops the lock
            del _CLAIMS[path]
            os.close(entry.fd)


def _unclaim_all(claims: dict[int, str]) -> None:
    """Release every claim in ``claims`` (at close, or when an unclosed store is collected)."""
    for token in list(claims):
        _unclaim(claims, token)


def _overlaps(ledger: Ledger, first: int, stop: int) -> bool:
    return ledger.first_user < stop and first < ledger.stop and ledger.count > 0 and stop > first


class LedgerStore(ABC):
    """Ledgers keyed by the identity of the data; see the module docstring for the protocol."""

    @abstractmethod
    def open(self, identity: str, first_user: int, count: int, budget: float) -> Ledger:
        """The ledger of users first_user..first_user+count−1 of ``identity``, continuing what
        they spent and their nonces under that identity (new users start at 0)."""

    @abstractmethod
    def commit(self) -> None:
        """Make every pending charge of every ledger this store opened durable (no-op in
        memory), then clear their pending lists: they can no longer be refunded."""

    @abstractmethod
    def close(self) -> None:
        """Commit, then close every ledger opened here; the store can no longer be used."""

    @property
    def durable(self) -> bool:
        """True if committed charges survive the process."""
        return False

    def __enter__(self) -> LedgerStore:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


# -- memory ----------------------------------------------------------------------------------


@dataclass
class _Saved:
    """Spent units and nonces of users first..first+len−1 (int64 arrays, owned)."""

    first: int
    spent: np.ndarray
    nonces: np.ndarray

    @property
    def stop(self) -> int:
        return self.first + len(self.spent)

    def piece(self, lo: int, hi: int) -> _Saved:
        return _Saved(lo, self.spent[lo - self.first : hi - self.first], self.nonces[lo - self.first : hi - self.first])


class MemoryLedgerStore(LedgerStore):
    """Ledgers in memory, per identity, for the life of this object (the default store).

    ``one_load=True`` is for sweeps that load thousands of populations into one client process
    (16 bytes per user each, forever, would exhaust memory): opening a ledger for new data
    discards the ledgers of every other identity, and remembers those identities so that their
    data can never be loaded again here. A reload would restart their budgets; refusing it keeps
    every budget whole (a hostile aggregator cannot cycle A → B → A to reset A). Memory is then
    the live ledgers plus one hash per retired identity. Chosen on the users' side only
    (``ClientConfig.ledgers``), never by the aggregator.
    """

    def __init__(self, one_load: bool = False) -> None:
        self._saved: dict[str, list[_Saved]] = {}  # closed ledgers' state, non-overlapping, by first user
        self._live: dict[str, list[Ledger]] = {}
        self._lock = threading.RLock()
        self._closed = False
        self.one_load = bool(one_load)
        self._discarded: set[str] = set()

    @property
    def durable(self) -> bool:
        return False

    def _check(self) -> None:
        if self._closed:
            raise LDPError("this ledger store is closed")

    def open(self, identity: str, first_user: int, count: int, budget: float) -> Ledger:
        identity = _check_identity(identity)
        first, n = _check_range(first_user, count)
        budget = require_epsilon(budget, name="budget epsilon")
        with self._lock:
            self._check()
            if identity in self._discarded:
                raise LDPError(
                    "these users' ledgers were discarded when other data was loaded (one-load ledgers): "
                    "loading the same data again would restart its budget, so it is refused"
                )
            if self.one_load:
                for other in [k for k in self._live if k != identity] + [k for k in self._saved if k != identity]:
                    self._forget(other)
            live = self._live.setdefault(identity, [])
            for ledger in live:
                if ledger.first_user == first and ledger.count == n and ledger.budget == budget:
                    return ledger
            overlapping = [x for x in live if _overlaps(x, first, first + n)]
            if overlapping:
                self.commit()  # as a durable store does: everything pending is committed first
            for ledger in overlapping:
                self._retire(identity, ledger)
            spent = np.zeros(n, dtype=np.int64)
            nonces = np.zeros(n, dtype=np.int64)
            for saved in self._saved.get(identity, []):
                lo, hi = max(saved.first, first), min(saved.stop, first + n)
                if lo < hi:
                    spent[lo - first : hi - first] = saved.spent[lo - saved.first : hi - saved.first]
                    nonces[lo - first : hi - first] = saved.nonces[lo - saved.first : hi - saved.first]
            ledger = Ledger(first, n, budget, spent=spent, nonces=nonces, journal=True)
            live.append(ledger)
            return ledger

    def _forget(self, identity: str) -> None:
        """one_load: close every ledger of ``identity``, drop its state, refuse it from now on."""
        for ledger in list(self._live.get(identity, [])):
            ledger.mark_committed()
            ledger._close()
        self._live.pop(identity, None)
        self._saved.pop(identity, None)
        self._discarded.add(identity)

    def _retire(self, identity: str, ledger: Ledger) -> None:
        """Fold a live ledger's state into the saved state and close it."""
        ledger.mark_committed()
        if ledger.count:
            a, b = ledger.first_user, ledger.stop
            kept = []
            for saved in self._saved.get(identity, []):
                if saved.first < a:
                    kept.append(saved.piece(saved.first, min(saved.stop, a)))
                if saved.stop > b:
                    kept.append(saved.piece(max(saved.first, b), saved.stop))
            kept.append(_Saved(a, ledger._spent, ledger._nonces))  # the closed ledger no longer changes them
            self._saved[identity] = sorted(kept, key=lambda s: s.first)
        ledger._close()
        self._live[identity].remove(ledger)

    def commit(self) -> None:
        with self._lock:
            self._check()
            for ledgers in self._live.values():
                for ledger in ledgers:
                    ledger.mark_committed()

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            for identity, ledgers in self._live.items():
                for ledger in list(ledgers):
                    self._retire(identity, ledger)
            self._closed = True


# -- SQLite ----------------------------------------------------------------------------------

_SCHEMA = """
CREATE TABLE IF NOT EXISTS identities (
    id INTEGER PRIMARY KEY,
    identity TEXT NOT NULL UNIQUE
);
CREATE TABLE IF NOT EXISTS charges (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    identity_id INTEGER NOT NULL,
    first_user INTEGER NOT NULL,
    stop INTEGER NOT NULL,
    ids BLOB,
    accepted BLOB,
    units INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS charges_by_identity ON charges (identity_id, seq);
CREATE TABLE IF NOT EXISTS snapshots (
    identity_id INTEGER NOT NULL,
    first_user INTEGER NOT NULL,
    stop INTEGER NOT NULL,
    as_of INTEGER NOT NULL,
    spent BLOB NOT NULL,
    nonces BLOB NOT NULL,
    PRIMARY KEY (identity_id, first_user)
);
"""


@dataclass
class _Open:
    """A ledger this SQLite store opened, and how much log touched its range since its snapshot."""

    identity: str
    key: int
    ledger: Ledger
    rows: int = 0
    bytes: int = 0
    claim: int = 0  # the token of its claim on its users (0: none, an empty range)


def _log_row(key: int, charge: Charge) -> tuple[int, int, int, bytes | None, bytes | None, int] | None:
    """The ``charges`` row of one charge, or None if it accepted nobody."""
    accepted = charge.accepted
    if not accepted.any():
        return None
    users = charge.ids() if charge.span is None else None
    span = charge.span if users is None else contiguous_span(users)
    if span is not None:
        (first, stop), ids = span, None
    else:
        assert users is not None
        first, stop, ids = int(users.min()), int(users.max()) + 1, users.astype(_I8).tobytes()
    bits = None if accepted.all() else np.packbits(accepted).tobytes()
    return key, first, stop, ids, bits, int(charge.units)


def _covered(first: int, stop: int, seq: int, snapshots: list[tuple[int, int, int]]) -> bool:
    """Whether snapshots with as_of ≥ seq cover every user in first..stop−1 (snapshots sorted)."""
    pos = first
    for lo, hi, as_of in snapshots:
        if hi <= pos:
            continue
        if lo > pos or as_of < seq:
            return False
        pos = hi
        if pos >= stop:
            return True
    return False


class SqliteLedgerStore(LedgerStore):
    """Ledgers in an SQLite file (created with its folders): durable at every ``commit()``."""

    def __init__(self, path: str | os.PathLike[str], *, compact_rows: int = 1024, compact_bytes: int | None = None) -> None:
        self.path = Path(path)
        if compact_rows < 1 or (compact_bytes is not None and compact_bytes < 1):
            raise ParameterError("compact_rows and compact_bytes must be ≥ 1")
        self.compact_rows = int(compact_rows)
        self.compact_bytes = compact_bytes
        self.path.parent.mkdir(parents=True, exist_ok=True)
        created = False
        if not self.path.exists():
            try:  # the ledger file is the users' own: readable by its owner only
                os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
                created = True
            except FileExistsError:
                pass
        self._db = sqlite3.connect(str(self.path), timeout=60.0, isolation_level=None, check_same_thread=False)
        self._lock = threading.RLock()
        self._live: list[_Open] = []
        self._closed = False
        # Claims on users (module docstring), released at close, or when a store that was never
        # closed is collected (the finalizer holds the dict, not the store).
        self._claims: dict[int, str] = {}
        self._finalizer = weakref.finalize(self, _unclaim_all, self._claims)
        try:
            self._db.execute("PRAGMA busy_timeout = 60000")
            mode = self._db.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise LDPError(f"{self.path}: the ledger file needs WAL mode, SQLite gave {mode!r}")
            self._db.execute("PRAGMA synchronous = FULL")
            with self._write():
                version = self._db.execute("PRAGMA user_version").fetchone()[0]
                if version not in (0, _FORMAT):
                    raise LDPError(f"{self.path}: ledger file format {version}, this version reads {_FORMAT}")
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        self._db.execute(statement)
                self._db.execute(f"PRAGMA user_version = {_FORMAT}")
        except sqlite3.DatabaseError as exc:  # "file is not a database", a read-only file...: one line, no traceback
            self._db.close()
            raise LDPError(f"the ledger {self.path} cannot be used: {exc} (name a new file, or a ledger this program wrote)") from None
        except BaseException:
            self._db.close()
            raise
        if created:  # the new file's directory entry, durable too
            fd = os.open(self.path.parent, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    @property
    def durable(self) -> bool:
        return True

    def _check(self) -> None:
        if self._closed:
            raise LDPError(f"the ledger store {self.path} is closed")

    @contextmanager
    def _write(self) -> Iterator[None]:
        """One write transaction (waits for another process's, up to the busy timeout)."""
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield
            self._db.execute("COMMIT")
        except BaseException:
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
            raise

    # -- open ------------------------------------------------------------------------------

    def open(self, identity: str, first_user: int, count: int, budget: float) -> Ledger:
        identity = _check_identity(identity)
        first, n = _check_range(first_user, count)
        budget = require_epsilon(budget, name="budget epsilon")
        stop = first + n
        with self._lock:
            self._check()
            for held in self._live:
                if held.identity == identity and held.ledger.first_user == first and held.ledger.count == n and held.ledger.budget == budget:
                    return held.ledger
            overlapping = [h for h in self._live if h.identity == identity and _overlaps(h.ledger, first, stop)]
            if overlapping:
                self.commit()  # their charges are in the file, so the replay below sees them
                for held in overlapping:
                    held.ledger._close()
                    self._live.remove(held)
                    _unclaim(self._claims, held.claim)
            # Claim the users before reading their state: a second live holder would charge from
            # the same state (LedgerClaimError names the users and the file).
            token = 0
            if n:
                claim_path, token = _claim(self.path, identity, first, stop)
                self._claims[token] = claim_path
            try:
                ledger, key, rows, log_bytes = self._read(identity, first, n, budget)
            except BaseException:
                _unclaim(self._claims, token)
                raise
            self._live.append(_Open(identity, key, ledger, rows=rows, bytes=log_bytes, claim=token))
            return ledger

    def _read(self, identity: str, first: int, n: int, budget: float) -> tuple[Ledger, int, int, int]:
        """The ledger of users first..first+n−1 of ``identity`` as the file holds it; with the
        identity's number, the log rows replayed and their bytes."""
        stop = first + n
        with self._write():
            self._db.execute("INSERT OR IGNORE INTO identities (identity) VALUES (?)", (identity,))
            key = int(self._db.execute("SELECT id FROM identities WHERE identity = ?", (identity,)).fetchone()[0])
            snapshots = self._db.execute(
                "SELECT first_user, stop, as_of, spent, nonces FROM snapshots "
                "WHERE identity_id = ? AND first_user < ? AND stop > ? ORDER BY first_user",
                (key, stop, first),
            ).fetchall()
            covered = sum(min(s[1], stop) - max(s[0], first) for s in snapshots)
            since = min([s[2] for s in snapshots] + ([0] if covered < n else []))
            rows = self._db.execute(
                "SELECT seq, first_user, stop, ids, accepted, units FROM charges "
                "WHERE identity_id = ? AND seq > ? AND first_user < ? AND stop > ? ORDER BY seq",
                (key, since, stop, first),
            ).fetchall()
        spent, nonces, log_bytes = _replay(first, n, snapshots, rows)
        if nonces.size and int(nonces.max()) >= NONCE_LIMIT:
            raise LDPError(f"{self.path}: identity {identity!r} holds a nonce ≥ 2^48: the file is corrupt")
        ledger = Ledger(first, n, budget, spent=spent, nonces=nonces, journal=True)
        return ledger, key, len(rows), log_bytes

    # -- commit ----------------------------------------------------------------------------

    def commit(self) -> None:
        with self._lock:
            self._check()
            batch = []
            written: list[tuple[_Open, int]] = []
            for held in self._live:
                size = 0
                for charge in held.ledger.pending():
                    row = _log_row(held.key, charge)
                    if row is not None:
                        batch.append(row)
                        size += 64 + len(row[3] or b"") + len(row[4] or b"")
                        held.rows += 1
                written.append((held, size))
            if batch:
                with self._write():
                    self._db.executemany(
                        "INSERT INTO charges (identity_id, first_user, stop, ids, accepted, units) VALUES (?, ?, ?, ?, ?, ?)", batch
                    )
            # Only now, with the rows durable, can the charges no longer be refunded.
            for held, size in written:
                held.ledger.mark_committed()
                held.bytes += size
            for held in list(self._live):
                if held.rows >= self.compact_rows or held.bytes >= self._byte_limit(held.ledger):
                    self._compact(held)

    def _byte_limit(self, ledger: Ledger) -> int:
        return self.compact_bytes if self.compact_bytes is not None else max(1 << 20, 16 * ledger.count)

    def _compact(self, held: _Open) -> None:
        """Snapshot a ledger's range (its state is exactly the committed one: nothing pending),
        then drop the log rows that every snapshot covering them has absorbed."""
        ledger = held.ledger
        a, b = ledger.first_user, ledger.stop
        if ledger.pending():
            raise LDPError("internal: compacting a ledger with pending charges")
        if b > a:
            with self._write():
                row = self._db.execute("SELECT seq FROM sqlite_sequence WHERE name = 'charges'").fetchone()
                as_of = int(row[0]) if row else 0
                old = self._db.execute(
                    "SELECT first_user, stop, as_of, spent, nonces FROM snapshots WHERE identity_id = ? AND first_user < ? AND stop > ?",
                    (held.key, b, a),
                ).fetchall()
                self._db.execute("DELETE FROM snapshots WHERE identity_id = ? AND first_user < ? AND stop > ?", (held.key, b, a))
                pieces = []
                for lo, hi, seen, spent, nonces in old:
                    if lo < a:
                        pieces.append((held.key, lo, a, seen, spent[: (a - lo) * 8], nonces[: (a - lo) * 8]))
                    if hi > b:
                        pieces.append((held.key, b, hi, seen, spent[(b - lo) * 8 :], nonces[(b - lo) * 8 :]))
                pieces.append((held.key, a, b, as_of, ledger._spent.astype(_I8).tobytes(), ledger._nonces.astype(_I8).tobytes()))
                self._db.executemany(
                    "INSERT INTO snapshots (identity_id, first_user, stop, as_of, spent, nonces) VALUES (?, ?, ?, ?, ?, ?)", pieces
                )
                spans = self._db.execute(
                    "SELECT first_user, stop, as_of FROM snapshots WHERE identity_id = ? ORDER BY first_user", (held.key,)
                ).fetchall()
                newest = max(s[2] for s in spans)
                heads = self._db.execute(
                    "SELECT seq, first_user, stop FROM charges WHERE identity_id = ? AND seq <= ?", (held.key, newest)
                ).fetchall()
                dead = [(seq,) for seq, lo, hi in heads if _covered(lo, hi, seq, spans)]
                self._db.executemany("DELETE FROM charges WHERE seq = ?", dead)
        held.rows = 0
        held.bytes = 0

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            try:
                self.commit()
                for held in self._live:
                    if held.rows:
                        self._compact(held)
            finally:
                for held in self._live:
                    held.ledger._close()
                self._live.clear()
                self._closed = True
                self._db.close()
                _unclaim_all(self._claims)  # only now, with every charge in the file, may another holder take them


def _replay(first: int, count: int, snapshots: list[tuple], rows: list[tuple]) -> tuple[np.ndarray, np.ndarray, int]:
    """Spent units and nonces of users first..first+count−1: the snapshots overlapping them, plus
    every log row newer than the snapshot that holds each user (vectorized; ranges via
    difference arrays). Also the log bytes read."""
    stop = first + count
    spent = np.zeros(count, dtype=np.int64)
    nonces = np.zeros(count, dtype=np.int64)
    spans: list[tuple[int, int, int]] = []  # (lo, hi, as_of) covering first..stop−1
    pos = first
    for lo_s, hi_s, as_of, spent_b, nonces_b in snapshots:
        lo, hi = max(lo_s, first), min(hi_s, stop)
        if pos < lo:
            spans.append((pos, lo, 0))
        spent[lo - first : hi - first] = np.frombuffer(spent_b, dtype=_I8, count=hi - lo, offset=(lo - lo_s) * 8)
        nonces[lo - first : hi - first] = np.frombuffer(nonces_b, dtype=_I8, count=hi - lo, offset=(lo - lo_s) * 8)
        spans.append((lo, hi, int(as_of)))
        pos = hi
    if pos < stop:
        spans.append((pos, stop, 0))
    span_starts = np.array([s[0] for s in spans], dtype=np.int64)
    span_as_of = np.array([s[2] for s in spans], dtype=np.int64)
    d_spent = np.zeros(count + 1, dtype=np.int64)
    d_nonces = np.zeros(count + 1, dtype=np.int64)
    ranges = False  # whether any difference was recorded
    read = 0
    for seq, r0, r1, ids, bits, units in rows:
        read += 64 + len(ids or b"") + len(bits or b"")
        if ids is None:
            mask = None if bits is None else np.unpackbits(np.frombuffer(bits, dtype=np.uint8), count=r1 - r0).view(bool)
            for lo, hi, as_of in spans:
                p0, p1 = max(lo, r0), min(hi, r1)
                if as_of >= seq or p0 >= p1:
                    continue
                if mask is None:
                    ranges = True
                    d_spent[p0 - first] += units
                    d_spent[p1 - first] -= units
                    d_nonces[p0 - first] += 1
                    d_nonces[p1 - first] -= 1
                else:
                    piece = mask[p0 - r0 : p1 - r0]
                    spent[p0 - first : p1 - first] += piece * np.int64(units)
                    nonces[p0 - first : p1 - first] += piece
        else:
            occurrences = np.frombuffer(ids, dtype=_I8)
            if bits is not None:
                occurrences = occurrences[np.unpackbits(np.frombuffer(bits, dtype=np.uint8), count=len(occurrences)).view(bool)]
            occurrences = occurrences[(occurrences >= first) & (occurrences < stop)]
            newer = span_as_of[np.searchsorted(span_starts, occurrences, side="right") - 1] < seq
            offsets = occurrences[newer] - first
            np.add.at(spent, offsets, np.int64(units))
            np.add.at(nonces, offsets, 1)
    if ranges:
        spent += np.cumsum(d_spent[:-1])
        nonces += np.cumsum(d_nonces[:-1])
    return spent, nonces, read


def open_store(path: str | os.PathLike[str] | None, *, one_load: bool = False) -> LedgerStore:
    """A ``SqliteLedgerStore`` at ``path``, or a fresh ``MemoryLedgerStore`` for None
    (``one_load``: see ``MemoryLedgerStore``; a durable store keeps every ledger)."""
    if path is None:
        return MemoryLedgerStore(one_load=one_load)
    if one_load:
        raise ParameterError("one-load ledgers are in memory only: a durable ledger (a path) keeps every population's ledgers")
    return SqliteLedgerStore(path)
