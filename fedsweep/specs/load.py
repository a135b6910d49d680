"""Sweep specs (``sweeps/*.yaml``): one per figure id of docs/figures.md.

A spec is a base run config, a grid of **panels** (cartesian product of its axes), a list of
**curves** (named override sets, one curve per value of a key, or product grids), the
**seeds**, and per-**profile** overrides (``paper``, ``quick``, ``smoke``; a profile may also
run a subset of the curves, ``curves: [label, ...]`` or ``grid: {key: [values]}`` (product
grids below), and name the ``target_acc`` a rounds-to-target figure counts to). A panel axis is either a dotted
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
sets ``figure: <id>``: then its error is the answer, unless exactly one other file of the folder
is a valid spec of that id (the broken one is then skipped with one warning). A local spec of a
shipped figure id whose text differs from the shipped spec's shadows it, with a one-line warning
(``extends`` and ``find_spec`` alike). An extended spec that is invalid on its own
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

A string in ``derive.set`` names a derivation of ``fedsweep.specs.derivations.DERIVATIONS``
(``mean_tau``, ``total_steps``), computed from the source trial's finished run; numbers and
booleans are set as they are. The derived layer comes after ``profiles.<p>.curve_set`` and
before ``--set`` (a profile's ``train.rounds`` does not undo a derived ``train.rounds: 1``).
The source must be a curve of the spec (run by every profile that runs the derived curve) and
not itself derived. The sweep runs the source trials first, then the derived ones (two Ray
experiments, one MLflow parent run); until then ``expand`` lists a derived trial with
placeholder values (``Trial.unresolved``, a config hash that matches no run), so counts and
key validation work before anything ran; ``expand(..., derived=...)`` gives the real ones.

Product grids (one curve per combination of several keys' values, e.g. a learning-rate grid):
an item of ``curves`` (or ``curves`` itself) with a ``grid:`` mapping of config keys to lists of
values gives the cartesian product, the first key outermost, in the order of the values::

    curves:
    - label: Centralized                 # ordinary curves and grids mix in one list
      set: {algorithm: centralized}
    - grid:                              # 3 x 2 x 2 = 12 curves
        server_optimizer: [adagrad, adam, yogi]
        train.lr: [0.01, 0.1]
        fedopt.lr: [0.01, 1]
      label: "{server_optimizer} η_l={train.lr}, η_s={fedopt.lr:g}"
      labels:                            # optional: the text of a value in the label
        server_optimizer: {adagrad: FedAdagrad, adam: FedAdam, yogi: FedYogi}
        train.lr: {0.01: 1e-2, 0.1: 1e-1}
      colors:                            # optional: a value's color (first grid key with one)
        server_optimizer: {adagrad: '#1f77b4', adam: '#d62728', yogi: '#2ca02c'}
      set: {algorithm: fedavg}           # optional: shared by every curve of the grid
      color: '#7f7f7f'                   # optional: color/dash/flat of every curve
                                         # (a ``colors`` value wins over ``color``)

Each curve sets its grid values and the grid's ``set`` (a key may not be in both) and is
labelled by the ``label`` template: ``{key}`` is the key's value (its ``labels`` text when it
has one), ``{key:fmt}`` the value in Python's format ``fmt`` (``{fedopt.lr:g}``), ``{{`` and
``}}`` are braces; without ``label``, ``key=value`` for every key, comma-separated. Checked when
the spec loads (a ``SpecError`` naming the field, e.g. ``curves[1].label``): a template key that
is not a grid key, a key with no values (an empty product), a repeated value, ``labels`` and
``colors`` of keys or values not in the grid, and labels that repeat. A grid's curves are
ordinary curves everywhere else (``profiles.<p>.curves``, ``curve_set``, ``derive.from`` name
them by label; ``curve_list()`` lists them). ``profiles.<p>.grid: {train.lr: [0.1]}`` runs only
the grid curves with those values (keys and values of the spec's grids; keys a grid lacks, and
curves of no grid, are kept). YAML anchors share value lists between grids (``train.lr: &rates
[0.01, 0.1]``, then ``fedopt.lr: *rates``; sweeps/intro-fedopt.yaml). The one-key form
``curves: {key, values, label: "B={value}", colors: [...]}`` stays as it was.
"""

from __future__ import annotations

