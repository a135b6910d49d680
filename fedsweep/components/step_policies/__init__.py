"""Step policies: how many local steps each client takes in a round (docs/algorithms.md §1.2, §5)."""
