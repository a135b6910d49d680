"""BHerd's claims (docs/figures.md, "BHerd"; sweeps/bherd-fig*.yaml): one criterion per claim
text, collected by ``dashboards.registry``; the rules every criterion follows are
:mod:`dashboards.claims`'."""

from __future__ import annotations

import json
import re

from dashboards.claims import (
    ACC_TOL,
    AUC_TOL,
    ClaimData,
    Criterion,
    Result,
    argmin,
    compare_final_acc,
    evidence_row,
    fmt,
    fmt_against,
    missing_curve,
    paired_effect,
    per_case,
    rel_gain,
    rises,
    same,
    within,
)
from dashboards.model import Panel
from dashboards.verdicts import Measure, all_of, decide

FAIL_ACC_GAP = 0.05  # final accuracy this far below the best curve counts as "fails"
BEST_B = {"case1": 10, "case2": 10, "case3": 50}  # the paper's best batch size per case


# ------------------------------------------------------------------------------ fig 2a
#: one margin for every "faster" and every "little gain" (issue 34: symmetric across claims):
#: a relative loss-AUC reduction counts as faster above AUC_TOL, as little gain below it; an
#: accuracy difference counts as higher above ACC_TOL, as little gain below it
FASTER = Measure(
    "relative loss-AUC reduction against FedAvg, per seed (paired)", AUC_TOL, "greater"
)
LITTLE_SPEEDUP = Measure(
    "relative loss-AUC reduction against FedAvg, per seed (paired)", AUC_TOL, "less"
)
HIGHER_ACC = Measure("final test accuracy − FedAvg's, per seed (paired)", ACC_TOL, "greater")
LITTLE_ACC = Measure("final test accuracy − FedAvg's, per seed (paired)", ACC_TOL, "less")
#: a curve whose mean test loss moves less than this over the run never updated the model
STILL = 1e-9


def _versus_fedavg(
    data: ClaimData, selector: str, name: str, measures: tuple[Measure, Measure], skip=None
) -> Result:
    """Per panel the FedAvg + ``selector`` curve against plain FedAvg, paired by seed: the
    relative loss-AUC reduction against ``measures[0]`` and the final-accuracy difference
    against ``measures[1]``; the claim holds where both parts hold in every panel
    (:func:`dashboards.verdicts.all_of`). ``skip(panel) -> reason | None`` leaves a panel out."""
    sel = data.curve_matching(algorithm="fedavg", selector=selector)
    fa = data.curve_matching(algorithm="fedavg", selector="none")
    if (why := missing_curve((sel, name), (fa, "FedAvg"))) is not None:
        return "n/a", why
    verdicts, parts = [], []
    for p in data.cases():
        label = p.label or p.panel_id
        reason = skip(p, sel) if skip is not None else None
        if reason:
            parts.append(f"{label}: left out ({reason})")
            continue
        speed = paired_effect(data, p.panel_id, fa, sel, "test_loss", "mean", relative=True)
        acc = paired_effect(data, p.panel_id, fa, sel, "test_acc", "final")
        if speed is None or acc is None:
            parts.append(f"{label}: no data ({name} or FedAvg missing)")
            continue
        v = [decide(speed, measures[0]), decide(acc, measures[1])]
        verdicts += v
        data.evidence += [
            evidence_row(f"{label} · loss AUC", speed, measures[0]),
            evidence_row(f"{label} · accuracy", acc, measures[1]),
        ]
        parts.append(
            f"{label}: loss-AUC reduction {speed.text()} → {v[0]}; accuracy Δ {acc.text()} → {v[1]}"
        )
    if not verdicts:
        return "n/a", "; ".join(parts) or "no panels"
    return all_of(verdicts), "; ".join(parts)


def bherd_beats_fedavg(data: ClaimData) -> Result:
    """Per panel, paired by seed, BHerd-FedAvg's loss AUC is more than 5% below FedAvg's
    (faster) and its final test accuracy more than 0.01 above (higher): 95% intervals over
    seeds; supported when every panel's both intervals clear their margins."""
    return _versus_fedavg(data, "bherd", "BHerd-FedAvg", (FASTER, HIGHER_ACC))


