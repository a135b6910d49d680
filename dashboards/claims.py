"""Check the paper's claims (docs/figures.md, ``spec.claims``) against the aggregated curves.

Every criterion is a function of :class:`ClaimData` (the seed-mean curves of one figure) that
returns ``(verdict, numbers)``. All criteria use the **seed-mean** curves:

* *final* value = the mean at the curve's last round with a finite value;
* *loss AUC* = the mean of the mean test-loss curve over all its rounds (area under the loss
  curve / T; lower = converges faster). A curve with a diverged seed in that panel gets
  AUC = inf (it cannot be "fastest"; the claim is then "n/t" anyway, see below);
* per-case claims are evaluated on every case (panel) that has the data; the verdict is "yes"
  when all of them pass, "no" when one fails, "n/a" when no case has the data (a case without
  data is listed as such in the numbers);
* a figure whose longest curve has fewer than ``MIN_ROUNDS`` rounds (the smoke profile's 2–3
  rounds) cannot test a claim about convergence: the verdict is "n/t" ("not testable at this
  profile (T=3)"), the numbers are still shown;
* a diverged run is never evidence: when a criterion reads a curve (through ``series``,
  ``final``, ``first`` or ``auc``) in a panel where one of its seeds diverged (non-finite values,
  ``fedsweep.status`` diverged) or its loss blew up while staying finite (tag
  ``fedsweep.loss_blowup``), the verdict is "n/t", shown as "not testable: n of m runs
  diverged" (n and m counted over the (panel, curve) cells the criterion read; failed runs are
  never loaded, they count as missing). This takes precedence over the T rule, which is then
  appended ("...; T=3 < 10 rounds"). The one exception is the claim that α=0.1 *fails* to
  converge: there the α=0.1 curve's divergence is the evidence, read explicitly
  (:meth:`ClaimData.failed_seeds`), not through its curve;
* thresholds compare the unrounded numbers (a difference within 1e-12 of a threshold counts as
  equal to it: float representation, e.g. 0.91 − 0.90); a printed difference carries as many
  digits as it takes to show on which side of the threshold it is (|Δ|=0.0104 > 0.01).

Curves are identified by their overrides in the spec (e.g. ``bherd.alpha: 1.0``,
``selector: none``), not by their labels.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field

import pandas as pd

from dashboards.model import ClaimCheck, Panel, Verdict
from dashboards.reducers import Stat, per_run, stat_of
from dashboards.targets import Reach, rounds_to_target, speedup
from fedsweep.sweep.spec import CurveSpec

ACC_TOL = 0.01  # |Δ final test accuracy| that counts as "matches" / "differs little"
AUC_TOL = 0.05  # relative loss-AUC reduction that still counts as "little or no gain"
FAIL_ACC_GAP = 0.05  # final accuracy this far below the best curve counts as "fails"
BEST_B = {"case1": 10, "case2": 10, "case3": 50}  # the paper's best batch size per case
#: fewest rounds (of the figure's longest curve) at which a claim is tested; shorter: "n/t"
MIN_ROUNDS = 10
EPS = 1e-12  # float representation slack at a threshold

Result = tuple[Verdict, str]


@dataclass
class ClaimData:
    """Seed-mean curves of one figure (``store.aggregate`` output) plus what names them."""

    agg: pd.DataFrame  # panel_id, curve, metric, round, mean, std, n
    curves: list[CurveSpec]
    panels: list[Panel]
    #: (panel_id, curve) -> [(seed, round)] of the runs that diverged (non-finite values)
    diverged: dict[tuple[str, str], list[tuple[int, int]]] = field(default_factory=dict)
    #: (panel_id, curve) -> [(seed, tag text)] of the finished runs whose loss blew up
    blowups: dict[tuple[str, str], list[tuple[int, str]]] = field(default_factory=dict)
    #: (panel_id, curve) -> runs found; a cell not given counts its largest seed count ``n``
    runs: dict[tuple[str, str], int] = field(default_factory=dict)
    #: the (panel_id, curve) cells read since the last ``used.clear()`` (by ``series``)
    used: set[tuple[str, str]] = field(default_factory=set, repr=False, compare=False)
    #: the profile's ``target_acc`` (rounds-to-target figures), None when it has none
    target: float | None = None
    #: per-run histories (``store.load_metrics``: panel_id, curve, seed, run_id, round, metric,
    #: value), for criteria about single runs (catastrophic training failures); may be None
    long: pd.DataFrame | None = field(default=None, repr=False)
    #: per-run reductions of ``long`` by (metric, reducer), see :meth:`run_stat`
    reduced: dict[tuple[str, str], pd.DataFrame] = field(
        default_factory=dict, repr=False, compare=False
    )

    def run_stat(
        self, panel: str, curve: str, metric: str, how: str = "best", *, mark: bool = True
    ) -> Stat | None:
        """Seed mean ± std of each run's ``metric`` reduced by ``how`` (``reducers``: "best" =
        max over rounds, "final" = last finite round), from the per-run histories ``long``;
        None without runs (or without ``long``). ``mark``: count the cell as read (as
        ``series`` does); False to compare candidates, e.g. a learning-rate grid."""
        if mark:
            self.used.add((panel, curve))
        if self.long is None:
            return None
        key = (metric, how)
        if key not in self.reduced:
            self.reduced[key] = per_run(self.long, metric, how)
        return stat_of(self.reduced[key], panel, curve)

    def series(self, panel: str, curve: str, metric: str) -> pd.Series:
        self.used.add((panel, curve))
        a = self.agg
        sel = a[(a["panel_id"] == panel) & (a["curve"] == curve) & (a["metric"] == metric)]
        s = sel.set_index("round")["mean"].sort_index().astype(float)
        return s[s.map(math.isfinite)]

    def peek(self, panel: str, curve: str, metric: str) -> pd.Series:
        """``series`` without marking the cell as read (to choose among curves, e.g. the best
        grid point, before reading the chosen one)."""
        was_read = (panel, curve) in self.used
        s = self.series(panel, curve, metric)
        if not was_read:
            self.used.discard((panel, curve))
        return s

    def final(self, panel: str, curve: str, metric: str) -> float | None:
        s = self.series(panel, curve, metric)
        return float(s.iloc[-1]) if len(s) else None

    def first(self, panel: str, curve: str, metric: str) -> float | None:
        s = self.series(panel, curve, metric)
        return float(s.iloc[0]) if len(s) else None

    def auc(self, panel: str, curve: str, metric: str = "test_loss") -> float | None:
        s = self.series(panel, curve, metric)
        if not len(s):
            return None
        return math.inf if (panel, curve) in self.diverged else float(s.mean())

    def curve_where(self, key: str, value) -> str | None:
        """Label of the curve whose overrides set ``key`` to ``value``."""
        for c in self.curves:
            if key in c.set and _same(c.set[key], value):
                return c.label
        return None

    def curve_matching(self, **conds) -> str | None:
        """Label of the first curve whose overrides set every dotted key (``__`` for ``.``)
        to the given value, e.g. ``curve_matching(algorithm="fedavg", selector="bherd")``."""
        want = {k.replace("__", "."): v for k, v in conds.items()}
        for c in self.curves:
            if all(k in c.set and _same(c.set[k], v) for k, v in want.items()):
                return c.label
        return None

    def curves_with(self, key: str) -> list[tuple[object, str]]:
        """(value, label) of every curve that sets ``key``, sorted by value."""
        pairs = [(c.set[key], c.label) for c in self.curves if key in c.set]
        return sorted(pairs, key=lambda p: p[0])

    def cases(self) -> list[Panel]:
        return [p for p in self.panels if "data.partition" in p.values] or self.panels

    def failed_seeds(self, panel: str, curve: str) -> dict[int, str]:
        """Seed -> "diverged at round r" / "loss blew up: <tag>" of the cell's runs that are no
        evidence of convergence (read without marking the cell as used)."""
        out = {s: f"loss blew up ({text})" for s, text in self.blowups.get((panel, curve), [])}
        out.update({s: f"diverged at round {r}" for s, r in self.diverged.get((panel, curve), [])})
        return out

    def unusable(self, cells) -> tuple[int, int, int]:
        """(diverged, blown up, total) run counts over ``cells`` ((panel_id, curve) pairs); a
        seed both diverged and blown up counts as diverged."""
        div = blow = total = 0
        a = self.agg
        for key in sorted(cells):
            d = {s for s, _ in self.diverged.get(key, [])}
            b = {s for s, _ in self.blowups.get(key, [])} - d
            div, blow = div + len(d), blow + len(b)
            if key in self.runs:
                total += self.runs[key]
            else:
                sel = a[(a["panel_id"] == key[0]) & (a["curve"] == key[1])]
                total += max(int(sel["n"].max()) if len(sel) else 0, len(d | b))
        return div, blow, total


def _same(a, b) -> bool:
    if isinstance(a, int | float) and isinstance(b, int | float):
        return math.isclose(float(a), float(b))
    return a == b


def _fmt(x: float | None, digits: int = 3) -> str:
    if x is None:
        return "n/a"
    return "inf (diverged)" if math.isinf(x) else f"{x:.{digits}f}"


def within(value: float, limit: float) -> bool:
    """``value ≤ limit`` on the unrounded numbers (``EPS`` slack for float representation)."""
    return value <= limit + EPS


def fmt_against(value: float, limit: float, digits: int = 3, *, at_least: bool = False) -> str:
    """``value`` with ``digits`` decimals, or more when the rounded text would read as the other
    side of ``limit`` than the value itself or as equal to it when it is not (|Δ| = 0.0104
    against ≤ 0.01 is printed "0.0104", not "0.010"). ``at_least``: the test is ``value ≥ limit`` instead of ``value ≤ limit``."""
    if math.isinf(value) or math.isnan(value):
        return _fmt(value, digits)

    def passes(v: float) -> bool:
        return within(limit, v) if at_least else within(v, limit)

    ok = passes(value)
    for d in range(digits, 13):
        text = f"{value:.{d}f}"
        shown = float(text)
        at_limit = math.isclose(shown, limit, rel_tol=0, abs_tol=EPS)
        if passes(shown) == ok and not (at_limit and abs(value - limit) > EPS):
            return text
    return repr(value)


def _per_case(
    data: ClaimData, check: Callable[[Panel], tuple[bool | None, str]], panels=None
) -> Result:
    """Combine a per-panel check: yes if all panels with data pass, n/a if none has data."""
    oks, parts = [], []
    for panel in panels if panels is not None else data.cases():
        ok, text = check(panel)
        name = panel.label or panel.panel_id
        parts.append(f"{name}: {text}" if ok is not None else f"{name}: no data ({text})")
        if ok is not None:
            oks.append(ok)
    if not oks:
        return "n/a", "; ".join(parts) or "no panels"
    return ("yes" if all(oks) else "no"), "; ".join(parts)


def _argmin(values: dict[str, float | None]) -> str | None:
    have = {k: v for k, v in values.items() if v is not None}
    return min(have, key=have.get) if have else None


def _missing(*named: tuple[str | None, str]) -> str | None:
    """The description of the first curve that the spec does not define, if any."""
    for label, what in named:
        if label is None:
            return f"the spec has no {what} curve"
    return None


def _compare_final_acc(data: ClaimData, pid: str, a: str, b: str, names=("", "")):
    """``(|Δ final test acc| ≤ ACC_TOL, numbers)`` for curves ``a`` and ``b`` in panel ``pid``;
    ``(None, why)`` when either has no data."""
    x, y = data.final(pid, a, "test_acc"), data.final(pid, b, "test_acc")
    if x is None or y is None:
        return None, f"{a if x is None else b} missing"
    delta = abs(x - y)
    op = "≤" if within(delta, ACC_TOL) else ">"
    numbers = f"acc {names[0]}{_fmt(x, 4)} vs {names[1]}{_fmt(y, 4)}, "
    return within(delta, ACC_TOL), numbers + f"|Δ|={fmt_against(delta, ACC_TOL)} {op} {ACC_TOL}"


def _rel_gain(base: float, new: float) -> float:
    """Relative loss-AUC reduction of ``new`` against ``base`` (positive = faster)."""
    if math.isinf(base) or math.isinf(new):
        return -math.inf if math.isinf(new) else math.inf
    return (base - new) / base


# ------------------------------------------------------------------------------ fig 2a
def _versus_fedavg(data: ClaimData, selector: str, name: str, compare) -> Result:
    """Per panel, the FedAvg + ``selector`` curve against plain FedAvg:
    ``compare(auc_sel, auc_fedavg, acc_sel, acc_fedavg) -> (ok, numbers)``."""
    sel = data.curve_matching(algorithm="fedavg", selector=selector)
    fa = data.curve_matching(algorithm="fedavg", selector="none")
    if (why := _missing((sel, name), (fa, "FedAvg"))) is not None:
        return "n/a", why

    def check(p: Panel):
        pid = p.panel_id
        values = (
            data.auc(pid, sel),
            data.auc(pid, fa),
            data.final(pid, sel, "test_acc"),
            data.final(pid, fa, "test_acc"),
        )
        if None in values:
            return None, f"{name} or FedAvg missing"
        return compare(*values)

    return _per_case(data, check)


def bherd_beats_fedavg(data: ClaimData) -> Result:
    """Per panel BHerd-FedAvg has a lower loss AUC (converges faster) and a higher final test
    accuracy than FedAvg."""

    def compare(ab, af, cb, cf):
        numbers = f"loss AUC {_fmt(ab, 4)} vs {_fmt(af, 4)}, acc {_fmt(cb)} vs {_fmt(cf)}"
        return ab < af and cb > cf, numbers

    return _versus_fedavg(data, "bherd", "BHerd-FedAvg", compare)


def grab_little_gain(data: ClaimData) -> Result:
    """Per panel GraB-FedAvg's final test accuracy is at most 0.01 above FedAvg's and its loss
    AUC at most 5% below FedAvg's."""

    def compare(ag, af, cg, cf):
        gain = _rel_gain(af, ag)
        numbers = (
            f"acc {_fmt(cg, 4)} vs {_fmt(cf, 4)} (Δ={fmt_against(cg - cf, ACC_TOL, 4)}), "
            f"loss AUC {_fmt(ag, 4)} vs {_fmt(af, 4)} "
            f"(gain {fmt_against(100 * gain, 100 * AUC_TOL, 1)}%)"
        )
        return within(cg - cf, ACC_TOL) and within(gain, AUC_TOL), numbers

    return _versus_fedavg(data, "grab", "GraB-FedAvg", compare)


