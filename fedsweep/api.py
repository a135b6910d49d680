"""fedsweep's Python API: a figure's runs, curves, verdicts and Plotly figure as Python objects
(issue 52, item 1), for analysis beyond the figures fedsweep draws (a notebook, a script).

Every function reads the tracking store only (it never runs or writes anything) and takes the
same names the commands take: a figure id (``bherd-fig3a``: ``sweeps/bherd-fig3a.yaml``) or a
spec file's path, a profile (default: the profile of the store's newest sweep of the figure),
``tracking_uri`` (default: ``$MLFLOW_TRACKING_URI``, else ``./mlruns/mlflow.db``) and
``seeds`` (instead of the profile's, as ``--seeds``). A figure's runs are its trials' runs,
found by config hash exactly as the figures and the report find them: what these functions
return is what ``fedsweep figures`` draws and ``fedsweep report`` judges.

* :func:`runs`: one row per trial (panel, curve, seed), its run id and status, its typed config
  (one column per dotted key) and its final and best metrics; ``where`` filters it (a mapping,
  or a string of column comparisons read by :func:`parse_where`, never run as code).
* :func:`curves`: per panel, curve, metric and round, the mean, std and count over seeds.
* :func:`claims`: the verdict rows of the figure's claims (those of ``claims-<profile>.json``).
* :func:`figure`: the Plotly figure ``fedsweep figures`` draws.

::

    import fedsweep.api as api
    df = api.runs("bherd-fig4e", "smoke")
    df[df["curve"] == "Case 2, RR"][["seed", "final_test_acc"]]
"""

from __future__ import annotations

import tempfile
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

__all__ = ["runs", "curves", "claims", "figure", "parse_where", "WhereError"]

#: the metrics every run logs, reduced per run in :func:`runs`
RUN_METRICS = ("test_acc", "test_loss", "train_loss")


@dataclass
class _Figure:
    """A figure opened on a store: its spec file, plan, client and the store's run index."""

    path: Path
    spec: Any
    profile: str
    plan: Any
    uri: str
    client: Any
    index: Any


def _locate(
    name: str | Path, profile: str | None, tracking_uri: str | None, sweeps_dir: str | Path
) -> tuple[Path, Any, str, str]:
    """The figure's spec file and spec, its profile (None: the store's newest sweep of it) and
    the resolved tracking URI."""
    from fedsweep.specs.load import PROFILES, find_spec, load_spec
    from fedsweep.sweep.swept import swept_profiles
    from fedsweep.tracking.uri import resolve_tracking_uri

    path = find_spec(name, sweeps_dir)
    spec = load_spec(path)
    uri = resolve_tracking_uri(tracking_uri)
    if profile is None:
        found = swept_profiles(uri, [spec.figure])
        profile = found[0].profile if found else "quick"
    if profile not in PROFILES:
        raise ValueError(f"profile: got {profile!r} (allowed: {', '.join(PROFILES)})")
    return path, spec, profile, uri


def checked_seeds(seeds: Any) -> list[int] | None:
    """``seeds=`` as ``--seeds`` takes them: at most :data:`fedsweep.specs.seeds.MAX_SEEDS`
    (1000) integers >= 0, sorted, each once; None for the profile's. Anything else is a
    ``ValueError`` naming the argument, the value and the bound (``range(100000)`` built a plan
    of 18 GB)."""
    import itertools
    from numbers import Integral

    from fedsweep.specs.seeds import MAX_SEEDS, SeedsError

    if seeds is None:
        return None
    allowed = f"allowed: at most {MAX_SEEDS} integers >= 0, e.g. range(10) or [0, 1, 5]"
    if isinstance(seeds, (str, bytes, Mapping)) or not hasattr(seeds, "__iter__"):
        raise SeedsError(f"seeds: got {seeds!r} ({allowed})")
    size = len(seeds) if hasattr(seeds, "__len__") else None
    if size is not None and size > MAX_SEEDS:
        raise SeedsError(f"seeds: got {size} seeds ({seeds!r:.60}; {allowed})")
    taken = list(itertools.islice(iter(seeds), MAX_SEEDS + 1))
    if len(taken) > MAX_SEEDS:
        raise SeedsError(f"seeds: got more than {MAX_SEEDS} seeds ({allowed})")
    bad = [s for s in taken if isinstance(s, bool) or not isinstance(s, Integral) or s < 0]
    if bad or not taken:
        what = f"seed {bad[0]!r}" if bad else "no seed"
        raise SeedsError(f"seeds: got {what} ({allowed})")
    return sorted({int(s) for s in taken})


