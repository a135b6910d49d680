"""Quantity skew (docs/algorithms.md §9.5): ``data.quantity_skew: powerlaw`` gives the IID
partition power-law client sizes; ``none`` (the default) leaves every partition, config hash and
run as it was. Exact counts on synthetic labels; no data set is loaded."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from pydantic import ValidationError
from typer.testing import CliRunner

from fedsweep.cli.main import app
from fedsweep.config.hashing import config_hash
from fedsweep.core.seeding import numpy_rng
from fedsweep.data import partitions as P
from fedsweep.data.config import DataConfig
from fedsweep.experiment import FLRun
from tests.helpers import small_run, tiny_config, tiny_dataset, write_yaml

N, TOTAL = 100, 6000  # the intro-sampling quick profile: 6,000 images on 100 clients


@pytest.fixture(scope="module")
def labels() -> np.ndarray:
    """6,000 labels 0..9, 600 of each, in a known shuffled order."""
    y = np.repeat(np.arange(10), TOTAL // 10)
    return np.random.default_rng(2024).permutation(y).astype(np.int64)


def gini(sizes: np.ndarray) -> float:
    x = np.sort(np.asarray(sizes, dtype=np.float64))
    ranks = 2 * np.arange(1, x.size + 1) - x.size - 1
    return float(ranks @ x / (x.size * x.sum()))


def old_iid(labels: np.ndarray, num_clients: int, seed: int) -> list[np.ndarray]:
    """The IID split before quantity skew existed (``array_split`` of the permutation)."""
    perm = np.random.default_rng(seed).permutation(labels.size).astype(np.int64)
    return [np.sort(part) for part in np.array_split(perm, num_clients)]


# ----------------------------------------------------------------------------- the sizes
@pytest.mark.parametrize("seed", range(4))
def test_powerlaw_sizes_sum_minimum_and_skew(seed: int) -> None:
    sizes = P.powerlaw_sizes(TOTAL, N, P.POWERLAW_EXPONENT, np.random.default_rng(seed))
    assert sizes.dtype == np.int64 and sizes.shape == (N,)
    assert int(sizes.sum()) == TOTAL
    assert int(sizes.min()) >= P.QUANTITY_MIN_SIZE
    # the skew is real (balanced: 60 each, ratio 1, Gini 0); Zipf's law on 100 clients:
    top = sorted(sizes.tolist(), reverse=True)
    assert top[:3] == [1797, 600, 360] and top[-1] == 10  # about 6000 / (6.6 (r - 1/2))
    assert sizes.max() / sizes.min() > 100
    assert gini(sizes) > 0.6


def test_powerlaw_sizes_follow_the_rank_size_law() -> None:
    """n_(r) ∝ ((r - 1/2)/N)^(-1/a) up to the rounding: the log-log slope of the sizes against
    the rank is -1/a."""
    for a in (0.8, 1.0, 1.5, 3.0):
        top = np.sort(P.powerlaw_sizes(600_000, N, a, 0))[::-1].astype(np.float64)
        slope = np.polyfit(np.log(np.arange(1, N + 1) - 0.5), np.log(top), 1)[0]
        assert abs(slope + 1 / a) < 0.02, (a, slope)


def test_powerlaw_sizes_are_dealt_by_the_seed() -> None:
    """The same seed gives the same sizes; another seed deals the same set of sizes to other
    clients (the skew does not vary from seed to seed)."""

    def draw(seed: int) -> list[int]:
        return P.powerlaw_sizes(TOTAL, N, 1.0, np.random.default_rng(seed)).tolist()

    assert draw(3) == draw(3)
    assert draw(3) != draw(4) and sorted(draw(3)) == sorted(draw(4))
    assert P.powerlaw_sizes(TOTAL, N, 1.0, 3).tolist() == draw(3)  # an int seed is a generator


def test_smaller_exponent_means_more_skew() -> None:
    ginis = [gini(P.powerlaw_sizes(TOTAL, N, a, 0)) for a in (0.8, 1.0, 1.5, 3.0)]
    assert all(x > y + 0.05 for x, y in zip(ginis, ginis[1:], strict=False)), ginis


def test_minimum_holds_when_the_data_barely_covers_the_clients() -> None:
    """A heavy tail on almost no spare data: each client keeps 1 sample, the rest is shared."""
    for seed in range(5):
        sizes = P.powerlaw_sizes(120, N, 0.3, np.random.default_rng(seed))
        assert int(sizes.sum()) == 120 and int(sizes.min()) == 1
    exact = P.powerlaw_sizes(N, N, 1.5, 0)  # nothing to share: one sample each
    assert exact.tolist() == [1] * N
    custom = P.powerlaw_sizes(TOTAL, N, 1.5, 0, min_size=10)
    assert int(custom.min()) >= 10 and int(custom.sum()) == TOTAL


def test_powerlaw_sizes_refuse_bad_input() -> None:
    with pytest.raises(ValueError, match="cannot give 100 clients"):
        P.powerlaw_sizes(99, N, 1.5, 0)
    for bad in (0.0, -1.0, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="exponent"):
            P.powerlaw_sizes(TOTAL, N, bad, 0)
    with pytest.raises(ValueError, match="seeded rng"):
        P.powerlaw_sizes(TOTAL, N, 1.5, None)


# ----------------------------------------------------------------------------- the partition
def test_iid_powerlaw_partition(labels: np.ndarray) -> None:
    parts = P.iid(labels, N, np.random.default_rng(7), quantity_skew="powerlaw", exponent=1.5)
    assert len(parts) == N
    for part in parts:
        assert part.dtype == np.int64 and np.all(np.diff(part) > 0)
    everything = np.concatenate(parts)
    np.testing.assert_array_equal(np.sort(everything), np.arange(TOTAL))  # each index once
    # the sizes are the ones drawn right after the balanced split's permutation
    gen = np.random.default_rng(7)
    perm = gen.permutation(TOTAL)
    sizes = P.powerlaw_sizes(TOTAL, N, 1.5, gen)
    assert [p.size for p in parts] == sizes.tolist()
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    for part, start, size in zip(parts, starts, sizes, strict=True):
        np.testing.assert_array_equal(part, np.sort(perm[start : start + size]))
    again = P.iid(labels, N, np.random.default_rng(7), quantity_skew="powerlaw", exponent=1.5)
    assert P.partition_hash(again) == P.partition_hash(parts)
    other = P.iid(labels, N, np.random.default_rng(8), quantity_skew="powerlaw", exponent=1.5)
    assert P.partition_hash(other) != P.partition_hash(parts)
    zipf = P.iid(labels, N, np.random.default_rng(7), quantity_skew="powerlaw")  # a = 1
    assert P.partition_hash(zipf) != P.partition_hash(parts)


def test_iid_powerlaw_labels_stay_iid(labels: np.ndarray) -> None:
    """Every client holds an IID sample: the clients x labels table passes a chi-square
    homogeneity bound (df + 5 sd), and the largest clients' label shares are near 1/10."""
    parts = P.make_partition("iid", labels, N, rng=11, quantity_skew="powerlaw")
    table = np.stack([np.bincount(labels[p], minlength=10) for p in parts]).astype(np.float64)
    expected = table.sum(axis=1, keepdims=True) * table.sum(axis=0, keepdims=True) / TOTAL
    chi2 = float(((table - expected) ** 2 / expected).sum())
    df = (N - 1) * (10 - 1)
    assert chi2 < df + 5 * np.sqrt(2 * df), chi2
    large = table[np.argsort(-table.sum(axis=1), kind="stable")[:3]]  # the 3 largest clients
    assert large.sum(axis=1).min() >= 150
    shares = large / large.sum(axis=1, keepdims=True)
    assert float(np.abs(shares - 0.1).sum(axis=1).max()) / 2 < 0.15  # total variation


