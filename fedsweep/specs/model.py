"""The types of a sweep spec (:mod:`fedsweep.specs.load` documents the format): panels, profiles,
the spec itself (:class:`SweepSpec`) and its trials (:class:`Trial`); the curves are in
:mod:`fedsweep.specs.curves`. Loading, ``extends`` and ``expand`` are in :mod:`fedsweep.specs.load`,
which re-exports these names.
"""

from __future__ import annotations

import itertools
import re
import unicodedata
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from fedsweep.config.schema import RunConfig
from fedsweep.core.suggest import did_you_mean
from fedsweep.specs.claims import Claim, claim_problems, claim_texts, claims_count_problem
from fedsweep.specs.curves import (
    CurveGrid,
    CurveItem,
    Curves,
    CurveSpec,
    DeriveSpec,
    Strict,
    curve_items,
    has_search,
    in_grid,
    product_blocks,
    repeated,
    value_in,
)
from fedsweep.specs.search import TUNED, bounded_budget
from fedsweep.tracking.naming import trial_line_name, trial_run_name

PROFILES = ("paper", "quick", "smoke")
#: a figure id: it names the MLflow experiment and a folder under the store's ray_results (which
#: a finished sweep removes), so it must be one plain path component
FIGURE_ID = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")


def figure_id_problem(value: str) -> str | None:
    """Why ``value`` is not a valid figure id, or None when it is one."""
    if not isinstance(value, str) or not FIGURE_ID.match(value) or ".." in value:
        return (
            f"figure id {value!r} is not a slug: use 1-64 lowercase letters, digits, '.', '_' "
            "or '-', starting with a letter or digit, without '..' (e.g. bherd-fig3a, "
            "my-alpha-study)"
        )
    return None


class SpecError(ValueError):
    """A sweep spec that cannot run; the message names the spec file and the key."""


class PanelChoice(Strict):
    """One value of a named panel axis: several config overrides under one id and label."""

    id: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.-]+$")
    label: str | None = None
    set: dict[str, Any]


PanelValue = PanelChoice | str | int | float | bool | None


def axis_value(value: PanelValue):
    """A panel axis value as it appears in panel ids: the choice id or the value itself."""
    return value.id if isinstance(value, PanelChoice) else value


def panel_id(pairs: tuple[tuple[str, Any], ...]) -> str:
    """``"setting=cnn-mnist,data.partition=case2"``; ``"all"`` for a spec without panels."""
    return ",".join(f"{k}={v}" for k, v in pairs) or "all"


@dataclass(frozen=True)
class PanelCell:
    """One cell of the panel grid: ``pairs`` = ((axis, value or choice id), ...)."""

    pairs: tuple[tuple[str, Any], ...]
    overrides: dict[str, Any]
    label: str

    @property
    def panel_id(self) -> str:
        return panel_id(self.pairs)


class Regime(Strict):
    """How a profile's runs stand to the paper's (issue 34), declared by the spec: ``paper``
    (the paper's settings), ``reconstructed`` (the paper's settings where it gives them, ours
    where they are lost) or ``scaled`` (smaller, shorter or otherwise changed so that a claim
    about the paper's regime is not testable on it). ``reason``: one line (``"η 100× the
    paper's, 6 local steps"``), required unless ``paper``."""

    kind: Literal["paper", "reconstructed", "truncated", "scaled"]
    reason: str = ""

    @model_validator(mode="after")
    def _reason(self) -> Regime:
        if self.kind != "paper" and not self.reason.strip():
            raise ValueError(f"regime {self.kind!r} needs a one-line reason")
        return self

    @property
    def text(self) -> str:
        return self.kind if not self.reason else f"{self.kind}: {self.reason}"


