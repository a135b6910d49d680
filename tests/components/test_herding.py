"""BHerd selection: Gram greedy vs the naive Algorithm 2 oracle, k_i rounding, distances."""

from __future__ import annotations

import math

import pytest
import torch

from fedsweep.components.selectors.bherd import keep_count
from fedsweep.components.selectors.herding import centred_gram, herd


def herd_naive(z: torch.Tensor, k: int) -> list[int]:
    """docs/algorithms.md §3.2 HERD_NAIVE, literally: the test oracle."""
    zc = z - z.mean(dim=0, keepdim=True)
    s = torch.zeros(z.shape[1], dtype=z.dtype)
    remaining = list(range(z.shape[0]))
    order = []
    for _ in range(k):
        best, best_norm = None, math.inf
        for c in remaining:  # ascending scan, first strict minimiser
            norm = torch.linalg.vector_norm(s + zc[c]).item()
            if norm < best_norm:
                best, best_norm = c, norm
        order.append(best)
        remaining.remove(best)
        s = s + zc[best]
    return order


def test_gram_greedy_equals_naive_on_random_float64():
    g = torch.Generator().manual_seed(0)
    for case in range(300):
        # tau = 2 is excluded: then ẑ_1 = −ẑ_2, an exact tie that only rounding decides; exact
        # ties are covered by the integer test below.
        tau = int(torch.randint(3, 41, (1,), generator=g))
        d = int(torch.randint(1, 51, (1,), generator=g))
        k = int(torch.randint(1, tau + 1, (1,), generator=g))
        z = torch.randn(tau, d, generator=g, dtype=torch.float64)
        assert herd(z, k).order.tolist() == herd_naive(z, k), f"case {case}"


def test_gram_greedy_equals_naive_on_exact_ties():
    g = torch.Generator().manual_seed(1)
    for case in range(300):
        half = int(torch.randint(1, 11, (1,), generator=g))
        d = int(torch.randint(1, 6, (1,), generator=g))
        x = torch.randint(-2, 3, (half, d), generator=g).to(torch.float64)
        z = torch.cat([x, -x])  # mean exactly zero, many exact ties and duplicates
        k = int(torch.randint(1, 2 * half + 1, (1,), generator=g))
        assert herd(z, k).order.tolist() == herd_naive(z, k), f"case {case}"


def test_ties_go_to_the_lowest_index():
    z = torch.tensor([[1.0], [1.0], [-1.0], [-1.0]], dtype=torch.float64)
    assert herd(z, 4).order.tolist() == [0, 2, 1, 3]


def test_running_norm_equals_direct_recomputation():
    """Appendix B.3. Compared on the squared norm with a tolerance relative to trace(K): when
    k = tau the exact value is 0 and the running sum ends in float64 cancellation noise."""
    g = torch.Generator().manual_seed(2)
    for _ in range(50):
        z = torch.randn(30, 20, generator=g, dtype=torch.float64)
        k = int(torch.randint(1, 31, (1,), generator=g))
        res = herd(z, k)
        zc = z - z.mean(0)
        scale = zc.square().sum().item()
        direct_sq = zc[res.order].sum(0).square().sum()
        assert abs(res.sum_sq.item() - direct_sq.item()) <= 1e-12 * scale
        # dist = ||g_sel/k − μ|| (§3.6), same quantity
        dist_sq = (z[res.order].sum(0) / k - z.mean(0)).square().sum()
        assert abs(res.sum_sq.item() / k**2 - dist_sq.item()) <= 1e-12 * scale


def test_blocked_gram_matches_one_shot_in_float64():
    z = torch.randn(12, 1000, dtype=torch.float32)
    zc = z.double() - z.double().mean(0)
    torch.testing.assert_close(centred_gram(z, block=128), zc @ zc.T, rtol=1e-12, atol=1e-10)
    assert centred_gram(z).dtype == torch.float64


def test_first_pick_is_closest_to_mean():
    z = torch.tensor([[5.0, 0.0], [0.1, 0.1], [-5.0, 0.0], [0.0, -0.3]], dtype=torch.float64)
    assert herd(z, 1).order.tolist() == [1]