def test_none_is_the_old_iid_split_bit_for_bit(labels: np.ndarray) -> None:
    for seed in (0, 1, 5):
        old = old_iid(labels[:5999], 7, seed)
        for new in (
            P.iid(labels[:5999], 7, np.random.default_rng(seed)),
            P.make_partition("iid", labels[:5999], 7, rng=np.random.default_rng(seed)),
            P.make_partition("iid", labels[:5999], 7, rng=seed, quantity_skew="none"),
        ):
            assert P.partition_hash(new) == P.partition_hash(old)


def test_make_partition_skew_errors(labels: np.ndarray) -> None:
    for scheme in ("shards", "dirichlet", "case1", "case2", "case3"):
        with pytest.raises(ValueError) as info:
            P.make_partition(scheme, labels, 10, rng=0, quantity_skew="powerlaw")
        msg = str(info.value)
        assert scheme in msg and "'powerlaw'" in msg and "allowed: iid" in msg
    with pytest.raises(ValueError, match="allowed: none, powerlaw"):
        P.make_partition("iid", labels, 10, rng=0, quantity_skew="zipf")
    with pytest.raises(ValueError, match="case4"):
        P.make_partition("case4", labels, 10, rng=0, quantity_skew="powerlaw")


# ----------------------------------------------------------------------------- the config
def test_config_field_defaults_and_validation() -> None:
    data = DataConfig()
    assert (data.quantity_skew, data.quantity_skew_exponent) == ("none", P.POWERLAW_EXPONENT)
    assert DataConfig(partition="iid", quantity_skew="powerlaw").quantity_skew == "powerlaw"
    with pytest.raises(ValidationError) as info:
        DataConfig(partition="shards", quantity_skew="powerlaw")
    msg = str(info.value)
    assert "quantity_skew" in msg and "'shards'" in msg and "allowed: none" in msg
    with pytest.raises(ValidationError):
        DataConfig(quantity_skew="zipf")
    with pytest.raises(ValidationError):
        DataConfig(partition="iid", quantity_skew="powerlaw", quantity_skew_exponent=0)