class ProfileSpec(Strict):
    seeds: list[int] | None = None
    set: dict[str, Any] = Field(default_factory=dict)
    #: per-curve extra overrides, keyed by curve label (e.g. fewer rounds for one curve)
    curve_set: dict[str, dict[str, Any]] = Field(default_factory=dict)
    #: per-panel extra overrides, keyed by one panel axis value: ``"setting=cnn-mnist"``,
    #: ``"data.partition=case2"`` (applied after ``set``, before ``curve_set``)
    panel_set: dict[str, dict[str, Any]] = Field(default_factory=dict)
    #: per-panel seeds, keyed like ``panel_set`` (``"setting=cnn-mnist": [0, 1]``): fewer seeds
    #: for the costly panels of a profile, the profile's seeds for the others
    panel_seeds: dict[str, list[int]] = Field(default_factory=dict)
    #: the scaling relative to the paper, shown in the figure subtitle
    note: str = ""
    #: the regime of the profile's runs (:class:`Regime`), for every panel; ``panel_regime``
    #: overrides it per panel, keyed like ``panel_set``; None: not declared (claims are judged
    #: as before, and the report says "regime not declared")
    regime: Regime | None = None
    panel_regime: dict[str, Regime] = Field(default_factory=dict)
    #: data set to use when the configured one can be neither found nor downloaded: one name for
    #: every data set, or a map ``{configured: fallback}`` (data sets not in it have none)
    data_fallback: str | dict[str, str] | None = None
    #: a data set that can be neither found, downloaded nor replaced skips its trials (with a
    #: note on the figure) instead of stopping the sweep
    skip_missing_data: bool = False
    #: run (and draw) only these curves, by label (a smaller grid than the spec's, e.g. the
    #: quick profile of a learning-rate grid); None: every curve
    curves: list[str] | None = None
    #: run (and draw) only these values of a panel axis (``{setting: [c10-dir0.1]}``: a smaller
    #: grid for a smoke profile); axes not named keep every value
    panels: dict[str, list[PanelValue]] | None = None
    #: run (and draw) only the grid curves whose value of a grid key is among these
    #: (``{train.lr: [0.01, 0.1]}``: a smaller grid for a quick profile); keys not named keep
    #: every value, curves of no grid are kept (``curves`` subsets them further)
    grid: dict[str, list[Any]] | None = None
    #: the test accuracy a rounds-to-target figure counts the rounds to (intro figures: McMahan's
    #: Table 2 form); None: the figure has no target
    target_acc: float | None = Field(None, gt=0, le=1)
    #: search trials per panel cell of every curve's ``search`` under this profile (replaces
    #: its ``budget``: a smaller one for smoke); None: the searches' own budgets
    search_budget: int | None = Field(None, ge=1)

    @field_validator("search_budget")
    @classmethod
    def _search_budget(cls, value: int | None) -> int | None:
        return bounded_budget(value)

    def regime_of(self, pairs) -> Regime | None:
        """The regime of the panel with axis ``pairs`` ((axis, value), ...): the first
        ``panel_regime`` entry one of its values names, else the profile's ``regime``."""
        for key, value in pairs:
            found = self.panel_regime.get(f"{key}={value}")
            if found is not None:
                return found
        return self.regime

    def fallback_for(self, dataset: str) -> str | None:
        fb = self.data_fallback
        if isinstance(fb, dict):
            return fb.get(dataset)
        return fb if fb != dataset else None


class Reading(Strict):
    """A labelled alternative reading of the paper (issue 35): config overrides a sweep runs with
    ``--set`` (its runs sit beside the figure's own, by config hash) and the reproduction report
    sets beside the figure as configured, claim by claim. ``note`` says what it reads into the
    paper and whose reading it is."""

    label: str = Field(min_length=1)
    set: dict[str, Any] = Field(min_length=1)
    note: str = ""


class Resources(Strict):
    cpu: float = Field(1.0, gt=0)
    gpu: float = Field(0.0, ge=0)


