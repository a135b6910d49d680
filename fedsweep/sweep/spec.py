"""Sweep specs (``sweeps/*.yaml``): one per figure id of docs/figures.md.

A spec is a base run config, a grid of **panels** (cartesian product of its axes), a list of
**curves** (named override sets, or one curve per value of a key), the **seeds**, and
per-**profile** overrides (``paper``, ``quick``, ``smoke``; a profile may also run a subset of
the curves, ``curves: [label, ...]``, and name the ``target_acc`` a rounds-to-target figure
counts to). A panel axis is either a dotted
config key with a list of values (``data.partition: [case1, case2, case3]``) or a free name with
a list of labelled override sets (``setting: [{id: cnn-mnist, label: "CNN, MNIST", set:
{model.name: cnn}}, ...]``), for settings that change several keys at once. ``expand`` turns
(spec, profile) into the list of trials, each a fully validated ``RunConfig`` with a stable
config hash. Every override key is checked against the run-config schema before anything runs;
errors name the spec file and the key.

Extending a spec (your own study on top of a paper figure, in a file anywhere)::

    extends: bherd-fig3a          # a figure id (a spec in this file's folder or in sweeps/),
                                  # or a path relative to this file: ../sweeps/bherd-fig3a.yaml
    figure: my-fig3a-alpha02      # required: the extension's own id (its MLflow experiment)
    title: "Fig. 3a plus alpha=0.2"   # required: its own title
    add_curves:                   # appended to the extended spec's curves
    - label: α=0.2
      set: {bherd.alpha: 0.2}

``extends`` stays among the specs: a path (``*.yaml``/``*.yml``, or with a ``/``) must resolve,
symlinks and ``..`` included, to a ``.yaml``/``.yml`` file inside the extending file's folder or
a ``sweeps/`` folder (the working directory's, fedsweep's own); a figure id must be claimed by
exactly one spec of the first of those folders that has one (two: an error naming both). Looking
for a figure id skips files that cannot be read as YAML, unless one is named ``<id>.yaml`` or
sets ``figure: <id>``: then its error is the answer. An extended spec that is invalid on its own
is named in the error (``... (extended by ...)``), not its extension.

Merge rules: mappings (``base``, ``panels``, ``panel_labels``, ``profiles`` and everything in
them, ``resources``) are deep-merged, the extension's values winning; lists and single values
(``seeds``, ``claims``, a panel axis' values, ``metrics``) are replaced; ``curves`` in the
extension replaces the extended spec's curves, ``add_curves`` appends to them (labels must stay
unique). An extension may itself be extended. Trials equal to the extended spec's (same
panel, curve, seed and profile settings) have the same config hash, so a sweep of the extension
reuses the extended figure's finished runs and schedules only what is new.

Derived curves (a baseline defined by another curve's runs, e.g. FedVeca's FedAvg with the
matching FedVeca run's mean local steps)::

    curves:
    - label: FedVeca
      set: {algorithm: fednova, step_policy: fedveca}
    - label: FedAvg
      set: {algorithm: fedavg, step_policy: fixed}
      derive:
        from: FedVeca                       # the source curve (same panel cell and seed)
        set: {fixed_steps.steps: mean_tau}  # config key -> derivation name
    - label: Centralized SGD
      set: {algorithm: centralized, step_policy: fixed}
      derive:
        from: FedVeca
        set: {fixed_steps.steps: total_steps, train.rounds: 1}  # a number/bool is a literal

A string in ``derive.set`` names a derivation of ``fedsweep.sweep.derive.DERIVATIONS``
(``mean_tau``, ``total_steps``), computed from the source trial's finished run; numbers and
booleans are set as they are. The derived layer comes after ``profiles.<p>.curve_set`` and
before ``--set`` (a profile's ``train.rounds`` does not undo a derived ``train.rounds: 1``).
The source must be a curve of the spec (run by every profile that runs the derived curve) and
not itself derived. The sweep runs the source trials first, then the derived ones (two Ray
experiments, one MLflow parent run); until then ``expand`` lists a derived trial with
placeholder values (``Trial.unresolved``, a config hash that matches no run), so counts and
key validation work before anything ran; ``expand(..., derived=...)`` gives the real ones.
"""

from __future__ import annotations