import json
import typing
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from fedsweep.config.hashing import (  # noqa: F401  (HASH_EXCLUDED, legacy_config_hash re-exported)
    HASH_EXCLUDED,
    UNREAD_SETTINGS,
    config_hash,
    drop_unused,
    legacy_config_hash,
    setting_value,
)
from fedsweep.config.load import ConfigError, blame_overrides, build_config, set_dotted
from fedsweep.config.schema import DataConfig
from fedsweep.core.suggest import closest
from fedsweep.specs.curves import (  # noqa: F401  (the spec's types, re-exported)
    CurveGrid,
    CurveProduct,
    CurveSpec,
    DeriveSpec,
)
from fedsweep.specs.derivations import PLACEHOLDER, UNRESOLVED, Resolution
from fedsweep.specs.extends import (  # noqa: F401  (re-exported)
    SPEC_MARKERS,
    SWEEPS_DIRS,
    resolve_extends,
    shadow_warning,
    spec_exists,
    spec_tree,
    sweep_spec_keys,
)
from fedsweep.specs.model import (  # noqa: F401  (the spec's types, re-exported)
    PROFILES,
    PanelCell,
    PanelChoice,
    ProfileSpec,
    Resources,
    SpecError,
    SweepSpec,
    Trial,
    figure_id_problem,
    panel_id,
)
from fedsweep.specs.names import (  # noqa: F401  (re-exported)
    find_spec_file,
    looks_like_path,
    name_problem,
    spec_paths,
    sweeps_home,
)
from fedsweep.specs.search import TUNED, search_label


def _models_in(annotation) -> list[type[BaseModel]]:
    """The pydantic models inside ``annotation`` (``X``, ``list[X]``, ``dict[str, X]``,
    ``X | None``, a tagged union), in order."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in _models_in(arg)]


def _unknown_key(loc: tuple) -> str:
    """ "unknown key; did you mean `curves`? (allowed: ...)" for a key the spec schema lacks."""
    model: type[BaseModel] | None = SweepSpec
    members: list[type[BaseModel]] = []
    for part in loc[:-1]:
        if model is None:
            break
        if isinstance(part, str) and part in model.model_fields:
            members = _models_in(model.model_fields[part].annotation)
            model = members[0] if members else None
        elif isinstance(part, str) and part in {m.__name__ for m in members}:
            model = next(m for m in members if m.__name__ == part)  # a union member's tag
        # list indexes and dict keys (profile names) stay on the same model
    if model is None:
        return "unknown key"
    allowed = [f.alias or name for name, f in model.model_fields.items()]
    if model is SweepSpec and len(loc) == 1:  # a spec's own keys: extends.py takes add_curves
        allowed.insert(allowed.index("curves") + 1, "add_curves")
    best = closest(str(loc[-1]), allowed)
    hint = f"; did you mean `{best}`?" if best else ""
    return f"unknown key{hint} (allowed: {', '.join(allowed)})"


#: the union branches of ``curves`` as pydantic names them in an error's location
_CURVE_TAGS = ("CurveSpec", "CurveProduct", "CurveGrid")


def _curve_errors(errors: list[dict], curves: Any) -> list[dict]:
    """``errors`` without those of the ``curves`` union branch the YAML is not (a list, or a
    grid mapping): a typo in one curve is one error, not one per form ``curves`` may take."""
    want_list = isinstance(curves, list)
    return [
        e
        for e in errors
        if len(e["loc"]) < 2
        or e["loc"][0] != "curves"
        or str(e["loc"][1]).startswith("list[") == want_list
    ]


def _claim_errors(errors: list[dict], claims: Any) -> list[dict]:
    """``errors`` without those of the ``claims`` entry's union branch the YAML is not (a
    declared claim is a mapping, a legacy one a string): a typo in a claim is one error, not
    one per form an entry may take."""
    if not isinstance(claims, list):
        return errors

    def other_form(e: dict) -> bool:
        loc = e["loc"]
        if len(loc) < 3 or loc[0] != "claims" or not isinstance(loc[1], int):
            return False
        if loc[1] >= len(claims):
            return False
        is_text = isinstance(claims[loc[1]], str)
        return loc[2] == ("Claim" if is_text else "str")

    return [e for e in errors if not other_form(e)]


def _shown_loc(loc: tuple) -> tuple:
    """An error's location as the YAML has it: ``curves.1.colr``, without pydantic's names of
    the ``curves`` union branches (``list[...]``, ``CurveProduct``) and of a claim's
    (``Claim``: ``claims.0.kind``)."""
    if len(loc) >= 3 and loc[0] == "claims" and loc[2] in ("Claim", "str"):
        return (*loc[:2], *loc[3:])
    if not loc or loc[0] != "curves":
        return loc
    return tuple(p for p in loc if not (isinstance(p, str) and ("[" in p or p in _CURVE_TAGS)))


def load_spec(path: str | Path) -> SweepSpec:
    """The validated spec of ``path`` (its ``extends`` chain resolved). An error names the file
    it comes from: an extended spec that is invalid on its own is named, not its extension."""
    path = Path(path)
    if not spec_exists(path):
        raise SpecError(f"sweep spec not found: {path}")
    levels: list[tuple[Path, dict[str, Any]]] = []
    tree = spec_tree(path.resolve(), (), levels, load_spec)
    try:
        return _checked_spec(tree, path, str(path))
    except SpecError:
        for where, level in levels[:-1]:  # the extended specs, the first of the chain first
            _checked_spec(level, where, f"{where} (extended by {path})")
        raise


def read_spec(path: str | Path) -> SweepSpec:
    """The spec of ``path`` (its ``extends`` chain resolved) without building its trials:
    :func:`load_spec` builds and checks every trial of every profile, minutes for a grid of
    thousands of curves, so a command counts them first (:func:`trial_count`). An invalid spec
    raises :func:`load_spec`'s error."""
    path = Path(path)
    if not spec_exists(path):
        raise SpecError(f"sweep spec not found: {path}")
    tree = spec_tree(path.resolve(), (), load=load_spec)
    try:
        spec = _spec_model(tree, str(path))
    except SpecError:
        return load_spec(path)  # its error names the extended spec when that one is invalid
    spec._path = path  # type: ignore[attr-defined]
    return spec