@pytest.mark.parametrize(
    "alpha,tau,expected",
    [
        (0.5, 113, 57),  # 56.5 -> 57 (banker's rounding would give 56)
        (0.5, 126, 63),
        (0.5, 119, 60),  # 59.5 -> 60
        (0.5, 117, 59),  # 58.5 -> 59 (banker's would give 58)
        (0.1, 4, 1),  # 0.4 rounds to 0: clamped to 1
        (1.0, 120, 120),
        (0.3, 1, 1),
    ],
)
def test_keep_count_half_up_and_clamp(alpha, tau, expected):
    assert keep_count(alpha, tau) == expected


def test_keep_count_variants_and_no_bankers_rounding():
    assert round(0.5 * 117) == 58 and keep_count(0.5, 117) == 59
    assert keep_count(0.5, 113, "ceil") == 57 and keep_count(0.5, 113, "floor") == 56
    assert keep_count(0.01, 10, "floor") == 1  # clamp low
    with pytest.raises(ValueError, match="bherd.round"):
        keep_count(0.5, 10, "nearest")


@pytest.mark.parametrize("alpha,tau,expected", [(0.7, 45, 32), (0.7, 85, 60), (0.7, 165, 116)])
def test_keep_count_float_product_just_below_a_half_rounds_up(alpha, tau, expected):
    """0.7 * 45 = 31.499999999999996 in floating point; the half-up rule of k_i gives 32."""
    assert alpha * tau < expected - 0.5  # the float product really is below the half
    assert keep_count(alpha, tau) == expected


def test_keep_count_floor_ignores_float_noise():
    # 0.7 * 90 = 62.99999999999999 in floating point; floor of the exact 63 is 63
    assert 0.7 * 90 < 63
    assert keep_count(0.7, 90, "floor") == 63 and keep_count(0.7, 90, "ceil") == 63
    assert keep_count(0.5, 113, "ceil") == 57 and keep_count(0.5, 113, "floor") == 56


def test_herd_rejects_bad_k():
    with pytest.raises(ValueError):
        herd(torch.zeros(3, 2, dtype=torch.float64), 0)


def test_compiled_greedy_is_bit_identical_to_the_tensor_loop():
    """Issue 13 (cheap herding): the greedy loop runs compiled on the CPU with the same float64
    operations in the same order: the same order and the same ||s||², bit for bit, ties (equal
    rows, integer-valued gradients) included; a NaN Gram matrix takes the tensor loop."""
    from fedsweep.components.selectors.herding import herd_gram, herd_gram_loop
    from fedsweep.engine.fast.herding import _greedy_kernel

    if _greedy_kernel() is None:
        pytest.skip("numba is not available")
    g = torch.Generator().manual_seed(0)
    for trial in range(120):
        tau = int(torch.randint(1, 130, (1,), generator=g))
        z = torch.randn(tau, 40, generator=g, dtype=torch.float64)
        if trial % 3 == 0:
            z = torch.round(z)  # many exact ties in the keys
        if trial % 5 == 0 and tau > 2:
            z[1] = z[0]
        gram = centred_gram(z)
        k = int(torch.randint(1, tau + 1, (1,), generator=g))
        fast, loop = herd_gram(gram, k), herd_gram_loop(gram, k)
        assert torch.equal(fast.order, loop.order), (tau, k)
        assert torch.equal(fast.sum_sq, loop.sum_sq), (tau, k)
    gram = centred_gram(torch.randn(6, 4, generator=g, dtype=torch.float64))
    gram[2, 2] = float("nan")
    assert torch.equal(herd_gram(gram, 3).order, herd_gram_loop(gram, 3).order)