# ------------------------------------------------------------------------------ fig 2b
def _bherd_pairs(data: ClaimData) -> dict[str, tuple[str | None, str | None]]:
    return {
        name: (
            data.curve_matching(algorithm=alg, selector="none"),
            data.curve_matching(algorithm=alg, selector="bherd"),
        )
        for alg, name in (("fednova", "FedNova"), ("scaffold", "SCAFFOLD"))
    }


def bherd_speeds_up_others(data: ClaimData) -> Result:
    """Per panel BHerd-FedNova has a lower loss AUC than FedNova and BHerd-SCAFFOLD a lower loss
    AUC than SCAFFOLD."""
    pairs = _bherd_pairs(data)
    for name, (base, herd) in pairs.items():
        if (why := _missing((base, name), (herd, f"BHerd-{name}"))) is not None:
            return "n/a", why

    def check(p: Panel):
        oks, parts = [], []
        for name, (base, herd) in pairs.items():
            a0, a1 = data.auc(p.panel_id, base), data.auc(p.panel_id, herd)
            if a0 is None or a1 is None:
                return None, f"{name} or BHerd-{name} missing"
            oks.append(a1 < a0)
            parts.append(f"{name} loss AUC {_fmt(a1, 4)} (BHerd) vs {_fmt(a0, 4)}")
        return all(oks), ", ".join(parts)

    return _per_case(data, check)


def bherd_gain_by_model(data: ClaimData) -> Result:
    """BHerd's mean relative loss-AUC gain over the panels is larger on the SVM than on the CNN
    for FedNova, and larger on the CNN than on the SVM for SCAFFOLD."""
    pairs = _bherd_pairs(data)
    for name, (base, herd) in pairs.items():
        if (why := _missing((base, name), (herd, f"BHerd-{name}"))) is not None:
            return "n/a", why
    gains: dict[str, dict[str, list[float]]] = {name: {} for name in pairs}
    for p in data.panels:
        model = p.values.get("model.name")
        for name, (base, herd) in pairs.items():
            a0, a1 = data.auc(p.panel_id, base), data.auc(p.panel_id, herd)
            if model in ("svm", "cnn") and a0 is not None and a1 is not None:
                gains[name].setdefault(model, []).append(_rel_gain(a0, a1))
    means = {
        name: {m: sum(v) / len(v) for m, v in by_model.items()} for name, by_model in gains.items()
    }
    numbers = "; ".join(
        f"{name}: " + ", ".join(f"{m.upper()} {100 * g:+.1f}%" for m, g in sorted(ms.items()))
        for name, ms in means.items()
    )
    if any(len(ms) < 2 for ms in means.values()):
        return "n/a", f"needs SVM and CNN panels with data ({numbers or 'none'})"
    ok = (
        means["FedNova"]["svm"] > means["FedNova"]["cnn"]
        and means["SCAFFOLD"]["cnn"] > means["SCAFFOLD"]["svm"]
    )
    return ("yes" if ok else "no"), "mean loss-AUC gain of BHerd " + numbers


# ------------------------------------------------------------------------------ fig 3a
def alpha_matches_fedavg(data: ClaimData) -> Result:
    """Per case |final test acc(α=1.0) − final test acc(FedAvg curve)| ≤ 0.01."""
    a1, fa = data.curve_where("bherd.alpha", 1.0), data.curve_where("selector", "none")
    if (why := _missing((a1, "α=1.0"), (fa, "FedAvg (selector none)"))) is not None:
        return "n/a", why

    def check(p: Panel):
        return _compare_final_acc(data, p.panel_id, a1, fa)

    return _per_case(data, check)


def alpha_fastest(data: ClaimData) -> Result:
    """Per case, among the α curves the lowest loss AUC belongs to α=0.3 or α=0.5."""
    alphas = data.curves_with("bherd.alpha")
    if not alphas:
        return "n/a", "the spec has no α curves"

    def check(p: Panel):
        aucs = {label: data.auc(p.panel_id, label) for _, label in alphas}
        best = _argmin(aucs)
        if best is None:
            return None, "no α curve"
        value = next(v for v, label in alphas if label == best)
        ok = any(_same(value, a) for a in (0.3, 0.5))
        return ok, f"fastest {best} (loss AUC {_fmt(aucs[best])})"

    return _per_case(data, check)


def alpha_fails(data: ClaimData) -> Result:
    """Per case α=0.1 fails: a seed diverged (or its loss blew up), or its final test loss is
    not below its round-1 loss, or its final test acc is ≥ 0.05 below the best curve's final
    test acc."""
    a01 = data.curve_where("bherd.alpha", 0.1)
    if a01 is None:
        return "n/a", "the spec has no α=0.1 curve"

    def check(p: Panel):
        pid = p.panel_id
        failed = data.failed_seeds(pid, a01)  # the evidence of this claim: not "used"
        if failed:
            return True, ", ".join(f"seed {s} {why}" for s, why in sorted(failed.items()))
        l1, lt = data.first(pid, a01, "test_loss"), data.final(pid, a01, "test_loss")
        acc = data.final(pid, a01, "test_acc")
        if l1 is None or lt is None or acc is None:
            return None, f"{a01} missing"
        accs = [data.final(pid, c.label, "test_acc") for c in data.curves]
        best = max(a for a in accs if a is not None)
        gap = best - acc
        ok = lt >= l1 or within(FAIL_ACC_GAP, gap)
        return ok, (
            f"loss {_fmt(l1)}→{_fmt(lt)}, acc {_fmt(acc)} (best {_fmt(best)}, "
            f"gap {fmt_against(gap, FAIL_ACC_GAP, at_least=True)})"
        )

    return _per_case(data, check)


