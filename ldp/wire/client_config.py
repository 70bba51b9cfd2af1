"""What a client process is configured with, on the users' side, never by the aggregator.

A ``ClientConfig`` says which data the client's users hold (a ``PopulationSpec`` to generate
records from, or a local CSV/Parquet file), their per-user budget, the secret key of their report
randomness, where their ledgers live, and the key that opens sealed populations (a client with
only that key waits on standby, holding no users, until a sealed population arrives). It reaches the
client out of band: from its own command line and files (``ldp-sim clients --population
spec.json --budget 1 ...``), or from the experiment that spawned it, written to the child's
standard input (``ldp.wire.launcher``), which no other process and no aggregator can read.

Budgets: a spec carries the budget the experiment gave its users; ``budget`` in the config is the
users' own cap, and the smaller of the two is enforced. A data file has no budget of its own,
so ``budget`` is required with it.

Process lives (invariant I1, docs/design.md §2a): ``key_salt`` says how this process life's
report key is made from the long-term one (``ldp.core.rng.life_key``). None (the default, and
what ``ldp-sim clients`` and ``join`` write) means *fresh*: every process that reads the config
draws its own salt once (``life_salt``), so a restarted or twin process, even one fed the very
same configuration text again, never repeats a (key, user, nonce). An empty salt is the
experiment vouching for its launches (``launch_local``, ``launch_ray``: reproducible seeded
runs, never restarted); other bytes are a salt the experiment chose.

JSON format 1 (``to_json``): ``{"format": 1, "population", "data_path", "schema_path",
"budget", "report_key", "seal_key", "key_salt", "ledger_path", "ledgers"}``. ``format`` is
required; the other keys may be left out (their defaults above); an unknown key, another format
or a value of the wrong type is refused with the key's name.

Rows checked (issue 25): a client process reading its configuration as JSON (``from_json``, what
``python -m ldp.wire.client --config`` does) parses and checks only its own users' rows of a data
file (``shard_rows_only``; ``load_data(..., lazy=True)``): its whole file is still hashed (the
identity) and its rows counted (the public ``size``), and every row is checked by the process
whose users it holds. The launchers that write such configurations (``ldp-sim clients``,
``launch_data``) have read the whole file once before, so a bad cell anywhere is one line there.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ldp.core.errors import LDPError, ParameterError, require_epsilon
from ldp.core.file_format import check_keys, read_format
from ldp.core.population import PopulationSpec
from ldp.core.rng import KEY_BYTES, SALT_BYTES, new_life_salt
from ldp.local.ledger_store import LedgerStore, open_store
from ldp.local.shard import Holdings, Shard
from ldp.wire.sealed import SEAL_KEY_BYTES, open_population

__all__ = ["ClientConfig", "MAX_CONFIG_BYTES"]

MAX_CONFIG_BYTES = 1 << 20
FORMAT = 1  # the JSON layout ``to_json`` writes and ``from_json`` reads

_LIFE_SALT: bytes | None = None  # this process life's salt, drawn at first use (``life_salt``)


def _process_life_salt() -> bytes:
    """This process's own salt: drawn once from the OS when first needed, never written down, so
    it dies with the process (a restart draws another)."""
    global _LIFE_SALT
    if _LIFE_SALT is None:
        _LIFE_SALT = new_life_salt()
    return _LIFE_SALT


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode()


def _key(value: Any, what: str, size: int | None) -> bytes | None:
    """Base64 ``value`` (a JSON string or null) as bytes, of exactly ``size`` bytes when given."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise ParameterError(f"client configuration key {what!r} must be a base64 string or null, got {type(value).__name__}")
    try:
        raw = base64.b64decode(value, validate=True)
    except ValueError:
        raise ParameterError(f"{what} must be base64, got {value[:16]!r}...") from None
    if size is not None and len(raw) != size:
        raise ParameterError(f"{what} must hold {size} bytes, got {len(raw)}")
    return raw