import difflib
import itertools
import json
import re
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from fedsweep.config.hashing import (  # noqa: F401  (HASH_EXCLUDED re-exported)
    HASH_EXCLUDED,
    config_hash,
    drop_unused,
    legacy_config_hash,
)
from fedsweep.config.load import ConfigError, build_config, closest, set_dotted
from fedsweep.config.schema import DataConfig, RunConfig
from fedsweep.config.section import NoBoolNumbers
from fedsweep.config.yamlio import YamlFileError, read_yaml
from fedsweep.sweep.derive import DERIVATIONS, PLACEHOLDER, UNRESOLVED, Resolution
from fedsweep.tracking.naming import trial_run_name

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


def _repeated(values) -> list:
    """The values that occur more than once in ``values``, in first-seen order."""
    seen, out = set(), []
    for v in values:
        key = json.dumps(v, sort_keys=True, default=str)
        if key in seen and v not in out:
            out.append(v)
        seen.add(key)
    return out


class SpecError(ValueError):
    """A sweep spec that cannot run; the message names the spec file and the key."""


class _Strict(NoBoolNumbers):
    model_config = ConfigDict(extra="forbid")


class PanelChoice(_Strict):
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


class DeriveSpec(_Strict):
    """A curve's settings computed from another curve's runs (module docstring)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    #: the source curve's label (``from`` in the YAML)
    from_: str = Field(alias="from")
    #: config key -> a derivation name (str) or a literal (number, bool)
    set: dict[str, str | bool | int | float] = Field(min_length=1)

    @field_validator("set")
    @classmethod
    def _known(cls, value: dict[str, Any]) -> dict[str, Any]:
        for key, name in value.items():
            if isinstance(name, str) and name not in DERIVATIONS:
                best = closest(name, list(DERIVATIONS))
                hint = f" (did you mean {best!r}?)" if best else ""
                raise ValueError(
                    f"derive.set.{key}: unknown derivation {name!r}{hint}; allowed: "
                    f"{', '.join(DERIVATIONS)}, or a number/bool literal"
                )
        return value


class CurveSpec(_Strict):
    label: str
    set: dict[str, Any] = Field(default_factory=dict)
    color: str | None = None
    dash: Literal["solid", "dash", "dot", "dashdot"] | None = None
    #: drawn as a flat horizontal line at its final value (the papers' centralized baseline)
    flat: bool = False
    #: settings computed from another curve's finished runs (module docstring)
    derive: DeriveSpec | None = None


class CurveGrid(_Strict):
    """Shorthand: one curve per value of ``key``; ``label`` may use ``{value}``."""

    key: str
    values: list[Any]
    label: str = "{key}={value}"
    colors: list[str] | None = None

    def curve_list(self) -> list[CurveSpec]:
        colors = self.colors or [None] * len(self.values)
        return [
            CurveSpec(
                label=self.label.format(key=self.key.split(".")[-1], value=v),
                set={self.key: v},
                color=c,
            )
            for v, c in zip(self.values, colors, strict=False)
        ]


class ProfileSpec(_Strict):
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
    #: the test accuracy a rounds-to-target figure counts the rounds to (intro figures: McMahan's
    #: Table 2 form); None: the figure has no target
    target_acc: float | None = Field(None, gt=0, le=1)

    def fallback_for(self, dataset: str) -> str | None:
        fb = self.data_fallback
        if isinstance(fb, dict):
            return fb.get(dataset)
        return fb if fb != dataset else None


class Resources(_Strict):
    cpu: float = Field(1.0, gt=0)
    gpu: float = Field(0.0, ge=0)


class SweepSpec(_Strict):
    figure: str
    title: str
    paper: str = ""
    #: the figure id of the spec this one extends (set by ``load_spec`` from ``extends:``)
    extends: str | None = None
    base: dict[str, Any]
    panels: dict[str, list[PanelValue]] = Field(default_factory=dict)
    panel_labels: dict[str, dict[str, str]] = Field(default_factory=dict)
    curves: list[CurveSpec] | CurveGrid
    seeds: list[int] = Field(default_factory=lambda: list(range(10)))
    metrics: list[str] = Field(default_factory=lambda: ["test_loss", "test_acc"])
    resources: Resources = Field(default_factory=Resources)
    max_failures: int = Field(2, ge=0)
    checkpoint_every: int = Field(10, ge=1)
    claims: list[str] = Field(default_factory=list)
    profiles: dict[str, ProfileSpec]

    @field_validator("figure")
    @classmethod
    def _slug(cls, value: str) -> str:
        problem = figure_id_problem(value)
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
            for field_name in ("panel_set", "panel_seeds"):
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
        labels = [c.label for c in self.curve_list()]
        for name, prof in self.profiles.items():
            if prof.curves is None:
                continue
            unknown_curves = [c for c in prof.curves if c not in labels]
            if unknown_curves or not prof.curves or _repeated(prof.curves):
                raise ValueError(
                    f"profiles.{name}.curves: unknown, repeated or no curve label(s) "
                    f"{unknown_curves or prof.curves}; allowed: one or more of {labels}"
                )
        if isinstance(self.curves, CurveGrid) and not self.curves.values:
            raise ValueError(f"curves.values for {self.curves.key}: empty list")
        if isinstance(self.curves, list) and not self.curves:
            raise ValueError("curves: empty list")
        labels = [c.label for c in self.curve_list()]
        if _repeated(labels):
            raise ValueError(
                f"curves: repeated label(s) {_repeated(labels)}: each curve needs its own label "
                "(it is part of the trial id)"
            )
        self._check_derived()
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
            if _repeated(seeds):
                raise ValueError(
                    f"{where}: repeated seed(s) {_repeated(seeds)} in {seeds}: each seed once "
                    "(it is part of the trial id)"
                )
        missing = [p for p in PROFILES if p not in self.profiles]
        unknown = [p for p in self.profiles if p not in PROFILES]
        if missing or unknown:
            raise ValueError(
                f"profiles must be exactly {PROFILES}; missing {missing}, unknown {unknown}"
            )
        return self

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
            if source.derive is not None:
                raise ValueError(
                    f"{where}: {source.label!r} is itself derived (from "
                    f"{source.derive.from_!r}); derive from a curve that runs on its own"
                )
            for name, prof in self.profiles.items():
                if prof.curves is not None and curve.label in prof.curves:
                    if source.label not in prof.curves:
                        raise ValueError(
                            f"profiles.{name}.curves: runs the derived curve {curve.label!r} "
                            f"but not its source {source.label!r}; add {source.label!r}"
                        )

    def panel_cells(self, profile: str | None = None) -> list[PanelCell]:
        """The panel grid in order (cartesian product of the axes), with overrides and labels;
        with ``profile``, only the axis values that profile runs (``profiles.<p>.panels``)."""
        keys = list(self.panels)
        wanted = (self.profiles[profile].panels if profile in self.profiles else None) or {}
        axes = [
            [
                v
                for v in self.panels[k]
                if k not in wanted or str(axis_value(v)) in map(str, wanted[k])
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

    def curve_list(self) -> list[CurveSpec]:
        if isinstance(self.curves, list):
            return self.curves
        return self.curves.curve_list()

    def profile_curves(self, profile: str) -> list[CurveSpec]:
        """The curves ``profile`` runs: its ``curves`` subset (spec order), else all."""
        wanted = self.profiles[profile].curves
        curves = self.curve_list()
        return curves if wanted is None else [c for c in curves if c.label in wanted]


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
        """The MLflow run name: ``α=0.3 · Case 2 · seed 1``."""
        return trial_run_name(self.curve, self.panel_label, self.seed)

    @property
    def panel_id(self) -> str:
        return panel_id(self.panel)

    @property
    def trial_id(self) -> str:
        return f"{self.figure}|{self.profile}|{self.panel_id}|{self.curve}|seed={self.seed}"


def _model_in(annotation) -> type[BaseModel] | None:
    """The pydantic model inside ``annotation`` (``X``, ``list[X]``, ``dict[str, X]``, ``X | None``)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def _unknown_key(loc: tuple) -> str:
    """ "unknown key; did you mean `curves`? (allowed: ...)" for a key the spec schema lacks."""
    model: type[BaseModel] | None = SweepSpec
    for part in loc[:-1]:
        if model is None:
            break
        if isinstance(part, str) and part in model.model_fields:
            model = _model_in(model.model_fields[part].annotation)
        # list indexes and dict keys (profile names) stay on the same model
    if model is None:
        return "unknown key"
    allowed = [f.alias or name for name, f in model.model_fields.items()]
    best = closest(str(loc[-1]), allowed)
    hint = f"; did you mean `{best}`?" if best else ""
    return f"unknown key{hint} (allowed: {', '.join(allowed)})"


