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
  premise ``η β̂ τ_k`` (the paper draws 1 as its *lower* bound: docs/algorithms.md §5.3); no τ
  update after round 1; from round 2
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
``w_change`` (``||w_k − w_{k−1}||``), ``beta_hat`` and ``premise``; with ``tau_damping: bounded``
also ``tau_scale`` from round 2 (the common factor of the bound below, 1 when it did not act).

**Our reconstruction's damped variant [U]** (``fedveca.tau_damping: bounded``, §5.8): how much
do FedVeca's conclusions hang on R1? The variant keeps R1 (or the configured rule) and its clamp,
then bounds the change of the *global* step size ``τ_k = Σ p_i τ_{k,i}`` from one round to the
next to a factor ``1 + c`` (``c = fedveca.tau_max_change``, default 0.5), at least one local step
either way (τ is an integer: a purely relative bound could never leave ``τ_k = 1``)::

    τ'_{k+1,i} = clamp(TAU_RULE(A_i, ||ĝ_k||², φ))                       (as R1, per client)
    lo = min(τ_k / (1 + c), τ_k − 1),  hi = max(τ_k · (1 + c), τ_k + 1)
    τ_{k+1,i} = τ'_{k+1,i}                                      if lo ≤ Σ p_i τ'_{k+1,i} ≤ hi
              = min(τ_max, max(1, floor(s · τ'_{k+1,i})))        else, with the common factor
                s < 1 as large as keeps Σ p_i τ_{k+1,i} ≤ hi (or s > 1 as small as lifts it to lo)

so the clients keep the proportions the rule gave them and only their common level moves
slowly. The bound holds every round, exactly (integer τ, ``s`` found by bisection:
:func:`bound_tau_k`). Why this form: the paper says that τ_{k,i} "fluctuates very much with
round k" while the curve of τ_k shows "no large fluctuation [...] despite the large difference
in τ_{k,i} values at each client" (FedVeca, Sec. IV-B4, Fig. 6 text). A bound on each client's τ, or an exponential average of the
estimators ``A_i`` and ``||ĝ||²``, would flatten every τ_{k,i} as well, against those words (the
paper wins). R1's τ_k, by contrast, jumps between small and large values (our quick profile,
SVM: median |Δτ_k|/τ_k 0.64 over 10 seeds, τ_k from 1 to 86 within a run); the variant damps
that level and leaves the clients' spread to the rule. The default ``c = 0.5`` is twice the
threshold of the Fig. 6 claim "no large fluctuation" (median |Δτ_k|/τ_k < 0.25,
sweeps/fedveca-fig6.yaml): a ``c`` below 0.25 would make that verdict largely true
by construction (wherever ``τ_k > 1/c``). The damping is a typed option, not a registered rule: a rule is stateless
(:func:`r1` sees round ``k`` only) and the bound needs τ_k (checkpointed with the τ vector).
``tau_damping: none`` (the default) is R1 exactly, and adds nothing to the config hash.
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
from fedsweep.data.catalog import TRAIN_SIZES
from fedsweep.engine.fast.estimates import step_sums
from fedsweep.engine.local import StepObserver

BETA_FLOOR = 1e-5  # §5.3 step 5 (the IBM estimator's floor)
MIN_DISTANCE = 1e-10  # ||w^t − w_k|| below this: no β ratio (§5.3)
F64 = torch.float64
#: the metrics FedVeca logs (the names figures read): per client as ``client/{i}/<name>``, and
#: per round
PER_CLIENT_METRICS = ("tau", "beta", "delta", "A", "tau_r1")
ROUND_METRICS = ("beta_hat", "premise", "w_change")
#: ``fedveca.tau_damping``: ``none`` (R1 as it is) or ``bounded`` (our reconstruction's damped
#: variant [U]: the change of τ_k per round bounded, see the module docstring)
DAMPINGS = ("none", "bounded")
#: how every report and figure names the variant
VARIANT_LABEL = "our reconstruction's damped variant [U]"
BISECTIONS = 100  # halvings of the common factor s (it stops earlier when s stops moving)


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
    tau_damping: Literal["none", "bounded"] = Field(
        "none",
        description="none: the rule's tau as it is (R1). bounded: our reconstruction's damped "
        "variant [U]: the global step size tau_k = sum p_i tau_{k,i} changes per round by at "
        "most a factor 1 + tau_max_change (at least one step either way); the clients' taus "
        "are scaled by one common factor, keeping their proportions.",
    )
    tau_max_change: float = Field(
        0.5,
        gt=0,
        description="With tau_damping: bounded, the largest relative change c of tau_k per "
        "round: tau_{k+1} within [tau_k / (1 + c), tau_k (1 + c)] (widened to tau_k -/+ 1).",
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

    @model_validator(mode="after")
    def _damping_acts(self) -> FedVecaConfig:
        """A damping setting that cannot change the run is refused (it would split the hash)."""
        if self.tau_damping == "bounded" and self.tau_rule == FIXED:
            raise ValueError(
                f"tau_damping 'bounded' with tau_rule {FIXED!r}: a fixed tau never changes, "
                "so there is nothing to damp (allowed: tau_damping none with tau_rule fixed, or "
                "a rule such as R1 with tau_damping bounded)"
            )
        default = type(self).model_fields["tau_max_change"].default
        if self.tau_damping == "none" and self.tau_max_change != default:
            raise ValueError(
                f"tau_max_change ({self.tau_max_change}) is read only with tau_damping "
                f"'bounded', and tau_damping is 'none' (allowed tau_damping: "
                f"{', '.join(DAMPINGS)})"
            )
        return self

    def rule_label(self) -> str:
        """How figures and reports name the τ rule: ``R1 (our reconstruction)``, or with the
        damping ``R1 + bounded τ_k change (c = 0.5): our reconstruction's damped variant
        [U]``."""
        return rule_label(self.tau_rule, self.tau_damping, self.tau_max_change)


def rule_label(tau_rule: str = "R1", tau_damping: str = "none", tau_max_change: float = 0.5) -> str:
    """The τ rule's name as every FedVeca figure and report prints it (see
    :meth:`FedVecaConfig.rule_label`)."""
    base = f"{tau_rule} (our reconstruction)" if tau_rule == "R1" else tau_rule
    if tau_damping == "none":
        return base
    return f"{tau_rule} + bounded τ_k change (c = {tau_max_change:g}): {VARIANT_LABEL}"


def tau_bounds(tau_k: float, change: float) -> tuple[float, float]:
    """The range of ``τ_{k+1}`` the damped variant allows after ``τ_k``: ``[τ_k / (1 + c),
    τ_k (1 + c)]``, widened to ``[τ_k − 1, τ_k + 1]`` where that is wider (one local step either
    way, so an integer τ can always move)."""
    return min(tau_k / (1.0 + change), tau_k - 1.0), max(tau_k * (1.0 + change), tau_k + 1.0)


def bound_tau_k(
    proposed: list[int], weights: list[float], current: list[int], change: float, tau_max: int
) -> tuple[list[int], float]:
    """Our reconstruction's damped variant [U]: the clients' next τ (``proposed``, after the
    rule and its clamp) scaled by one common factor ``s`` so that ``τ_{k+1} = Σ p_i τ_{k+1,i}``
    lies within :func:`tau_bounds` of ``τ_k = Σ p_i τ_{k,i}`` (``current``; ``weights`` = p).
    Returns (the clients' τ, ``s``): ``proposed`` itself and 1.0 when it is within the bounds;
    else ``min(τ_max, max(1, floor(s · τ'_i)))`` with ``s < 1`` the largest that keeps
    ``τ_{k+1} ≤ hi`` (``s > 1`` the smallest that lifts it to ``≥ lo``), found by bisection:
    ``floor`` makes ``τ_{k+1}`` a non-decreasing step function of ``s`` whose steps are at most
    ``Σ p_i = 1``, below ``hi − lo ≥ 2``, so the result lies within both bounds."""

    def mean(taus: list[int]) -> float:
        return math.fsum(p * tau for p, tau in zip(weights, taus, strict=True))

    def scaled(s: float) -> list[int]:
        return [min(tau_max, max(1, math.floor(s * tau))) for tau in proposed]

    low, high = tau_bounds(mean(current), change)
    target = mean(proposed)
    if low <= target <= high:
        return list(proposed), 1.0
    if target > high:  # too large a step up: the largest s in [0, 1) that keeps it ≤ hi
        ok, bad, fits = 0.0, 1.0, lambda s: mean(scaled(s)) <= high
    else:  # too large a step down: the smallest s in (1, τ_max] that lifts it to ≥ lo
        ok, bad, fits = float(tau_max), 1.0, lambda s: mean(scaled(s)) >= low
    for _ in range(BISECTIONS):
        mid = 0.5 * (ok + bad)
        if mid in (ok, bad):
            break
        ok, bad = (mid, bad) if fits(mid) else (ok, mid)
    return scaled(ok), ok


# ------------------------------------------------------------------------------ the client
class FedVecaEstimates(StepObserver):
    """Client side of §5.3: ``G0``, ``β_i``, ``δ_i``, ``A_i`` of one client's round, float64.

    Step by step (``on_step``), or, where a fast path runs the client's steps in one call (the
    SVM on the CPU, ``engine.fast``; ``beta_est: stoch_vs_full``, the default), from the
    recorded iterates and gradients at once (``on_trajectory``: the per-step norms in one
    compiled pass over ``[τ, d]``, ``engine.fast.estimates``, and ``G0`` in one accelerator
    call; equal to rounding, the same τ in the tests). ``same_batch`` needs every step's batch:
    it keeps the per-step path."""

    wants_next_batch = True

    def __init__(self, beta_est: str) -> None:
        self.same_batch = beta_est == "same_batch"

    def bind(self, fm, oracle) -> None:
        self.fm, self.oracle = fm, oracle

    def begin_client(self, client, task, w) -> None:
        self.client = client
        self.w = w
        self.w64 = w.to(F64)
        self.g0 = self.g0_64 = None  # ∇F_i(w_k) on the full local set: at the first step
        self.lr, self.tau = task.lr, task.num_steps
        self.beta = torch.zeros((), dtype=F64, device=w.device)
        self.delta = torch.full((), -math.inf, dtype=F64, device=w.device)

    def _full_gradient(self) -> None:
        """``G0 = ∇F_i(w_k)`` through the client oracle (its chunks)."""
        self._set_g0(self.oracle.gradients([self.client], self.w)[0])

    def _set_g0(self, g0: torch.Tensor) -> None:
        self.g0, self.g0_64 = g0, g0.to(F64)

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
        if self.g0 is None:
            self._full_gradient()
        r = y.to(F64) - self.w64  # w^t − w_k
        if t >= 1:
            self._beta_at(r, g, batch)
        r_next = r - lr * v.to(F64)  # w^{t+1} − w_k
        grow = (r_next.dot(r_next) - r.dot(r)) / lr
        self.delta = torch.maximum(self.delta, grow)

    def fused_record(self, direction):
        """The iterates, gradients and directions of every step (``stoch_vs_full``)."""
        return None if self.same_batch else frozenset({"y", "g", "v"})

    def on_trajectory(self, steps) -> None:
        """``on_step``'s updates for every step at once (rows ``t`` of ``[τ, d]``): ``G0`` in
        one accelerator call, the per-step norms in one compiled pass
        (``engine.fast.estimates``; tensor operations where it cannot run)."""
        g0 = steps.full_gradient()
        if g0 is None:
            self._full_gradient()
        else:
            self._set_g0(g0)
        lr = steps.lr
        sums = step_sums(steps.y, steps.g, steps.v, self.w64, self.g0_64, lr)
        if sums is None:
            r = steps.y.to(F64) - self.w64  # w^t − w_k, t = 0..τ−1
            r_next = r - lr * steps.v.to(F64)  # w^{t+1} − w_k
            e = steps.g.to(F64) - self.g0_64
            sums = torch.stack([(r * r).sum(1), (r_next * r_next).sum(1), (e * e).sum(1)], 1)
        sq_r, sq_next, sq_e = sums.unbind(1)
        grow = (sq_next - sq_r) / lr
        self.delta = torch.maximum(self.delta, grow.max())  # a NaN stays NaN, as step by step
        if len(sums) > 1:  # β from t = 1 on (steps closer than MIN_DISTANCE to w_k skipped)
            dist = sq_r[1:].sqrt()
            ratio = sq_e[1:].sqrt() / dist
            ratio = torch.where(dist >= MIN_DISTANCE, ratio, torch.zeros_like(ratio))
            self.beta = torch.maximum(self.beta, ratio.max())

    def end_client(self, y, next_batch, update) -> None:
        if self.g0 is None:  # pragma: no cover - every client takes at least one step
            self._full_gradient()
        g_tau = self.fm.gradient(y, *next_batch)[0]  # t = τ on one extra batch
        self._beta_at(y.to(F64) - self.w64, g_tau, next_batch)
        beta = torch.clamp(self.beta, min=BETA_FLOOR)
        delta = torch.clamp(self.delta, min=0.0)
        A = self.lr * beta * beta * delta
        tau = torch.tensor(float(self.tau), dtype=F64)
        update.metrics.update({"tau": tau, "beta": beta, "delta": delta, "A": A})
        update.extras.update({"g0": self.g0, "A": A})


# ------------------------------------------------------------------------------ the server
#: FedVeca's ``τ_max`` (§5.4) may let one client's round cover at most this many passes over the
#: whole training set: beyond, a round never ends in any useful time (``tau_max: 1e9`` with a
#: tiny ``phi`` ran one round for ever) and no paper setting comes near (τ_max = 100 of 600 batches)
MAX_ROUND_PASSES = 100


def tau_max_limit(config) -> tuple[int, str]:
    """The largest ``fedveca.tau_max`` the data allows, and why: ``MAX_ROUND_PASSES`` passes
    over the training set's ``|D|`` samples (all clients') at batch size ``B`` (``full``: a
    step is one pass over the client's data, ``|D| / N`` samples on average)."""
    data, batch = config.data, config.train.batch_size
    total = TRAIN_SIZES[data.dataset] - data.holdout
    if data.train_subset is not None:
        total = min(total, data.train_subset)
    if batch == "full":
        limit = MAX_ROUND_PASSES * data.num_clients
        how = f"batch_size full: a step is a pass over a client's data; {data.num_clients} clients"
    else:
        limit = MAX_ROUND_PASSES * max(1, -(-total // batch))
        how = f"{total} training samples of {data.dataset} at batch size {batch}"
    return limit, (
        f"one client's round may take at most {MAX_ROUND_PASSES} passes over the whole training "
        f"set ({how})"
    )


def tau_max_problems(config) -> list[str]:
    limit, why = tau_max_limit(config)
    tau_max = config.fedveca.tau_max
    if tau_max <= limit:
        return []
    return [
        f"  field `fedveca.tau_max`: got {tau_max}: {why} (allowed: 1..{limit}; "
        f"fedveca.tau_init <= tau_max)"
    ]


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

    @classmethod
    def data_errors(cls, config, files: bool = True) -> list[str]:
        return tau_max_problems(config)

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
            # Theorem 1's premise; the paper draws 1 as its lower bound (§5.3; our first reading,
            # an upper bound, was wrong)
            metrics["premise"] = lr * metrics["beta_hat"] * tau_k
        if t >= 2 and self.rule is not None:  # no τ update after round 1 (§5.1)
            A = torch.stack([u.extras["A"].to(F64) for u in updates])
            values = self.rule(A, g_hat.dot(g_hat), self.cfg.phi)
            proposed = []
            for u, value in zip(updates, values.tolist(), strict=True):
                metrics[f"client/{u.client}/tau_r1"] = torch.tensor(value, dtype=F64)
                proposed.append(self.clamp(value, self.tau[u.client]))
            if self.cfg.tau_damping == "bounded":  # our reconstruction's damped variant [U]
                proposed, scale = bound_tau_k(
                    proposed,
                    q.tolist(),
                    taus.tolist(),
                    self.cfg.tau_max_change,
                    self.cfg.tau_max,
                )
                metrics["tau_scale"] = torch.tensor(scale, dtype=F64)
            for u, tau in zip(updates, proposed, strict=True):
                self.tau[u.client] = tau
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