class SweepSpec(Strict):
    figure: str
    title: str
    paper: str = ""
    #: the figure id of the spec this one extends (set by ``load_spec`` from ``extends:``)
    extends: str | None = None
    base: dict[str, Any]
    panels: dict[str, list[PanelValue]] = Field(default_factory=dict)
    panel_labels: dict[str, dict[str, str]] = Field(default_factory=dict)
    curves: Curves
    seeds: list[int] = Field(default_factory=lambda: list(range(10)))
    metrics: list[str] = Field(default_factory=lambda: ["test_loss", "test_acc"])
    resources: Resources = Field(default_factory=Resources)
    max_failures: int = Field(2, ge=0)
    checkpoint_every: int = Field(10, ge=1)
    #: the claims the figure judges, declared (``fedsweep.specs.claims.Claim``: a mapping with an
    #: id and a kind)
    claims: list[Claim] = Field(default_factory=list)
    #: labelled alternative readings of the paper (``Reading``), compared in the report
    readings: list[Reading] = Field(default_factory=list)
    profiles: dict[str, ProfileSpec]

    @field_validator("figure")
    @classmethod
    def _slug(cls, value: str) -> str:
        problem = figure_id_problem(value)
        if problem:
            raise ValueError(problem)
        return value

    @field_validator("claims", mode="before")
    @classmethod
    def _few_claims(cls, value: Any) -> Any:
        problem = claims_count_problem(value)
        if problem:
            raise ValueError(problem)
        return value

    @model_validator(mode="after")
    def _check(self) -> SweepSpec:
        for key, values in self.panels.items():
            if not values:
                raise ValueError(f"panels.{key}: empty list of values")
            choices = [isinstance(v, PanelChoice) for v in values]
            if any(choices) and not all(choices):
                raise ValueError(
                    f"panels.{key}: mixes labelled override sets ({{id, label, set}}) with plain "
                    "values; an axis is either a config key with values or a list of sets"
                )
            ids = [str(axis_value(v)) for v in values]
            if len(set(ids)) != len(ids):
                raise ValueError(f"panels.{key}: repeated value in {ids}")
        axis_values = {f"{k}={axis_value(v)}" for k, vs in self.panels.items() for v in vs}
        for name, prof in self.profiles.items():
            for field_name in ("panel_set", "panel_seeds", "panel_regime"):
                unknown_cells = sorted(set(getattr(prof, field_name)) - axis_values)
                if unknown_cells:
                    raise ValueError(
                        f"profiles.{name}.{field_name}: unknown panel value(s) {unknown_cells}; "
                        f"allowed: {sorted(axis_values)}"
                    )
        for name, prof in self.profiles.items():
            for axis, wanted in (prof.panels or {}).items():
                known = [str(axis_value(v)) for v in self.panels.get(axis, [])]
                bad = [str(v) for v in wanted if str(v) not in known]
                if axis not in self.panels or bad or not wanted:
                    raise ValueError(
                        f"profiles.{name}.panels.{axis}: unknown axis or value(s) {bad or wanted}; "
                        f"allowed: axes {list(self.panels)}, values {known}"
                    )
        for where, block in product_blocks(self.curves):
            block.check(where)
        labels = [c.label for c in self.curve_list()]
        for name, prof in self.profiles.items():
            if prof.curves is None:
                continue
            unknown_curves = [c for c in prof.curves if c not in labels]
            if unknown_curves or not prof.curves or repeated(prof.curves):
                raise ValueError(
                    f"profiles.{name}.curves: unknown, repeated or no curve label(s) "
                    f"{unknown_curves or prof.curves}; allowed: one or more of {labels}"
                )
        if isinstance(self.curves, CurveGrid) and not self.curves.values:
            raise ValueError(f"curves.values for {self.curves.key}: empty list")
        if isinstance(self.curves, list) and not self.curves:
            raise ValueError("curves: empty list")
        labels = [c.label for c in self.curve_list()]
        self._check_label_text(labels)
        if repeated(labels):
            raise ValueError(
                f"curves: repeated label(s) {repeated(labels)}: each curve needs its own label "
                "(it is part of the trial id)"
            )
        self._check_profile_grids()
        self._check_derived()
        problem = claim_problems(self.claims, self.curve_list(), self.panel_values())
        if problem:
            raise ValueError(problem)
        seed_lists = [("seeds", self.seeds)] + [
            (f"profiles.{n}.seeds", p.seeds)
            for n, p in self.profiles.items()
            if p.seeds is not None
        ]
        seed_lists += [
            (f"profiles.{n}.panel_seeds.{cell}", seeds)
            for n, p in self.profiles.items()
            for cell, seeds in p.panel_seeds.items()
        ]
        for where, seeds in seed_lists:
            if not seeds:
                raise ValueError(f"{where}: empty list (allowed: one or more seeds, e.g. [0, 1])")
            if repeated(seeds):
                raise ValueError(
                    f"{where}: repeated seed(s) {repeated(seeds)} in {seeds}: each seed once "
                    "(it is part of the trial id)"
                )
        missing = [p for p in PROFILES if p not in self.profiles]
        unknown = [p for p in self.profiles if p not in PROFILES]
        if missing or unknown:
            raise ValueError(
                f"profiles must be exactly {PROFILES}; missing {missing}, unknown {unknown}"
            )
        return self

    @property
    def claim_texts(self) -> list[str]:
        """The claims as the report names them (each one's title)."""
        return claim_texts(self.claims)

    def panel_values(self) -> set[str]:
        """What names a panel in a claim: ``axis=value`` (a choice's id) and the
        ``config.key=value`` overrides a panel value sets."""
        out = set()
        for key, values in self.panels.items():
            for v in values:
                out.add(f"{key}={axis_value(v)}")
                if isinstance(v, PanelChoice):
                    out.update(f"{k}={x}" for k, x in v.set.items())
        return out

    def _check_label_text(self, curve_labels: list[str]) -> None:
        """Every label is one line of printable text: it names trials (their ids), MLflow runs
        and legend entries, where a newline or a NUL splits or cuts it."""
        named = [("curves", label) for label in curve_labels]
        named += [
            (f"panels.{axis}", v.label)
            for axis, values in self.panels.items()
            for v in values
            if isinstance(v, PanelChoice) and v.label is not None
        ]
        named += [
            (f"panel_labels.{a}", t)
            for a, texts in self.panel_labels.items()
            for t in texts.values()
        ]
        named += [("readings", r.label) for r in self.readings]
        for where, label in named:
            bad = next((ch for ch in label if unicodedata.category(ch) in ("Cc", "Zl", "Zp")), None)
            if bad is not None:
                raise ValueError(
                    f"{where}: label {label!r} has the control character {bad!r}: a label is one "
                    "line of printable text (it names trials, runs and legend entries)"
                )

    def _check_derived(self) -> None:
        """Each derived curve's source is a curve of the spec, not derived itself, and run by
        every profile that runs the derived curve (else the derived trials could never run)."""
        curves = {c.label: c for c in self.curve_list()}
        for curve in curves.values():
            if curve.derive is None:
                continue
            where = f"curves[{curve.label!r}].derive.from"
            source = curves.get(curve.derive.from_)
            if source is None:
                raise ValueError(
                    f"{where}: {curve.derive.from_!r} is not a curve of this spec; curves: "
                    f"{list(curves)}"
                )
            if curve.derive.tuned:
                self._check_tuned(curve, source, where)
            if source.derive is not None:
                raise ValueError(
                    f"{where}: {source.label!r} is itself derived (from "
                    f"{source.derive.from_!r}); derive from a curve that runs on its own"
                )
            for name, prof in self.profiles.items():
                runs = [c.label for c in self.profile_curves(name)]
                if curve.label in runs and source.label not in runs:
                    why = "curves" if prof.curves and source.label not in prof.curves else "grid"
                    raise ValueError(
                        f"profiles.{name}.{why}: runs the derived curve {curve.label!r} "
                        f"but not its source {source.label!r}; add {source.label!r}"
                    )

    def _check_tuned(self, curve: CurveSpec, source: CurveSpec, where: str) -> None:
        """A tuned curve's source has a ``search`` whose space has every ``tuned`` key (and
        ``tuned`` is not mixed with run-derived values), and the search's metric is one of the
        spec's ``metrics``."""
        assert curve.derive is not None
        if source.search is None:
            raise ValueError(
                f"{where}: {source.label!r} has no `search:`; `tuned` values come from a "
                "curve's search (add one to it, or derive another value)"
            )
        space = list(source.search.space)
        for key, how in curve.derive.set.items():
            if isinstance(how, str) and how != TUNED:
                raise ValueError(
                    f"curves[{curve.label!r}].derive.set.{key}: {how!r} with `tuned` values; "
                    "allowed: `tuned` and literals only (the values of one search trial)"
                )
            if how == TUNED and key not in space:
                raise ValueError(
                    f"curves[{curve.label!r}].derive.set.{key}: not a key of "
                    f"{source.label!r}'s search space{did_you_mean(key, space)}; allowed: "
                    f"{', '.join(space)}"
                )
        metric = source.search.metric
        if metric not in self.metrics:
            raise ValueError(
                f"curves[{source.label!r}].search.metric: {metric!r} is not one of the spec's "
                f"metrics{did_you_mean(metric, self.metrics)}; allowed: {', '.join(self.metrics)}"
            )

    def _check_profile_grids(self) -> None:
        """Each ``profiles.<p>.grid`` names keys and values of the spec's curve grids, and
        leaves the profile at least one curve."""
        known: dict[str, list[Any]] = {}  # grid key -> its values over every grid
        hashed: dict[str, set] = {}  # the same, hashable ones (a grid of thousands of values)
        for _, coords in self.curve_items():
            for key, value in (coords or {}).items():
                _add_new(value, known.setdefault(key, []), hashed.setdefault(key, set()))
        for name, prof in self.profiles.items():
            if prof.grid is None:
                continue
            for key, wanted in prof.grid.items():
                where = f"profiles.{name}.grid.{key}"
                if key not in known:
                    raise ValueError(
                        f"{where}: not a key of the spec's curve grids (grid keys: "
                        f"{', '.join(known) or 'none: no curve comes from a grid'})"
                    )
                bad = [v for v in wanted if not value_in(v, known[key])]
                if bad or not wanted:
                    raise ValueError(
                        f"{where}: unknown or no value(s) {bad or wanted}; allowed: one or more "
                        f"of {known[key]}"
                    )
            if not self.profile_curves(name):
                raise ValueError(
                    f"profiles.{name}: its curves and grid leave no curve to run; allowed: a "
                    "grid and curves that select one or more curves"
                )

    def panel_cells(
        self, profile: str | None = None, only: dict[str, list[str]] | None = None
    ) -> list[PanelCell]:
        """The panel grid in order (cartesian product of the axes), with overrides and labels;
        with ``profile``, only the axis values that profile runs (``profiles.<p>.panels``);
        with ``only`` (``fedsweep sweep --panel``, checked by
        :func:`fedsweep.specs.load.check_panel_filter`), only these axis values too."""
        keys = list(self.panels)
        wanted = (self.profiles[profile].panels if profile in self.profiles else None) or {}
        only = only or {}
        axes = [
            [
                v
                for v in self.panels[k]
                if (k not in wanted or str(axis_value(v)) in map(str, wanted[k]))
                and (k not in only or str(axis_value(v)) in map(str, only[k]))
            ]
            for k in keys
        ]
        cells = []
        for values in itertools.product(*axes):
            pairs, overrides, labels = [], {}, []
            for key, value in zip(keys, values, strict=True):
                if isinstance(value, PanelChoice):
                    pairs.append((key, value.id))
                    overrides.update(value.set)
                    labels.append(value.label or value.id)
                else:
                    pairs.append((key, value))
                    overrides[key] = value
                    labels.append(self.panel_labels.get(key, {}).get(str(value), f"{key}={value}"))
            cells.append(PanelCell(tuple(pairs), overrides, " · ".join(labels)))
        return cells or [PanelCell((), {}, "")]

    def curve_items(self) -> list[CurveItem]:
        """Every curve in order, product grids expanded, with its grid coordinates."""
        return curve_items(self.curves)

    def curve_list(self) -> list[CurveSpec]:
        if isinstance(self.curves, list) and not product_blocks(self.curves):
            if not has_search(self.curves):
                return self.curves
        return [curve for curve, _ in self.curve_items()]

    def with_seeds(self, profile: str, seeds: list[int]) -> SweepSpec:
        """This spec with ``profile`` running ``seeds`` in every panel (``--seeds``; its own
        ``seeds`` and ``panel_seeds`` replaced): more seeds of the same configs, so the runs of
        the seeds both have are the same runs (the seed is the only key that differs)."""
        if not seeds or len(set(seeds)) != len(seeds) or min(seeds) < 0:
            raise ValueError(f"seeds: got {seeds} (allowed: distinct integers >= 0)")
        prof = self.profiles[profile].model_copy(update={"seeds": list(seeds), "panel_seeds": {}})
        copy = self.model_copy(update={"profiles": {**self.profiles, profile: prof}})
        if hasattr(self, "_path"):
            copy._path = self._path  # type: ignore[attr-defined]
        return copy

    def profile_curves(self, profile: str) -> list[CurveSpec]:
        """The curves ``profile`` runs (spec order): those of its ``curves`` subset and ``grid``
        values, else all."""
        prof = self.profiles[profile]
        return [
            curve
            for curve, coords in self.curve_items()
            if (
                prof.curves is None
                or curve.label in prof.curves
                # a search's tuned curve comes with its curve
                or (curve.auto_tuned and curve.derive.from_ in prof.curves)
            )
            and in_grid(coords, prof.grid)
        ]