# ------------------------------------------------------------------------------ fig 3b
def larger_e_faster(data: ClaimData) -> Result:
    """Per case the loss AUC strictly decreases as E increases (over all E curves)."""
    es = data.curves_with("train.local_epochs")
    if len(es) < 2:
        return "n/a", "fewer than two E curves"

    def check(p: Panel):
        aucs = [(v, data.auc(p.panel_id, label)) for v, label in es]
        aucs = [(v, a) for v, a in aucs if a is not None]
        if len(aucs) < 2:
            return None, "fewer than two E curves with data"
        ok = all(a > b for (_, a), (_, b) in zip(aucs, aucs[1:], strict=False))
        return ok, "loss AUC " + ", ".join(f"E={v}: {_fmt(a)}" for v, a in aucs)

    return _per_case(data, check)


def rises(s: pd.Series) -> int:
    """Number of round-to-round increases of a curve."""
    return int((s.diff().dropna() > 0).sum())


def e2_oscillates(data: ClaimData) -> Result:
    """Per case the E=2 mean test-loss curve has more round-to-round rises than E=1's."""
    e2, e1 = data.curve_where("train.local_epochs", 2.0), data.curve_where("train.local_epochs", 1)
    if (why := _missing((e2, "E=2"), (e1, "E=1"))) is not None:
        return "n/a", why

    def check(p: Panel):
        s2, s1 = data.series(p.panel_id, e2, "test_loss"), data.series(p.panel_id, e1, "test_loss")
        if not len(s2) or not len(s1):
            return None, "E=1 or E=2 missing"
        r2, r1 = rises(s2), rises(s1)
        return r2 > r1, f"loss rises E=2: {r2}, E=1: {r1}"

    return _per_case(data, check)


# ------------------------------------------------------------------------------ fig 3c
def best_batch(data: ClaimData) -> Result:
    """Per case the B with the lowest final mean test loss equals the paper's (10, 10, 50)."""
    bs = data.curves_with("train.batch_size")
    if not bs:
        return "n/a", "the spec has no B curves"
    cases = [p for p in data.cases() if p.values.get("data.partition") in BEST_B]

    def check(p: Panel):
        finals = {label: data.final(p.panel_id, label, "test_loss") for _, label in bs}
        best = _argmin(finals)
        if best is None:
            return None, "no B curve"
        value = next(v for v, label in bs if label == best)
        want = BEST_B[p.values["data.partition"]]
        return _same(value, want), f"best B={value} (paper {want})"

    return _per_case(data, check, cases)


# ------------------------------------------------------------------------------ fig 3d
def n1_centralized(data: ClaimData) -> Result:
    """Per case |final acc(N=1) − final acc(Centralized SGD)| ≤ 0.01 and N=1 has the lowest
    loss AUC among the N curves."""
    ns = data.curves_with("data.num_clients")
    n1, cen = data.curve_where("data.num_clients", 1), data.curve_where("algorithm", "centralized")
    if (why := _missing((n1, "N=1"), (cen, "centralized"))) is not None:
        return "n/a", why

    def check(p: Panel):
        close, numbers = _compare_final_acc(data, p.panel_id, n1, cen)
        if close is None:
            return None, numbers
        fastest = _argmin({label: data.auc(p.panel_id, label) for _, label in ns})
        return close and fastest == n1, f"{numbers}; fastest {fastest}"

    return _per_case(data, check)


def n5_best(data: ClaimData) -> Result:
    """Per case N=5 has the lowest final mean test loss among N ∈ {5, 10, 15, 20}."""
    ns = [(v, lab) for v, lab in data.curves_with("data.num_clients") if v in (5, 10, 15, 20)]
    if not any(v == 5 for v, _ in ns):
        return "n/a", "the spec has no N=5 curve"

    def check(p: Panel):
        finals = {label: data.final(p.panel_id, label, "test_loss") for _, label in ns}
        best = _argmin(finals)
        if best is None:
            return None, "no N curve"
        five = next(lab for v, lab in ns if v == 5)
        return best == five, f"best {best} (final loss {_fmt(finals[best])})"

    return _per_case(data, check)


# ------------------------------------------------------------------------------ fig 4d
def case3_far_clients(data: ClaimData) -> Result:
    """In Case 3 the mean-over-rounds distance of clients 4 and 5 both exceed the largest of
    clients 1–3 (curves "Client 1".."Client 5", metric ``dist_paper``, else ``dist``)."""
    case3 = [p for p in data.panels if p.values.get("data.partition") == "case3"]
    if not case3:
        return "n/a", "no Case 3 panel"
    pid = case3[0].panel_id
    means = {}
    metrics = set(data.agg["metric"])
    metric = "dist_paper" if "dist_paper" in metrics else "dist"
    for i in range(1, 6):
        s = data.series(pid, f"Client {i}", metric)
        means[i] = float(s.mean()) if len(s) else None
    if any(v is None for v in means.values()):
        return "n/a", "Case 3: missing clients " + ", ".join(
            str(i) for i, v in means.items() if v is None
        )
    ok = min(means[4], means[5]) > max(means[1], means[2], means[3])
    return ("yes" if ok else "no"), f"Case 3 mean {metric}: " + ", ".join(
        f"client {i} {_fmt(v, 4)}" for i, v in means.items()
    )


# ------------------------------------------------------------------------------ fig 4e
def rr_little_difference(data: ClaimData) -> Result:
    """Per case |final acc(RR) − final acc(no RR)| ≤ 0.01 (curves paired by their overrides
    other than ``train.order``)."""
    pairs: dict[str, dict[str, str]] = {}
    for c in data.curves:
        order = c.set.get("train.order")
        if order in ("rr", "fixed"):
            rest = {k: v for k, v in c.set.items() if k != "train.order"}
            case = str(rest.get("data.partition", rest))
            pairs.setdefault(case, {})[order] = c.label
    pairs = {k: v for k, v in pairs.items() if len(v) == 2}
    if not pairs:
        return "n/a", "no RR / no-RR curve pairs"
    pid = data.panels[0].panel_id
    panels = [Panel(pid, _case_label(case), {"case": case}) for case in sorted(pairs)]

    def check(p: Panel):
        pair = pairs[p.values["case"]]
        return _compare_final_acc(data, pid, pair["rr"], pair["fixed"], ("RR ", "no RR "))

    return _per_case(data, check, panels)


def _case_label(case: str) -> str:
    m = re.fullmatch(r"case(\d+)", case)
    return f"Case {m.group(1)}" if m else case


# ------------------------------------------------------------------------------ intro slides
FAR_SPEEDUP = 2.0  # "far fewer rounds": speed-up over FedSGD of at least this factor


def _reach(data: ClaimData, pid: str, curve: str, metric: str = "test_acc") -> Reach | None:
    """When the seed-mean ``metric`` curve reaches the figure's target (None: no data)."""
    return rounds_to_target(data.series(pid, curve, metric), data.target or 0.0)


def _no_target(data: ClaimData) -> str | None:
    return None if data.target is not None else "the profile sets no target_acc"


def fedavg_fewer_rounds(data: ClaimData) -> Result:
    """Per panel every FedAvg curve (a numeric B) reaches the target test accuracy within T, with
    a speed-up over FedSGD (B = full) of at least 2: rounds(FedSGD) / rounds(FedAvg), where a
    FedSGD that does not reach the target within T counts as T + 1 rounds (a lower bound)."""
    if (why := _no_target(data)) is not None:
        return "n/a", why
    sgd = data.curve_where("train.batch_size", "full")
    avg = [c.label for c in data.curves if isinstance(c.set.get("train.batch_size"), int)]
    if sgd is None or not avg:
        return "n/a", _missing((sgd, "FedSGD (B=full)")) or "the spec has no FedAvg curve"

    def check(p: Panel):
        base = _reach(data, p.panel_id, sgd)
        if base is None:
            return None, "FedSGD missing"
        oks, parts = [], [f"FedSGD {base.short}"]
        for label in avg:
            r = _reach(data, p.panel_id, label)
            if r is None:
                continue
            up = speedup(base, r)
            ok = up.value is not None and within(FAR_SPEEDUP, up.value)
            oks.append(ok)
            parts.append(f"{label} {r.short} ({up.text})")
        if not oks:
            return None, "no FedAvg curve with data"
        return all(oks), "rounds to target: " + ", ".join(parts)

    return _per_case(data, check)


def _reached(data: ClaimData, panel_id: str, curves) -> list:
    """``(value, rounds to target)`` for each ``(value, curve label)`` with data in the panel."""
    reach = [(v, _reach(data, panel_id, label)) for v, label in curves]
    return [(v, r) for v, r in reach if r is not None]


def e_interior_fastest(data: ClaimData) -> Result:
    """Per panel, over the E curves, the fewest rounds to the target test accuracy (seed mean;
    not reached within T counts as T + 1) are strictly fewer than both the smallest E's and the
    largest E's rounds (an intermediate E is fastest); "no" also when no E curve reaches it."""
    if (why := _no_target(data)) is not None:
        return "n/a", why
    es = data.curves_with("train.local_epochs")
    if len(es) < 3:
        return "n/a", "fewer than three E curves"

    def check(p: Panel):
        reach = _reached(data, p.panel_id, es)
        if len(reach) < 3:
            return None, "fewer than three E curves with data"
        best = min(r.low for _, r in reach)
        ends = (reach[0][1], reach[-1][1])
        any_reached = any(r.reached for _, r in reach)
        ok = any_reached and all(r.low > best for r in ends)
        return ok, "rounds to target " + ", ".join(f"E={v:g}: {r.short}" for v, r in reach)

    return _per_case(data, check)


def replacement_faster(data: ClaimData) -> Result:
    """Per panel scheme 1 (sampler replacement) has a lower training-loss AUC (mean of the
    seed-mean training loss over the rounds) than scheme 2 (sampler uniform, weighting
    scheme2)."""
    s1 = data.curve_where("sampler", "replacement")
    s2 = data.curve_matching(sampler="uniform", uniform__weighting="scheme2")
    if (why := _missing((s1, "scheme 1 (replacement)"), (s2, "scheme 2"))) is not None:
        return "n/a", why

    def check(p: Panel):
        a1, a2 = data.auc(p.panel_id, s1, "train_loss"), data.auc(p.panel_id, s2, "train_loss")
        if a1 is None or a2 is None:
            return None, "scheme 1 or scheme 2 missing (train_loss)"
        return a1 < a2, (
            f"train-loss AUC scheme 1 {_fmt(a1, 4)} vs scheme 2 {_fmt(a2, 4)} "
            f"(gain {100 * _rel_gain(a2, a1):+.1f}%)"
        )

    return _per_case(data, check)


