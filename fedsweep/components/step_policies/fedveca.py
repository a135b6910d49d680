"""FedVeca: adaptive per-client local steps (docs/algorithms.md §5).

FedVeca is a composition, not a base method of its own: ``algorithm: fednova`` (plain local
SGD, §5.1's aggregation ``w_{k+1} = w_k − η τ_k Σ p_i d_i`` with ``d_i = Δ_i / (η τ_i)`` and
``τ_k = Σ p_i τ_{k,i}``) with ``step_policy: fedveca``, which sets every client's ``τ_{k+1,i}``
from estimates the clients make during round ``k``:

* **client** (§5.3, ``FedVecaEstimates``, a step observer of ``engine.local``), in float64:
  ``G0 = ∇F_i(w_k)`` on the whole local set (client oracle);
  ``β_i = max_{t=1..τ} ||g_t − G0|| / ||w^t − w_k||`` (steps with ``||w^t − w_k|| < 1e-10``
  skipped), plus ``t = τ`` on one extra batch (the client's next one, peeked: training does not
  see it); ``δ_i = max_{t=0..τ−1} (||w^{t+1} − w_k||² − ||w^t − w_k||²) / η``; floors
  ``β_i ≥ 1e-5``, ``δ_i ≥ 0``; ``A_i = η β_i² δ_i``. ``beta_est: same_batch`` compares with
  ``∇F_i(w_k; x_t)`` on the step's own batch instead of ``G0`` (one more gradient per step).
* **server** (§5.4, ``FedVecaSteps.observe``): ``ĝ_k = Σ p_i G0_i``; from round 2,
  ``β̂ = max(β̂, ||ĝ_k − ĝ_{k−1}|| / ||w_k − w_{k−1}||)`` (one round late) and the Theorem-1
  premise ``η β̂ τ_k`` (≤ 1); no τ update after round 1; from round 2
  ``τ_{k+1,i} = TAU_RULE(A_i, ||ĝ_k||², φ)``, then ``< 1 → 1``, ``> τ_max → τ_max``, and a
  non-finite value keeps ``τ_{k,i}``.

**The τ rule is a reconstruction [U].** Every equation of the paper is lost in the copies we
have (§5.0); ``R1`` caps each client's drift term at a ``1/φ`` share of the guaranteed decrease:
``floor(1 + 2 ||ĝ_k||² / (φ A_i))`` (``A_i = 0`` gives ``τ_max``). ``fixed`` keeps
``τ = tau_init`` (the estimates are still made and logged).

**A rule of your own** (e.g. the published Eq. 15) is registered in Python, never imported
because a config names it: a config only names a registered rule (``fedveca.tau_rule: eq15``),
and validation imports nothing. Register it with :func:`register_tau_rule` in a module you name
on the command line (``fedsweep run CONFIG --plugin mypkg.rules``; a sweep's trials import the
same modules), or as an installed package's entry point in the group ``fedsweep.tau_rules``
(``eq15 = "mypkg.rules:eq15"``: its name is read from the package's metadata, and the function
is loaded only when a run uses it). Its signature is ``r1``'s; it is checked when registered.
The rule's name, not its code, enters the config hash.

Logged every round: per client ``tau`` (``τ_{k,i}``), ``beta``, ``delta``, ``A`` and ``tau_r1``
(the rule's value before flooring and clamping, predicting ``τ_{k+1,i}``; from round 2); per round
``tau_k``, ``tau_total`` (``Σ_i τ_{k,i}``, what derived baselines read), and from round 2
``w_change`` (``||w_k − w_{k−1}||``), ``beta_hat`` and ``premise``.
"""

from __future__ import annotations

import functools
import importlib.metadata
import inspect
import math
import re
from collections.abc import Callable
from typing import Literal

import torch
from pydantic import Field, field_validator, model_validator

from fedsweep.components.algorithms.fednova import plain_sgd_errors
from fedsweep.components.step_policies.base import StepPolicy
from fedsweep.core.registry import register
from fedsweep.core.section import Section
from fedsweep.engine.local import StepObserver

BETA_FLOOR = 1e-5  # §5.3 step 5 (the IBM estimator's floor)
MIN_DISTANCE = 1e-10  # ||w^t − w_k|| below this: no β ratio (§5.3)
F64 = torch.float64
#: the metrics FedVeca logs (the names figures read): per client as ``client/{i}/<name>``, and
#: per round
PER_CLIENT_METRICS = ("tau", "beta", "delta", "A", "tau_r1")
ROUND_METRICS = ("beta_hat", "premise", "w_change")


