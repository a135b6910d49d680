"""A sweep spec's curves: named override sets (:class:`CurveSpec`), one curve per value of one key
(:class:`CurveGrid`, ``curves: {key, values}``) and product grids (:class:`CurveProduct`, a
``grid:`` over several keys with a label template). The syntax is documented in
:mod:`fedsweep.specs.load`'s docstring.

Validators here raise ``ValueError`` (pydantic wraps them); the product grid's own checks
(:meth:`CurveProduct.check`) run from the spec's validator, so their messages name the field
(``curves[1].label: ...``). Nothing here imports a spec module.
"""

from __future__ import annotations

import itertools
import json
import re
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Discriminator, Field, Tag, field_validator

from fedsweep.core.section import NoBoolNumbers
from fedsweep.core.suggest import closest
from fedsweep.specs.derivations import DERIVATIONS
from fedsweep.specs.search import TUNED, SearchSpec, tuned_label

Dash = Literal["solid", "dash", "dot", "dashdot"]


def repeated(values) -> list:
    """The values that occur more than once in ``values``, in first-seen order."""
    seen, out = set(), []
    for v in values:
        key = json.dumps(v, sort_keys=True, default=str)
        if key in seen and v not in out:
            out.append(v)
        seen.add(key)
    return out


class Strict(NoBoolNumbers):
    model_config = ConfigDict(extra="forbid")


class DeriveSpec(Strict):
    """A curve's settings computed from another curve's runs (:mod:`fedsweep.specs.load`)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    #: the source curve's label (``from`` in the YAML)
    from_: str = Field(alias="from")
    #: config key -> a derivation name (str) or a literal (number, bool)
    set: dict[str, str | bool | int | float] = Field(min_length=1)

    @field_validator("set")
    @classmethod
    def _known(cls, value: dict[str, Any]) -> dict[str, Any]:
        for key, name in value.items():
            if isinstance(name, str) and name not in (*DERIVATIONS, TUNED):
                best = closest(name, [*DERIVATIONS, TUNED])
                hint = f" (did you mean {best!r}?)" if best else ""
                raise ValueError(
                    f"derive.set.{key}: unknown derivation {name!r}{hint}; allowed: "
                    f"{', '.join(DERIVATIONS)}, {TUNED}, or a number/bool literal"
                )
        return value

    @property
    def tuned(self) -> bool:
        """Values from the source curve's best search trial (``set: {key: tuned}``)."""
        return TUNED in self.set.values()


class CurveSpec(Strict):
    label: str
    set: dict[str, Any] = Field(default_factory=dict)
    color: str | None = None
    dash: Dash | None = None
    #: drawn as a flat horizontal line at its final value (the papers' centralized baseline)
    flat: bool = False
    #: settings computed from another curve's finished runs (module docstring)
    derive: DeriveSpec | None = None
    #: a hyperparameter search over this curve's settings (:mod:`fedsweep.specs.search`): adds
    #: the search trials and the curve ``"<label> (tuned)"`` (:func:`tuned_curve`)
    search: SearchSpec | None = None

    @property
    def auto_tuned(self) -> bool:
        """The tuned curve a ``search`` adds (not one the spec lists)."""
        d = self.derive
        return d is not None and d.tuned and self.label == tuned_label(d.from_)


def tuned_curve(curve: CurveSpec) -> CurveSpec:
    """The curve a searched curve adds: its settings with the best search trial's point
    (``derive: {from: <label>, set: {key: tuned}}``), run over the figure's seeds, dashed."""
    assert curve.search is not None
    return CurveSpec(
        label=tuned_label(curve.label),
        set=dict(curve.set),
        color=curve.color,
        dash="dash" if curve.dash in (None, "solid") else curve.dash,
        flat=curve.flat,
        derive=DeriveSpec(from_=curve.label, set={k: TUNED for k in curve.search.space}),
    )


#: a curve and its coordinates in the grid it comes from (``{key: value}``; None: no grid)
CurveItem = tuple[CurveSpec, dict[str, Any] | None]


class CurveGrid(Strict):
    """Shorthand: one curve per value of ``key``; ``label`` may use ``{value}``."""

    key: str
    values: list[Any]
    label: str = "{key}={value}"
    colors: list[str] | None = None

    def curve_list(self) -> list[CurveSpec]:
        return [curve for curve, _ in self.curve_items()]

    def curve_items(self) -> list[CurveItem]:
        colors = self.colors or [None] * len(self.values)
        return [
            (
                CurveSpec(
                    label=self.label.format(key=self.key.split(".")[-1], value=v),
                    set={self.key: v},
                    color=c,
                ),
                {self.key: v},
            )
            for v, c in zip(self.values, colors, strict=False)
        ]


