"""The generic FL round (docs/algorithms.md §1.4); it knows no particular algorithm."""