def _add_new(value: Any, values: list[Any], hashed: set) -> None:
    """Append ``value`` to ``values`` unless an equal one (``curves.same_value``: a boolean
    equals only a boolean) is there; ``hashed`` keeps the hashable ones for a set lookup
    instead of a scan (comparing every pair of a 10,000-curve grid took minutes)."""
    key = (isinstance(value, bool), value)
    try:
        if key in hashed:
            return
        hashed.add(key)
    except TypeError:  # a list or mapping value: compared one by one
        if value_in(value, values):
            return
    values.append(value)


@dataclass(frozen=True)
class Trial:
    """One FL run of a sweep."""

    figure: str
    profile: str
    panel: tuple[tuple[str, Any], ...]  # ((key, value), ...) of the panel grid
    curve: str
    seed: int
    config: RunConfig
    config_hash: str
    #: the panel cell's label (``"CNN, MNIST · Case 2"``), for run names
    panel_label: str = ""
    #: a derived curve's ``derive`` (None: an ordinary trial)
    derive: DeriveSpec | None = None
    #: the source run id(s) the derived values come from; empty while unresolved
    derived_from: tuple[str, ...] = ()
    #: the derived layer's values, ((key, value), ...); placeholders while unresolved
    derived_set: tuple[tuple[str, Any], ...] = ()
    #: the hash runs of this trial were tagged with before sections a curve does not use left
    #: the hash (``config.hashing.legacy_config_hash``); None where it is ``config_hash``
    legacy_hash: str | None = None
    #: a search trial's point of its curve's search space, ((key, value), ...); () otherwise
    search_point: tuple[tuple[str, Any], ...] = ()
    #: a search trial's curve (the one searched); None otherwise
    search_of: str | None = None

    @property
    def hashes(self) -> tuple[str, ...]:
        """Every hash a finished run of this trial may carry: ``config_hash`` first."""
        legacy = () if self.legacy_hash is None else (self.legacy_hash,)
        return (self.config_hash, *legacy)

    @property
    def unresolved(self) -> bool:
        """A derived trial whose values are placeholders: it cannot run, its hash matches no
        run."""
        return self.derive is not None and not self.derived_from

    @property
    def derived_note(self) -> str:
        """``FedVeca run <id>: fixed_steps.steps = mean_tau = 37``; "" for an ordinary trial."""
        if self.derive is None or not self.derived_from:
            return ""
        parts = []
        for key, value in self.derived_set:
            how = self.derive.set.get(key)
            parts.append(f"{key} = {how} = {value}" if isinstance(how, str) else f"{key} = {value}")
        runs = ", ".join(self.derived_from)
        return f"{self.derive.from_} run {runs}: {', '.join(parts)}"

    @property
    def run_name(self) -> str:
        """The MLflow run name: ``seed 1 · α=0.3 · Case 2``."""
        return trial_run_name(self.curve, self.panel_label, self.seed)

    @property
    def line_name(self) -> str:
        """The figure line this trial is a seed of: ``α=0.3 · Case 2 · quick profile``."""
        return trial_line_name(self.curve, self.panel_label, self.profile)

    @property
    def panel_id(self) -> str:
        return panel_id(self.panel)

    @property
    def trial_id(self) -> str:
        return f"{self.figure}|{self.profile}|{self.panel_id}|{self.curve}|seed={self.seed}"