def same_value(a: Any, b: Any) -> bool:
    """``a == b`` where a YAML boolean equals only a boolean (``1 == True`` in Python)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    return a == b


def value_in(value: Any, values) -> bool:
    return any(same_value(value, v) for v in values)


def _lookup(table: dict[Any, str], value: Any) -> str | None:
    return next((text for v, text in table.items() if same_value(v, value)), None)


#: a label template's pieces: ``{{``, ``}}``, ``{key}`` / ``{key:format}``, a lone brace
_TEMPLATE = re.compile(r"\{\{|\}\}|\{([^{}:]*)(?::([^{}]*))?\}|[{}]")


def template_fields(template: str) -> list[tuple[str, str | None]]:
    """The ``(key, format or None)`` fields of a label template; ``ValueError`` for a lone
    ``{``/``}`` or an empty ``{}``."""
    fields = []
    for m in _TEMPLATE.finditer(template):
        piece = m.group(0)
        if piece in ("{{", "}}"):
            continue
        if piece in ("{", "}"):
            raise ValueError(
                f"a lone {piece!r} at position {m.start()} of {template!r} (write {piece * 2} "
                "for a brace, {key} for a grid value)"
            )
        if not m.group(1):
            raise ValueError(f"an empty {{}} in {template!r} (write {{key}} with a grid key)")
        fields.append((m.group(1), m.group(2)))
    return fields


class CurveProduct(Strict):
    """A product grid: one curve per combination of the values of ``grid``'s keys (the first
    key outermost), labelled by the ``label`` template (:mod:`fedsweep.specs.load`)."""

    #: config key -> its values
    grid: dict[str, list[Any]]
    #: ``{key}``: the key's value (its ``labels`` text if it has one); ``{key:fmt}``: the value
    #: formatted (``{train.lr:g}``); ``{{``/``}}``: a brace. None: ``key=value, ...``
    label: str | None = None
    #: per key, the text a value stands for in the label: ``{train.lr: {0.001: 1e-3}}``
    labels: dict[str, dict[Any, str]] = Field(default_factory=dict)
    #: per key, the color of a value's curves (the first grid key that has one wins)
    colors: dict[str, dict[Any, str]] = Field(default_factory=dict)
    #: overrides every curve of the grid shares
    set: dict[str, Any] = Field(default_factory=dict)
    color: str | None = None
    dash: Dash | None = None
    flat: bool = False

    @property
    def template(self) -> str:
        return (
            self.label if self.label is not None else ", ".join(f"{k}={{{k}}}" for k in self.grid)
        )

    def check(self, where: str) -> None:
        """Raise ``ValueError`` naming the field (``where``: ``curves[1]``) for an empty product,
        a repeated value, a key both in ``grid`` and ``set``, ``labels``/``colors`` of keys or
        values not in the grid, and a template that names no grid key or cannot be rendered."""
        keys = list(self.grid)
        allowed = ", ".join(f"{{{k}}}" for k in keys)
        if not keys:
            raise ValueError(
                f"{where}.grid: no keys: the product is empty (allowed: one or more config keys, "
                "each with a list of values, e.g. {train.lr: [0.01, 0.1]})"
            )
        for key, values in self.grid.items():
            if not values:
                raise ValueError(f"{where}.grid.{key}: empty list of values: the product is empty")
            if repeated(values):
                raise ValueError(f"{where}.grid.{key}: repeated value(s) {repeated(values)}")
        both = [k for k in self.set if k in self.grid]
        if both:
            raise ValueError(f"{where}.set.{both[0]}: also a grid key; set it in one place")
        for field_name in ("labels", "colors"):
            for key, table in getattr(self, field_name).items():
                if key not in self.grid:
                    raise ValueError(
                        f"{where}.{field_name}.{key}: not a grid key (grid keys: {', '.join(keys)})"
                    )
                stray = [v for v in table if not value_in(v, self.grid[key])]
                if stray:
                    raise ValueError(
                        f"{where}.{field_name}.{key}: {stray[0]!r} is not one of its grid values "
                        f"{self.grid[key]}"
                    )
        try:
            fields = template_fields(self.template)
        except ValueError as err:
            raise ValueError(f"{where}.label: {err}") from None
        for key, _ in fields:
            if key not in self.grid:
                best = closest(key, keys)
                hint = f" (did you mean {{{best}}}?)" if best else ""
                raise ValueError(
                    f"{where}.label: unknown key {{{key}}} in the template {self.template!r}"
                    f"{hint}; allowed: the grid's keys {allowed}"
                )
        labels = []
        for combo in itertools.product(*self.grid.values()):
            try:
                labels.append(self._render(dict(zip(keys, combo, strict=True))))
            except (ValueError, TypeError) as err:
                raise ValueError(f"{where}.label: {self.template!r}: {err}") from None
        if repeated(labels):
            used = {key for key, _ in fields}
            missing = [f"{{{k}}}" for k, vs in self.grid.items() if k not in used and len(vs) > 1]
            hint = f"; add {', '.join(missing)}" if missing else ""
            raise ValueError(
                f"{where}.label: the template {self.template!r} gives several curves the label "
                f"{repeated(labels)[0]!r}: each curve needs its own label (it is part of the "
                f"trial id){hint}"
            )

    def _render(self, coords: dict[str, Any]) -> str:
        out, last = [], 0
        template = self.template
        for m in _TEMPLATE.finditer(template):
            out.append(template[last : m.start()])
            last = m.end()
            piece = m.group(0)
            if piece in ("{{", "}}"):
                out.append(piece[0])
                continue
            key, fmt = m.group(1), m.group(2)
            value = coords[key]
            if fmt is not None:
                try:
                    out.append(format(value, fmt))
                except (ValueError, TypeError) as err:
                    raise ValueError(f"{{{key}:{fmt}}} cannot format {value!r} ({err})") from None
                continue
            text = _lookup(self.labels.get(key, {}), value)
            out.append(text if text is not None else str(value))
        out.append(template[last:])
        return "".join(out)

    def curve_items(self) -> list[CurveItem]:
        """The grid's curves in order, with their coordinates."""
        keys = list(self.grid)
        items = []
        for combo in itertools.product(*self.grid.values()):
            coords = dict(zip(keys, combo, strict=True))
            colors = (_lookup(self.colors.get(k, {}), v) for k, v in coords.items())
            color = next((c for c in colors if c is not None), self.color)
            curve = CurveSpec(
                label=self._render(coords),
                set={**self.set, **coords},
                color=color,
                dash=self.dash,
                flat=self.flat,
            )
            items.append((curve, coords))
        return items

    def curve_list(self) -> list[CurveSpec]:
        return [curve for curve, _ in self.curve_items()]