#: server optimizer -> method name of the intro-fedopt figure
FEDOPT_METHODS = {"sgd": "FedAvg", "adagrad": "FedAdagrad", "adam": "FedAdam", "yogi": "FedYogi"}


def best_of_grid(data: ClaimData, pid: str, optimizer: str) -> tuple[str | None, float | None]:
    """The grid point (curve) of ``server_optimizer = optimizer`` with the highest seed-mean
    final test accuracy in panel ``pid``, and that accuracy; grid points with a diverged or
    blown-up seed, or without data, are not candidates (spec order breaks exact ties). The
    candidates are read without marking them used; the caller reads the chosen one."""
    best, best_acc = None, None
    for c in data.curves:
        if c.set.get("server_optimizer") != optimizer or data.failed_seeds(pid, c.label):
            continue
        s = data.peek(pid, c.label, "test_acc")
        if len(s) and (best_acc is None or float(s.iloc[-1]) > best_acc):
            best, best_acc = c.label, float(s.iloc[-1])
    return best, best_acc


def adaptive_outperform(data: ClaimData) -> Result:
    """Per panel FedAdagrad, FedAdam and FedYogi, each at its best grid point (highest seed-mean
    final test accuracy over the (η_l, η_s) curves without a diverged or blown-up seed), reach a
    higher final test accuracy than FedAvg (server_optimizer sgd) at its best grid point."""

    def check(p: Panel):
        best = {o: best_of_grid(data, p.panel_id, o) for o in FEDOPT_METHODS}
        if best["sgd"][0] is None:
            return None, "FedAvg missing"
        for label, _ in best.values():
            if label is not None:
                data.final(p.panel_id, label, "test_acc")  # the chosen curves are the evidence
        base = best["sgd"][1]
        oks, parts = [], [f"FedAvg {_fmt(base, 4)} ({best['sgd'][0]})"]
        for o in ("adagrad", "adam", "yogi"):
            label, acc = best[o]
            if label is None:
                parts.append(f"{FEDOPT_METHODS[o]} no grid point with data")
                continue
            oks.append(acc > base)
            parts.append(f"{FEDOPT_METHODS[o]} {_fmt(acc, 4)} ({label})")
        if not oks:
            return None, "no adaptive method with data"
        return all(oks) and len(oks) == 3, "best final test acc: " + ", ".join(parts)

    if not any(c.set.get("server_optimizer") == "sgd" for c in data.curves):
        return "n/a", "the spec has no FedAvg (server_optimizer sgd) curve"
    return _per_case(data, check)


def informed_early(data: ClaimData) -> Result:
    """Per panel Power-of-Choice (sampler poc) and DivFL (sampler divfl) each have a lower mean
    training loss than random selection (sampler uniform) over the early rounds t ≤ ⌈T/2⌉ (the
    mean of the seed-mean training-loss curve over those rounds, T = the figure's last round)."""
    rnd = data.curve_where("sampler", "uniform")
    informed = [
        (n, data.curve_where("sampler", s)) for n, s in (("PoC", "poc"), ("DivFL", "divfl"))
    ]
    if (why := _missing((rnd, "random (uniform)"), *((c, n) for n, c in informed))) is not None:
        return "n/a", why
    early = math.ceil(rounds_of(data) / 2)

    def early_mean(pid: str, label: str) -> float | None:
        s = data.series(pid, label, "train_loss")
        s = s[s.index <= early]
        return float(s.mean()) if len(s) else None

    def check(p: Panel):
        base = early_mean(p.panel_id, rnd)
        if base is None:
            return None, "random missing (train_loss)"
        oks, parts = [], [f"random {_fmt(base, 4)}"]
        for name, label in informed:
            v = early_mean(p.panel_id, label)
            if v is None:
                return None, f"{name} missing (train_loss)"
            oks.append(v < base)
            parts.append(f"{name} {_fmt(v, 4)}")
        return all(oks), f"mean train loss over t ≤ {early}: " + ", ".join(parts)

    return _per_case(data, check)


def _cohort_size(c: CurveSpec) -> float | None:
    v = c.set.get("cohort.size")
    return float(v) if isinstance(v, int | float) else None


def _gain_per_doubling(small: Reach, large: Reach, m_small: float, m_large: float):
    """(lowest, highest) possible speed-up per doubling of M, rounds(small)/rounds(large) to the
    power 1/log2(m_large/m_small), from the rounds' bounds (not reached: more than T)."""
    k = 1 / math.log2(m_large / m_small)

    def ratio(a: float, b: float) -> float:
        if math.isinf(a) and math.isinf(b):
            return math.nan
        return a / b

    lo, hi = ratio(small.low, large.high), ratio(small.high, large.low)
    return (0.0 if math.isnan(lo) else lo) ** k, (math.inf if math.isnan(hi) else hi) ** k


def cohort_diminishing(data: ClaimData) -> Result:
    """Per panel, with R(M) the rounds to the target test accuracy (seed mean) of the cohort-size
    curves M1 < M2 < … < Mk: the speed-up per doubling of M between the two smallest cohorts,
    (R(M1)/R(M2))^(1/log2(M2/M1)), exceeds the one between the two largest,
    (R(Mk−1)/R(Mk))^(1/log2(Mk/Mk−1)). A curve not reached within T has R > T: the verdict is
    "yes"/"no" only when the bounds decide it, else "n/a"."""
    if (why := _no_target(data)) is not None:
        return "n/a", why
    ms = sorted(((m, c.label) for c in data.curves if (m := _cohort_size(c))), key=lambda x: x[0])
    if len(ms) < 3:
        return "n/a", "fewer than three cohort-size (cohort.size) curves"

    def check(p: Panel):
        reach = _reached(data, p.panel_id, ms)
        if len(reach) < 3:
            return None, "fewer than three M curves with data"
        (m1, r1), (m2, r2) = reach[0], reach[1]
        (ma, ra), (mb, rb) = reach[-2], reach[-1]
        lo_small, hi_small = _gain_per_doubling(r1, r2, m1, m2)
        lo_large, hi_large = _gain_per_doubling(ra, rb, ma, mb)
        rounds = ", ".join(f"M={m:g}: {r.short}" for m, r in reach)
        text = (
            f"rounds to target {rounds}; speed-up per doubling M={m1:g}→{m2:g} "
            f"{_interval(lo_small, hi_small)}, M={ma:g}→{mb:g} {_interval(lo_large, hi_large)}"
        )
        if lo_small > hi_large:
            return True, text
        if hi_small <= lo_large:
            return False, text
        return None, text + " (undecided: a cohort did not reach the target within T)"

    return _per_case(data, check)


def _interval(lo: float, hi: float) -> str:
    if math.isclose(lo, hi):
        return f"{lo:.2f}×"
    return f"{lo:.2f}…{'∞' if math.isinf(hi) else f'{hi:.2f}'}×"


FAILURE_DROP = 0.5  # a round whose training accuracy is ≤ this times the previous round's


def training_failures(long: pd.DataFrame | None, metric: str = "train_acc") -> pd.DataFrame:
    """Catastrophic training failures per run: rows (panel_id, curve, seed, round, before,
    after) of every round t whose training accuracy is at most half of round t−1's (consecutive
    logged rounds, finite values only)."""
    cols = ["panel_id", "curve", "seed", "round", "before", "after"]
    if long is None or long.empty:
        return pd.DataFrame(columns=cols)
    sel = long[long["metric"] == metric].sort_values(["run_id", "round"])
    rows = []
    for (pid, curve, seed, _), g in sel.groupby(["panel_id", "curve", "seed", "run_id"]):
        v = g[g["value"].map(math.isfinite)]
        prev = v["value"].shift(1)
        hit = v[(prev > 0) & (v["value"] <= FAILURE_DROP * prev + EPS)]
        for r, after, before in zip(hit["round"], hit["value"], prev[hit.index], strict=True):
            rows.append((pid, curve, int(seed), int(r), float(before), float(after)))
    return pd.DataFrame(rows, columns=cols)


def failures_happen(data: ClaimData) -> Result:
    """At least one catastrophic training failure in a run of any cohort-size curve: a round
    whose training accuracy is at most half of the previous round's (read per run, not on the
    seed mean; counted over the runs without a diverged or blown-up seed)."""
    if data.long is None or "train_acc" not in set(data.long["metric"]):
        return "n/a", "no training accuracy logged (eval.train_metrics)"
    fails = training_failures(data.long)
    labels = [c.label for c in data.curves]
    parts, total = [], 0
    for p in data.panels:
        for label in labels:
            if not len(data.series(p.panel_id, label, "train_acc")):
                continue
            bad = set(data.failed_seeds(p.panel_id, label))
            f = fails[(fails["panel_id"] == p.panel_id) & (fails["curve"] == label)]
            f = f[~f["seed"].isin(bad)]
            total += len(f)
            parts.append(f"{label}: {len(f)} in {f['seed'].nunique()} run(s)")
    if not parts:
        return "n/a", "no training accuracy with data"
    return ("yes" if total > 0 else "no"), f"{total} failure(s): " + ", ".join(parts)


# ------------------------------------------------------------------------------ FedVeca
#: Theorem 1's premise in our reading (docs/algorithms.md §5.3): η β̂ τ_k ≤ PREMISE_BOUND
PREMISE_BOUND = 1.0


def fedveca_curve(data: ClaimData) -> str | None:
    """Label of the FedVeca curve: the source the derived curves name (``derive.from``), else
    the curve that sets ``step_policy: fedveca``, else a curve labelled "FedVeca"."""
    sources = {c.derive.from_ for c in data.curves if c.derive is not None}
    if len(sources) == 1:
        return sources.pop()
    label = data.curve_where("step_policy", "fedveca")
    if label is not None:
        return label
    return next((c.label for c in data.curves if c.label == "FedVeca"), None)