def _checked_spec(tree: dict[str, Any], path: Path, source: str) -> SweepSpec:
    """``tree`` as a spec, every key of every profile checked; errors name ``source``."""
    spec = _spec_model(tree, source)
    spec._path = path  # type: ignore[attr-defined]
    for profile in PROFILES:  # validates every key of every profile against the run schema
        expand(spec, profile, source=source)
    check_search_ranges(spec, source)
    for i, reading in enumerate(spec.readings):  # and every reading's overrides (used by a trial)
        try:
            expand(spec, "smoke", source=source, extra=reading.set)
        except SpecError as err:
            raise SpecError(f"{source}: readings[{i}] ({reading.label!r}): {err}") from None
    return spec


def check_search_ranges(spec: SweepSpec, source: str) -> None:
    """Every end of every search range (every choice) is a valid value of its key: one search
    trial per value, in the first panel cell of the smoke profile, built and checked."""
    cells = spec.panel_cells("smoke")
    for curve in spec.profile_curves("smoke"):
        if curve.search is None:
            continue
        points = [
            {key: value}
            for key, rng in curve.search.space.items()
            for value in rng.ends
            if value != rng.placeholder  # the placeholder is checked by the tuned curve
        ]
        if points:
            try:
                expand(
                    spec, "smoke", source=source, search={(cells[0].panel_id, curve.label): points}
                )
            except SpecError as err:
                raise SpecError(f"{err} (curve {curve.label!r}: a value of its search)") from None


def _spec_model(tree: dict[str, Any], source: str) -> SweepSpec:
    """``tree`` as a :class:`SweepSpec` (its trials not built); errors name ``source``."""
    try:
        spec = SweepSpec.model_validate(tree)
    except ValidationError as err:
        lines = [f"invalid sweep spec {source}:"]
        errors = _claim_errors(err.errors(), tree.get("claims"))
        for e in _curve_errors(errors, tree.get("curves")):
            key = ".".join(str(p) for p in _shown_loc(e["loc"]))
            msg = (
                _unknown_key(e["loc"])
                if e["type"] == "extra_forbidden"
                else e["msg"].removeprefix("Value error, ")
            )
            lines.append(f"  key `{key}`: {msg}" if key else f"  {msg}")
        raise SpecError("\n".join(lines)) from None
    return spec


