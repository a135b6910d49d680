"""Claims as declared data (issue 50): what a figure claims, typed, checked before anything runs.

A spec's ``claims:`` holds the claims its figure judges, each a mapping (a :class:`Claim`); prose
(a plain string) is refused when the spec loads: nothing could judge it.

A declared claim says *what* it compares and *how* it is decided, never in Python::

    - id: alpha04-faster                     # a slug: the claim's row in the report
      text: α=0.4 converges faster than α=0.5 # the paper's (or your) words
      where: my notes, §2                     # where they stand
      kind: faster                            # one of KINDS
      measure: loss_auc                       # a registered measure (fedsweep.judge.measures)
      curve: α=0.4                            # the claimed side: a label, or {set: {...}}
      versus: α=0.5                           # the other side
      margin: 0.05                            # the practical margin (>= 0; its side: holds)

The kinds (:data:`KINDS`) and what their effect is, per seed (the judge:
:mod:`fedsweep.judge`):

* ``faster``: the relative (or absolute, by the measure) reduction of a lower-is-better measure
  of ``curve`` against ``versus`` (loss AUC, rounds to a target);
* ``higher``: ``curve − versus`` of the measure (final / best accuracy, ...);
* ``equivalent``: ``curve − versus``, holding when ``|effect| ≤ margin``;
* ``first``: the margin by which the best of ``curve`` beats the best of ``versus`` (a ranking);
* ``monotone``: each step up the config key ``over`` beats the step below by the margin;
* ``interior_optimum``: the best inner point of the grid ``over`` beats both ends;
* ``bound``: the measure itself (of ``curve`` or of the panel, after round ``after``) stays
  above (or below) the line ``margin``.

``holds`` is the margin's side: ``above`` (the default: the effect must exceed the margin),
``below`` ("little or no gain": the effect stays under it) or ``within`` (``equivalent``). A
comparison kind's margin is never negative (the effect is already the claimed side's advantage),
except with ``holds: below``: a margin of −0.05 there says the claimed side is *worse* by more
than 5% ("the leash slows training early").
Named guards (``fedsweep.judge.measures``) qualify a verdict: ``leave_out`` leaves a panel out,
``inconclusive_if`` makes any verdict inconclusive (the claim holds by construction),
``vacuous_if`` only a supported one (it could not have failed: e.g. three methods overlap in
Case 1 and in every other panel too).
``blocked_if`` names guards asked per part (with the part's curves): a reason makes that part
inconclusive whatever its interval (a grid whose chosen point lies on its edge), the other
parts still decide. A part whose two sides are the same computation (identical typed configs,
identical runs on every seed and round, or a ``degenerate_if`` guard's reason: FedNova with
equal local steps is FedAvg) is *degenerate*: named in the report, not counted.
``and`` adds further comparisons the claim needs (each with its own kind, measure, margin; its
curves default to the claim's): the claim holds where all of them hold.

Curves are named by their label or by the typed config overrides they set (``{set:
{bherd.alpha: 0.3}}``; ``{sets: train.batch_size}``: every curve that sets the key; ``{others:
true}``: every curve not on the other side; ``unset: [hooks]`` beside any of them: only the
curves that set none of these keys), never by a YAML string. Panels are named ``axis=value``
(``data.partition=case3``) or by a config value the panel sets (``model.name=svm``). ``best: true`` on a side
takes, in each panel, only the one curve of those it names with the best seed mean of the
comparison's measure (a learning-rate grid's best point; a curve with a failed seed there is
no candidate, spec order breaks ties); a claimed ``best`` side without a candidate in a panel
is an inconclusive part ("no curve with data").

Tuned comparisons (``tune: {over: [train.lr, lr_step.gamma], by: best_acc}``): each side's
curves whose typed configs differ only in the keys ``over`` are one method's grid; in each
panel the comparison reads the grid point with the best seed mean of the measure ``by`` (points
with a failed seed or without runs are no candidates; a tie: the first in spec order), and a
chosen point on the edge of its grid (the smallest or largest value of ``over[0]`` among the
points with runs) makes the part inconclusive ("grid not converged: widen it"), its numbers
still shown. With ``interior_optimum``, ``tune`` chooses the inner point on the seed means of
``by`` (a choice of configuration) and compares it with each end, one part each. ``pair: KEY``
pairs the curves of both sides with the same value of that config key (``leash.task``), and
``absent: inconclusive`` makes a pair without runs of both (a side without a chosen point), or
a side's named curve the figure lacks, an inconclusive part where another pair in the panel has
runs (default ``no_data``: the panel has no data). ``contrast_below: largest`` compares the ``above`` panels with the largest effect
among the ``below`` panels, per seed ("the gain is largest at Dir(0.1)": a ranking across
panels) instead of their mean.

A claim's words can admit a second reading on the same runs (BHerd's "optimal B": the lowest
final loss, or the fastest convergence). A comparison under ``and`` with ``reading: speed`` is
that reading: judged per panel like the others but never deciding, shown after the verdict's
numbers as ``speed reading (loss_auc; shown, not deciding): Case 1 B=10 first by effect ... →
would be supported``; the report says when it would give another verdict.

:func:`claim_problems` checks a claim against its spec (curves, panels, kinds, margins, a curve
compared with itself) when the spec loads; the measure names are checked against the judge's
registry by ``fedsweep.judge.check.claim_problem`` before a sweep or a report runs. A comparison
whose two sides are the same computation (identical typed configs) is reported "degenerate" by
the judge, not judged.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from fedsweep.core.suggest import did_you_mean
from fedsweep.specs.curves import CurveSpec, Strict, same_value

KINDS = ("faster", "higher", "equivalent", "first", "monotone", "interior_optimum", "bound")
Kind = Literal["faster", "higher", "equivalent", "first", "monotone", "interior_optimum", "bound"]
Holds = Literal["above", "below", "within"]
#: what a seed of a curve that diverged (or whose loss blew up) counts as: ``untestable`` (the
#: claim is then not testable, the default), ``last`` (it ranks last on that seed: a rival that
#: failed is no faster than any other), ``chance`` (its accuracy is chance: the failure is the
#: claim's evidence)
Failed = Literal["untestable", "last", "chance"]
REGIMES = ("paper", "reconstructed", "truncated", "scaled")
CLAIM_ID = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
#: the most claims one spec declares: each is judged per panel and regime, and ten thousand of
#: them ran for tens of minutes with no output (issue 62)
MAX_CLAIMS = 200


@dataclass(frozen=True)
class Needs:
    """What a measure needs beyond a curve's runs, checked before a sweep or a report starts
    (:func:`profile_claim_problem`): ``target``: the profile's ``target_acc`` (rounds to it);
    ``train_metrics``: the runs log the training set's loss and accuracy
    (``eval.train_metrics``, on by default), which the measure reads."""

    target: bool = False
    train_metrics: bool = False


#: measure name -> what it needs (:class:`Needs`); a measure not named needs nothing more. The
#: judge's registry (``fedsweep.judge.measures``) registers the functions and reads a measure's needs
#: here, so a sweep checks them without importing the judge; a paper's own measure declares its
#: needs when it registers (``measure(..., needs=...)`` adds it here).
MEASURE_NEEDS: dict[str, Needs] = {
    "rounds_to_target": Needs(target=True),
    "log2_speedup": Needs(target=True),
}


def _finite(value: float | None, what: str) -> float | None:
    if value is not None and not math.isfinite(value):
        raise ValueError(f"{what} {value!r} is not a finite number; allowed: a finite number")
    return value


class CurveRef(Strict):
    """One side's curve(s): a label (a plain string in YAML), the curves whose overrides set
    every key of ``set`` to its value, every curve that sets ``sets``, or every curve not on the
    other side (``others``)."""

    curve: str | None = None
    set: dict[str, Any] | None = None
    sets: str | None = None
    others: bool = False
    #: only the curves that set none of these keys (``{others: true, unset: [hooks]}``)
    unset: list[str] = Field(default_factory=list)
    failed: Failed = "untestable"
    #: per panel only the best of the named curves (by the comparison's measure, seed mean)
    best: bool = False

    @model_validator(mode="before")
    @classmethod
    def _label(cls, value: Any) -> Any:
        return {"curve": value} if isinstance(value, str) else value

    @model_validator(mode="after")
    def _one(self) -> CurveRef:
        given = [self.curve is not None, self.set is not None, self.sets is not None, self.others]
        if sum(given) != 1:
            raise ValueError(
                "a curve reference is one of: a label, {set: {key: value}}, {sets: key}, "
                "{others: true}"
            )
        return self

    def text(self) -> str:
        if self.curve is not None:
            return repr(self.curve)
        unset = f", unset: {self.unset}" if self.unset else ""
        if self.set is not None:
            text = "{set: " + ", ".join(f"{k}={v}" for k, v in self.set.items()) + unset + "}"
        else:
            text = f"{{sets: {self.sets}{unset}}}" if self.sets is not None else "{others: true}"
        return f"the best of {text}" if self.best else text

    def admits(self, curve: CurveSpec) -> bool:
        """Whether ``curve`` sets none of the keys ``unset`` names."""
        return not any(k in curve.set for k in self.unset)

    def matches(self, curve: CurveSpec) -> bool:
        """Whether ``curve`` is one this reference names (``others`` names none by itself)."""
        if not self.admits(curve):
            return False
        if self.curve is not None:
            return curve.label == self.curve
        if self.set is not None:
            return all(
                k in curve.set and same_setting(curve.set[k], v) for k, v in self.set.items()
            )
        return self.sets is not None and self.sets in curve.set


def resolve(refs: Sequence[CurveRef], curves: Sequence[CurveSpec], exclude=()) -> list[str]:
    """The labels ``refs`` name among ``curves`` (spec order; ``others``: every curve), each
    once, none of ``exclude`` (the other side's)."""
    return [
        c.label
        for c in curves
        if c.label not in exclude and any((r.others and r.admits(c)) or r.matches(c) for r in refs)
    ]


def _number(value: Any) -> Any:
    """A number written as YAML 1.1 leaves it, a string (``1e-4``: no dot), read as the config
    reads it (a float); any other value as it is."""
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return value
    return value


def same_setting(a: Any, b: Any) -> bool:
    """Whether a curve's override ``a`` is the claim's value ``b`` as the typed config reads
    them: numbers to float precision (``1e-4``, a string in YAML, is 0.0001), a boolean only a
    boolean, anything else equal (the judge checks the typed configs themselves)."""
    if (
        isinstance(a, int | float)
        and isinstance(b, str)
        or isinstance(b, int | float)
        and isinstance(a, str)
    ):
        a, b = _number(a), _number(b)
    if isinstance(a, int | float) and isinstance(b, int | float):
        if isinstance(a, bool) or isinstance(b, bool):
            return same_value(a, b)
        return abs(float(a) - float(b)) <= 1e-9 * max(1.0, abs(float(a)), abs(float(b)))
    return same_value(a, b)


def _refs(value: Any) -> Any:
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


class Tune(Strict):
    """A tuned comparison (the module's docstring): the keys a method's grid varies, the first
    one deciding its edge, and the measure whose best seed mean chooses the point."""

    over: list[str] = Field(default_factory=list)
    by: str = Field(min_length=1)


class Comparison(Strict):
    """One decided comparison of a claim: the kind, the measure, the two sides and the margin."""

    model_config = Strict.model_config | {"populate_by_name": True}

    kind: Kind
    measure: str = Field(min_length=1)
    #: the claimed side (``first``: the curves of which the best must rank first)
    curve: list[CurveRef] = Field(default_factory=list)
    #: the other side (``first``: the rivals)
    versus: list[CurveRef] = Field(default_factory=list)
    #: ``monotone`` / ``interior_optimum``: the config key whose values order the curves
    over: str | None = None
    margin: float
    #: the margin's side; None: the kind's (``within`` for ``equivalent``, else ``above``)
    holds: Holds | None = None
    #: ``holds: above`` only: the effect below which the claim fails, when not the margin
    #: itself (None): ``fails_below: -0.01`` with ``margin: 0.01`` makes "first" hold above
    #: +0.01, fail below −0.01 (a rival ahead by a margin that matters) and leaves a practical
    #: tie between the two inconclusive
    fails_below: float | None = None
    #: per panel value (``data.partition=case1``) the claimed curve(s) there, instead of ``curve``
    by_panel: dict[str, list[CurveRef]] = Field(default_factory=dict)
    #: pair the curves of both sides whose typed configs differ only in the keys the sides set
    #: (``{set: {train.order: rr}}`` against ``{set: {train.order: fixed}}``), or (a config
    #: key) those with the same value of that key: one part per pair
    pair: bool | str = False
    #: each side's curves differing only in ``tune.over`` are one grid, read at its best point
    tune: Tune | None = None
    #: a pair without runs of both in a panel where another pair has them: ``no_data`` (the
    #: panel has none) or an ``inconclusive`` part
    absent: Literal["no_data", "inconclusive"] = "no_data"
    #: the effect is the mean over the ``above`` panels minus the mean over the ``below`` panels
    #: (per seed): "helps most on the SVM", judged once over the figure
    contrast: dict[Literal["above", "below"], list[str]] | None = None
    #: how the ``below`` panels of ``contrast`` combine per seed: their mean or the largest
    contrast_below: Literal["mean", "largest"] = "mean"
    #: the name of the comparison in the numbers (e.g. "loss AUC")
    name: str = ""
    #: named guards asked per part (its curves): a reason makes that part inconclusive
    blocked_if: list[str] = Field(default_factory=list)
    #: named guards asked per part (its curves): a reason says the part's two sides compute
    #: the same thing (FedNova with equal local steps is FedAvg): the part is named in the
    #: report's ``degenerate`` list and not counted (identical configs and identical runs are
    #: found without a guard)
    degenerate_if: list[str] = Field(default_factory=list)
    #: under ``and``: a second reading of the claim's words, named (``speed``): judged per panel
    #: and shown beside the verdict in its numbers, never deciding ("" : a deciding comparison)
    reading: str = Field("", pattern=r"^\w*$")

    @field_validator("kind", mode="before")
    @classmethod
    def _kind(cls, value: Any) -> Any:
        if isinstance(value, str) and value not in KINDS:
            raise ValueError(
                f"unknown kind {value!r}{did_you_mean(value, KINDS)}; allowed: {', '.join(KINDS)}"
            )
        return value

    @field_validator("margin", "fails_below")
    @classmethod
    def _finite_margin(cls, value: float | None, info: ValidationInfo) -> float | None:
        return _finite(value, info.field_name)

    @field_validator("curve", "versus", mode="before")
    @classmethod
    def _listed(cls, value: Any) -> Any:
        return _refs(value)

    @field_validator("by_panel", mode="before")
    @classmethod
    def _listed_panels(cls, value: Any) -> Any:
        return {k: _refs(v) for k, v in value.items()} if isinstance(value, dict) else value

    @property
    def side(self) -> Holds:
        if self.holds is not None:
            return self.holds
        return "within" if self.kind == "equivalent" else "above"


class PaperEffect(Strict):
    """The paper's own effect for a claim (issue 51, item 8), beside ours in the report:
    ``value`` in the claim's measure and units (None: the paper gives no number, only words or
    a figure), ``text`` (what it says or shows), ``source`` (where: section, table, figure) and
    whether ``comparable`` (the same measure and units as ours, so ours / the paper's is a
    meaningful ratio; e.g. not when our profile runs another model)."""

    value: float | None = None
    text: str = Field(min_length=1)
    source: str = Field(min_length=1)
    comparable: bool = True

    @field_validator("value")
    @classmethod
    def _finite_value(cls, value: float | None) -> float | None:
        return _finite(value, "value")


class Claim(Comparison):
    """A declared claim (the module's docstring): an id, the words, where they stand, one
    comparison (and more under ``and``), the panels it covers, the regimes that can test it,
    the measure's resolution and the fewest seeds that decide."""

    id: str
    text: str = Field(min_length=1)
    where: str = ""
    #: the short form shown in the report's tables; "": ``text``
    summary: str = ""
    #: the panels it covers (``axis=value`` or ``config.key=value``); []: every case panel
    panels: list[str] = Field(default_factory=list)
    #: the regimes whose panels can test it; a panel of another regime: not testable. None:
    #: ``paper`` and ``reconstructed``, and ``truncated`` (the first T of the paper's rounds)
    #: unless a comparison reads a measure about the end of a run (a final or best value, the
    #: plateau: ``fedsweep.judge.measures.regimes_that_test``)
    regimes: list[Literal["paper", "reconstructed", "truncated", "scaled"]] | None = None
    #: judged once over every panel (a comparison across panels: ``contrast``), not per regime
    across_regimes: bool = False
    #: ``equivalent``: the factor must matter somewhere: some other curve setting this key
    #: differs from ``versus`` beyond the margin, else matching it shows nothing (inconclusive)
    factor: str | None = None
    #: ``bound``: the rounds after this one
    after: int = Field(0, ge=0)
    #: the smallest difference the measure can show (1 round for rounds to a target): the margin
    #: decided is at least this; None: continuous
    resolution: float | None = Field(None, gt=0)
    #: the fewest seeds that decide; fewer: inconclusive (issue 51: 3 by default, two identical
    #: seeds give an interval of zero width)
    min_seeds: int = Field(3, ge=1)
    #: issue 51's rules on top of the interval: each part's interval widened to at least ± the
    #: measure's resolution (an accuracy's 1 / test images, a count's 1, or ``resolution``), a
    #: part whose two sides logged identical histories named degenerate, not counted, and a
    #: contradicted part of a claim of several kept only after Holm's correction over them;
    #: false: the judge before them (intervals as computed; identical configs still degenerate)
    strict: bool = True
    #: named guards (``fedsweep.judge.measures``): leave a panel out when one gives a reason
    leave_out: list[str] = Field(default_factory=list)
    #: named guards: the claim holds by construction when one gives a reason (inconclusive)
    inconclusive_if: list[str] = Field(default_factory=list)
    #: named guards: a supported verdict shows nothing when one gives a reason (the claim could
    #: not have failed here): inconclusive; any other verdict stands (both with the reason)
    vacuous_if: list[str] = Field(default_factory=list)
    and_: list[Comparison] = Field(default_factory=list, alias="and")
    #: what the paper itself reports for the claim (None: not recorded)
    paper_effect: PaperEffect | None = None

    @field_validator("resolution")
    @classmethod
    def _finite_resolution(cls, value: float | None) -> float | None:
        return _finite(value, "resolution")

    @field_validator("id")
    @classmethod
    def _slug(cls, value: str) -> str:
        if not CLAIM_ID.match(value):
            raise ValueError(
                f"claim id {value!r} is not a slug: 1-64 lowercase letters, digits, '-' or '_' "
                "(e.g. alpha04-faster)"
            )
        return value

    @property
    def title(self) -> str:
        """The claim as the report's tables show it."""
        return self.summary or self.text

    @property
    def comparisons(self) -> list[Comparison]:
        """This claim's comparison and those under ``and`` (their sides default to the claim's)."""
        out: list[Comparison] = [self]
        for c in self.and_:
            fill = {}
            if not c.curve and not c.by_panel:
                fill["curve"] = self.curve
                fill["by_panel"] = self.by_panel
            if not c.versus:
                fill["versus"] = self.versus
            out.append(c.model_copy(update=fill))
        return out


def claim_texts(claims: Iterable[Claim]) -> list[str]:
    """The claims as the report names them (each one's title)."""
    return [c.title for c in claims]


# ------------------------------------------------------------------------------ checking
def claims_count_problem(entries: Any) -> str | None:
    """Too many claims for one spec (:data:`MAX_CLAIMS`), or a claim written as prose (a
    string: nothing can judge it), checked before each is validated."""
    if isinstance(entries, list) and len(entries) > MAX_CLAIMS:
        return (
            f"{len(entries):,} claims; allowed: at most {MAX_CLAIMS} per spec (each is judged "
            "per panel: split the study into several specs)"
        )
    for i, entry in enumerate(entries if isinstance(entries, list) else []):
        if isinstance(entry, str):
            return (
                f"claims[{i}]: {entry!r} is not a claim fedsweep can judge (prose: nothing "
                "decides it); allowed: a declared claim (docs/how-to/own-claims.md), or "
                "`claims: []` for none"
            )
    return None


def profile_claim_problem(
    claims: Sequence[Claim], profile: str, spec: Any, trials: Any = None
) -> str | None:
    """The first declared claim that cannot be computed on ``profile`` of ``spec`` (its
    :class:`ProfileSpec`): a measure that needs what the profile lacks (:data:`MEASURE_NEEDS`),
    one line naming the claim and the missing field; None when every claim can be.
    ``trials``: a function giving the profile's trials (``fedsweep.specs.load.expand``), asked
    only when a measure needs what their configs say (the training metrics); None: not checked."""
    prof = spec.profiles.get(profile)
    if prof is None:
        return None
    curves: list[CurveSpec] = spec.curve_list() if hasattr(spec, "curve_list") else []
    silent: set[str] | None = None  # the curves whose runs log no training metrics
    for i, claim in enumerate(claims):
        at = f"claims[{i}] ({claim.id})"
        for n, comp in enumerate(claim.comparisons):
            where = at if n == 0 else f"{at}.and[{n - 1}]"
            measures = [("measure", comp.measure)]
            if comp.tune is not None:
                measures.append(("tune.by", comp.tune.by))
            for field, name in measures:
                needs = MEASURE_NEEDS.get(name, Needs())
                if needs.target and prof.target_acc is None:
                    return (
                        f"{where}.{field}: {name!r} counts the rounds to the profile's target "
                        f"accuracy, and profiles.{profile}.target_acc is not set; allowed: set "
                        "it (e.g. target_acc: 0.9) or use another measure"
                    )
                if needs.train_metrics and trials is not None:
                    if silent is None:
                        silent = {t.curve for t in trials() if not t.config.eval.train_metrics}
                    refs = [
                        *comp.curve,
                        *comp.versus,
                        *(r for rs in comp.by_panel.values() for r in rs),
                    ]
                    read = resolve(refs, curves) if curves else []
                    off = [label for label in read if label in silent] or (
                        sorted(silent) if not read else []
                    )
                    if off:
                        return (
                            f"{where}.{field}: {name!r} reads the training set's metrics, and "
                            f"the runs of {off[0]!r} at profile {profile} do not log them "
                            "(eval.train_metrics: false); allowed: eval.train_metrics: true "
                            "(the default) or another measure"
                        )
    return None


def _bad(where: str, value: Any, allowed: Sequence[str], what: str) -> str:
    shown = ", ".join(map(str, allowed[:12])) + (", ..." if len(allowed) > 12 else "")
    return f"{where}: {what} {value!r}{did_you_mean(str(value), allowed)}; allowed: {shown}"


def claim_problems(
    claims: Sequence[Claim], curves: Sequence[CurveSpec], panel_values: Iterable[str]
) -> str | None:
    """The first problem of the declared ``claims`` against the spec's ``curves`` and panel
    values (``axis=value`` and ``config.key=value``), one line naming the field, the bad value
    and the allowed ones; None when there is none."""
    labels = [c.label for c in curves]
    panels = sorted(set(panel_values))
    ids: list[str] = []
    for i, claim in enumerate(claims):
        at = f"claims[{i}] ({claim.id})"
        if claim.id in ids:
            return f"{at}.id: {claim.id!r} is another claim's id too; each claim has its own"
        ids.append(claim.id)
        for value in claim.panels:
            if value not in panels:
                return _bad(f"{at}.panels", value, panels or ["(the spec has no panels)"], "panel")
        for n, comp in enumerate(claim.comparisons):
            where = at if n == 0 else f"{at}.and[{n - 1}]"
            problem = _comparison_problem(comp, where, curves, labels, panels)
            if problem:
                return problem
            if comp.reading and (n == 0 or comp.contrast is not None or claim.contrast):
                return (
                    f"{where}.reading: {comp.reading!r} on "
                    + ("the claim's own comparison" if n == 0 else "a contrast")
                    + "; allowed: a reading under `and` of a claim judged per panel (no contrast)"
                )
        if claim.factor is not None and not any(claim.factor in c.set for c in curves):
            keys = sorted({k for c in curves for k in c.set})
            return _bad(f"{at}.factor", claim.factor, keys, "no curve sets the key")
    return None


def _comparison_problem(
    comp: Comparison, where: str, curves: Sequence[CurveSpec], labels: list[str], panels: list[str]
) -> str | None:
    if comp.side == "within" and comp.kind != "equivalent":
        return (
            f"{where}.holds: 'within' is the side of kind 'equivalent' only; allowed: above, below"
        )
    if comp.kind == "equivalent" and comp.side != "within":
        return f"{where}.holds: {comp.side!r} for kind 'equivalent'; allowed: within"
    if comp.fails_below is not None and (comp.side != "above" or comp.fails_below > comp.margin):
        return (
            f"{where}.fails_below: {comp.fails_below:g} with holds {comp.side!r}, margin "
            f"{comp.margin:g}; allowed: a value ≤ the margin, with holds: above"
        )
    if comp.kind == "equivalent" and comp.margin <= 0:
        return (
            f"{where}.margin: {comp.margin:g} has the wrong sign for kind 'equivalent'; allowed: "
            "a margin > 0 (|effect| ≤ margin)"
        )
    if comp.kind != "bound" and comp.margin < 0 and comp.side != "below":
        return (
            f"{where}.margin: {comp.margin:g} has the wrong sign for kind {comp.kind!r}; allowed: "
            "a margin ≥ 0 (the effect is the claimed side's advantage; holds: below for 'little "
            "or no gain', with a negative margin for 'worse by more than it')"
        )
    keys = sorted({k for c in curves for k in c.set})
    if comp.tune is not None:
        if comp.kind not in ("faster", "higher", "equivalent", "interior_optimum"):
            return (
                f"{where}.tune: kind {comp.kind!r} is not tuned; allowed with kinds faster, "
                "higher, equivalent, interior_optimum"
            )
        for key in comp.tune.over:
            if not any(key in c.set for c in curves):
                return _bad(f"{where}.tune.over", key, keys, "no curve sets the key")
    if isinstance(comp.pair, str) and not any(comp.pair in c.set for c in curves):
        return _bad(f"{where}.pair", comp.pair, keys, "no curve sets the key")
    for ref in [*comp.curve, *comp.versus, *(r for rs in comp.by_panel.values() for r in rs)]:
        if ref.curve is not None and ref.curve not in labels:
            return _bad(f"{where}.curve", ref.curve, labels, "unknown curve")
        if ref.set is not None and not any(ref.matches(c) for c in curves):
            return (
                f"{where}: no curve sets {ref.text()}; allowed: a label of {labels} or the "
                "overrides one of them sets"
            )
        if ref.sets is not None and not any(ref.matches(c) for c in curves):
            keys = sorted({k for c in curves for k in c.set})
            return _bad(where, ref.sets, keys, "no curve sets the key")
    for value in comp.by_panel:
        if value not in panels:
            return _bad(f"{where}.by_panel", value, panels or ["(no panels)"], "panel")
    for side in (comp.contrast or {}).values():
        for value in side:
            if value not in panels:
                return _bad(f"{where}.contrast", value, panels or ["(no panels)"], "panel")
    if comp.kind in ("monotone", "interior_optimum"):
        if comp.over is None:
            return f"{where}.over: kind {comp.kind!r} needs the config key whose values order the curves"
        if not any(comp.over in c.set for c in curves):
            keys = sorted({k for c in curves for k in c.set})
            return _bad(f"{where}.over", comp.over, keys, "no curve sets the key")
        values = [c.set[comp.over] for c in curves if comp.over in c.set]
        bad = [v for v in values if isinstance(v, bool) or not isinstance(v, int | float)]
        if bad:
            return (
                f"{where}.over: {comp.over!r} takes the value {bad[0]!r}, which has no order; "
                "allowed: a config key whose curves set numbers (e.g. train.local_epochs)"
            )
        return None
    if comp.kind == "bound":
        return None
    if not comp.curve and not comp.by_panel:
        return f"{where}.curve: kind {comp.kind!r} needs the claimed curve(s)"
    if not comp.versus:
        return f"{where}.versus: kind {comp.kind!r} needs the curve(s) it is compared with"
    explicit = [r for r in [*comp.curve, *comp.versus] if r.curve is not None or r.set is not None]
    if comp.kind != "first" and len(explicit) == len(comp.curve) + len(comp.versus):
        same = sorted(set(resolve(comp.curve, curves)) & set(resolve(comp.versus, curves)))
        if same:
            return (
                f"{where}: compares curve {same[0]!r} with itself (curve and versus both name "
                "it); allowed: two different curves"
            )
    return None