def _baselines(data: ClaimData) -> dict[str, str | None]:
    """FedAvg and FedNova with fixed steps (the curves derived from FedVeca's runs)."""
    return {
        "FedAvg": data.curve_matching(algorithm="fedavg", step_policy="fixed"),
        "FedNova": data.curve_matching(algorithm="fednova", step_policy="fixed"),
    }


def _first_reach(s: pd.Series, level: float, *, below: bool) -> Reach | None:
    """When ``s`` first reaches ``level``: ≤ it (``below``, a loss) or ≥ it (an accuracy)."""
    return rounds_to_target(-s, -level) if below else rounds_to_target(s, level)


def _reaches_first(reach: dict[str, Reach], first: str) -> bool:
    """``first`` reached, no later than every other curve and strictly earlier than at least
    one (a curve that never reaches counts as later than any that does)."""
    mine = reach[first]
    others = [r for name, r in reach.items() if name != first]
    if not mine.reached:
        return False
    return all(mine.high <= r.high for r in others) and any(mine.high < r.high for r in others)


def fedveca_reaches_first(data: ClaimData) -> Result:
    """Per panel, with L_c and A_c the final seed-mean test loss and test accuracy of the
    centralized (flat) curve, and for FedAvg, FedNova and FedVeca the first round at which the
    seed-mean test loss is ≤ L_c and the first round at which the seed-mean test accuracy is ≥
    A_c: for each of the two levels FedVeca reaches it, no later than both FedAvg and FedNova
    and strictly earlier than at least one of them (a curve that never reaches a level counts
    as later than any that does; if no curve reaches a level the panel fails). "yes" iff every
    panel with data passes."""
    cen, veca = data.curve_where("algorithm", "centralized"), fedveca_curve(data)
    named = {**_baselines(data), "FedVeca": veca}
    missing = _missing((cen, "centralized"), *((label, name) for name, label in named.items()))
    if missing is not None:
        return "n/a", missing

    def check(p: Panel):
        pid, oks, parts = p.panel_id, [], []
        for metric, below, what in (("test_loss", True, "L_c"), ("test_acc", False, "A_c")):
            level = data.final(pid, cen, metric)
            series = {name: data.series(pid, label, metric) for name, label in named.items()}
            if level is None or any(not len(s) for s in series.values()):
                return None, f"centralized or a method missing ({metric})"
            reach = {n: _first_reach(s, level, below=below) for n, s in series.items()}
            oks.append(_reaches_first(reach, "FedVeca"))
            rounds = ", ".join(
                f"{n} {r.rounds if r.reached else 'never'}" for n, r in reach.items()
            )
            gaps = ", ".join(f"{n} {float(s.iloc[-1]) - level:+.4f}" for n, s in series.items())
            op = "≤" if below else "≥"
            head = f"{metric} {op} {what}={_fmt(level, 4)}"
            parts.append(f"{head} first at: {rounds} (final − {what}: {gaps})")
        return all(oks), "; ".join(parts)

    return _per_case(data, check)


def premise_values(long: pd.DataFrame | None, panel: str, curve: str) -> pd.DataFrame:
    """Per-run ``premise`` rows (run_id, round, value) of one cell from round 2 on (the metric
    starts there: β̂ is one round late)."""
    if long is None or long.empty:
        return pd.DataFrame(columns=["run_id", "round", "value"])
    sel = long[
        (long["panel_id"] == panel)
        & (long["curve"] == curve)
        & (long["metric"] == "premise")
        & (long["round"] >= 2)
    ]
    return sel[["run_id", "round", "value"]]


def premise_below_bound(data: ClaimData) -> Result:
    """Read per run (not on the seed mean): every (run, round ≥ 2) pair of every curve with a
    ``premise`` history (η β̂ τ_k) has premise ≤ 1, Theorem 1's premise in our reading; a
    non-finite value counts as above. "yes" iff that holds in every panel with data. Numbers:
    per panel the largest premise and the share of (run, round) pairs above 1."""
    if data.long is None or "premise" not in set(data.long["metric"]):
        return "n/a", "no premise logged (step_policy: fedveca logs it from round 2)"

    def check(p: Panel):
        frames = []
        for c in data.curves:
            rows = premise_values(data.long, p.panel_id, c.label)
            if len(rows):
                data.series(p.panel_id, c.label, "premise")  # read: a diverged run makes it n/t
                frames.append(rows)
        if not frames:
            return None, "no premise from round 2"
        values = pd.concat(frames)["value"].astype(float)
        above = ~values.map(lambda v: math.isfinite(v) and within(v, PREMISE_BOUND))
        top = float(values.max())
        share = f"{int(above.sum())} of {len(values)} (run, round) pairs above 1"
        return not above.any(), f"max premise {fmt_against(top, PREMISE_BOUND, 4)}, {share}"

    return _per_case(data, check)


def case1_overlap(data: ClaimData) -> Result:
    """In the Case 1 panel (``data.partition: case1``) the final seed-mean test accuracies of
    FedAvg, FedNova and FedVeca differ by at most 0.01 (largest − smallest), and their loss AUCs
    by at most 5% relative to the smallest ((largest − smallest) / smallest ≤ 0.05)."""
    case1 = [p for p in data.panels if p.values.get("data.partition") == "case1"]
    named = {**_baselines(data), "FedVeca": fedveca_curve(data)}
    missing = _missing(*((label, name) for name, label in named.items()))
    if missing is not None or not case1:
        return "n/a", missing or "no Case 1 panel"

    def check(p: Panel):
        accs = {n: data.final(p.panel_id, label, "test_acc") for n, label in named.items()}
        aucs = {n: data.auc(p.panel_id, label) for n, label in named.items()}
        if None in accs.values() or None in aucs.values():
            return None, "a method missing"
        spread = max(accs.values()) - min(accs.values())
        rel = (max(aucs.values()) - min(aucs.values())) / min(aucs.values())
        ok = within(spread, ACC_TOL) and within(rel, AUC_TOL)
        return ok, (
            "final acc "
            + ", ".join(f"{n} {_fmt(v, 4)}" for n, v in accs.items())
            + f" (spread {fmt_against(spread, ACC_TOL, 4)}); loss AUC "
            + ", ".join(f"{n} {_fmt(v, 4)}" for n, v in aucs.items())
            + f" (spread {fmt_against(100 * rel, 100 * AUC_TOL, 1)}% of the smallest)"
        )

    return _per_case(data, check, case1)


def mean_rises(long: pd.DataFrame | None, panel: str, curve: str, metric: str = "test_loss"):
    """How noisy a curve is: the number of round-to-round rises of ``metric`` counted in each
    run of the cell (finite values, :func:`rises`) and averaged over the runs; None without
    runs."""
    if long is None or long.empty:
        return None
    sel = long[(long["panel_id"] == panel) & (long["curve"] == curve) & (long["metric"] == metric)]
    counts = []
    for _, g in sel.groupby("run_id"):
        s = g.sort_values("round").set_index("round")["value"].astype(float)
        counts.append(rises(s[s.map(math.isfinite)]))
    return sum(counts) / len(counts) if counts else None


def phi_smooth_slow(data: ClaimData) -> Result:
    """Over the φ curves (``fedveca.phi``): "noisy" = the test-loss rises from one round to the
    next counted per run and averaged over the seeds (:func:`mean_rises`); "slow" = the loss AUC
    of the seed-mean curve. "yes" iff the largest φ has strictly fewer mean rises and a strictly
    larger loss AUC than each other φ, and the smallest φ strictly more mean rises and a strictly
    smaller loss AUC than each other φ."""
    phis = data.curves_with("fedveca.phi")
    if len(phis) < 3:
        return "n/a", "fewer than three φ curves"
    if data.long is None:
        return "n/a", "no per-run histories"

    def check(p: Panel):
        aucs = {label: data.auc(p.panel_id, label) for _, label in phis}
        noise = {label: mean_rises(data.long, p.panel_id, label) for _, label in phis}
        if None in aucs.values() or None in noise.values():
            return None, "a φ curve missing"
        big, small = phis[-1][1], phis[0][1]
        others_big = [lab for _, lab in phis if lab != big]
        others_small = [lab for _, lab in phis if lab != small]
        ok = all(noise[big] < noise[o] and aucs[big] > aucs[o] for o in others_big) and all(
            noise[small] > noise[o] and aucs[small] < aucs[o] for o in others_small
        )
        return ok, ", ".join(
            f"{label}: {noise[label]:.1f} mean rises, loss AUC {_fmt(aucs[label], 4)}"
            for _, label in phis
        )

    return _per_case(data, check)


def fedveca_by_clients(data: ClaimData) -> dict[int, str]:
    """N -> label of the FedVeca curves over ``data.num_clients`` (not derived, no fixed
    step policy)."""
    out = {}
    for c in data.curves:
        n = c.set.get("data.num_clients")
        if c.derive is None and n is not None and c.set.get("step_policy") != "fixed":
            out[int(n)] = c.label
    return dict(sorted(out.items()))


def more_clients_not_faster(data: ClaimData) -> Result:
    """Per panel, with AUC(N) the loss AUC of the seed-mean FedVeca curve with N clients:
    AUC(30) ≥ 0.95 · AUC(5), AUC(50) ≥ 0.95 · AUC(5) and AUC(50) ≥ 0.95 · AUC(30) (more
    clients are at most 5% faster: 1 − AUC_TOL)."""
    ns = fedveca_by_clients(data)
    if any(n not in ns for n in (5, 30, 50)):
        return "n/a", "the spec needs FedVeca curves with N = 5, 30 and 50"

    def check(p: Panel):
        aucs = {n: data.auc(p.panel_id, ns[n]) for n in (5, 30, 50)}
        if None in aucs.values():
            return None, "a FedVeca N curve missing"
        pairs = ((30, 5), (50, 5), (50, 30))
        ok = all(within((1 - AUC_TOL) * aucs[b], aucs[a]) for a, b in pairs)
        ratios = ", ".join(
            f"N={a}/N={b} {fmt_against(aucs[a] / aucs[b], 1 - AUC_TOL, 4, at_least=True)}"
            for a, b in pairs
        )
        text = ", ".join(f"N={n} {_fmt(v, 4)}" for n, v in aucs.items())
        return ok, f"loss AUC {text}; ratios {ratios} (≥ {1 - AUC_TOL:g} passes)"

    return _per_case(data, check)