def _grab_still(data: ClaimData):
    def skip(p: Panel, label: str) -> str | None:
        s = data.peek(p.panel_id, label, "test_loss")
        if len(s) >= 2 and float(s.max() - s.min()) < STILL:
            return "GraB never updated the model: its curve is the initial model's"
        return None

    return skip


def grab_little_gain(data: ClaimData) -> Result:
    """Per panel where GraB updated the model at all (its mean test loss moves), paired by
    seed, GraB-FedAvg's loss AUC is less than 5% below FedAvg's and its final test accuracy
    less than 0.01 above (the same margins as "faster" and "higher"); a panel where GraB never
    updated is left out, said in the numbers."""
    return _versus_fedavg(
        data, "grab", "GraB-FedAvg", (LITTLE_SPEEDUP, LITTLE_ACC), skip=_grab_still(data)
    )


# ------------------------------------------------------------------------------ fig 2b
def _bherd_pairs(data: ClaimData) -> dict[str, tuple[str | None, str | None]]:
    return {
        name: (
            data.curve_matching(algorithm=alg, selector="none"),
            data.curve_matching(algorithm=alg, selector="bherd"),
        )
        for alg, name in (("fednova", "FedNova"), ("scaffold", "SCAFFOLD"))
    }


#: "BHerd speeds up X": the relative loss-AUC reduction of BHerd-X against X, the same margin
#: as every "faster"
SPEEDUP = Measure(
    "relative loss-AUC reduction of BHerd-X against X, per seed (paired)", AUC_TOL, "greater"
)


def bherd_speeds_up_others(data: ClaimData) -> Result:
    """Per panel, paired by seed, BHerd-FedNova's loss AUC is more than 5% below FedNova's and
    BHerd-SCAFFOLD's more than 5% below SCAFFOLD's (95% intervals over seeds; the same margin
    as every "faster"); supported when every panel's both intervals clear it."""
    pairs = _bherd_pairs(data)
    for name, (base, herd) in pairs.items():
        if (why := missing_curve((base, name), (herd, f"BHerd-{name}"))) is not None:
            return "n/a", why
    verdicts, parts = [], []
    for p in data.cases():
        label = p.label or p.panel_id
        texts = []
        for name, (base, herd) in pairs.items():
            ev = paired_effect(data, p.panel_id, base, herd, "test_loss", "mean", relative=True)
            if ev is None:
                texts = None
                break
            verdict = decide(ev, SPEEDUP)
            verdicts.append(verdict)
            data.evidence.append(evidence_row(f"{label} · {name}", ev, SPEEDUP))
            texts.append(f"{name} loss-AUC reduction {ev.text()} → {verdict}")
        parts.append(f"{label}: " + ("; ".join(texts) if texts else "no data"))
    if not verdicts:
        return "n/a", "; ".join(parts)
    return all_of(verdicts), "; ".join(parts)


def bherd_gain_by_model(data: ClaimData) -> Result:
    """BHerd's mean relative loss-AUC gain over the panels is larger on the SVM than on the CNN
    for FedNova, and larger on the CNN than on the SVM for SCAFFOLD."""
    pairs = _bherd_pairs(data)
    for name, (base, herd) in pairs.items():
        if (why := missing_curve((base, name), (herd, f"BHerd-{name}"))) is not None:
            return "n/a", why
    gains: dict[str, dict[str, list[float]]] = {name: {} for name in pairs}
    for p in data.panels:
        model = p.values.get("model.name")
        for name, (base, herd) in pairs.items():
            a0, a1 = data.auc(p.panel_id, base), data.auc(p.panel_id, herd)
            if model in ("svm", "cnn") and a0 is not None and a1 is not None:
                gains[name].setdefault(model, []).append(rel_gain(a0, a1))
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
#: "α = 1.0 matches FedAvg": the paired difference of final accuracies within ±ACC_TOL
MATCHES = Measure("final test accuracy of α=1.0 − FedAvg, per seed (paired)", ACC_TOL, "within")