def _open(
    name: str | Path,
    profile: str | None,
    tracking_uri: str | None,
    sweeps_dir: str | Path,
    seeds: list[int] | None,
    overrides: Mapping[str, Any] | None = None,
) -> _Figure:
    """The figure located (:func:`_locate`), its plan, the store's client and run index."""
    from fedsweep.judge.store import RunIndex
    from fedsweep.specs.figure import figure_plan
    from fedsweep.tracking.connect import get_client

    path, spec, profile, uri = _locate(name, profile, tracking_uri, sweeps_dir)
    plan = figure_plan(spec, profile, extra=dict(overrides or {}), seeds=seeds)
    client = get_client(uri, create=False)  # a store that does not exist: StoreMissingError
    return _Figure(path, plan.spec, profile, plan, uri, client, RunIndex.load(client))


def runs(
    figure: str | Path,
    profile: str | None = None,
    *,
    where: Mapping[str, Any] | str | None = None,
    tracking_uri: str | None = None,
    sweeps_dir: str | Path = "sweeps",
    seeds: list[int] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> pd.DataFrame:
    """One row per trial of ``figure`` at ``profile``: ``figure``, ``profile``, ``panel``
    (its id), ``panel_label``, ``curve``, ``seed``, ``run_id`` (None: not run yet), ``status``
    (``finished``, ``diverged``, or ``missing``), ``config_hash``, one column per key of the
    trial's typed config (``bherd.alpha``, ``train.lr``, ...) and ``final_<metric>`` /
    ``best_<metric>`` of test accuracy, test loss and training loss (the last finite round; the
    largest accuracy, the smallest loss). ``where``: keep the rows whose columns have these
    values (``{"train.order": "rr"}``), or a filter string of comparisons (``"seed < 3 and
    `train.order` == 'rr'"``, :func:`parse_where`: never evaluated as Python).
    ``overrides``: the ``--set`` values the sweep ran with; ``seeds``: at most 1000, as
    ``--seeds``."""
    from fedsweep.config.load import flatten
    from fedsweep.judge.store import load_metrics, resolve_runs

    seeds = checked_seeds(seeds)
    if isinstance(where, str):
        parse_where(where)  # a bad filter: before the store is read
    fig = _open(figure, profile, tracking_uri, sweeps_dir, seeds, overrides)
    res = resolve_runs(fig.spec, fig.profile, fig.index, client=fig.client, plan=fig.plan)
    long = load_metrics(fig.client, res.found, RUN_METRICS)
    finals = _per_run(long)
    rows = []
    for trial, run in [(tr.trial, tr.run) for tr in res.found] + [(t, None) for t in res.missing]:
        row = {
            "figure": fig.spec.figure,
            "profile": fig.profile,
            "panel": trial.panel_id,
            "panel_label": trial.panel_label,
            "curve": trial.curve,
            "seed": trial.seed,
            "run_id": run.run_id if run is not None else None,
            "status": (run.status if run is not None else "missing"),
            "config_hash": trial.config_hash,
        }
        row.update(flatten(trial.config.model_dump(mode="json")))
        row.update(finals.get(row["run_id"], {}) if run is not None else {})
        rows.append(row)
    df = pd.DataFrame(rows)
    for metric in RUN_METRICS:
        for how in ("final", "best"):
            if f"{how}_{metric}" not in df:
                df[f"{how}_{metric}"] = float("nan")
    return _where(df, where)


def _per_run(long: pd.DataFrame) -> dict[str, dict[str, float]]:
    """run id -> ``final_<metric>`` (last finite round) and ``best_<metric>`` (max accuracy,
    min loss)."""
    import numpy as np

    out: dict[str, dict[str, float]] = {}
    if long.empty:
        return out
    finite = long[np.isfinite(long["value"].astype(float))].sort_values("round")
    for (run_id, metric), group in finite.groupby(["run_id", "metric"]):
        values = group["value"].astype(float)
        best = values.max() if metric.endswith("acc") else values.min()
        out.setdefault(run_id, {}).update(
            {f"final_{metric}": float(values.iloc[-1]), f"best_{metric}": float(best)}
        )
    return out


def _where(df: pd.DataFrame, where: Mapping[str, Any] | str | None) -> pd.DataFrame:
    if where is None:
        return df.reset_index(drop=True)
    if isinstance(where, str):
        condition = parse_where(where)  # checked before the rows: a bad one fails on any store
        if df.empty:
            return df.reset_index(drop=True)
        return df[condition.mask(df)].reset_index(drop=True)
    if df.empty:
        return df.reset_index(drop=True)
    unknown = [k for k in where if k not in df.columns]
    if unknown:
        from fedsweep.core.suggest import did_you_mean

        raise KeyError(
            f"where: unknown column {unknown[0]!r}{did_you_mean(unknown[0], list(df.columns))}"
        )
    keep = pd.Series(True, index=df.index)
    for key, value in where.items():
        keep &= df[key].map(lambda v, value=value: v == value)
    return df[keep].reset_index(drop=True)


def curves(
    figure: str | Path,
    profile: str | None = None,
    *,
    metrics: list[str] | None = None,
    tracking_uri: str | None = None,
    sweeps_dir: str | Path = "sweeps",
    seeds: list[int] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> pd.DataFrame:
    """Per ``panel`` (id), ``curve``, ``metric`` and ``round``: ``mean``, ``std`` (sample, 0 for
    one seed) and ``n`` (seeds) over the finite values of the figure's runs; ``metrics``:
    the metric keys (default: the spec's ``metrics``, else test accuracy and loss)."""
    from fedsweep.judge.runs import aggregate
    from fedsweep.judge.store import load_metrics, resolve_runs

    seeds = checked_seeds(seeds)
    fig = _open(figure, profile, tracking_uri, sweeps_dir, seeds, overrides)
    res = resolve_runs(fig.spec, fig.profile, fig.index, client=fig.client, plan=fig.plan)
    keys = list(metrics or getattr(fig.spec, "metrics", None) or ["test_acc", "test_loss"])
    agg = aggregate(load_metrics(fig.client, res.found, keys))
    agg = agg.rename(columns={"panel_id": "panel"})
    agg.insert(0, "figure", fig.spec.figure)
    return agg.reset_index(drop=True)


def _build(located: tuple, seeds, level: float, **options):
    """The figure built as ``fedsweep figures`` builds it (its own run index and plan), at
    ``level``; ``located``: :func:`_locate`'s answer."""
    from dashboards import build_figures
    from dashboards.build import FigureBuildWarning
    from fedsweep.judge.stats import confidence

    path, spec, profile, uri = located
    with confidence(level), tempfile.TemporaryDirectory(prefix="fedsweep-api-") as tmp:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FigureBuildWarning)
            (result,) = build_figures(
                uri, profile=profile, out_dir=tmp, spec_files=[path], png=False,
                extras=False, require_store=True, seeds=seeds, **options,
            )  # fmt: skip
        if result.error:
            raise RuntimeError(f"{spec.figure}: {result.error}")
        return result


def claims(
    figure: str | Path,
    profile: str | None = None,
    *,
    tracking_uri: str | None = None,
    sweeps_dir: str | Path = "sweeps",
    seeds: list[int] | None = None,
    level: float = 0.95,
) -> pd.DataFrame:
    """The figure's claims judged from the store, one row per claim (and regime), as
    ``fedsweep report --json`` gives them: ``id``, ``claim``, ``verdict``, ``why``,
    ``effect``, ``ci_low``, ``ci_high``, ``margin``, ``seeds``, ``seeds_needed``, ``regime``,
    ``numbers``, ``panels`` (each part's evidence) and the rest; ``level``: the intervals'."""
    from dashboards.report import judged_rows
    from fedsweep.judge.stats import confidence
    from fedsweep.judge.store import RunIndex
    from fedsweep.specs.figure import figure_plan
    from fedsweep.tracking.connect import get_client

    seeds = checked_seeds(seeds)
    _, spec, profile, uri = _locate(figure, profile, tracking_uri, sweeps_dir)
    if seeds:
        spec = spec.with_seeds(profile, seeds)
    plan = figure_plan(spec, profile)
    client = get_client(uri, create=False)
    # judged from the plan and the store alone: nothing is drawn, no file written
    with confidence(level):
        return pd.DataFrame(judged_rows(plan, client, RunIndex.load(client)))


def figure(
    figure: str | Path,
    profile: str | None = None,
    *,
    part: str | None = None,
    band: str = "std",
    tracking_uri: str | None = None,
    sweeps_dir: str | Path = "sweeps",
    seeds: list[int] | None = None,
):
    """The Plotly figure ``fedsweep figures`` draws for ``figure`` (a ``go.Figure``; ``part``:
    one part of a figure drawn in several, e.g. Fig. 2a's ``loss``). None without runs."""
    from dashboards import FigureOptions

    seeds = checked_seeds(seeds)
    located = _locate(figure, profile, tracking_uri, sweeps_dir)
    result = _build(located, seeds, 0.95, options=FigureOptions(band=band))
    if part is None:
        return result.figure
    if part not in result.parts:
        raise KeyError(f"part: got {part!r} (allowed: {', '.join(result.parts) or 'none'})")
    return result.parts[part]


# ------------------------------------------------------------------------ where="..." strings
#: the largest ``where`` string and the most comparisons in it (a filter, not a program: pandas'
#: own parser took tens of minutes over 500 comparisons joined by ``and``)
WHERE_MAX_CHARS = 2000
WHERE_MAX_COMPARISONS = 64
#: the deepest nesting of parentheses and ``not``
WHERE_MAX_DEPTH = 16
WHERE_FORMS = (
    "allowed: COLUMN OP VALUE with OP one of == != < <= > >=, COLUMN in [VALUE, ...], "
    "COLUMN not in [...], joined by and / or (also & / |), negated by not (also ~), grouped by "
    "parentheses; COLUMN a column name (`dotted.name` in backticks, or bare: train.lr); "
    "VALUE a number, a 'string' or \"string\", True, False or None"
)
_OPS = ("==", "!=", "<=", ">=", "<", ">")
_WORDS = {"and": "and", "or": "or", "not": "not", "in": "in", "&": "and", "|": "or", "~": "not"}
_CONSTANTS = {"True": True, "False": False, "None": None}


class WhereError(ValueError):
    """A ``where`` string outside its grammar: the message names the position and the forms."""


@dataclass
class _Token:
    kind: str  # name, value, op, word, punct, end
    value: Any
    pos: int


def _tokens(text: str) -> list[_Token]:
    """``text`` split into tokens (the position of each for a message); no code is run."""
    import re

    number = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
    name = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")
    out: list[_Token] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch.isspace():
            i += 1
        elif text.startswith(_OPS, i):
            op = next(o for o in _OPS if text.startswith(o, i))
            out.append(_Token("op", op, i))
            i += len(op)
        elif ch in "()[],":
            out.append(_Token("punct", ch, i))
            i += 1
        elif ch in "&|~":
            out.append(_Token("word", _WORDS[ch], i))
            i += 1
        elif ch == "`":
            end = text.find("`", i + 1)
            if end < 0 or end == i + 1:
                raise _where_error(text, i, "a backticked column name that is not closed")
            out.append(_Token("name", text[i + 1 : end], i))
            i = end + 1
        elif ch in "'\"":
            value, i = _string(text, i)
            out.append(value)
        elif (match := number.match(text, i)) and not (out and out[-1].kind == "name"):
            raw = match.group(0)
            is_int = not any(c in raw for c in ".eE")
            out.append(_Token("value", int(raw) if is_int else float(raw), i))
            i = match.end()
        elif match := name.match(text, i):
            word = match.group(0)
            if word in ("and", "or", "not", "in"):
                out.append(_Token("word", word, i))
            elif word in _CONSTANTS:
                out.append(_Token("value", _CONSTANTS[word], i))
            else:
                out.append(_Token("name", word, i))
            i = match.end()
        else:
            raise _where_error(text, i, f"unexpected {ch!r}")
    out.append(_Token("end", None, len(text)))
    return out


def _string(text: str, start: int) -> tuple[_Token, int]:
    """A quoted string (``\\`` escapes the next character) from ``start``: its token and the
    position after it."""
    quote, chars, i = text[start], [], start + 1
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            chars.append(text[i + 1])
            i += 2
        elif ch == quote:
            return _Token("value", "".join(chars), start), i + 1
        else:
            chars.append(ch)
            i += 1
    raise _where_error(text, start, "a string that is not closed")


def _where_error(text: str, pos: int, what: str) -> WhereError:
    shown = text if len(text) <= 120 else text[:117] + "..."
    return WhereError(f"where: {what} at position {pos} of {shown!r}; {WHERE_FORMS}")


@dataclass
class _Condition:
    """A parsed ``where``: a comparison (``op`` on ``column`` and ``value``) or ``and`` / ``or``
    / ``not`` of its ``parts``."""

    op: str
    parts: tuple = ()
    column: str = ""
    value: Any = None
    pos: int = 0

    def mask(self, df: pd.DataFrame) -> pd.Series:
        """The rows that meet it, as a boolean Series over ``df``'s index (pandas masks only)."""
        if self.op == "and":
            out = self.parts[0].mask(df)
            for part in self.parts[1:]:
                out = out & part.mask(df)
            return out
        if self.op == "or":
            out = self.parts[0].mask(df)
            for part in self.parts[1:]:
                out = out | part.mask(df)
            return out
        if self.op == "not":
            return ~self.parts[0].mask(df)
        if self.column not in df.columns:
            from fedsweep.core.suggest import did_you_mean

            raise WhereError(
                f"where: unknown column {self.column!r} at position {self.pos}"
                f"{did_you_mean(self.column, [str(c) for c in df.columns])} (columns: "
                f"{', '.join(map(str, df.columns))})"
            )
        column = df[self.column]
        if self.op in ("in", "not in"):
            found = column.isin(list(self.value))
            return ~found if self.op == "not in" else found
        if self.value is None and self.op in ("==", "!="):
            return column.isna() if self.op == "==" else column.notna()
        import operator

        compare = {"==": operator.eq, "!=": operator.ne, "<": operator.lt,
                   "<=": operator.le, ">": operator.gt, ">=": operator.ge}[self.op]  # fmt: skip
        try:
            out = column.map(lambda v: _compare(compare, v, self.value))
        except TypeError:
            raise WhereError(
                f"where: column {self.column!r} {self.op} {self.value!r} at position "
                f"{self.pos}: its values cannot be compared with {type(self.value).__name__}"
            ) from None
        return out.astype(bool)


def _compare(compare, value: Any, literal: Any) -> bool:
    """One cell against the literal; a missing cell (None, NaN) meets only ``!=``."""
    if value is None or (isinstance(value, float) and value != value):
        return compare is __import__("operator").ne
    return bool(compare(value, literal))


def parse_where(text: str) -> _Condition:
    """``where="..."`` of :func:`runs` parsed by its own small grammar (:data:`WHERE_FORMS`):
    comparisons of a column with a literal, combined by and / or / not and parentheses. Nothing
    is evaluated as Python (pandas' ``DataFrame.query`` ran any call it was given). Raises
    :class:`WhereError` naming the position, and at most :data:`WHERE_MAX_CHARS` characters and
    :data:`WHERE_MAX_COMPARISONS` comparisons are read."""
    if not isinstance(text, str):
        raise WhereError(f"where: got {type(text).__name__} (a mapping or a string; {WHERE_FORMS})")
    if len(text) > WHERE_MAX_CHARS:
        raise WhereError(
            f"where: {len(text)} characters (at most {WHERE_MAX_CHARS}: a filter of at most "
            f"{WHERE_MAX_COMPARISONS} comparisons)"
        )
    tokens = _tokens(text)
    at = 0
    count = 0

    def peek() -> _Token:
        return tokens[at]

    def take() -> _Token:
        nonlocal at
        at += 1
        return tokens[at - 1]

    def expect(kind: str, value: Any, what: str) -> _Token:
        tok = peek()
        if tok.kind != kind or tok.value != value:
            raise _where_error(text, tok.pos, f"expected {what}")
        return take()

    def either(depth: int) -> _Condition:
        parts = [both(depth)]
        while peek().kind == "word" and peek().value == "or":
            take()
            parts.append(both(depth))
        return parts[0] if len(parts) == 1 else _Condition("or", tuple(parts))

    def both(depth: int) -> _Condition:
        parts = [negated(depth)]
        while peek().kind == "word" and peek().value == "and":
            take()
            parts.append(negated(depth))
        return parts[0] if len(parts) == 1 else _Condition("and", tuple(parts))

    def negated(depth: int) -> _Condition:
        tok = peek()
        if depth > WHERE_MAX_DEPTH:
            raise _where_error(text, tok.pos, f"nested deeper than {WHERE_MAX_DEPTH}")
        if tok.kind == "word" and tok.value == "not":
            take()
            return _Condition("not", (negated(depth + 1),))
        if tok.kind == "punct" and tok.value == "(":
            take()
            inner = either(depth + 1)
            expect("punct", ")", "')'")
            return inner
        return comparison()

    def comparison() -> _Condition:
        nonlocal count
        tok = take()
        if tok.kind != "name":
            raise _where_error(text, tok.pos, "a column name")
        count += 1
        if count > WHERE_MAX_COMPARISONS:
            raise _where_error(
                text, tok.pos, f"more than {WHERE_MAX_COMPARISONS} comparisons (the most allowed)"
            )
        op = take()
        if op.kind == "word" and op.value == "not":
            expect("word", "in", "'in' after 'not'")
            return _Condition("not in", column=tok.value, value=values(), pos=tok.pos)
        if op.kind == "word" and op.value == "in":
            return _Condition("in", column=tok.value, value=values(), pos=tok.pos)
        if op.kind != "op":
            raise _where_error(text, op.pos, f"an operator after column {tok.value!r}")
        return _Condition(op.value, column=tok.value, value=literal(), pos=tok.pos)

    def literal() -> Any:
        tok = take()
        if tok.kind != "value":
            raise _where_error(text, tok.pos, "a value (a number, a string, True, False, None)")
        return tok.value

    def values() -> tuple:
        expect("punct", "[", "'[' (a list of values)")
        out = [literal()]
        while peek().kind == "punct" and peek().value == ",":
            take()
            if peek().kind == "punct" and peek().value == "]":
                break
            out.append(literal())
        expect("punct", "]", "',' or ']'")
        return tuple(out)

    condition = either(0)
    if peek().kind != "end":
        raise _where_error(text, peek().pos, "the end (or and / or)")
    return condition