def load_spec(path: str | Path) -> SweepSpec:
    """The validated spec of ``path`` (its ``extends`` chain resolved). An error names the file
    it comes from: an extended spec that is invalid on its own is named, not its extension."""
    path = Path(path)
    if not path.is_file():
        raise SpecError(f"sweep spec not found: {path}")
    levels: list[tuple[Path, dict[str, Any]]] = []
    tree = _spec_tree(path.resolve(), (), levels)
    try:
        return _checked_spec(tree, path, str(path))
    except SpecError:
        for where, level in levels[:-1]:  # the extended specs, the first of the chain first
            _checked_spec(level, where, f"{where} (extended by {path})")
        raise


def _checked_spec(tree: dict[str, Any], path: Path, source: str) -> SweepSpec:
    """``tree`` as a spec, every key of every profile checked; errors name ``source``."""
    try:
        spec = SweepSpec.model_validate(tree)
    except ValidationError as err:
        lines = [f"invalid sweep spec {source}:"]
        for e in err.errors():
            key = ".".join(str(p) for p in e["loc"])
            msg = _unknown_key(e["loc"]) if e["type"] == "extra_forbidden" else e["msg"]
            lines.append(f"  key `{key}`: {msg}" if key else f"  {msg}")
        raise SpecError("\n".join(lines)) from None
    spec._path = path  # type: ignore[attr-defined]
    for profile in PROFILES:  # validates every key of every profile against the run schema
        expand(spec, profile, source=source)
    return spec