def r1(A: torch.Tensor, g_norm2: torch.Tensor, phi: float) -> torch.Tensor:
    """R1 [U] (§5.5): ``1 + 2 ||ĝ_k||² / (φ A_i)`` per client, before flooring and clamping
    (float64 ``[n]``; ``A_i = 0`` gives ``+inf``, i.e. ``τ_max`` after the cap). Decreasing in
    ``A`` and in ``φ``."""
    A = A.to(F64)
    value = 1.0 + 2.0 * g_norm2.to(F64) / (phi * A)
    return torch.where(A == 0, torch.full_like(A, math.inf), value)


#: the rules by name: the ones fedsweep ships, then those registered (``register_tau_rule``);
#: ``fixed`` is handled by the policy (no rule is evaluated)
TAU_RULES: dict[str, Callable] = {"R1": r1}
FIXED = "fixed"
#: installed packages' rules: ``[project.entry-points."fedsweep.tau_rules"]``
ENTRY_POINTS = "fedsweep.tau_rules"
RULE_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]*$")


class TauRuleError(ValueError):
    """A rule that cannot be registered or loaded (bad name, not callable, wrong signature)."""


def register_tau_rule(name: str, fn: Callable) -> Callable:
    """Make ``fn`` the τ rule ``name`` (``fedveca.tau_rule: name``). ``fn(A, g_norm2, phi)``
    takes the clients' ``A_i`` (float64 ``[n]``), ``||ĝ_k||²`` (0-dim) and ``φ`` and returns
    the clients' values before flooring and clamping (``[n]``), like :func:`r1`. Returns
    ``fn`` (usable as a decorator's body). Registering a name twice with another function, a
    name that is not a plain identifier, or a function that cannot take those three arguments
    raises :class:`TauRuleError`."""
    if not isinstance(name, str) or not RULE_NAME.match(name) or name == FIXED:
        raise TauRuleError(
            f"tau rule name {name!r}: use letters, digits, '_', '.', '-', starting with a "
            f"letter (and not {FIXED!r})"
        )
    check_rule(name, fn)
    if TAU_RULES.get(name, fn) is not fn:
        raise TauRuleError(f"tau rule {name!r} is registered already ({TAU_RULES[name]!r})")
    TAU_RULES[name] = fn
    return fn


def check_rule(name: str, fn) -> None:
    """Raise :class:`TauRuleError` unless ``fn`` is callable as ``fn(A, g_norm2, phi)``."""
    if not callable(fn):
        raise TauRuleError(f"tau rule {name!r}: {fn!r} is not callable")
    try:
        inspect.signature(fn).bind(None, None, None)
    except TypeError as err:
        raise TauRuleError(
            f"tau rule {name!r}: {getattr(fn, '__qualname__', fn)!r} cannot be called as "
            f"rule(A, g_norm2, phi) ({err}); see fedsweep.components.step_policies.fedveca.r1"
        ) from None
    except ValueError:  # no signature to inspect (a builtin): taken as it is
        pass


@functools.cache
def _entry_points() -> dict:
    """The installed packages' rules by name (read from their metadata once per process:
    nothing imported)."""
    return {ep.name: ep for ep in importlib.metadata.entry_points(group=ENTRY_POINTS)}


def rule_names() -> tuple[str, ...]:
    """Every name ``fedveca.tau_rule`` accepts now: built-in and registered rules, installed
    packages' entry points, and ``fixed``."""
    names = list(TAU_RULES)
    names += [n for n in _entry_points() if n not in TAU_RULES]
    return (*names, FIXED)


def load_rule(name: str) -> Callable | None:
    """The rule ``name`` names (``None`` for ``fixed``): a registered rule, else an installed
    package's entry point, loaded now (a run that uses it is being built) and checked."""
    if name == FIXED:
        return None
    if name in TAU_RULES:
        return TAU_RULES[name]
    point = _entry_points().get(name)
    if point is None:
        raise TauRuleError(f"unknown tau_rule {name!r} (allowed: {', '.join(rule_names())})")
    fn = point.load()
    check_rule(name, fn)
    return fn


