"""BHerd: upload a beneficial herd of local gradients (docs/algorithms.md §3).

Client (§3.1): the local trajectory is the base method's own; every raw gradient ``g_{i,λ}`` is
kept in a ``τ_i × d`` buffer (and the direction actually used, ``v_{i,λ}``, in a second buffer
only when it differs from ``g``, i.e. under SCAFFOLD). After the last step:

    k_i    = clamp(round_half_up(α τ_i), 1, τ_i)                 (§3.3, B2)
    π      = first k_i entries of the greedy herding order of g  (§3.2, computed as §3.5)
    dist_i = ||Σ_{λ∈π} ẑ_λ|| / k_i = ||g_sel/k_i − μ_i||          (§3.6, B11)

The uploaded vector is ``Σ_{λ∈π} v_λ`` (``= g_sel``, Eq. 6, when ``v = g``), scaled per base:

* fedavg (§3.4, Eq. 7): ``Δ_i = η (E/α) g_sel,i``; FedAvg's aggregation gives
  ``w_{t+1} = w_t − η (E/α) Σ_i q_i g_sel,i``. ``bherd.scale = "one_over_alpha"`` drops ``E`` (B3).
  ``bherd.server_scale = "none"`` drops ``1/α``: a reading of the paper (not ours by default)
  under which the herd sum of ``k_i ≈ α τ_i`` gradients is applied unscaled, so the step
  shrinks with α; with Eq. 7's ``1/α`` (``inverse_alpha``, the default) the herd sum is
  ``≈ α τ_i μ_i`` (Proposition 1) and the update ``≈`` FedAvg's whenever the gradients change
  little within a round (issue 35's diagnosis).
* scaffold (§3.8): ``Δ_i = −Δy_i^sel = η (E/α) Σ_{λ∈π} v_λ``; SCAFFOLD's ``client_update`` also
  derives ``c_i`` from it (unless ``bherd.scaffold_ci = "full"``). The order is herded on ``g``:
  ``v − g = c − c_i`` is constant within the round and centring removes it (Appendix B.5).
* fednova (§3.7): ``Δ_i = η (τ_i/k_i) g_sel,i`` with normaliser ``a_i = τ_i``, so FedNova's
  ``w_t − τ_eff Σ q_i Δ_i/a_i`` is ``w_t − η τ_eff Σ_i q_i g_sel,i/k_i``, ``τ_eff = Σ q_i τ_i``.
  Defined for plain local SGD only (the composition table, ``fedsweep.components.compose``, checks it).

**Diagnostics** (``bherd.diagnostics: true``; off by default, so no existing run changes): per
client and round ``dev = ||Δ_i − Δ_all,i|| / ||Δ_all,i||``, the upload's relative deviation from
the full-trajectory update of the same local steps (``Δ_all,i = η Σ_λ v_λ = w_t − y_i``, what
FedAvg would upload), and ``herd_err = ||g_sel,i/(α τ_i) − μ_i|| / ||μ_i||`` (``μ_i`` the mean
local gradient), the herd mean's relative error; per round ``bherd_dev = ||Σ q_i (Δ_i −
Δ_all,i)|| / ||Σ q_i Δ_all,i||`` (the server step's deviation) and ``bherd_herd_err = Σ q_i
herd_err_i / Σ q_i``. Costs two ``τ × d`` sums per client.
"""

from __future__ import annotations

import math
from typing import Literal

import torch
from pydantic import Field

from fedsweep.components.algorithms.fednova import plain_sgd_errors
from fedsweep.components.selectors.base import Selection, Selector
from fedsweep.components.selectors.herding import herd
from fedsweep.core.messages import RoundContext
from fedsweep.core.registry import register
from fedsweep.core.section import Section

#: ``α τ_i`` is a float product: 0.7 * 45 = 31.499999999999996. A value this close to a half
#: (half_up) or to an integer (ceil/floor) is taken as that exact value before rounding.
ROUND_TOL = 1e-9


def keep_count(alpha: float, tau: int, rounding: str = "half_up") -> int:
    """``k_i = clamp(round(α τ_i), 1, τ_i)``; ``half_up`` is ``floor(x + 0.5)``, never banker's.

    ``x = α τ_i`` within ``ROUND_TOL`` of a half rounds up (``(0.7, 45)`` gives 32, not 31), and
    within ``ROUND_TOL`` of an integer counts as that integer for ``ceil``/``floor``."""
    x = alpha * tau
    if rounding == "half_up":
        k = math.floor(x + 0.5 + ROUND_TOL)
    elif rounding == "ceil":
        k = math.ceil(x - ROUND_TOL)
    elif rounding == "floor":
        k = math.floor(x + ROUND_TOL)
    else:
        raise ValueError(f"bherd.round {rounding!r} not in ('half_up', 'ceil', 'floor')")
    return min(max(k, 1), tau)