def expand(
    spec: SweepSpec,
    profile: str,
    *,
    source: str | None = None,
    extra: dict[str, Any] | None = None,
    substitute: dict[str, str] | None = None,
    derived: Resolution | None = None,
) -> list[Trial]:
    """All trials of ``spec`` under ``profile``: panels x curves x seeds, validated.

    ``substitute`` maps configured data set names to the ones to run on instead (the profile's
    ``data_fallback`` after the driver found a data set missing); it is applied last.
    ``derived`` maps a derived trial's ``(panel id, curve label, seed)`` to its derived values
    and source run ids (``fedsweep.sweep.derive.resolve``); derived trials not in it get
    placeholders (each derivation = 1: the keys are validated, the trial is ``unresolved``).
    """
    source = source or str(getattr(spec, "_path", spec.figure))
    if profile not in PROFILES:
        raise SpecError(f"{source}: unknown profile {profile!r}; allowed: {', '.join(PROFILES)}")
    prof = spec.profiles[profile]
    seeds = prof.seeds if prof.seeds is not None else spec.seeds
    for label in prof.curve_set:
        if label not in [c.label for c in spec.curve_list()]:
            raise SpecError(
                f"{source}: profiles.{profile}.curve_set names unknown curve "
                f"{label!r}; curves: {[c.label for c in spec.curve_list()]}"
            )
    trials = []
    for cell in spec.panel_cells(profile):
        panel_set: dict[str, Any] = {}
        cell_seeds = seeds
        for key, value in reversed(cell.pairs):  # the first axis' panel_seeds win
            cell_seeds = prof.panel_seeds.get(f"{key}={value}", cell_seeds)
        for key, value in cell.pairs:
            panel_set.update(prof.panel_set.get(f"{key}={value}", {}))
        for curve in spec.profile_curves(profile):
            for seed in cell_seeds:
                values, runs = _derived_layer(curve, (cell.panel_id, curve.label, seed), derived)
                layers = [
                    ("panels", cell.overrides),
                    (f"curve {curve.label!r}", curve.set),
                    (f"profiles.{profile}.set", prof.set),
                    (f"profiles.{profile}.panel_set", panel_set),
                    (f"profiles.{profile}.curve_set", prof.curve_set.get(curve.label, {})),
                    (f"curve {curve.label!r}: derive.set", values),
                    ("--set", extra or {}),
                ]
                full = _build(spec, source, layers, seed, substitute or {})
                # a section of the shared base that this curve's components do not read is
                # dropped (it cannot change the run); runs hashed with it are still found
                cfg = drop_unused(full)
                digest = config_hash(cfg)  # an ordinary trial: exactly as before derived curves
                legacy = legacy_config_hash(full)
                legacy = None if legacy == digest else legacy
                if curve.derive is not None and not runs:
                    digest = UNRESOLVED + digest
                    legacy = None
                trials.append(
                    Trial(
                        spec.figure,
                        profile,
                        cell.pairs,
                        curve.label,
                        seed,
                        cfg,
                        digest,
                        cell.label,
                        derive=curve.derive,
                        derived_from=tuple(runs),
                        derived_set=tuple(values.items()),
                        legacy_hash=legacy,
                    )
                )
    _check_extra_used(source, extra or {}, trials)
    return trials


