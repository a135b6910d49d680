"""Base methods: pure update rules plugged into the generic round (docs/algorithms.md §2)."""