def fedveca_n50_beats_baselines(data: ClaimData) -> Result:
    """Per panel the FedVeca curve with N = 50 has a strictly lower loss AUC than both FedNova
    and FedAvg with N = 50 (fixed τ derived from the FedVeca N = 50 runs)."""
    veca = fedveca_by_clients(data).get(50)
    nova = data.curve_matching(algorithm="fednova", step_policy="fixed", data__num_clients=50)
    avg = data.curve_matching(algorithm="fedavg", step_policy="fixed", data__num_clients=50)
    named = {"FedVeca": veca, "FedNova": nova, "FedAvg": avg}
    missing = _missing(*((label, f"{name} N=50") for name, label in named.items()))
    if missing is not None:
        return "n/a", missing

    def check(p: Panel):
        aucs = {n: data.auc(p.panel_id, label) for n, label in named.items()}
        accs = {n: data.final(p.panel_id, label, "test_acc") for n, label in named.items()}
        if None in aucs.values():
            return None, "a method missing"
        ok = aucs["FedVeca"] < aucs["FedNova"] and aucs["FedVeca"] < aucs["FedAvg"]
        return ok, (
            "N=50 loss AUC "
            + ", ".join(f"{n} {_fmt(v, 4)}" for n, v in aucs.items())
            + "; final acc "
            + ", ".join(f"{n} {_fmt(v, 4)}" for n, v in accs.items())
        )

    return _per_case(data, check)


# ------------------------------------------------------------------------------ FedWalk
#: algorithm -> method name of FedWalk's Table 2
WALK_BASES = {
    "fedavg": "FedAvg",
    "scaffold": "SCAFFOLD",
    "fedprox": "FedProx",
    "fednova": "FedNova",
}
#: the rows of Table 2, in the paper's order: the four passive methods, then their leashed forms
WALK_METHODS = (
    "FedAvg",
    "SCAFFOLD",
    "FedProx",
    "FedNova",
    "FedWalk",
    "SCAFFOLD+FedWalk",
    "FedProx+FedWalk",
    "FedNova+FedWalk",
)
#: leashed method -> its base method (the "+/−" of Table 2)
WALK_BASE_OF = {
    "FedWalk": "FedAvg",
    "SCAFFOLD+FedWalk": "SCAFFOLD",
    "FedProx+FedWalk": "FedProx",
    "FedNova+FedWalk": "FedNova",
}
#: a panel whose ``data.dirichlet_alpha`` is below this is non-IID (Dir(0.1), Dir(0.01));
#: the paper's "IID" panels are Dir(10) and Dir(100)
NON_IID_BELOW = 1.0
MIN_TAUS = 3  # τ values with data a Fig. 3 trend needs
LEASH_TASKS = ("LH", "MH", "HH")


def hooks_of(c: CurveSpec) -> list[str]:
    """The ``hooks`` a curve sets (a single name counts as a list of one)."""
    hooks = c.set.get("hooks") or []
    return [hooks] if isinstance(hooks, str) else list(hooks)


def walk_method(c: CurveSpec) -> str | None:
    """The Table 2 method of a curve, from its overrides: ``algorithm`` (fedavg, scaffold,
    fedprox, fednova) and whether ``hooks`` has ``fedwalk``: "FedAvg", "FedWalk" (FedAvg with
    the leash), "SCAFFOLD+FedWalk", ...; None for any other curve."""
    base = WALK_BASES.get(c.set.get("algorithm"))
    hooks = hooks_of(c)
    if base is None or "leash_pretrain" in hooks:
        return None
    if "fedwalk" not in hooks:
        return base
    return "FedWalk" if base == "FedAvg" else f"{base}+FedWalk"


def lr_grid(curves: list[CurveSpec], method: str) -> list[tuple[float, str]]:
    """(η_0 = ``train.lr``, label) of the curves of ``method``, in spec order."""
    return [
        (float(c.set["train.lr"]), c.label)
        for c in curves
        if walk_method(c) == method and isinstance(c.set.get("train.lr"), int | float)
    ]


def eta_text(lr: float | None) -> str:
    """η_0 as the specs write it: 0.01 -> "1e-2", 0.003 -> "3e-3", 0.5 -> "0.5"."""
    if lr is None:
        return "—"
    if lr > 0:
        exp = math.floor(math.log10(lr))
        mant = lr / 10**exp
        if exp < -1 and math.isclose(mant, round(mant), rel_tol=1e-9):
            return f"{round(mant)}e{exp}"
    return f"{lr:g}"


@dataclass
class LrChoice:
    """One method's learning rate in one panel (W4): the grid point with the highest seed-mean
    best-over-rounds test accuracy among those without a diverged or blown-up seed."""

    method: str
    label: str | None = None
    lr: float | None = None
    stat: Stat | None = None
    #: every grid point: (η_0, label, its Stat or None, why it is no candidate, "" if it is)
    grid: list[tuple[float, str, Stat | None, str]] = field(default_factory=list)
    #: the other candidates with exactly the chosen accuracy (spec order decided: stated)
    tied: list[str] = field(default_factory=list)

    @property
    def eta(self) -> str:
        """ "η=1e-2" (+ " (tie with η=1e-3: first in spec order)"), or why none was chosen."""
        if self.label is None:
            return self.why_none
        text = f"η={eta_text(self.lr)}"
        if self.tied:
            etas = [f"η={eta_text(lr)}" for lr, lab, _, _ in self.grid if lab in self.tied]
            text += f" (tie with {', '.join(etas)}: first in spec order)"
        return text

    @property
    def why_none(self) -> str:
        whys = {why for _, _, _, why in self.grid}
        if not self.grid or whys == {"no runs"}:
            return "no runs"
        if self.label is None:
            some = " with runs" if "no runs" in whys else ""
            return f"every η{some} " + "/".join(sorted(w for w in whys if w != "no runs"))
        return ""

    @property
    def excluded(self) -> list[str]:
        """ "η=1e-2 diverged" for every grid point with runs that was no candidate."""
        return [
            f"η={eta_text(lr)} {why}" for lr, _, _, why in self.grid if why not in ("", "no runs")
        ]


def choose_lr(data: ClaimData, pid: str, method: str, metric: str = "test_acc") -> LrChoice:
    """:class:`LrChoice` of ``method`` in panel ``pid``: per grid point the seed mean of each
    run's best ``metric`` over rounds (W11); grid points with a diverged or blown-up seed, or
    without runs, are no candidates; an exact tie goes to the first in spec order (stated in
    ``tied``). The candidates are read without marking them used; the chosen one is marked."""
    choice = LrChoice(method)
    for lr, label in lr_grid(data.curves, method):
        stat = data.run_stat(pid, label, metric, mark=False)
        failed = data.failed_seeds(pid, label)
        why = ""
        if failed:
            why = (
                "diverged"
                if any(v.startswith("diverged") for v in failed.values())
                else ("blew up")
            )
        elif stat is None:
            why = "no runs"
        choice.grid.append((lr, label, stat, why))
        if why:
            continue
        if choice.stat is None or stat.mean > choice.stat.mean:
            choice.label, choice.lr, choice.stat, choice.tied = label, lr, stat, []
        elif stat.mean == choice.stat.mean:
            choice.tied.append(label)
    if choice.label is not None:
        data.run_stat(pid, choice.label, metric)  # the chosen curve is the evidence
    return choice


def pct_pair(a: float, b: float, digits: int = 2) -> tuple[str, str]:
    """``a`` and ``b`` (fractions) in percent with ``digits`` decimals, or as many more as it
    takes for two different values to print differently (equal values print equal)."""
    for d in range(digits, 13):
        ta, tb = f"{100 * a:.{d}f}", f"{100 * b:.{d}f}"
        if ta != tb or a == b:
            return ta, tb
    return repr(100 * a), repr(100 * b)


def compare_text(name_a: str, a: float, name_b: str, b: float, *, lower: bool = False) -> str:
    """ "FedWalk 91.45 > FedAvg 88.06" (``lower``: smaller wins, e.g. a loss); an exact tie
    says so: "FedWalk 91.45 = FedAvg 91.45 (tie)"."""
    ta, tb = pct_pair(a, b) if not lower else (f"{a:.4f}", f"{b:.4f}")
    if lower and ta == tb and a != b:
        ta, tb = (f"{v:.12g}" for v in (a, b))
    op = "=" if a == b else (">" if a > b else "<")
    return f"{name_a} {ta} {op} {name_b} {tb}" + (" (tie)" if a == b else "")


def non_iid(panel: Panel) -> bool:
    """A panel with ``data.dirichlet_alpha`` < 1 (``NON_IID_BELOW``)."""
    alpha = panel.values.get("data.dirichlet_alpha")
    return isinstance(alpha, int | float) and float(alpha) < NON_IID_BELOW


def _panel_name(p: Panel) -> str:
    return p.label or p.panel_id


