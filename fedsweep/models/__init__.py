"""Models of docs/algorithms.md §8; ``build_model`` is the single entry point."""

from fedsweep.models.registry import MODELS, FLModel, build_model, count_parameters  # noqa: F401