def _item_kind(value: Any) -> str:
    """A ``curves`` list item: a product grid when it has ``grid``, else one curve."""
    if isinstance(value, dict):
        return "CurveProduct" if "grid" in value else "CurveSpec"
    return "CurveProduct" if isinstance(value, CurveProduct) else "CurveSpec"


def _mapping_kind(value: Any) -> str:
    """``curves`` as a mapping: a product grid when it has ``grid``, else a one-key grid."""
    if isinstance(value, dict):
        return "CurveProduct" if "grid" in value else "CurveGrid"
    return "CurveProduct" if isinstance(value, CurveProduct) else "CurveGrid"


CurveListItem = Annotated[
    Annotated[CurveSpec, Tag("CurveSpec")] | Annotated[CurveProduct, Tag("CurveProduct")],
    Discriminator(_item_kind),
]
CurveMapping = Annotated[
    Annotated[CurveGrid, Tag("CurveGrid")] | Annotated[CurveProduct, Tag("CurveProduct")],
    Discriminator(_mapping_kind),
]
#: a spec's ``curves``: a list of curves and product grids, or one grid
Curves = list[CurveListItem] | CurveMapping


def curve_items(curves: list | CurveGrid | CurveProduct) -> list[CurveItem]:
    """Every curve of a spec's ``curves`` in order, with its grid coordinates (None: a curve
    listed on its own)."""
    if isinstance(curves, CurveGrid | CurveProduct):
        return curves.curve_items()
    items: list[CurveItem] = []
    for entry in curves:
        items += entry.curve_items() if isinstance(entry, CurveProduct) else [(entry, None)]
        if isinstance(entry, CurveSpec) and entry.search is not None:
            items.append((tuned_curve(entry), None))
    return items


def product_blocks(curves: list | CurveGrid | CurveProduct) -> list[tuple[str, CurveProduct]]:
    """The product grids of a spec's ``curves``, each with its field name (``curves[1]``)."""
    if isinstance(curves, CurveProduct):
        return [("curves", curves)]
    if isinstance(curves, CurveGrid):
        return []
    return [(f"curves[{i}]", c) for i, c in enumerate(curves) if isinstance(c, CurveProduct)]


def in_grid(coords: dict[str, Any] | None, wanted: dict[str, list[Any]] | None) -> bool:
    """Whether a curve at ``coords`` is among a profile's ``grid`` values (keys the curve's
    grid lacks, and curves of no grid, are kept)."""
    if not wanted or coords is None:
        return True
    return all(value_in(coords[k], values) for k, values in wanted.items() if k in coords)


def has_search(curves: list | CurveGrid | CurveProduct) -> bool:
    """Whether a curve of ``curves`` declares a ``search`` (and so adds a tuned curve)."""
    return isinstance(curves, list) and any(
        isinstance(c, CurveSpec) and c.search is not None for c in curves
    )