def _check_extra_used(source: str, extra: dict[str, Any], trials: list[Trial]) -> None:
    """A ``--set`` value for a section that no trial's components read cannot change any run:
    refused (a section some trials read is dropped for the others)."""
    from fedsweep.compose import GENERAL_SECTIONS, config_sections, readers_text, section_readers

    if not trials:
        return
    used = {s for t in trials for s in config_sections(t.config)}
    for key in extra:
        section = key.split(".", 1)[0]
        if section in used or section in GENERAL_SECTIONS or not section_readers(section):
            continue
        readers = readers_text(section)
        raise SpecError(
            f"{source}: --set {key}: no trial of this sweep uses section `{section}` (read "
            f"only by {readers}): it cannot change any run. Remove it, or set a component "
            "that reads it"
        )


def _derived_layer(
    curve: CurveSpec, key: tuple[str, str, int], derived: Resolution | None
) -> tuple[dict[str, Any], list[str]]:
    """A trial's derived overrides and source run ids: the resolved ones, else placeholders
    (``PLACEHOLDER`` for each derivation, literals as they are) and no run ids."""
    if curve.derive is None:
        return {}, []
    if derived is not None and key in derived:
        values, runs = derived[key]
        return dict(values), list(runs)
    placeholders = {
        k: PLACEHOLDER if isinstance(v, str) else v for k, v in curve.derive.set.items()
    }
    return placeholders, []


def _build(spec: SweepSpec, source: str, layers, seed: int, substitute: dict[str, str]):
    tree = json.loads(json.dumps(spec.base))  # deep copy
    for where, overrides in layers:
        for key, value in overrides.items():
            try:
                set_dotted(tree, key, value)
            except ConfigError as err:
                raise SpecError(f"{source}: {where}: {err}") from None
    data = tree.setdefault("data", {})
    dataset = data.get("dataset", DataConfig.model_fields["dataset"].default)
    if dataset in substitute:
        data["dataset"] = substitute[dataset]
    tree["seed"] = seed
    try:
        # files: checked by the sweep; sections a curve does not use: dropped by ``expand``
        return build_config(tree, source=source, files=False, unused="keep")
    except ConfigError as err:
        raise SpecError(str(err)) from None


def spec_paths(folder: str | Path = "sweeps") -> list[Path]:
    return sorted(Path(folder).glob("*.yaml"))


# ----------------------------------------------------------------------------- extends
#: where ``extends: <figure id>`` looks after the extending file's own folder (the working
#: directory's ``sweeps/``, then fedsweep's own); with that folder, the only folders an
#: ``extends`` path may point into
SWEEPS_DIRS = (Path("sweeps"), Path(__file__).resolve().parents[2] / "sweeps")
SPEC_SUFFIXES = (".yaml", ".yml")
#: top-level keys that make a YAML file a sweep spec (a run config has none of them)
SPEC_MARKERS = ("figure", "extends", "add_curves", "base", "panels", "curves", "profiles")


def sweep_spec_keys(tree: Any) -> list[str]:
    """The top-level sweep-spec keys of ``tree`` when it looks like a sweep spec rather than a
    run config (a spec marker such as ``figure``/``curves``/``profiles``/``extends``, and more
    spec keys than run-config sections), else ``[]``."""
    if not isinstance(tree, dict):
        return []
    spec_keys = [k for k in tree if k in SweepSpec.model_fields or k == "add_curves"]
    run_keys = [k for k in tree if k in RunConfig.model_fields]
    if any(k in SPEC_MARKERS for k in spec_keys) and len(spec_keys) > len(run_keys):
        return spec_keys
    return []


def _read_tree(path: Path) -> dict[str, Any]:
    try:
        tree = read_yaml(path, "sweep spec")
    except YamlFileError as err:
        raise SpecError(f"invalid sweep spec: {err}") from None
    except RecursionError:
        raise SpecError(
            f"invalid sweep spec {path}: nested too deeply to be a sweep spec"
        ) from None
    if tree is None:
        raise SpecError(f"sweep spec {path} is empty")
    if not isinstance(tree, dict):
        raise SpecError(f"invalid sweep spec {path}: top level must be a mapping of spec keys")
    return tree