def test_bad_skew_fails_validation_with_exit_2(tmp_path) -> None:
    runner = CliRunner()
    data = {"dataset": "mnist-5k", "partition": "shards", "num_clients": 3, "train_subset": 300}
    for skew, needles in (
        ("powerlaw", ["`data.quantity_skew`", "'powerlaw'", "'shards'", "allowed: none"]),
        ("zipf", ["`data.quantity_skew`", "'zipf'", "'none'", "'powerlaw'"]),
    ):
        tree = small_run("v", "validation", data={**data, "quantity_skew": skew})
        res = runner.invoke(app, ["validate", str(write_yaml(tmp_path / "c.yaml", tree))])
        assert res.exit_code == 2, res.output
        assert "Traceback" not in res.output
        for needle in needles:
            assert needle in res.output, (needle, res.output)


def test_default_none_keeps_the_config_hash() -> None:
    base = tiny_config(data__partition="iid")
    assert config_hash(tiny_config(data__partition="iid", data__quantity_skew="none")) == (
        config_hash(base)
    )
    skewed = tiny_config(data__partition="iid", data__quantity_skew="powerlaw")
    assert config_hash(skewed) != config_hash(base)
    milder = tiny_config(
        data__partition="iid", data__quantity_skew="powerlaw", data__quantity_skew_exponent=1.5
    )
    assert config_hash(milder) != config_hash(skewed)


def test_run_gets_powerlaw_clients_and_scheme2_weights() -> None:
    """A run: the clients' sizes are the partition's, p_i = |D_i|/|D| unequal, and scheme 2 is
    accepted with weights p_i N/m that do not sum to 1."""
    cfg = tiny_config(
        data__partition="iid",
        data__num_clients=10,
        data__quantity_skew="powerlaw",
        sampler="uniform",
        cohort__size=3,
        uniform__weighting="scheme2",
        step_policy="fixed",
        fixed_steps__steps=2,
        train__rounds=1,
    )
    run = FLRun(cfg, dataset=tiny_dataset(n_train=600))
    sizes = [c.num_samples for c in run.clients]
    want = P.iid(np.zeros(600, np.int64), 10, np.random.default_rng(0))  # balanced reference
    assert sum(sizes) == 600 and min(sizes) >= 1 and len(set(sizes)) > 1
    assert sizes != [p.size for p in want]
    expected = P.make_partition(
        "iid",
        run.y_train.numpy(),
        10,
        rng=numpy_rng(0, "partition"),
        quantity_skew="powerlaw",
    )
    assert run.partition_hash == P.partition_hash(expected)
    torch.testing.assert_close(run.p, torch.tensor(sizes, dtype=torch.float64) / 600)
    cohort = run.components.sampler.sample(1, run.w, np.random.default_rng(0), None)
    torch.testing.assert_close(cohort.weights, run.p[cohort.clients] * 10 / 3)
    assert abs(float(cohort.weights.sum()) - 1.0) > 1e-6
    result = run.run()
    assert result.status == "finished" and result.rounds == 1
