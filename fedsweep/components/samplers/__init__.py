"""Client samplers: which clients train in a round, and with what aggregation weights (§7)."""