def _figure_of(path: Path) -> str | None:
    """The figure id ``path`` sets; None for a file that cannot be read or sets none."""
    try:
        tree = read_yaml(path)
    except (YamlFileError, RecursionError):
        return None
    figure = tree.get("figure") if isinstance(tree, dict) else None
    return figure if isinstance(figure, str) else None


def _spec_folders(here: Path) -> list[Path]:
    """The folders ``extends`` in a spec of folder ``here`` may reach, symlinks resolved: ``here``,
    then the ``sweeps/`` folders of :data:`SWEEPS_DIRS` that exist."""
    folders: list[Path] = []
    for folder in (here, *SWEEPS_DIRS):
        folder = folder.resolve()
        if folder.is_dir() and folder not in folders:
            folders.append(folder)
    return folders


def _inside(target: Path, folders: list[Path]) -> bool:
    return any(target.is_relative_to(folder) for folder in folders)


def _claims(candidate: Path, ref: str) -> bool:
    """Whether a file that cannot be read as YAML still is the spec of figure id ``ref``: it is
    named ``<ref>.yaml`` or its text sets ``figure: <ref>`` on a line of its own."""
    if candidate.stem == ref:
        return True
    try:
        text = candidate.read_bytes().decode("utf-8", errors="replace")
    except OSError:
        return False
    line = rf"""^figure:[ \t]*(['"]?){re.escape(ref)}\1[ \t]*(#.*)?$"""
    return re.search(line, text, flags=re.MULTILINE) is not None


def _spec_of_figure(ref: str, folder: Path, path: Path, folders: list[Path]) -> Path | None:
    """The one spec of ``folder`` whose figure id is ``ref``, None when there is none. Files
    that cannot be read as YAML are skipped, unless one is that spec (:func:`_claims`): then its
    error is raised; two specs with the figure id are an error naming both. Only ``<ref>.yaml``
    and files whose text contains ``ref`` are read, and none that resolves outside ``folders``."""
    me = path.resolve()
    found: dict[Path, Path] = {}  # resolved -> as listed
    broken: list[tuple[Path, str]] = []
    for candidate in sorted(folder.glob("*.y*ml")):
        target = candidate.resolve()
        if (
            candidate.suffix not in SPEC_SUFFIXES
            or target == me
            or target in found
            or not _inside(target, folders)
            or not target.is_file()
        ):
            continue
        try:
            if candidate.stem != ref and ref.encode() not in target.read_bytes():
                continue
            tree = read_yaml(candidate, "sweep spec")
        except OSError:
            continue
        except (YamlFileError, RecursionError) as err:
            if _claims(candidate, ref):
                broken.append((candidate, str(err) or "nested too deeply to be a sweep spec"))
            continue
        if isinstance(tree, dict) and tree.get("figure") == ref:
            found[target] = candidate
    claimants = [*found.values(), *(c for c, _ in broken)]
    if len(claimants) > 1:
        names = ", ".join(str(c) for c in sorted(claimants))
        raise SpecError(
            f"{path}: key `extends`: figure id {ref!r} is claimed by {len(claimants)} specs in "
            f"{folder}: {names}; give each its own figure id, or extend one by its path "
            f"(extends: {claimants[0].name})"
        )
    if broken:
        candidate, problem = broken[0]
        raise SpecError(
            f"{path}: key `extends`: the spec of figure id {ref!r}, {candidate}, cannot be "
            f"read: {problem}"
        )
    return next(iter(found), None)