def alpha_matches_fedavg(data: ClaimData) -> Result:
    """Per case, paired by seed, the final test accuracy of α=1.0 minus FedAvg's lies within
    ±0.01 (a 95% equivalence interval). Supported only if the figure shows that α matters
    somewhere: some other α's accuracy differs from FedAvg's beyond ±0.01 (its interval outside
    the margin) in some case; otherwise matching FedAvg shows nothing about α: inconclusive."""
    a1, fa = data.curve_where("bherd.alpha", 1.0), data.curve_where("selector", "none")
    if (why := missing_curve((a1, "α=1.0"), (fa, "FedAvg (selector none)"))) is not None:
        return "n/a", why
    others = [label for _, label in data.curves_with("bherd.alpha") if label != a1]
    verdicts, parts, differs = [], [], []
    for p in data.cases():
        label = p.label or p.panel_id
        ev = paired_effect(data, p.panel_id, fa, a1, "test_acc")
        if ev is None:
            parts.append(f"{label}: no data")
            continue
        verdict = decide(ev, MATCHES)
        verdicts.append(verdict)
        data.evidence.append(evidence_row(label, ev, MATCHES))
        parts.append(f"{label}: α=1.0 − FedAvg {ev.text()} → {verdict}")
        for other in others:
            ev2 = paired_effect(data, p.panel_id, fa, other, "test_acc", mark=False)
            if ev2 is not None and decide(ev2, MATCHES) == "contradicted":
                differs.append(f"{other} in {label}")
    if not verdicts:
        return "n/a", "; ".join(parts)
    overall = all_of(verdicts)
    if differs:
        parts.append(f"α matters: {', '.join(differs[:3])} differ(s) from FedAvg")
    elif overall == "supported":
        overall = "inconclusive"
        parts.append(
            "no α differs from FedAvg anywhere in this figure, so matching it shows nothing "
            "about α (inconclusive)"
        )
    return overall, "; ".join(parts)


def alpha_fastest(data: ClaimData) -> Result:
    """Per case, among the α curves the lowest loss AUC belongs to α=0.3 or α=0.5."""
    alphas = data.curves_with("bherd.alpha")
    if not alphas:
        return "n/a", "the spec has no α curves"

    def check(p: Panel):
        aucs = {label: data.auc(p.panel_id, label) for _, label in alphas}
        best = argmin(aucs)
        if best is None:
            return None, "no α curve"
        value = next(v for v, label in alphas if label == best)
        ok = any(same(value, a) for a in (0.3, 0.5))
        return ok, f"fastest {best} (loss AUC {fmt(aucs[best])})"

    return per_case(data, check)


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
            f"loss {fmt(l1)}→{fmt(lt)}, acc {fmt(acc)} (best {fmt(best)}, "
            f"gap {fmt_against(gap, FAIL_ACC_GAP, at_least=True)})"
        )

    return per_case(data, check)


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
        return ok, "loss AUC " + ", ".join(f"E={v}: {fmt(a)}" for v, a in aucs)

    return per_case(data, check)


def e2_oscillates(data: ClaimData) -> Result:
    """Per case the E=2 mean test-loss curve has more round-to-round rises than E=1's."""
    e2, e1 = data.curve_where("train.local_epochs", 2.0), data.curve_where("train.local_epochs", 1)
    if (why := missing_curve((e2, "E=2"), (e1, "E=1"))) is not None:
        return "n/a", why

    def check(p: Panel):
        s2, s1 = data.series(p.panel_id, e2, "test_loss"), data.series(p.panel_id, e1, "test_loss")
        if not len(s2) or not len(s1):
            return None, "E=1 or E=2 missing"
        r2, r1 = rises(s2), rises(s1)
        return r2 > r1, f"loss rises E=2: {r2}, E=1: {r1}"

    return per_case(data, check)