def _distances(sum_sq: torch.Tensor, k: int, paper_k: float) -> tuple[torch.Tensor, ...]:
    """``(k, ||s||/k, ||s||/(α τ))`` as float64 0-dim tensors (§3.6). On the CPU from Python
    floats in one tensor (the same IEEE square root and divisions as the tensor operations,
    without four small operations per client); elsewhere as tensor operations (no sync)."""
    if sum_sq.device.type == "cpu":
        norm = math.sqrt(float(sum_sq))
        return torch.tensor([float(k), norm / k, norm / paper_k], dtype=torch.float64).unbind()
    norm = sum_sq.sqrt()
    return torch.tensor(float(k), dtype=torch.float64), norm / k, norm / paper_k


class BHerdConfig(Section):
    alpha: float = Field(0.5, gt=0, le=1)
    round: Literal["half_up", "ceil", "floor"] = "half_up"
    scale: Literal["E_over_alpha", "one_over_alpha"] = "E_over_alpha"
    server_scale: Literal["inverse_alpha", "none"] = Field(
        "inverse_alpha",
        description="Eq. 7's 1/α on the uploaded herd sum (inverse_alpha), or none: the herd sum "
        "unscaled, so the step shrinks with α (a reading of the paper; BHerd-FedAvg and "
        "BHerd-SCAFFOLD only).",
    )
    diagnostics: bool = Field(
        False,
        description="Log the upload's relative deviation from the full-trajectory update and "
        "the herd mean's relative error, per client and round (see the selector's docstring).",
    )
    scaffold_ci: Literal["selected", "full"] = Field(
        "selected",
        description="BHerd-SCAFFOLD c_i from the uploaded herd or the full trajectory (§3.8).",
    )


