"""Sweep specs (``sweeps/*.yaml``): one per figure id of FIGURES.md.

A spec is a base run config, a grid of **panels** (cartesian product of its axes), a list of
**curves** (named override sets, or one curve per value of a key), the **seeds**, and
per-**profile** overrides (``paper``, ``quick``, ``smoke``). A panel axis is either a dotted
config key with a list of values (``data.partition: [case1, case2, case3]``) or a free name with
a list of labelled override sets (``setting: [{id: cnn-mnist, label: "CNN, MNIST", set:
{model.name: cnn}}, ...]``), for settings that change several keys at once. ``expand`` turns
(spec, profile) into the list of trials, each a fully validated ``RunConfig`` with a stable
config hash. Every override key is checked against the run-config schema before anything runs;
errors name the spec file and the key.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from fedsweep.config.load import ConfigError, build_config, set_dotted
from fedsweep.config.schema import DataConfig, RunConfig

PROFILES = ("paper", "quick", "smoke")
#: config keys that do not change a run's numbers (excluded from the config hash)
HASH_EXCLUDED = ("name", "threads", "device", "tracking", "data.root", "data.download")


class SpecError(ValueError):
    """A sweep spec that cannot run; the message names the spec file and the key."""


class _Strict(BaseModel):
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


class CurveSpec(_Strict):
    label: str
    set: dict[str, Any] = Field(default_factory=dict)
    color: str | None = None
    dash: Literal["solid", "dash", "dot", "dashdot"] | None = None
    #: drawn as a flat horizontal line at its final value (the papers' centralized baseline)
    flat: bool = False


class CurveGrid(_Strict):
    """Shorthand: one curve per value of ``key``; ``label`` may use ``{value}``."""

    key: str
    values: list[Any]
    label: str = "{key}={value}"
    colors: list[str] | None = None


class ProfileSpec(_Strict):
    seeds: list[int] | None = None
    set: dict[str, Any] = Field(default_factory=dict)
    #: per-curve extra overrides, keyed by curve label (e.g. fewer rounds for one curve)
    curve_set: dict[str, dict[str, Any]] = Field(default_factory=dict)
    #: per-panel extra overrides, keyed by one panel axis value: ``"setting=cnn-mnist"``,
    #: ``"data.partition=case2"`` (applied after ``set``, before ``curve_set``)
    panel_set: dict[str, dict[str, Any]] = Field(default_factory=dict)
    #: the scaling relative to the paper, shown in the figure subtitle
    note: str = ""
    #: data set to use when the configured one can be neither found nor downloaded: one name for
    #: every data set, or a map ``{configured: fallback}`` (data sets not in it have none)
    data_fallback: str | dict[str, str] | None = None
    #: a data set that can be neither found, downloaded nor replaced skips its trials (with a
    #: note on the figure) instead of stopping the sweep
    skip_missing_data: bool = False

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
            unknown_cells = sorted(set(prof.panel_set) - axis_values)
            if unknown_cells:
                raise ValueError(
                    f"profiles.{name}.panel_set: unknown panel value(s) {unknown_cells}; "
                    f"allowed: {sorted(axis_values)}"
                )
        if isinstance(self.curves, CurveGrid) and not self.curves.values:
            raise ValueError(f"curves.values for {self.curves.key}: empty list")
        if isinstance(self.curves, list) and not self.curves:
            raise ValueError("curves: empty list")
        if not self.seeds:
            raise ValueError("seeds: empty list")
        missing = [p for p in PROFILES if p not in self.profiles]
        unknown = [p for p in self.profiles if p not in PROFILES]
        if missing or unknown:
            raise ValueError(
                f"profiles must be exactly {PROFILES}; missing {missing}, unknown {unknown}"
            )
        return self

    def panel_cells(self) -> list[PanelCell]:
        """The panel grid in order (cartesian product of the axes), with overrides and labels."""
        keys = list(self.panels)
        cells = []
        for values in itertools.product(*(self.panels[k] for k in keys)):
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
        grid = self.curves
        colors = grid.colors or [None] * len(grid.values)
        return [
            CurveSpec(
                label=grid.label.format(key=grid.key.split(".")[-1], value=v),
                set={grid.key: v},
                color=c,
            )
            for v, c in zip(grid.values, colors, strict=False)
        ]


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

    @property
    def panel_id(self) -> str:
        return panel_id(self.panel)

    @property
    def trial_id(self) -> str:
        return f"{self.figure}|{self.profile}|{self.panel_id}|{self.curve}|seed={self.seed}"


def config_hash(config: RunConfig) -> str:
    """Stable hash of everything in a config that can change its numbers.

    Only values that differ from the schema defaults enter the hash, so adding a new config
    field (with a default that keeps the old behaviour) does not orphan finished runs.
    """
    tree = config.model_dump(mode="json", exclude_defaults=True)
    for key in HASH_EXCLUDED:
        node, *rest = key.split(".")
        if rest:
            tree.get(node, {}).pop(rest[0], None)
            if tree.get(node) == {}:
                tree.pop(node)
        else:
            tree.pop(node, None)
    text = json.dumps(tree, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def load_spec(path: str | Path) -> SweepSpec:
    path = Path(path)
    if not path.is_file():
        raise SpecError(f"sweep spec not found: {path}")
    tree = yaml.safe_load(path.read_text()) or {}
    try:
        spec = SweepSpec.model_validate(tree)
    except ValidationError as err:
        lines = [f"invalid sweep spec {path}:"]
        for e in err.errors():
            key = ".".join(str(p) for p in e["loc"])
            msg = "unknown key (typo?)" if e["type"] == "extra_forbidden" else e["msg"]
            lines.append(f"  key `{key}`: {msg}" if key else f"  {msg}")
        raise SpecError("\n".join(lines)) from None
    spec._path = path  # type: ignore[attr-defined]
    for profile in PROFILES:  # validates every key of every profile against the run schema
        expand(spec, profile, source=str(path))
    return spec


def expand(
    spec: SweepSpec,
    profile: str,
    *,
    source: str | None = None,
    extra: dict[str, Any] | None = None,
    substitute: dict[str, str] | None = None,
) -> list[Trial]:
    """All trials of ``spec`` under ``profile``: panels x curves x seeds, validated.

    ``substitute`` maps configured data set names to the ones to run on instead (the profile's
    ``data_fallback`` after the driver found a data set missing); it is applied last.
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
    for cell in spec.panel_cells():
        panel_set: dict[str, Any] = {}
        for key, value in cell.pairs:
            panel_set.update(prof.panel_set.get(f"{key}={value}", {}))
        for curve in spec.curve_list():
            for seed in seeds:
                layers = [
                    ("panels", cell.overrides),
                    (f"curve {curve.label!r}", curve.set),
                    (f"profiles.{profile}.set", prof.set),
                    (f"profiles.{profile}.panel_set", panel_set),
                    (f"profiles.{profile}.curve_set", prof.curve_set.get(curve.label, {})),
                    ("--set", extra or {}),
                ]
                cfg = _build(spec, source, layers, seed, substitute or {})
                trials.append(
                    Trial(
                        spec.figure, profile, cell.pairs, curve.label, seed, cfg, config_hash(cfg)
                    )
                )
    return trials


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
        return build_config(tree, source=source)
    except ConfigError as err:
        raise SpecError(str(err)) from None


def spec_paths(folder: str | Path = "sweeps") -> list[Path]:
    return sorted(Path(folder).glob("*.yaml"))