# ------------------------------------------------------------------------------ fig 3c
def best_batch(data: ClaimData) -> Result:
    """Per case the B with the lowest final mean test loss equals the paper's (10, 10, 50)."""
    bs = data.curves_with("train.batch_size")
    if not bs:
        return "n/a", "the spec has no B curves"
    cases = [p for p in data.cases() if p.values.get("data.partition") in BEST_B]

    def check(p: Panel):
        finals = {label: data.final(p.panel_id, label, "test_loss") for _, label in bs}
        best = argmin(finals)
        if best is None:
            return None, "no B curve"
        value = next(v for v, label in bs if label == best)
        want = BEST_B[p.values["data.partition"]]
        return same(value, want), f"best B={value} (paper {want})"

    return per_case(data, check, cases)


# ------------------------------------------------------------------------------ fig 3d
def n1_centralized(data: ClaimData) -> Result:
    """Per case |final acc(N=1) − final acc(Centralized SGD)| ≤ 0.01 and N=1 has the lowest
    loss AUC among the N curves."""
    ns = data.curves_with("data.num_clients")
    n1, cen = data.curve_where("data.num_clients", 1), data.curve_where("algorithm", "centralized")
    if (why := missing_curve((n1, "N=1"), (cen, "centralized"))) is not None:
        return "n/a", why

    def check(p: Panel):
        close, numbers = compare_final_acc(data, p.panel_id, n1, cen)
        if close is None:
            return None, numbers
        fastest = argmin({label: data.auc(p.panel_id, label) for _, label in ns})
        return close and fastest == n1, f"{numbers}; fastest {fastest}"

    return per_case(data, check)


def n5_best(data: ClaimData) -> Result:
    """Per case N=5 has the lowest final mean test loss among N ∈ {5, 10, 15, 20}."""
    ns = [(v, lab) for v, lab in data.curves_with("data.num_clients") if v in (5, 10, 15, 20)]
    if not any(v == 5 for v, _ in ns):
        return "n/a", "the spec has no N=5 curve"

    def check(p: Panel):
        finals = {label: data.final(p.panel_id, label, "test_loss") for _, label in ns}
        best = argmin(finals)
        if best is None:
            return None, "no N curve"
        five = next(lab for v, lab in ns if v == 5)
        return best == five, f"best {best} (final loss {fmt(finals[best])})"

    return per_case(data, check)


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
        f"client {i} {fmt(v, 4)}" for i, v in means.items()
    )


# ------------------------------------------------------------------------------ fig 4e
def rr_little_difference(data: ClaimData) -> Result:
    """Per case |final acc(RR) − final acc(no RR)| ≤ 0.01 (curves paired by their overrides
    other than ``train.order``)."""
    pairs = _rr_pairs(data)
    if not pairs:
        return "n/a", "no RR / no-RR curve pairs"
    pid = data.panels[0].panel_id
    panels = [Panel(pid, _case_label(case[0]), {"case": case}) for case in sorted(pairs)]

    def check(p: Panel):
        pair = pairs[p.values["case"]]
        return compare_final_acc(data, pid, pair["rr"], pair["fixed"], ("RR ", "no RR "))

    return per_case(data, check, panels)


def _rr_pairs(data: ClaimData) -> dict[tuple[str, str], dict[str, str]]:
    """(data.partition, the rest of the config) -> {"rr": label, "fixed": label} of the curves
    whose run configs (:meth:`ClaimData.config`) differ only in ``train.order``."""
    pairs: dict[tuple[str, str], dict[str, str]] = {}
    for c in data.curves:
        config = data.config(c)
        order = config.train.order
        if order in ("rr", "fixed"):
            rest = config.model_dump(mode="json", exclude={"train": {"order"}})
            case = (config.data.partition, json.dumps(rest, sort_keys=True))
            pairs.setdefault(case, {})[order] = c.label
    return {k: v for k, v in pairs.items() if len(v) == 2}


def _case_label(case: str) -> str:
    m = re.fullmatch(r"case(\d+)", case)
    return f"Case {m.group(1)}" if m else case


CRITERIA: dict[str, Criterion] = {
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
}
