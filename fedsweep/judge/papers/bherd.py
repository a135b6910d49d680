"""BHerd's named measures and guards (registered in :mod:`fedsweep.judge.measures`), for what is
specific to the paper: its claims themselves are declared in ``sweeps/bherd-*.yaml``."""

from __future__ import annotations

from fedsweep.data.catalog import TRAIN_SIZES
from fedsweep.judge.degenerate import largest_difference
from fedsweep.judge.measures import guard, measure
from fedsweep.judge.panels import Panel
from fedsweep.judge.runs import ClaimData, same

#: a curve whose mean test loss moves less than this over the run never updated the model
STILL = 1e-9


#: the per-client distances BHerd's runs log (Fig. 4d): the paper's form, else ours
DISTANCES = ("client/{i}/dist_paper", "client/{i}/dist")


@measure(
    "bherd.client_distance_gap",
    "mean-over-rounds distance, min of clients 4, 5 − max of clients 1–3 (one run gives all "
    "five clients; metric dist_paper, else dist)",
    lower_is_better=False,
    scope="panel",
    metrics=DISTANCES,
)
def client_distance_gap(data: ClaimData, panel: str, after: int = 0) -> dict[int, float]:
    """Per seed, the smaller of the mean-over-rounds distances of clients 4 and 5 minus the
    largest of clients 1–3 (``client/{i}/dist_paper``, else ``client/{i}/dist``, i = 0..4, of
    the panel's first curve that logged them: one run gives all five clients, Fig. 4d's
    curves); {} unless every client has a seed."""
    logged = set(data.agg["metric"])
    metric = "dist_paper" if "client/0/dist_paper" in logged else "dist"
    for curve in data.curves:
        runs = {
            i: data.per_seed(panel, curve.label, f"client/{i - 1}/{metric}", "mean", mark=False)
            for i in range(1, 6)
        }
        if all(runs.values()):
            data.per_seed(panel, curve.label, f"client/0/{metric}", "mean")  # read: marked
            break
    else:
        return {}
    seeds = sorted(set.intersection(*(set(r) for r in runs.values())))
    near, far = [runs[i] for i in (1, 2, 3)], [runs[i] for i in (4, 5)]
    return {s: min(r[s] for r in far) - max(r[s] for r in near) for s in seeds}


@guard("bherd.never_updated")
def never_updated(data: ClaimData, panel: Panel | None, labels: list[str]) -> str | None:
    """A claimed curve whose mean test loss never moves (GraB with α_t = 0 every round: the
    initial model) is no evidence of "little gain": its panel is left out."""
    for label in labels:
        s = data.peek(panel.panel_id, label, "test_loss") if panel is not None else []
        if len(s) >= 2 and float(s.max() - s.min()) < STILL:
            return f"{label} never updated the model: its curve is the initial model's"
    return None


@guard("bherd.e_over_alpha")
def e_over_alpha(data: ClaimData, panel: Panel | None, labels: list[str]) -> str | None:
    """The literal Eq. 7 server factor E/α (``bherd.scale: E_over_alpha``, docs/algorithms.md
    §3.4, B3) on a BHerd curve with E ≠ 1 scales the step with E: "faster with larger E" then
    holds by construction."""
    for c in data.curves:
        if c.label not in labels or same(c.set.get("train.local_epochs", 1.0), 1.0):
            continue
        config = data.config(c)
        if config.selector == "bherd" and config.bherd.scale == "E_over_alpha":
            return (
                "the E/α server factor scales the step with E: faster with larger E follows by "
                "construction; run the 1/α reading (bherd.scale: one_over_alpha) to test it "
                "(inconclusive)"
            )
    return None


__all__ = [
    "client_distance_gap",
    "never_updated",
    "e_over_alpha",
    "fednova_is_fedavg",
    "grab_rescales_fedavg",
]


@guard("bherd.fednova_is_fedavg")
def fednova_is_fedavg(data: ClaimData, panel: Panel | None, labels: list[str]) -> str | None:
    """A part with a FedNova curve in a panel where every client takes the same number of
    local steps (Case 1: the training set dealt round-robin in equal shares, E epochs of
    ⌈n_i / B⌉ steps each): FedNova's normalised update Σ q_i Δ_i a_eff / a_i is FedAvg's when
    every a_i is the same, so the part measures BHerd on FedAvg (Fig. 2a), not on FedNova
    (issue 51, item 5; ALGORITHMS.md on FedNova's τ_eff)."""
    if panel is None:
        return None
    for label in labels:
        curve = next((c for c in data.curves if c.label == label), None)
        if curve is None:
            continue
        config = data.config(curve)
        if config.algorithm != "fednova":
            continue
        values = panel.values
        partition = values.get("data.partition", config.data.partition)
        dataset = values.get("data.dataset", config.data.dataset)
        clients = int(values.get("data.num_clients", config.data.num_clients))
        size = values.get("data.train_subset", config.data.train_subset)
        size = int(size) if size is not None else TRAIN_SIZES.get(dataset)
        if partition != "case1" or size is None or size % clients:
            continue
        # (the spec's shares: a profile's subset of the data, dealt the same way, is not seen
        # here, so no sample counts are named)
        return (
            f"{label} takes the same local steps on every client here (Case 1 deals the "
            "training set round-robin in equal shares): FedNova's update is FedAvg's, so this "
            "part measures BHerd on FedAvg (Fig. 2a), not on FedNova"
        )
    return None


#: GraB's test loss and accuracy within this relative difference of FedAvg's on every seed and
#: round: the construction's "little gain" (:func:`grab_rescales_fedavg`); a gain or loss beyond
#: it is evidence and is judged
GRAB_NEAR = 0.01


@guard("bherd.grab_rescales_fedavg")
def grab_rescales_fedavg(data: ClaimData, panel: Panel | None, labels: list[str]) -> str | None:
    """A part comparing GraB-FedAvg with the FedAvg it is built on, where GraB's test loss and
    accuracy stayed within :data:`GRAB_NEAR` of FedAvg's on every seed and round. GraB's
    clients train exactly as FedAvg's (the same steps, the same order), sign balancing uploads a
    subset of their gradients whose sum is about ``α_t`` of the whole (the balancing's
    purpose), and the server divides by ``α_t`` (Alg. 4; GraB has no reading without it): its
    update is FedAvg's up to the balancing's error (docs/algorithms.md §4). So a GraB that
    tracks FedAvg shows what the construction predicts, nothing about GraB's ordering (issue 51,
    item 5); one that departs from FedAvg is evidence, and its part is judged."""
    if panel is None:
        return None
    curves = [c for c in data.curves if c.label in labels]
    grab = [c for c in curves if data.config(c).selector == "grab"]
    plain = [c for c in curves if data.config(c).selector == "none"]
    for g in grab:
        for p in plain:
            if data.config(g).algorithm != data.config(p).algorithm:
                continue
            found = largest_difference(data, panel.panel_id, g.label, p.label, GRAB_NEAR)
            if found is None:
                continue
            worst, seeds, values, _ = found
            return (
                f"{g.label} trains as {p.label} does and its server divides the balanced subset "
                f"of the gradients by α_t: its update is {p.label}'s up to the balancing's error, "
                f"and its test loss and accuracy stayed within {worst:.1g} (relative) of "
                f"{p.label}'s on {seeds} seeds, {values} values: little or no gain follows by "
                "construction"
            )
    return None
