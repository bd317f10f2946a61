"""Records are data: one versioned JSON form for everything the workshop records (replay recordings, key
figures and meta, engine runs, run times), written by `dump`, read by `load` and listed by `each`, here only.

A record is a JSON object whose first key is ``"record_format": 1``. Values JSON has no type for are one-key
tagged objects: ``$tuple``, ``$dict`` (keys that are not text), ``$float`` (nan, inf), ``$frame`` (pandas),
``$array`` (numpy), ``$dataclass`` (a result type of helpers, rebuilt field by field: a record is never code;
a type changed since the recording is a RecordError, except a field gained with a default). Reading is
confined to the record folders, the size checked first; writing is atomic and masks the recording machine's
own paths (its checkout, home, caches).
"""
from __future__ import annotations

import dataclasses
import importlib
import json
import math
import os
import re
import tempfile
from pathlib import Path
from typing import Any, Iterable

RECORD_FORMAT = 1
ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "workshop" / "results"
BUILD = ROOT / "build"
MAX_BYTES = 5_000_000      # a record is results (timings, tables): megabytes at most, never a model
NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,79}$")   # a record folder's name: 'cpu-amd-epyc', 'h200'


class RecordError(ValueError):
    """A record that cannot be used: the message names the file and what is wrong with it."""


def shown(path: Path | str) -> str:
    """A path relative to the checkout when inside it, else with this machine's folders masked."""
    try:
        return str(Path(path).resolve().relative_to(ROOT))
    except (ValueError, OSError):
        return mask_paths(str(path))


def mask_paths(text: str) -> str:
    """`text` with the checkout as <checkout>, ~/.cache as <user-cache>, home as ~, the temporary folder as <tmp>."""
    home, cache = Path.home(), os.environ.get("WORKSHOP_CACHE", "").strip()
    pairs = [(str(ROOT), "<checkout>"), (str(home / ".cache"), "<user-cache>"), (str(home), "~"),
             (tempfile.gettempdir(), "<tmp>")] + ([(str(Path(cache).expanduser()), "<workshop-cache>")] if cache else [])
    # longest first, so a folder inside another is named by the more precise mark
    for path, mark in sorted(((p.rstrip("/"), m) for p, m in pairs if len(p.rstrip("/")) > 1), key=lambda x: -len(x[0])):
        text = re.sub(re.escape(path) + r"(?=/|\b|$)", mark, text)
    return text