# JSON key → the JSON types it may hold (None: null), for the one-line refusals of ``from_json``.
_TYPES: dict[str, tuple[type, ...]] = {
    "population": (dict, type(None)),
    "data_path": (str, type(None)),
    "schema_path": (str, type(None)),
    "budget": (int, float, type(None)),
    "report_key": (str, type(None)),
    "seal_key": (str, type(None)),
    "key_salt": (str, type(None)),
    "ledger_path": (str, type(None)),
    "ledgers": (str,),
}
_NAMES = {dict: "an object", str: "a string", int: "a number", float: "a number", type(None): "null"}


@dataclass(frozen=True)
class ClientConfig:
    """The users' side of one client process (see the module docstring)."""

    population: PopulationSpec | None = None
    data_path: str | None = None  # a CSV or Parquet file of records (one user per row)
    schema_path: str | None = None  # its declared schema (JSON); required with data_path (I3: never inferred)
    budget: float | None = None  # the users' own per-user cap
    report_key: bytes | None = None  # None: derived from a seeded spec, else a fresh secret
    seal_key: bytes | None = None  # opens sealed populations sent in Loads; None: Loads refused
    ledger_path: str | None = None  # a durable SQLite ledger; None: in memory
    ledgers: str = "keep"  # in memory: "keep" every population's ledgers, or "one_load" (MemoryLedgerStore)
    key_salt: bytes | None = None  # None: a fresh salt per process life; b"": the experiment vouches (module docstring)
    # Not in the JSON: True where the configuration was read as JSON by a client process, which
    # then parses only its own users' rows of a data file (module docstring, "Rows checked").
    shard_rows_only: bool = field(default=False, compare=False)

    def __post_init__(self) -> None:
        if self.ledgers not in ("keep", "one_load"):
            raise ParameterError(f"ledgers must be 'keep' or 'one_load', got {self.ledgers!r}")
        if self.ledgers == "one_load" and self.ledger_path is not None:
            raise ParameterError("one-load ledgers are in memory only: a durable ledger (a path) keeps every population's ledgers")
        if self.population is not None and self.data_path is not None:
            raise ParameterError("a client holds either a population spec or a data file, not both")
        if self.population is None and self.data_path is None and self.seal_key is None:
            raise ParameterError(
                "a client holds a population spec or a data file, or waits on standby for sealed populations (a seal key); it was given none of them"
            )
        if self.budget is not None:
            object.__setattr__(self, "budget", require_epsilon(self.budget, name="budget epsilon"))
        if self.data_path is not None and self.budget is None:
            raise ParameterError("a client holding a data file needs its users' budget (--budget)")
        if self.data_path is not None and self.schema_path is None:
            # I3: a schema inferred from the file is a summary of its values (min, max, gcd), and
            # the description leaves in Ready before any charge; only a declared one is served.
            from ldp.core.datafile import undeclared_schema_message

            raise ParameterError(undeclared_schema_message(self.data_path))
        if self.report_key is not None and len(self.report_key) != KEY_BYTES:
            raise ParameterError(f"a report key has {KEY_BYTES} bytes, got {len(self.report_key)}")
        if self.seal_key is not None and len(self.seal_key) != SEAL_KEY_BYTES:
            raise ParameterError(f"a seal key has {SEAL_KEY_BYTES} bytes, got {len(self.seal_key)}")
        if self.key_salt is not None and len(self.key_salt) not in (0, SALT_BYTES):
            raise ParameterError(f"a key salt has {SALT_BYTES} bytes (or 0: the experiment vouches), got {len(self.key_salt)}")

    # --- (de)serialization: what the launcher writes to a child's standard input ---

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "population": None if self.population is None else self.population.to_json(),
            "data_path": self.data_path,
            "schema_path": self.schema_path,
            "budget": self.budget,
            "report_key": _b64(self.report_key),
            "seal_key": _b64(self.seal_key),
            "ledger_path": self.ledger_path,
            "ledgers": self.ledgers,
            "key_salt": _b64(self.key_salt),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ClientConfig:
        if not isinstance(data, Mapping):
            raise ParameterError(f"a client configuration is a JSON object, got {type(data).__name__}")
        check_keys(data, what="client configuration", version=FORMAT, known=["format", *_TYPES], required=["format"])
        read_format(data, what="client configuration", version=FORMAT, rewrite="the experiment that launched this client writes format 1")
        for name, types in _TYPES.items():
            value = data.get(name)
            if name in data and (isinstance(value, bool) or not isinstance(value, types)):
                allowed = "a base64 string or null" if name in ("report_key", "seal_key", "key_salt") else " or ".join(dict.fromkeys(_NAMES[t] for t in types))
                raise ParameterError(f"client configuration key {name!r} must be {allowed}, got {type(value).__name__}")
        population = data.get("population")
        return cls(
            population=None if population is None else PopulationSpec.from_json(population),
            data_path=data.get("data_path"),
            schema_path=data.get("schema_path"),
            budget=data.get("budget"),
            report_key=_key(data.get("report_key"), "report_key", KEY_BYTES),
            seal_key=_key(data.get("seal_key"), "seal_key", SEAL_KEY_BYTES),
            ledger_path=data.get("ledger_path"),
            ledgers=data.get("ledgers", "keep"),
            key_salt=_key(data.get("key_salt"), "key_salt", None),
            shard_rows_only=True,  # a client process: its launcher read the whole file (module docstring)
        )

    def dumps(self) -> str:
        return json.dumps(self.to_json())

    @classmethod
    def loads(cls, text: str | bytes) -> ClientConfig:
        if len(text) > MAX_CONFIG_BYTES:
            raise ParameterError(f"a client configuration has at most {MAX_CONFIG_BYTES} bytes, got {len(text)}")
        try:
            return cls.from_json(json.loads(text))
        except (ValueError, RecursionError) as exc:
            if isinstance(exc, LDPError):
                raise
            raise ParameterError(f"the client configuration is not valid JSON: {exc}") from None

    # --- what a client builds from it ---

    @property
    def standby(self) -> bool:
        """True when the client holds no data of its own and waits for sealed populations."""
        return self.population is None and self.data_path is None

    def holdings(self) -> Holdings | None:
        """The data this client's users hold (a data file is read here, once: all its rows, or with
        ``shard_rows_only`` only the shard's, when ``shard`` asks for them); None on standby."""
        if self.population is not None:
            return self.population
        if self.data_path is None:
            return None
        from ldp.core.datafile import load_data  # only clients with files need it (and Parquet, pyarrow)

        assert self.data_path is not None
        return load_data(self.data_path, self.schema_path, served=True, lazy=self.shard_rows_only)  # no error text quotes a cell (I3)

    def effective_budget(self, data: Holdings) -> float:
        """The smaller of the data's own budget (a spec's) and the users' cap."""
        own = getattr(data, "budget", None)
        caps = [b for b in (own, self.budget) if b is not None]
        return min(caps)

    def open_store(self) -> LedgerStore:
        return open_store(self.ledger_path, one_load=self.ledgers == "one_load")

    def life_salt(self) -> bytes:
        """The salt of this process life's report key (``ldp.core.rng.life_key``): the
        configured one, or (``key_salt`` None) this process's own fresh salt."""
        return self.key_salt if self.key_salt is not None else _process_life_salt()

    def shard(self, data: Holdings, first_user: int, count: int, store: LedgerStore) -> Shard:
        """The users' shard; without a key of its own the Shard derives one (a seeded spec) or
        draws a fresh one from the OS (anything else). Either way it draws under this process
        life's key (``life_salt``)."""
        return Shard(data, first_user, count, budget=self.effective_budget(data), key=self.report_key, store=store, key_salt=self.life_salt())

    def open_sealed(self, blob: bytes) -> PopulationSpec:
        if self.seal_key is None:
            raise ParameterError("this client was given no seal key, so it takes no Load: its data comes from its own configuration")
        return open_population(self.seal_key, blob)