def expand(
    spec: SweepSpec,
    profile: str,
    *,
    source: str | None = None,
    extra: dict[str, Any] | None = None,
    substitute: dict[str, str] | None = None,
    derived: Resolution | None = None,
    panels: dict[str, list[str]] | None = None,
    search: dict[tuple[str, str], list[dict[str, Any]]] | None = None,
) -> list[Trial]:
    """All trials of ``spec`` under ``profile``: panels x curves x seeds, validated.

    With ``search`` (``(panel id, curve label) -> [point, ...]``,
    :mod:`fedsweep.specs.search`), the search trials of those points instead: one per point, at
    the curve's ``search.seed``, the point set where a derived curve's values go (so the tuned
    curve's trial at that seed is the best search trial's run).

    ``panels`` (``fedsweep sweep --panel``: axis -> values, checked by
    :func:`check_panel_filter`) keeps only the panel cells with those axis values.

    ``substitute`` maps configured data set names to the ones to run on instead (the profile's
    ``data_fallback`` after the driver found a data set missing); it is applied last.
    ``derived`` maps a derived trial's ``(panel id, curve label, seed)`` to its derived values
    and source run ids (``fedsweep.specs.derive.resolve``); derived trials not in it get
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
    if panels:
        check_panel_filter(spec, profile, panels, source)
    check_fixed_keys(spec, profile, extra or {}, source)
    for cell in spec.panel_cells(profile, only=panels):
        panel_set: dict[str, Any] = {}
        cell_seeds = _cell_seeds(prof, cell, seeds)
        for key, value in cell.pairs:
            panel_set.update(prof.panel_set.get(f"{key}={value}", {}))
        for curve in spec.profile_curves(profile):
            runs_of_curve: list[tuple[int, dict[str, Any] | None]] = [(s, None) for s in cell_seeds]
            if search is not None:
                points = search.get((cell.panel_id, curve.label)) or []
                seed0 = curve.search.seed if curve.search is not None else 0
                runs_of_curve = [(seed0, point) for point in points]
            for index, (seed, point) in enumerate(runs_of_curve):
                if point is not None:
                    values, runs = dict(point), []
                else:
                    values, runs = _derived_layer(
                        spec, curve, (cell.panel_id, curve.label, seed), derived
                    )
                layers = [
                    ("panels", cell.overrides),
                    (f"curve {curve.label!r}", curve.set),
                    (f"profiles.{profile}.set", prof.set),
                    (f"profiles.{profile}.panel_set", panel_set),
                    (f"profiles.{profile}.curve_set", prof.curve_set.get(curve.label, {})),
                    (
                        f"curve {curve.label!r}: "
                        + ("search point" if point is not None else "derive.set"),
                        values,
                    ),
                    ("--set", extra or {}),
                ]
                full = _build(spec, source, layers, seed, substitute or {})
                # a section of the shared base that this curve's components do not read is
                # dropped (it cannot change the run); runs hashed with it are still found
                cfg = drop_unused(full)
                digest = config_hash(cfg)  # an ordinary trial: exactly as before derived curves
                legacy = legacy_config_hash(full)
                legacy = None if legacy == digest else legacy
                if curve.derive is not None and not runs and point is None:
                    digest = UNRESOLVED + digest
                    legacy = None
                trials.append(
                    Trial(
                        spec.figure,
                        profile,
                        cell.pairs,
                        curve.label if point is None else search_label(curve.label, index),
                        seed,
                        cfg,
                        digest,
                        cell.label,
                        derive=curve.derive if point is None else None,
                        derived_from=tuple(runs),
                        derived_set=tuple(values.items()),
                        legacy_hash=legacy,
                        search_point=() if point is None else tuple(point.items()),
                        search_of=None if point is None else curve.label,
                    )
                )
    _check_extra_used(source, extra or {}, trials)
    return trials


def _cell_seeds(prof: ProfileSpec, cell: PanelCell, seeds: list[int]) -> list[int]:
    """The seeds a panel cell runs: its ``panel_seeds`` (the first axis' win), else ``seeds``."""
    for key, value in reversed(cell.pairs):
        seeds = prof.panel_seeds.get(f"{key}={value}", seeds)
    return seeds


def trial_count(spec: SweepSpec, profile: str, panels: dict[str, list[str]] | None = None) -> int:
    """How many trials ``expand(spec, profile, panels=panels)`` gives, without building one:
    a grid of thousands of curves takes minutes to expand, so a command says the count (and
    asks before going on, ``fedsweep sweep --yes``) first."""
    prof = spec.profiles[profile]
    seeds = prof.seeds if prof.seeds is not None else spec.seeds
    curves = len(spec.profile_curves(profile))
    cells = spec.panel_cells(profile, only=panels)
    return sum(curves * len(_cell_seeds(prof, cell, seeds)) for cell in cells)


def overlaps(a: str, b: str) -> bool:
    """``data.partition`` and ``data.partition`` or ``data``: one key sets the other. A
    component's setting written under its slot (``server_optimizer.lr``, the chosen
    component's ``fedopt.lr``) does not set the slot's choice (``server_optimizer``)."""
    from fedsweep.core.registry import SLOTS

    if a == b:
        return True
    short, long = sorted((a, b), key=len)
    return long.startswith(short + ".") and short not in SLOTS


def key_setters(spec: SweepSpec, profile: str, key: str) -> tuple[list[str], list[str]]:
    """What of ``spec`` (under ``profile``) sets ``key`` (or a key inside it, or the section
    holding it) per panel or per curve: ``(panel axes, curve labels)``. These are the
    settings the figure compares: one value for all of them erases the comparison."""
    axes = [
        axis
        for axis, values in spec.panels.items()
        if any(
            overlaps(key, k)
            for v in values
            for k in (v.set if isinstance(v, PanelChoice) else {axis: v})
        )
    ]
    curves = [
        c.label
        for c in spec.profile_curves(profile)
        if any(overlaps(key, k) for k in (*c.set, *(c.derive.set if c.derive else ())))
    ]
    return axes, curves


def check_fixed_keys(spec: SweepSpec, profile: str, extra: dict[str, Any], source: str) -> None:
    """A ``--set`` key that the figure's panels or curves set (:func:`key_setters`) is refused:
    it would run (and draw) every curve at the one value, each under its own label (Fig. 4e's
    Case 1 and Case 3 curves, all at ``data.partition=case2``)."""
    for key, value in extra.items():
        axes, curves = key_setters(spec, profile, key)
        if not axes and not curves:
            continue
        who = [f"panel axis {a}" for a in axes]
        if curves:
            who.append(("curve " if len(curves) == 1 else "curves ") + ", ".join(map(repr, curves)))
        raise SpecError(
            f"{source}: --set {key}={value}: {spec.figure} varies {key} by its "
            f"{' and '.join(who)}: one value for all of them would draw every curve at "
            f"{key}={value} under its own label. Leave it out, or write a spec of your own "
            f"(extends: {spec.figure}) whose curves set it"
        )


def parse_panel_filter(items: list[str] | None) -> dict[str, list[str]]:
    """``["setting=svm-mnist", "data.partition=case1,case2"]`` -> ``{axis: [values]}``
    (repeated axes add values). Raises :class:`SpecError` for an item without ``=``."""
    out: dict[str, list[str]] = {}
    for item in items or []:
        key, sep, values = item.partition("=")
        key = key.strip()
        vals = [v.strip() for v in values.split(",") if v.strip()]
        if not sep or not key or not vals:
            raise SpecError(
                f"--panel: got {item!r} (allowed: AXIS=ID[,ID...], e.g. --panel setting=svm-mnist)"
            )
        out.setdefault(key, [])
        out[key] += [v for v in vals if v not in out[key]]
    return out


def check_panel_filter(
    spec: SweepSpec, profile: str, panels: dict[str, list[str]], source: str | None = None
) -> None:
    """Every axis of ``panels`` is a panel axis of ``spec`` and every value one of its values
    (the choice ids, or the values themselves) that ``profile`` runs; else :class:`SpecError`
    naming the bad axis or value and the allowed ones."""
    from fedsweep.specs.model import axis_value

    source = source or str(getattr(spec, "_path", spec.figure))
    axes = list(spec.panels)
    for key, values in panels.items():
        if key not in spec.panels:
            hint = closest(key, axes)
            allowed = ", ".join(axes) if axes else "none (this figure has one panel)"
            raise SpecError(
                f"{source}: --panel {key}=...: {spec.figure} has no panel axis {key!r}"
                + (f" (did you mean {hint!r}?)" if hint else "")
                + f"; its panel axes: {allowed}"
            )
        known = [str(axis_value(v)) for v in spec.panels[key]]
        for value in values:
            if value not in known:
                hint = closest(value, known)
                raise SpecError(
                    f"{source}: --panel {key}={value}: not a value of {spec.figure}'s panel axis "
                    f"{key!r}"
                    + (f" (did you mean {hint!r}?)" if hint else "")
                    + f"; allowed: {', '.join(known)}"
                )
    if not spec.panel_cells(profile, only=panels):
        raise SpecError(
            f"{source}: --panel {panel_filter_text(panels)}: no panel of {spec.figure} that the "
            f"{profile} profile runs has these values"
        )


def panel_filter_text(panels: dict[str, list[str]] | None) -> str:
    """``"setting=svm-mnist data.partition=case1,case2"`` ("" without a filter): the
    ``--panel`` options as typed, for the console, the parent run's tag and the figures."""
    return " ".join(f"{k}={','.join(map(str, v))}" for k, v in (panels or {}).items())


def _check_extra_used(source: str, extra: dict[str, Any], trials: list[Trial]) -> None:
    """A ``--set`` value for a section that no trial's components read cannot change any run:
    refused (a section some trials read is dropped for the others)."""
    from fedsweep.components.compose import (
        GENERAL_SECTIONS,
        config_sections,
        readers_text,
        section_readers,
    )

    if not trials:
        return
    used = {s for t in trials for s in config_sections(t.config)}
    for key in extra:
        if key in UNREAD_SETTINGS:
            choice, readers = UNREAD_SETTINGS[key]
            if not any(setting_value(t.config, choice) in readers for t in trials):
                raise SpecError(
                    f"{source}: --set {key}: no trial of this sweep reads it (read only with "
                    f"{choice} {' or '.join(readers)}): it cannot change any run. Remove it, or "
                    f"set {choice}"
                )
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
    spec: SweepSpec, curve: CurveSpec, key: tuple[str, str, int], derived: Resolution | None
) -> tuple[dict[str, Any], list[str]]:
    """A trial's derived overrides and source run ids: the resolved ones, else placeholders
    (``PLACEHOLDER`` for each derivation, literals as they are) and no run ids."""
    if curve.derive is None:
        return {}, []
    if derived is not None and key in derived:
        values, runs = derived[key]
        return dict(values), list(runs)
    space = {}
    if curve.derive.tuned:  # a tuned value's placeholder: a value of its search range
        source = next(c for c in spec.curve_list() if c.label == curve.derive.from_)
        space = source.search.space if source.search is not None else {}
    placeholders = {
        k: (space[k].placeholder if v == TUNED and k in space else PLACEHOLDER)
        if isinstance(v, str)
        else v
        for k, v in curve.derive.set.items()
    }
    return placeholders, []