@register("selector", "bherd", sections={"bherd": BHerdConfig})
class BHerd(Selector):
    """``upload``: ``"descent"`` for FedAvg and SCAFFOLD (Eq. 7, §3.8), ``"normalised"`` for
    FedNova (§3.7)."""

    uploads = {"fedavg": "descent", "scaffold": "descent", "fednova": "normalised"}

    @classmethod
    def config_errors(cls, config) -> list[str]:
        errors = plain_sgd_errors(config, "bherd-fednova", "§3.7")
        if config.algorithm == "fednova" and config.bherd.server_scale != "inverse_alpha":
            errors.append(
                f"bherd.server_scale: got {config.bherd.server_scale!r} with algorithm fednova "
                "(allowed: 'inverse_alpha'; BHerd-FedNova normalises the herd by k_i, §3.7)"
            )
        return errors

    records_gradients = True

    def __init__(self, config, upload: str = "descent") -> None:
        super().__init__(config, upload)
        self.alpha = config.bherd.alpha
        self.state_from_trajectory = config.bherd.scaffold_ci == "full"
        self.rounding = config.bherd.round
        self.scale_rule = config.bherd.scale
        self.server_rule = config.bherd.server_scale
        self.diagnostics = config.bherd.diagnostics
        self._diag: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []
        self._buffer: torch.Tensor | None = None  # raw g, [τ, d]
        self._vbuffer: torch.Tensor | None = None  # v, only when some v is not g
        self._v_differs = False
        self._tau = 0
        self._fused = False  # this client's steps ran as one fused call

    @staticmethod
    def _fit(buf, num_steps, dim, dtype, device):
        if buf is None or buf.shape[0] < num_steps or buf.dtype != dtype or buf.device != device:
            return torch.empty(num_steps, dim, dtype=dtype, device=device)
        return buf

    def begin_client(self, client, num_steps, dim, dtype, device) -> None:
        # Buffers reused across clients and rounds (clients are simulated one at a time).
        self._buffer = self._fit(self._buffer, num_steps, dim, dtype, device)
        if self._vbuffer is not None:
            self._vbuffer = self._fit(self._vbuffer, num_steps, dim, dtype, device)
        self._v_differs = False
        self._tau = num_steps
        self._fused = False

    def record(self, step: int, g: torch.Tensor, v: torch.Tensor) -> None:
        self._buffer[step].copy_(g)
        if v is not g and not self._v_differs:  # first corrected step: start the v buffer
            buf = self._buffer
            self._vbuffer = self._fit(self._vbuffer, self._tau, buf.shape[1], buf.dtype, buf.device)
            self._vbuffer[:step].copy_(buf[:step])  # earlier steps had v = g
            self._v_differs = True
        if self._v_differs:
            self._vbuffer[step].copy_(v)

    def fused_buffers(self, direction):
        """The gradient buffer, and the direction buffer when ``v`` is not ``g`` (the same
        buffers ``record`` fills, written by the fused trajectory without a copy per step)."""
        tau = self._tau
        self._fused = True
        if direction.is_gradient:
            return self._buffer[:tau], None
        buf = self._buffer
        self._vbuffer = self._fit(self._vbuffer, tau, buf.shape[1], buf.dtype, buf.device)
        self._v_differs = True
        return buf[:tau], self._vbuffer[:tau]

    def server_scale(self, ctx: RoundContext) -> float:
        """``E/α`` (Eq. 7, literal) or ``1/α``; without the ``1/α`` (``server_scale: none``)
        ``E`` or 1."""
        if self.server_rule == "none":
            return ctx.local_epochs if self.scale_rule == "E_over_alpha" else 1.0
        if self.scale_rule == "E_over_alpha":
            return ctx.local_epochs / self.alpha
        return 1.0 / self.alpha

    def finish_client(self, client: int, ctx: RoundContext) -> Selection:
        tau = self._tau
        z = self._buffer[:tau]
        k = keep_count(self.alpha, tau, self.rounding)
        # herd the raw g (§3.8: same order as herding v), compiled (engine.fast.herding: the
        # greedy bit-identical; after a fused trajectory the Gram matrix too, to rounding)
        result = herd(z, k, compiled_gram=self._fused)
        used = self._vbuffer[:tau] if self._v_differs else z
        v_sel = used.index_select(0, result.order).sum(dim=0)  # Σ_{λ∈π} v_λ (= g_sel if v = g)
        diag = self._measure_before(z, used, v_sel, result.order, tau) if self.diagnostics else None
        extras: dict[str, torch.Tensor] = {}
        if self.upload == "normalised":  # FedNova, §3.7: d_i^sel = g_sel/k_i, normaliser a_i = τ_i
            delta = v_sel.mul_(ctx.lr * tau / k)
            extras["a"] = torch.tensor(float(tau), dtype=torch.float64)
        else:  # fedavg (Eq. 7) and scaffold (§3.8): η (E/α) Σ_π v
            delta = v_sel.mul_(ctx.lr * self.server_scale(ctx))
        selected = result.selected
        if selected is None:
            selected = torch.zeros(tau, dtype=torch.bool, device=z.device)
            selected[result.order] = True
        names = ("k", "dist", "dist_paper")
        metrics = dict(zip(names, _distances(result.sum_sq, k, self.alpha * tau), strict=True))
        if diag is not None:
            full, herd_err = diag
            full.mul_(ctx.lr)  # Δ_all = η Σ_λ v_λ
            diff = delta - full
            metrics["dev"] = (diff.norm() / full.norm()).to(torch.float64)
            metrics["herd_err"] = herd_err
            self._diag.append((diff, full, herd_err))
        return Selection(delta, metrics, {"selected": selected}, extras, self.state_from_trajectory)

    def _measure_before(self, z, used, v_sel, order, tau: int):
        """``(Σ_λ v_λ, herd_err)`` from the buffers before the upload is scaled in place."""
        full = used.sum(dim=0)
        g_sel = z.index_select(0, order).sum(dim=0) if self._v_differs else v_sel
        mu = (z.sum(dim=0) if self._v_differs else full) / tau
        herd_err = (g_sel / (self.alpha * tau) - mu).norm() / mu.norm()
        return full, herd_err.to(torch.float64)

    def finish_round(self, updates, weights: torch.Tensor, ctx: RoundContext) -> None:
        """With ``diagnostics``: the round's ``bherd_dev`` and ``bherd_herd_err`` (q-weighted)."""
        if not self._diag:
            return
        q = weights.to(torch.float64)
        diff = sum(qi.to(d.dtype) * d for qi, (d, _, _) in zip(q, self._diag, strict=True))
        full = sum(qi.to(f.dtype) * f for qi, (_, f, _) in zip(q, self._diag, strict=True))
        errs = torch.stack([e for _, _, e in self._diag])
        self.metrics = {
            "bherd_dev": (diff.norm() / full.norm()).to(torch.float64),
            "bherd_herd_err": (q * errs).sum() / q.sum(),
        }
        self._diag = []