class FedVecaConfig(Section):
    tau_init: int = Field(1, ge=1, description="tau_{1,i} of every client (V5).")
    phi: float = Field(0.05, gt=0, description="Control parameter; smaller phi, larger tau (V2).")
    tau_max: int = Field(100, ge=1, description="Cap on every tau_{k,i} (V3).")
    tau_rule: str = Field(
        "R1",
        description="R1 (the reconstruction), fixed (tau = tau_init), or the name of a rule "
        "registered by a --plugin module or an installed package (e.g. the published Eq. 15).",
    )
    beta_est: Literal["stoch_vs_full", "same_batch"] = Field(
        "stoch_vs_full", description="beta_i against the full local gradient or the same batch."
    )

    @field_validator("tau_rule")
    @classmethod
    def _known_rule(cls, value: str) -> str:
        """A registered name; nothing is imported here (a config never runs code)."""
        names = rule_names()
        if value in names:
            return value
        raise ValueError(
            f"unknown tau_rule {value!r} (allowed: {', '.join(names)}; a rule of your own is "
            "registered with fedsweep.components.step_policies.fedveca.register_tau_rule in a module named "
            f"by --plugin MODULE, or by an installed package's {ENTRY_POINTS!r} entry point)"
        )

    @model_validator(mode="after")
    def _init_within_cap(self) -> FedVecaConfig:
        if self.tau_init > self.tau_max:
            raise ValueError(
                f"tau_init ({self.tau_init}) is above tau_max ({self.tau_max}) "
                f"(allowed: 1 <= tau_init <= tau_max)"
            )
        return self


# ------------------------------------------------------------------------------ the client
class FedVecaEstimates(StepObserver):
    """Client side of §5.3: ``G0``, ``β_i``, ``δ_i``, ``A_i`` of one client's round, float64."""

    wants_next_batch = True

    def __init__(self, beta_est: str) -> None:
        self.same_batch = beta_est == "same_batch"

    def bind(self, fm, oracle) -> None:
        self.fm, self.oracle = fm, oracle

    def begin_client(self, client, task, w) -> None:
        self.w = w
        self.w64 = w.to(F64)
        self.g0 = self.oracle.gradients([client], w)[0]  # ∇F_i(w_k), full local set
        self.g0_64 = self.g0.to(F64)
        self.lr, self.tau = task.lr, task.num_steps
        self.beta = torch.zeros((), dtype=F64, device=w.device)
        self.delta = torch.full((), -math.inf, dtype=F64, device=w.device)

    def _reference(self, batch) -> torch.Tensor:
        """What ``g_t`` is compared with: ``G0``, or ``∇F_i(w_k; x_t)`` (``same_batch``)."""
        if not self.same_batch:
            return self.g0_64
        return self.fm.gradient(self.w, *batch)[0].to(F64)

    def _beta_at(self, r, g, batch) -> None:
        """``β_i`` updated with ``||g − ref|| / ||r||`` at the displacement ``r = w^t − w_k``."""
        dist = torch.linalg.vector_norm(r)
        ratio = torch.linalg.vector_norm(g.to(F64) - self._reference(batch)) / dist
        self.beta = torch.where(dist >= MIN_DISTANCE, torch.maximum(self.beta, ratio), self.beta)

    def on_step(self, t, y, g, v, lr, batch) -> None:
        r = y.to(F64) - self.w64  # w^t − w_k
        if t >= 1:
            self._beta_at(r, g, batch)
        r_next = r - lr * v.to(F64)  # w^{t+1} − w_k
        grow = (r_next.dot(r_next) - r.dot(r)) / lr
        self.delta = torch.maximum(self.delta, grow)

    def end_client(self, y, next_batch, update) -> None:
        g_tau = self.fm.gradient(y, *next_batch)[0]  # t = τ on one extra batch
        self._beta_at(y.to(F64) - self.w64, g_tau, next_batch)
        beta = torch.clamp(self.beta, min=BETA_FLOOR)
        delta = torch.clamp(self.delta, min=0.0)
        A = self.lr * beta * beta * delta
        tau = torch.tensor(float(self.tau), dtype=F64)
        update.metrics.update({"tau": tau, "beta": beta, "delta": delta, "A": A})
        update.extras.update({"g0": self.g0, "A": A})