def test_compiled_herd_equals_herd_on_random_and_exact_tie_inputs():
    """Issue 13: BHerd on the fused SVM trajectory herds with one compiled call (blocked
    float64 Gram matrix with explicit centring, then the same greedy). §3.5's test contract:
    the same order as :func:`herd` on random float64 inputs, and on exact-arithmetic inputs
    (small integers, mean exactly 0: X stacked on −X) including their many ties; the Gram
    matrices agree to rounding; float32 buffers are herded in float64; a NaN gives None."""
    from fedsweep.engine.fast.herding import _compiled_kernel, herd_compiled

    if _compiled_kernel() is None:
        pytest.skip("numba is not available")
    g = torch.Generator().manual_seed(1)
    for trial in range(150):
        tau = int(torch.randint(1, 131, (1,), generator=g))  # block padding: any τ mod 4
        d = int(torch.randint(1, 90, (1,), generator=g))
        if trial % 2:
            z = torch.randn(tau, d, generator=g, dtype=torch.float64)
        else:  # exact arithmetic, many exact ties and duplicate rows
            half = torch.randint(-3, 4, ((tau + 1) // 2, d), generator=g).to(torch.float64)
            z = torch.cat([half, -half])
        k = int(torch.randint(1, len(z) + 1, (1,), generator=g))
        fast, ref = herd_compiled(z, k), herd(z, k)
        assert torch.equal(fast.order, ref.order), (trial, tau, d, k)
        torch.testing.assert_close(fast.sum_sq, ref.sum_sq, rtol=1e-12, atol=1e-9)
    z32 = torch.randn(120, 784, generator=g)
    assert torch.equal(herd_compiled(z32, 60).order, herd(z32, 60).order)
    z32[3, 5] = float("nan")
    assert herd_compiled(z32, 60) is None
    with pytest.raises(ValueError):
        herd_compiled(z32, 0)


def test_compiled_gram_does_not_depend_on_the_number_of_parts_and_rejects_inf():
    """The compiled Gram matrix is split into parts (one per thread) that centre the rows as
    they read them: the numbers are the same bits for 1, 2 or 3 parts (so for any thread
    count), and equal §3.5's float64 product to rounding. A NaN or ±inf in a float32 or float64 buffer gives
    None (the tensor path then handles it)."""
    import numpy as np

    from fedsweep.engine.fast.herding import _compiled_kernel, herd_compiled

    if _compiled_kernel() is None:
        pytest.skip("numba is not available")
    gram_kernel, _ = _compiled_kernel()
    g = torch.Generator().manual_seed(7)
    for tau, d in ((1, 5), (7, 33), (120, 784), (118, 100)):
        z = (torch.randn(tau, d, generator=g) * 3 + 1).numpy()
        size = 4 * ((tau + 3) // 4)
        grams = []
        for parts in (1, 2, 3):
            out = np.empty((tau, tau))
            bits = z.view(np.uint32)
            assert gram_kernel(
                z,
                bits,
                np.uint32(0x7F800000),
                np.empty(d),
                np.empty((parts, 4, d)),
                np.empty((size, size)),
                out,
            )
            grams.append(out)
        assert np.array_equal(grams[0], grams[1]) and np.array_equal(grams[0], grams[2])
        ref = centred_gram(torch.from_numpy(z)).numpy()
        np.testing.assert_allclose(grams[0], ref, rtol=1e-12, atol=1e-9 * np.abs(ref).max())
    for dtype in (torch.float32, torch.float64):
        for bad in (float("inf"), float("-inf"), float("nan")):
            z = torch.randn(20, 30, generator=g, dtype=dtype)
            assert herd_compiled(z, 10) is not None
            z[19, 29] = bad
            assert herd_compiled(z, 10) is None, (dtype, bad)


def test_compiled_greedy_falls_back_to_the_tensor_loop_when_a_key_overflows():
    """The compiled greedy keeps taken candidates at +inf; a key that overflows to ±inf would
    be ambiguous there, so it reports it and :func:`herd_gram` takes the tensor loop (torch's
    ``argmin`` semantics). Exact-tie inputs still give the lowest index."""
    from fedsweep.components.selectors.herding import herd_gram, herd_gram_loop
    from fedsweep.engine.fast.herding import _greedy_kernel

    if _greedy_kernel() is None:
        pytest.skip("numba is not available")
    huge = torch.full((6, 6), 1e308, dtype=torch.float64)
    huge.diagonal().copy_(torch.tensor([3e307, 1e308, 2e307, 1e308, 5e307, 1e308]))
    *_, ok = _greedy_kernel()(huge.numpy(), 4)
    assert not ok
    fast, loop = herd_gram(huge, 4), herd_gram_loop(huge, 4)
    assert torch.equal(fast.order, loop.order)
    assert torch.equal(fast.sum_sq, loop.sum_sq)
    ties = torch.zeros(5, 5, dtype=torch.float64)
    assert herd_gram(ties, 5).order.tolist() == [0, 1, 2, 3, 4]
    assert herd_gram(ties, 5).selected.all()