def fedwalk_beats_baselines(data: ClaimData) -> Result:
    """In each non-IID panel (data.dirichlet_alpha < 1: Dir(0.1), Dir(0.01)) with data, FedWalk's
    best test accuracy is strictly higher than each of FedAvg, SCAFFOLD, FedProx and FedNova;
    every method at its chosen η_0 (the grid point with the highest seed-mean best-over-rounds
    test accuracy, grid points with a diverged or blown-up seed excluded), best = max over
    rounds per run, then the seed mean. A panel fails when a baseline with data ties or beats
    FedWalk, passes only when all four baselines have data and FedWalk beats each, and counts
    as without data otherwise (numbers: accuracies in %, chosen η)."""
    if data.long is None:
        return "n/a", "no per-run histories"
    if not lr_grid(data.curves, "FedWalk"):
        return "n/a", "no FedWalk curve (algorithm fedavg + hooks fedwalk) in this profile"
    panels = [p for p in data.panels if non_iid(p)]
    if not panels:
        return "n/a", f"no non-IID panel (data.dirichlet_alpha < {NON_IID_BELOW:g})"

    def check(p: Panel):
        walk = choose_lr(data, p.panel_id, "FedWalk")
        if walk.stat is None:
            return None, f"FedWalk {walk.why_none}"
        oks, parts, missing = [], [], []
        for base in WALK_METHODS[:4]:
            ch = choose_lr(data, p.panel_id, base)
            if ch.stat is None:
                missing.append(f"{base} {ch.why_none}")
                continue
            oks.append(walk.stat.mean > ch.stat.mean)
            ta, tb = pct_pair(walk.stat.mean, ch.stat.mean)
            op = "=" if ta == tb else (">" if walk.stat.mean > ch.stat.mean else "<")
            tie = " (tie)" if walk.stat.mean == ch.stat.mean else ""
            parts.append(f"{op} {base} {tb}{tie} ({ch.eta})")
        text = f"best test acc (%): FedWalk {100 * walk.stat.mean:.2f} ({walk.eta})"
        text += (" " + ", ".join(parts)) if parts else ""
        text += ("; missing: " + ", ".join(missing)) if missing else ""
        if oks and not all(oks):
            return False, text
        if missing:
            return None, text + " (all four baselines needed)"
        return True, text

    return _per_case(data, check, panels)


def _leash_pairs(data: ClaimData, panels: list[Panel]):
    """(panel, base method, its leashed form, base choice, leashed choice) of every panel and
    base of Table 2 whose curves the profile has."""
    out = []
    for p in panels:
        for walk, base in WALK_BASE_OF.items():
            if not lr_grid(data.curves, walk) or not lr_grid(data.curves, base):
                continue
            out.append((p, base, walk))
    return out


def _no_data_text(missing: list[tuple[str, str]]) -> str:
    """ "no data: CIFAR-100, Dir(0.01): FedAvg no runs, SCAFFOLD no runs; ..." from (panel name,
    what) pairs, grouped by panel in order."""
    by: dict[str, list[str]] = {}
    for panel, what in missing:
        by.setdefault(panel, []).append(what)
    return "no data: " + "; ".join(f"{p}: {', '.join(w)}" for p, w in by.items())


def fedwalk_helps_each_base(data: ClaimData) -> Result:
    """For each base method X in {FedAvg, SCAFFOLD, FedProx, FedNova} and each panel where both
    have data, X+FedWalk (FedAvg+FedWalk = FedWalk) has a strictly higher best test accuracy
    than X, each at its chosen η_0 (as in the Table 2 claim above). "yes" iff every such pair
    holds, "n/a" without any pair with data. Numbers: how many pairs hold, each pair's
    accuracies (%) and the pairs without data."""
    if data.long is None:
        return "n/a", "no per-run histories"
    pairs = _leash_pairs(data, data.panels)
    if not pairs:
        return "n/a", "no base method with its FedWalk form in this profile"
    held, parts, missing = 0, [], []
    for p, base, walk in pairs:
        b = choose_lr(data, p.panel_id, base)
        w = choose_lr(data, p.panel_id, walk)
        if b.stat is None or w.stat is None:
            whats = [f"{c.method} {c.why_none}" for c in (b, w) if c.stat is None]
            missing.append((_panel_name(p), " and ".join(whats)))
            continue
        held += w.stat.mean > b.stat.mean
        parts.append(f"{_panel_name(p)}: {compare_text(walk, w.stat.mean, base, b.stat.mean)}")
    return _pairs_verdict(held, parts, missing, "best test acc %")


def fedwalk_lowers_training_loss(data: ClaimData) -> Result:
    """In each non-IID panel (data.dirichlet_alpha < 1), for each base X in {FedAvg, SCAFFOLD,
    FedProx, FedNova} with data for X and X+FedWalk (FedAvg+FedWalk = FedWalk), each at the η_0
    Table 2 chose (best seed-mean best-over-rounds test accuracy), X+FedWalk's mean training
    loss over the rounds (the mean of the seed-mean train_loss curve: area under it / T) is
    strictly lower than X's. "yes" iff every such pair holds, "n/a" without any."""
    if data.long is None:
        return "n/a", "no per-run histories"
    panels = [p for p in data.panels if non_iid(p)]
    if not panels:
        return "n/a", f"no non-IID panel (data.dirichlet_alpha < {NON_IID_BELOW:g})"
    pairs = _leash_pairs(data, panels)
    if not pairs:
        return "n/a", "no base method with its FedWalk form in this profile"
    held, parts, missing = 0, [], []
    for p, base, walk in pairs:
        b = choose_lr(data, p.panel_id, base)
        w = choose_lr(data, p.panel_id, walk)
        lb = data.auc(p.panel_id, b.label, "train_loss") if b.label else None
        lw = data.auc(p.panel_id, w.label, "train_loss") if w.label else None
        if lb is None or lw is None:
            whats = [
                f"{c.method} {c.why_none or 'no training loss'}"
                for c, loss in ((b, lb), (w, lw))
                if loss is None
            ]
            missing.append((_panel_name(p), " and ".join(whats)))
            continue
        held += lw < lb
        text = compare_text(f"{walk} ({w.eta})", lw, f"{base} ({b.eta})", lb, lower=True)
        parts.append(f"{_panel_name(p)}: {text}")
    return _pairs_verdict(held, parts, missing, "mean training loss over rounds")


def _pairs_verdict(held: int, parts: list[str], missing: list, what: str) -> Result:
    """The verdict of a (base, base + FedWalk) pair claim: "yes" iff all ``parts`` (pairs with
    data) hold, "n/a" without any; the numbers say how many hold, each pair, and what had no
    data (``missing``)."""
    if not parts:
        return "n/a", "no pair with data; " + _no_data_text(missing)
    n = len(parts)
    text = f"{held} of {n} pairs hold ({what}): " + "; ".join(parts)
    if missing:
        text += "; " + _no_data_text(missing)
    return ("yes" if held == n else "no"), text


def tau_points(data: ClaimData, pid: str, *, mark: bool = True) -> list[tuple[float, Stat]]:
    """(τ, Stat of the best test accuracy) of the ``fedwalk.tau`` curves with data in ``pid``,
    sorted by τ."""
    out = []
    for tau, label in data.curves_with("fedwalk.tau"):
        stat = data.run_stat(pid, label, "test_acc", mark=mark)
        if stat is not None:
            out.append((float(tau), stat))
    return sorted(out, key=lambda p: p[0])


def fit_slope(points: list[tuple[float, Stat]]) -> float:
    """Least-squares slope of the seed means against τ (accuracy per unit τ)."""
    xs = [t for t, _ in points]
    ys = [s.mean for _, s in points]
    mx, my = math.fsum(xs) / len(xs), math.fsum(ys) / len(ys)
    sxx = math.fsum((x - mx) ** 2 for x in xs)
    return math.fsum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx


def _taus_text(points: list[tuple[float, Stat]]) -> str:
    return ", ".join(f"{t:g}: {100 * s.mean:.2f}" for t, s in points)


def _task_panels(data: ClaimData, tasks: tuple[str, ...]) -> list[Panel]:
    return [p for p in data.panels if p.values.get("leash.task") in tasks]


def _best_taus(points: list[tuple[float, Stat]]) -> list[float]:
    top = max(s.mean for _, s in points)
    return [t for t, s in points if s.mean == top]


def _tie_text(best: list[float]) -> str:
    """`` (tie: τ=0.5, 1)`` when several τ share the best accuracy, else ``""``."""
    return f" (tie: τ={', '.join(f'{t:g}' for t in best)})" if len(best) > 1 else ""


def tau_rises_then_falls(data: ClaimData) -> Result:
    """For the LH and MH leash tasks (panels leash.task LH, MH), over the τ curves
    (fedwalk.tau) with data (at least 3), the τ with the highest seed-mean best test accuracy
    lies strictly inside the τ range drawn (neither the smallest nor the largest τ: the
    accuracy rises, then falls); an exact tie for the best counts only if every tied τ is
    inside. "yes" iff every task with data passes."""
    if data.long is None:
        return "n/a", "no per-run histories"
    panels = _task_panels(data, ("LH", "MH"))
    if not panels:
        return "n/a", "no LH or MH panel (leash.task) in this profile"

    def check(p: Panel):
        points = tau_points(data, p.panel_id)
        if len(points) < MIN_TAUS:
            return None, f"{len(points)} τ value(s) with runs, {MIN_TAUS} needed"
        best = _best_taus(points)
        lo, hi = points[0][0], points[-1][0]
        inside = all(lo < t < hi for t in best)
        tie = _tie_text(best)
        where = "inside" if inside else "at the edge of"
        top = 100 * max(s.mean for _, s in points)
        return inside, (
            f"best τ={best[0]:g} ({top:.2f}%){tie} {where} [{lo:g}, {hi:g}]; "
            f"best test acc (%) per τ: {_taus_text(points)}"
        )

    return _per_case(data, check, panels)


def tau_falls(data: ClaimData) -> Result:
    """For the HH leash task (panel leash.task HH), over the τ curves (fedwalk.tau) with data
    (at least 3): the least-squares slope of the seed-mean best test accuracy against τ is
    negative (< 0) and the highest accuracy is at the smallest τ alone (an exact tie with
    another τ fails, stated)."""
    if data.long is None:
        return "n/a", "no per-run histories"
    panels = _task_panels(data, ("HH",))
    if not panels:
        return "n/a", "no HH panel (leash.task) in this profile"

    def check(p: Panel):
        points = tau_points(data, p.panel_id)
        if len(points) < MIN_TAUS:
            return None, f"{len(points)} τ value(s) with runs, {MIN_TAUS} needed"
        slope = fit_slope(points)
        best = _best_taus(points)
        at_min = best == [points[0][0]]
        tie = _tie_text(best)
        return slope < 0 and at_min, (
            f"slope {100 * slope:+.3f} points per unit τ ({'< 0' if slope < 0 else '≥ 0'}); "
            f"best at τ={best[0]:g}{tie}, smallest τ {points[0][0]:g}; "
            f"best test acc (%) per τ: {_taus_text(points)}"
        )

    return _per_case(data, check, panels)