def resolve_extends(ref: Any, path: Path) -> Path:
    """The spec file ``extends: ref`` in ``path`` names: a path relative to ``path``'s folder
    (``*.yaml``/``*.yml`` or containing ``/``) that resolves (symlinks and ``..`` included)
    inside that folder or a ``sweeps/`` folder, else a figure id of exactly one spec in
    ``path``'s folder or, when it has none, in ``sweeps/`` (the working directory's, then
    fedsweep's own). Anything else is a :class:`SpecError` saying what is allowed."""
    path = Path(path)
    here = path.resolve().parent
    folders = _spec_folders(here)
    allowed = (
        "allowed: a figure id of a spec in the spec's folder or sweeps/ (e.g. bherd-fig3a), or "
        "a path to a .yaml spec inside " + " or ".join(str(f) for f in folders)
    )
    if not isinstance(ref, str) or not ref:
        raise SpecError(f"{path}: key `extends`: got {ref!r}; {allowed}")
    if ref.endswith(SPEC_SUFFIXES) or "/" in ref:
        target = (here / ref).resolve()
        if not _inside(target, folders):
            raise SpecError(
                f"{path}: key `extends`: {ref!r} is outside the spec's folder and sweeps/ (it "
                f"resolves to {target}); {allowed}"
            )
        if target.suffix not in SPEC_SUFFIXES:
            raise SpecError(f"{path}: key `extends`: {ref!r} is not a .yaml file; {allowed}")
        if not target.is_file():
            raise SpecError(f"{path}: key `extends`: spec file {ref!r} not found ({target})")
        return target
    if figure_id_problem(ref):
        raise SpecError(
            f"{path}: key `extends`: {ref!r} is neither a figure id nor a path to a .yaml spec; "
            f"{allowed}"
        )
    for folder in folders:
        found = _spec_of_figure(ref, folder, path, folders)
        if found is not None:
            return found
    known: dict[str, Path] = {}
    for folder in folders:
        for candidate in sorted(folder.glob("*.y*ml")):
            target = candidate.resolve()
            if _inside(target, folders) and target.is_file() and target != path.resolve():
                figure = _figure_of(target)
                if figure is not None:
                    known.setdefault(figure, candidate)
    close = difflib.get_close_matches(ref, list(known), n=1, cutoff=0.6)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise SpecError(
        f"{path}: key `extends`: no spec with figure id {ref!r} in {path.parent} or sweeps/"
        f"{hint}; known: {', '.join(sorted(known)) or 'none'}"
    )


def _deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def _curve_dicts(curves: Any, where: str) -> list[dict[str, Any]]:
    """A spec's ``curves`` (a list, or a ``{key, values}`` grid) as a list of curve dicts."""
    if isinstance(curves, list):
        return list(curves)
    try:
        grid = CurveGrid.model_validate(curves)
    except ValidationError as err:
        raise SpecError(f"{where}: key `curves`: {err.errors()[0]['msg']}") from None
    return [c.model_dump(exclude_defaults=True) for c in grid.curve_list()]


def _spec_tree(
    path: Path, chain: tuple[Path, ...], levels: list[tuple[Path, dict[str, Any]]] | None = None
) -> dict[str, Any]:
    """The spec's YAML with its ``extends`` chain resolved (rules: the module docstring).
    ``levels`` gets (file, its tree resolved so far) for each spec of the chain, the first
    (the one that extends nothing) first."""
    tree = _read_tree(path)
    ref = tree.pop("extends", None)
    added = tree.pop("add_curves", None)
    if ref is None:
        if added is not None:
            raise SpecError(f"{path}: key `add_curves` needs `extends` (the spec to add to)")
        if levels is not None:
            levels.append((path, tree))
        return tree
    parent_path = resolve_extends(ref, path)
    if parent_path in (*chain, path):
        cycle = " -> ".join(str(p) for p in (*chain, path, parent_path))
        raise SpecError(f"{path}: key `extends`: circular extension ({cycle})")
    parent = _spec_tree(parent_path, (*chain, path), levels)
    for key in ("figure", "title"):
        if not tree.get(key):
            raise SpecError(
                f"{path}: key `{key}`: an extension must set its own {key} (it extends "
                f"{parent.get('figure')!r}, whose {key} is {parent.get(key)!r})"
            )
    if tree["figure"] == parent.get("figure"):
        raise SpecError(
            f"{path}: key `figure`: {tree['figure']!r} is the figure id of the spec it extends; "
            "give the extension its own (it becomes its MLflow experiment)"
        )
    merged = _deep_merge(parent, {k: v for k, v in tree.items() if k != "curves"})
    curves = tree.get("curves", parent.get("curves"))
    if added is not None:
        if not isinstance(added, list) or not added:
            raise SpecError(f"{path}: key `add_curves`: expected a non-empty list of curves")
        curves = _curve_dicts(curves, str(path)) + added
        labels = [c.get("label") for c in curves if isinstance(c, dict)]
        repeated = sorted({lab for lab in labels if labels.count(lab) > 1}, key=str)
        if repeated:
            raise SpecError(
                f"{path}: key `add_curves`: curve label(s) {repeated} already in "
                f"{parent.get('figure')!r}; labels must be unique"
            )
    merged["curves"] = curves
    merged["extends"] = parent.get("figure")
    if levels is not None:
        levels.append((path, merged))
    return merged