# ------------------------------------------------------------------------------ the server
@register("step_policy", "fedveca", sections={"fedveca": FedVecaConfig})
class FedVecaSteps(StepPolicy):
    """Server side of §5.4: the τ vector, ``β̂``, the premise, and the τ rule."""

    #: estimates (a non-finite one is logged and handled here, not divergence): all but ``tau``
    diagnostics = tuple(m for m in (*PER_CLIENT_METRICS, *ROUND_METRICS) if m != "tau")
    #: FedVeca's estimates (§5.3) assume plain local SGD and every client uploading its whole
    #: trajectory; its β̂ compares ĝ of consecutive rounds, which needs the same clients every
    #: round (full participation)
    requires = {"algorithm": ("fednova", "fedavg"), "selector": ("none",), "sampler": ("full",)}

    @classmethod
    def method_label(cls, algorithm: str) -> str:
        """``fedveca`` (FedNova's aggregation with FedVeca's steps) or ``fedveca-fedavg``."""
        return "fedveca" if algorithm == "fednova" else f"fedveca-{algorithm}"

    @classmethod
    def config_errors(cls, config) -> list[str]:
        return plain_sgd_errors(config, "step_policy 'fedveca'", "§5.1")

    def __init__(self, config, sizes: list[int]) -> None:
        super().__init__(config, sizes)
        cfg = config.fedveca
        self.cfg = cfg
        self.rule = load_rule(cfg.tau_rule)
        self.tau = [cfg.tau_init] * len(sizes)  # τ_{k,i} of the coming round
        self.beta_hat = 0.0
        self.g_prev: torch.Tensor | None = None  # ĝ_{k−1}
        self.w_prev: torch.Tensor | None = None  # w_{k−1}

    def steps(self, t, client):
        return self.tau[client]

    def local_observer(self) -> StepObserver:
        return FedVecaEstimates(self.cfg.beta_est)

    def observe(self, t, w, updates, cohort, lr) -> None:
        q = cohort.weights.to(F64)
        taus = torch.tensor([float(u.num_steps) for u in updates], dtype=F64)
        g_hat = sum(qi * u.extras["g0"].to(F64) for qi, u in zip(q, updates, strict=True))
        tau_k = (q * taus).sum()
        metrics = {"tau_k": tau_k, "tau_total": taus.sum()}
        w64 = w.to(F64).clone()  # a copy: w_{k−1} of the next round
        if self.g_prev is not None and self.g_prev.device != g_hat.device:  # after a resume
            self.g_prev, self.w_prev = self.g_prev.to(g_hat.device), self.w_prev.to(g_hat.device)
        if self.g_prev is not None:  # one round late (§5.4): needs ĝ_{k−1} and w_{k−1}
            w_change = torch.linalg.vector_norm(w64 - self.w_prev)
            ratio = torch.linalg.vector_norm(g_hat - self.g_prev) / w_change
            if float(w_change) > MIN_DISTANCE and math.isfinite(float(ratio)):
                self.beta_hat = max(self.beta_hat, float(ratio))
            metrics["w_change"] = w_change
            metrics["beta_hat"] = torch.tensor(self.beta_hat, dtype=F64)
            metrics["premise"] = lr * metrics["beta_hat"] * tau_k  # Theorem 1: ≤ 1
        if t >= 2 and self.rule is not None:  # no τ update after round 1 (§5.1)
            A = torch.stack([u.extras["A"].to(F64) for u in updates])
            values = self.rule(A, g_hat.dot(g_hat), self.cfg.phi)
            for u, value in zip(updates, values.tolist(), strict=True):
                metrics[f"client/{u.client}/tau_r1"] = torch.tensor(value, dtype=F64)
                self.tau[u.client] = self.clamp(value, self.tau[u.client])
        self.g_prev, self.w_prev = g_hat, w64
        self.metrics = metrics

    def clamp(self, value: float, previous: int) -> int:
        """``floor(value)``; below 1 → 1 (the paper's "0 → 1"); above ``τ_max`` → ``τ_max``;
        not finite → the previous τ ([I] §5.4); ``+inf`` (``A = 0``) → ``τ_max``."""
        if math.isnan(value) or value == -math.inf:
            return previous
        if value == math.inf:
            return self.cfg.tau_max
        return min(max(math.floor(value), 1), self.cfg.tau_max)

    def nominal_steps(self) -> list[int]:
        return [self.cfg.tau_init] * len(self.sizes)

    def state_dict(self) -> dict:
        return {
            "tau": list(self.tau),
            "beta_hat": self.beta_hat,
            "g_prev": None if self.g_prev is None else self.g_prev.cpu().clone(),
            "w_prev": None if self.w_prev is None else self.w_prev.cpu().clone(),
        }

    def load_state_dict(self, state: dict) -> None:
        if not state:
            return
        self.tau = [int(v) for v in state["tau"]]
        self.beta_hat = float(state["beta_hat"])
        self.g_prev, self.w_prev = state["g_prev"], state["w_prev"]  # moved to the run's device
