"""Post-aggregation hooks (docs/algorithms.md §1.4 ``POST_AGGREGATION``): server-side steps
after the server optimizer and before the next broadcast (FedWalk's leash task next)."""