def encode(value: Any) -> Any:
    """`value` as JSON-ready data (the tagged forms above); TypeError naming any other type."""
    if value is None or isinstance(value, (bool, int)) and not hasattr(value, "dtype"):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else {"$float": repr(value)}
    if isinstance(value, str):
        return mask_paths(value)
    if isinstance(value, Path):
        return shown(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        cls = type(value)
        if not cls.__module__.startswith("helpers."):
            raise TypeError(f"a record holds helpers' results; {cls.__module__}.{cls.__qualname__} is not one")
        return {"$dataclass": f"{cls.__module__}.{cls.__qualname__}",
                "fields": {f.name: encode(getattr(value, f.name)) for f in dataclasses.fields(value)}}
    if isinstance(value, tuple):
        return {"$tuple": [encode(v) for v in value]}
    if isinstance(value, list):
        return [encode(v) for v in value]
    if isinstance(value, dict):
        if all(isinstance(k, str) and not k.startswith("$") for k in value):
            return {k: encode(v) for k, v in value.items()}
        return {"$dict": [[encode(k), encode(v)] for k, v in value.items()]}
    kind = f"{type(value).__module__}.{type(value).__qualname__}"
    if kind == "pandas.DataFrame":
        default_index = value.index.equals(__import__("pandas").RangeIndex(len(value)))
        return {"$frame": {"columns": [encode(c) for c in value.columns],
                           "dtypes": [str(t) for t in value.dtypes],
                           "index": None if default_index else [encode(i) for i in value.index],
                           "data": [[encode(v) for v in row] for row in value.itertuples(index=False, name=None)]}}
    if kind == "numpy.ndarray":
        return {"$array": encode(value.tolist()), "dtype": str(value.dtype)}
    if hasattr(value, "item") and hasattr(value, "dtype"):          # a numpy scalar
        return encode(value.item())
    raise TypeError(f"a record cannot hold a {kind}")


def _rebuild(name: str, fields: dict) -> Any:
    module, _, qualname = name.rpartition(".")
    if not module.startswith("helpers.") or not re.fullmatch(r"[A-Za-z_][\w.]*", name):
        raise ValueError(f"{name!r} is not a result type of helpers")
    try:
        cls = importlib.import_module(module)
        for part in qualname.split("."):
            cls = getattr(cls, part)
    except (ImportError, AttributeError):
        raise ValueError(f"the result type {name} no longer exists") from None
    if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
        raise ValueError(f"{name} is not a result type (a dataclass)")
    have = {f.name: f for f in dataclasses.fields(cls)}
    # a field gained since, with a default, reads as its default: a record stays readable as results grow
    gone = sorted(set(fields) - set(have))
    new = sorted(n for n, f in have.items() if n not in fields and f.default is dataclasses.MISSING
                 and f.default_factory is dataclasses.MISSING)
    if gone or new:
        raise ValueError(f"the result type {qualname} changed since it was recorded"
                         f"{f' (recorded fields it no longer has: {gone})' if gone else ''}"
                         f"{f' (fields it has gained: {new})' if new else ''}")
    obj = cls(**{k: decode(v) for k, v in fields.items() if have[k].init})
    for k, v in fields.items():
        if not have[k].init:
            object.__setattr__(obj, k, decode(v))
    return obj


def _frame(spec: dict):
    import pandas as pd

    df = pd.DataFrame([[decode(v) for v in row] for row in spec["data"]], columns=[decode(c) for c in spec["columns"]],
                      index=None if spec.get("index") is None else [decode(i) for i in spec["index"]])
    for col, dtype in zip(df.columns, spec["dtypes"]):
        if dtype != "object" and str(df[col].dtype) != dtype:
            try:
                df[col] = df[col].astype(dtype)
            except (TypeError, ValueError):
                pass                       # a column that was all-missing keeps the dtype it reads back as
    return df


def decode(data: Any) -> Any:
    """The value `encode` wrote; ValueError when a tagged form is malformed or names no result type."""
    if isinstance(data, list):
        return [decode(v) for v in data]
    if not isinstance(data, dict):
        return data
    if len(data) == 1 and next(iter(data)).startswith("$") or "$array" in data or "$dataclass" in data:
        if "$tuple" in data:
            return tuple(decode(v) for v in data["$tuple"])
        if "$dict" in data:
            return {decode(k): decode(v) for k, v in data["$dict"]}
        if "$float" in data:
            return float(data["$float"])
        if "$frame" in data:
            return _frame(data["$frame"])
        if "$array" in data:
            import numpy as np

            return np.array(decode(data["$array"]), dtype=data.get("dtype"))
        if "$dataclass" in data:
            return _rebuild(str(data["$dataclass"]), dict(data.get("fields") or {}))
        raise ValueError(f"unknown tag {next(iter(data))!r}")
    return {k: decode(v) for k, v in data.items()}


def load(path: Path | str, kind: str | None = None, roots: Iterable[Path] | None = None) -> dict:
    """The record in `path` (tagged values decoded), or one RecordError line naming the file and what is
    wrong: outside the record folders (or `roots`), too large (checked before reading), not JSON, not an
    object, another format or `kind`, a value that no longer decodes."""
    path = Path(path)
    roots = tuple(roots) if roots is not None else (RESULTS, BUILD)
    where = shown(path)
    if not any(path.resolve().is_relative_to(Path(r).resolve()) for r in roots):
        raise RecordError(f"{where} is not inside a record folder ({', '.join(shown(r) + '/' for r in roots)}): "
                          "records are read only from there")
    try:
        size = path.stat().st_size
        if not path.is_file():
            raise RecordError(f"{where} is not a file")
        if size > MAX_BYTES:
            raise RecordError(f"{where} is {size:,} bytes, more than a record's {MAX_BYTES:,}")
        data = json.loads(path.read_bytes().decode("utf-8"), parse_constant=_no_constant, parse_float=_finite)
    except RecordError:
        raise
    except OSError as exc:
        raise RecordError(f"cannot read {where}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise RecordError(f"{where} is not UTF-8 text") from None
    except (ValueError, RecursionError) as exc:
        raise RecordError(f"{where} is not valid JSON ({str(exc).splitlines()[0][:120]})") from None
    if not isinstance(data, dict):
        raise RecordError(f"{where} holds a JSON {type(data).__name__}, not an object")
    fmt = data.get("record_format")
    if fmt != RECORD_FORMAT:
        raise RecordError(f"{where} is record format {fmt!r}; this code reads format {RECORD_FORMAT} "
                          "(record it again with this checkout)")
    if kind is not None and data.get("kind") != kind:
        raise RecordError(f"{where} is a {data.get('kind')!r} record, not {kind!r}")
    try:
        return decode(data)
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as exc:
        raise RecordError(f"{where}: {str(exc)[:300]}") from None


def _no_constant(token: str):
    raise ValueError(f"{token} is not a number JSON allows")


def _finite(token: str) -> float:
    if not math.isfinite(x := float(token)):
        raise ValueError(f"{token[:20]} is beyond a finite number")
    return x


def dump(path: Path | str, kind: str, body: dict) -> Path:
    """Write `body` as a `kind` record at `path`, atomically; one ValueError line when too large or not writable."""
    path = Path(path)
    data = {"record_format": RECORD_FORMAT, "kind": kind, **encode(dict(body))}
    text = json.dumps(data, indent=1, ensure_ascii=False, allow_nan=False) + "\n"
    if len(text.encode()) > MAX_BYTES:
        raise ValueError(f"the {kind} record {shown(path)} would be {len(text.encode()):,} bytes (at most "
                         f"{MAX_BYTES:,}): a record holds results, not a model or a cache")
    try:
        return write_atomic(path, text)
    except OSError as exc:
        raise ValueError(f"cannot write the record {shown(path)}: {exc.strerror or exc}") from None


def write_atomic(path: Path | str, data: str | bytes) -> Path:
    """The one atomic writer: a temporary file beside `path`, renamed over it (a reader never sees half a file)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
        os.chmod(tmp, 0o644)     # mkstemp makes it private; records are for everyone to read
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def each(pattern: str, kind: str, results: Path | str | None = None, skipped: list[str] | None = None) -> list[tuple[Path, dict]]:
    """[(path, record)] of the `kind` records matching `pattern` under `results`; why each other one fails → `skipped`."""
    results = Path(results or RESULTS)
    out = []
    for path in sorted(results.glob(pattern)):
        try:
            out.append((path, load(path, kind, roots=(results,))))
        except RecordError as exc:
            if skipped is not None:
                skipped.append(str(exc))
    return out
