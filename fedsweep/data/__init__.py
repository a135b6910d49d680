"""Data sets (loaded once into tensors) and the federated partitions of docs/algorithms.md §9."""
