"""What fedsweep knows about each data set without loading it: names, training-set sizes, class
counts and channels (used by validation before anything runs)."""

from __future__ import annotations

DATASETS = ("mnist", "mnist-5k", "fashion-mnist", "cifar10", "cifar100")
PARTITIONS = ("case1", "case2", "case3", "dirichlet", "shards", "iid")

#: training-set sizes known without loading the data (``data.train_subset`` takes a prefix)
TRAIN_SIZES = {
    "mnist": 60000,
    "mnist-5k": 4000,
    "fashion-mnist": 60000,
    "cifar10": 50000,
    "cifar100": 50000,
}
#: test-set sizes (``eval.test_subset`` takes a prefix): an accuracy moves in steps of 1 / this
TEST_SIZES = {
    "mnist": 10000,
    "mnist-5k": 1000,
    "fashion-mnist": 10000,
    "cifar10": 10000,
    "cifar100": 10000,
}
#: training samples per class (0, 1, ...) of the full training sets
CLASS_COUNTS = {
    "mnist": (5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949),
    "mnist-5k": (400,) * 10,
    "fashion-mnist": (6000,) * 10,
    "cifar10": (5000,) * 10,
    "cifar100": (500,) * 100,
}
#: data sets of one-channel (grayscale) images
GRAYSCALE = ("mnist", "mnist-5k", "fashion-mnist")
