"""Upload selectors: decide which recorded local gradients a client uploads (BHerd, GraB)."""