def leash_curves(data: ClaimData, hook: str) -> dict[str, str]:
    """Leash task -> label of the curve with ``hook`` in its hooks and that ``leash.task``."""
    out: dict[str, str] = {}
    for c in data.curves:
        task = c.set.get("leash.task")
        if hook in hooks_of(c) and task is not None:
            out.setdefault(str(task), c.label)
    return out


def fedwalk_beats_pretraining(data: ClaimData) -> Result:
    """For every (setting panel, leash task) where both have data, FedWalk with that leash task
    (hooks fedwalk, leash.task) has a strictly higher best test accuracy (max over rounds per
    run, seed mean) than pre-training on the same leash task then FedAvg (hooks
    leash_pretrain). "yes" iff every such pair holds, "n/a" without any. Numbers: how many
    pairs hold, and each pair's accuracies (%)."""
    if data.long is None:
        return "n/a", "no per-run histories"
    walk, pre = leash_curves(data, "fedwalk"), leash_curves(data, "leash_pretrain")
    tasks = [t for t in (*LEASH_TASKS, *sorted(walk)) if t in walk and t in pre]
    tasks = list(dict.fromkeys(tasks))
    if not tasks:
        return "n/a", "no leash task with both a FedWalk and a Pre-training curve in this profile"
    held, parts, missing = 0, [], []
    for p in data.panels:
        for task in tasks:
            w = data.run_stat(p.panel_id, walk[task], "test_acc")
            b = data.run_stat(p.panel_id, pre[task], "test_acc")
            if w is None or b is None:
                missing.append(f"{_panel_name(p)} {task}")
                continue
            held += w.mean > b.mean
            text = compare_text("FedWalk", w.mean, "Pre-training", b.mean)
            parts.append(f"{_panel_name(p)} {task}: {text}")
    if not parts:
        return "n/a", "no (setting, task) pair with data"
    n = len(parts)
    text = f"{held} of {n} (setting, task) pairs hold (best test acc %): " + "; ".join(parts)
    if missing:
        text += "; no runs: " + ", ".join(missing)
    return ("yes" if held == n else "no"), text


def fig5_curves(data: ClaimData) -> tuple[str | None, str | None]:
    """(FedAvg, FedWalk) labels of Fig. 5: the first curve without hooks and the first with the
    fedwalk hook."""
    avg = next((c.label for c in data.curves if not hooks_of(c)), None)
    walk = next((c.label for c in data.curves if "fedwalk" in hooks_of(c)), None)
    return avg, walk


def walk_gains(data: ClaimData, *, mark: bool = True) -> list[tuple[float, Panel, float]]:
    """(a, panel, FedWalk − FedAvg best test accuracy, seed means) of every panel with
    ``data.dirichlet_alpha`` and data for both, sorted by a."""
    avg, walk = fig5_curves(data)
    out = []
    if avg is None or walk is None:
        return out
    for p in data.panels:
        alpha = p.values.get("data.dirichlet_alpha")
        if not isinstance(alpha, int | float):
            continue
        a = data.run_stat(p.panel_id, avg, "test_acc", mark=mark)
        w = data.run_stat(p.panel_id, walk, "test_acc", mark=mark)
        if a is not None and w is not None:
            out.append((float(alpha), p, w.mean - a.mean))
    return sorted(out, key=lambda g: g[0])


def gain_largest_at_01(data: ClaimData) -> Result:
    """Over the Dir(a) panels (data.dirichlet_alpha) with data for both, the gain = FedWalk's
    best test accuracy − FedAvg's (seed means of the max over rounds per run) is largest at
    a = 0.1, strictly larger than at every other a (an exact tie fails, stated). "n/a" when
    a = 0.1 or every other a lacks data."""
    if data.long is None:
        return "n/a", "no per-run histories"
    avg, walk = fig5_curves(data)
    if (why := _missing((avg, "FedAvg (no hooks)"), (walk, "FedWalk (hooks fedwalk)"))) is not None:
        return "n/a", why
    gains = walk_gains(data)
    text = "gain FedWalk − FedAvg (points of best test acc): " + ", ".join(
        f"Dir({a:g}) {100 * g:+.2f}" for a, _, g in gains
    )
    at = [g for a, _, g in gains if math.isclose(a, 0.1)]
    if not at or len(gains) < 2:
        have = "no Dir(0.1) panel with data" if not at else "no other Dir(a) panel with data"
        return "n/a", f"{have}" + (f"; {text}" if gains else "")
    top = max(g for _, _, g in gains)
    argmax = [a for a, _, g in gains if g == top]
    tie = f" (tie: a={', '.join(f'{a:g}' for a in argmax)})" if len(argmax) > 1 else ""
    ok = argmax == [0.1] or (len(argmax) == 1 and math.isclose(argmax[0], 0.1))
    return ("yes" if ok else "no"), f"{text}; largest at a={argmax[0]:g}{tie}"


# ------------------------------------------------------------------------------ registry
CRITERIA: dict[str, Callable[[ClaimData], Result]] = {
    "bherd-fedavg converges faster and reaches higher accuracy than fedavg": bherd_beats_fedavg,
    "grab-fedavg gives little or no gain": grab_little_gain,
    "bherd speeds up fednova and scaffold": bherd_speeds_up_others,
    "bherd helps fednova most on the svm and scaffold most on the cnn": bherd_gain_by_model,
    "alpha=1.0 matches fedavg": alpha_matches_fedavg,
    "alpha 0.3-0.5 is fastest": alpha_fastest,
    "alpha=0.1 fails to converge": alpha_fails,
    "larger e converges faster": larger_e_faster,
    "e=2 oscillates slightly": e2_oscillates,
    "best b is 10, 10, 50 for case 1, 2, 3": best_batch,
    "n=1 equals centralized and is fastest": n1_centralized,
    "n=5 is best among 5..20": n5_best,
    "in case 3 clients 4-5 show larger distances than clients 1-3": case3_far_clients,
    "rr vs no rr differ little": rr_little_difference,
    "fedavg needs far fewer rounds than fedsgd": fedavg_fewer_rounds,
    "too small and too large e both slow convergence": e_interior_fastest,
    "sampling with replacement converges faster": replacement_faster,
    "the adaptive server optimizers outperform fedavg": adaptive_outperform,
    "the informed samplers converge faster in early rounds": informed_early,
    "larger cohorts give diminishing gains": cohort_diminishing,
    "catastrophic training failures happen": failures_happen,
    "fedveca reaches the centralized loss and accuracy first": fedveca_reaches_first,
    "the premise stays below its bound after round 1": premise_below_bound,
    "in case 1 all three overlap": case1_overlap,
    "larger phi is smooth but slow, the smallest phi is fast but noisy": phi_smooth_slow,
    "more clients do not converge faster": more_clients_not_faster,
    "fedveca at n=50 beats the baselines at n=50": fedveca_n50_beats_baselines,
    "fedwalk beats every baseline under non-iid": fedwalk_beats_baselines,
    "adding fedwalk helps each base method (scaffold, fedprox, fednova, and fedavg itself)": (
        fedwalk_helps_each_base
    ),
    "fedwalk and its compositions lower the training loss faster than their base methods "
    "under non-iid": fedwalk_lowers_training_loss,
    "accuracy rises then falls with τ for lh and mh": tau_rises_then_falls,
    "accuracy falls with τ for hh": tau_falls,
    "fedwalk beats pre-training on the same leash task": fedwalk_beats_pretraining,
    "fedwalk's gain over fedavg is largest at dir(0.1)": gain_largest_at_01,
}


def normalize(claim: str) -> str:
    return " ".join(claim.lower().replace("–", "-").replace("—", "-").split())


def criterion_text(fn: Callable) -> str:
    return " ".join((fn.__doc__ or "").replace("``", "").split())


def rounds_of(data: ClaimData) -> int:
    """T of a figure: the last round of its longest curve."""
    return int(data.agg["round"].max()) if len(data.agg) else 0


NOT_TESTABLE = "not testable at this profile (T={t})"
NOT_TESTABLE_DIVERGED = "not testable: {n} of {m} runs diverged"
TESTABLE_RULE = (
    f"Tested from T ≥ {MIN_ROUNDS} rounds; a shorter profile shows n/t (not testable), with "
    "the numbers. A diverged run (or one whose loss blew up) in a curve the criterion reads "
    "makes it n/t too."
)


def diverged_label(div: int, blow: int, total: int) -> str:
    """ "not testable: 2 of 6 runs diverged" (+ " (1 of them a finite loss blow-up)")."""
    text = NOT_TESTABLE_DIVERGED.format(n=div + blow, m=total)
    if blow:
        text += (
            f" ({blow} of them {'a ' if blow == 1 else ''}finite loss blow-up{'s' * (blow > 1)})"
        )
    return text


def check_claims(claims: list[str], data: ClaimData | None) -> list[ClaimCheck]:
    """One :class:`ClaimCheck` per claim text; "n/a" without data or without a criterion, "n/t"
    when a curve the criterion read has a diverged (or blown-up) run, or when the figure's
    curves are shorter than ``MIN_ROUNDS`` (the numbers are still given)."""
    out = []
    for claim in claims:
        fn = CRITERIA.get(normalize(claim))
        if fn is None:
            out.append(ClaimCheck(claim, "n/a", "no criterion defined for this claim"))
            continue
        criterion = f"{criterion_text(fn)} {TESTABLE_RULE}"
        if data is None or data.agg.empty:
            out.append(ClaimCheck(claim, "n/a", "no runs", criterion))
            continue
        data.used.clear()
        verdict, numbers = fn(data)
        div, blow, total = data.unusable(data.used)
        t = rounds_of(data)
        label = ""
        if div + blow:
            verdict, label = "n/t", diverged_label(div, blow, total)
            if t < MIN_ROUNDS:
                label += f"; T={t} < {MIN_ROUNDS} rounds"
        elif verdict in ("yes", "no") and t < MIN_ROUNDS:
            verdict, label = "n/t", NOT_TESTABLE.format(t=t)
        out.append(ClaimCheck(claim, verdict, numbers, criterion, label))
    return out