def _build(spec: SweepSpec, source: str, layers, seed: int, substitute: dict[str, str]):
    tree = json.loads(json.dumps(spec.base))  # deep copy
    for where, overrides in layers:
        if "seed" in overrides:  # the trial's seed is set below: this value was dropped unseen
            raise SpecError(
                f"{source}: {where}: seed={overrides['seed']!r}: a trial's seed comes from the "
                "seeds (the spec's or profile's seeds, --seeds), never from a curve, panel or "
                "--set (it was replaced by the trial's seed, so its runs carried another seed "
                "than their label); remove it"
            )
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
        raise SpecError(_blame_set(str(err), source, dict(layers).get("--set", {}))) from None


def _blame_set(text: str, source: str, sets: dict[str, Any]) -> str:
    """A trial's config error headed as a ``--set`` problem where ``--set`` made it
    (:func:`fedsweep.config.load.blame_overrides`)."""
    header = f"invalid --set (applied to every trial of {source}):"
    return blame_overrides(text, source, sets, header)


def find_spec(name: str | Path, sweeps_dir: str | Path = "sweeps") -> Path:
    """The spec file a command's figure argument names: a figure id (``bherd-fig3a``, the
    stem of ``<sweeps_dir>/<id>.yaml``) or a spec file's path. Every command that takes a figure
    resolves it here, so ``sweep``, ``figures``, ``runs``, ``compare``, ``report`` and
    ``robustness`` accept the same names; an unknown one is a :class:`SpecError` with the
    nearest id or file name (:func:`fedsweep.specs.names.name_problem`, which the commands
    also ask before their heavy imports)."""
    text = str(name)
    path = Path(text)
    if path.is_file():
        return path
    problem = name_problem(text, sweeps_dir)
    if problem:
        raise SpecError(problem)
    candidate = find_spec_file(text, sweeps_dir)
    if not looks_like_path(text):
        shadow_warning(candidate, text, f"FIGURE {text}")
    return candidate
