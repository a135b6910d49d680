"""MLflow's checks and limits of names and values (``mlflow.utils.validation``), as its store
applies them: what :class:`fedsweep.tracking.lite.LiteStore` writes passes the checks MLflow's
own path would, or fails as it fails (:class:`LiteError`, in MLflow's words where it has them).
"""

from __future__ import annotations

import math
import numbers
import os
import posixpath
import re

#: MLflow's limits (``mlflow.utils.validation``)
MAX_KEY = 250
MAX_PARAM_VALUE = 6000
MAX_TAG_VALUE = 8000
MAX_REGISTRY_TAG_VALUE = 100_000
#: the characters MLflow allows in a param, metric or tag name
_NAME = re.compile(r"^[/\w.\- :]*$")


class LiteError(ValueError):
    """A call MLflow's store would refuse (a bad name, a missing or deleted run, a changed
    param); the message says what, in MLflow's words where it has them."""


def env_off(name: str) -> bool:
    """``$name`` says off (``0``, ``off``, ``false``, ``no``)."""
    return os.environ.get(name, "").strip().lower() in ("0", "off", "false", "no")


def _path_not_unique(name: str) -> bool:
    norm = posixpath.normpath(name)
    return norm != str(name) or norm == "." or norm.startswith("..") or norm.startswith("/")


def check_name(name, what: str) -> str:
    """MLflow's check of a param, metric or tag name (``_validate_tag_name`` and kin)."""
    if name is None:
        raise LiteError(f"{what} name cannot be None")
    if not _NAME.match(name):
        raise LiteError(
            f"Invalid value {name!r} for parameter '{what}' supplied: Names may only contain "
            "alphanumerics, underscores (_), dashes (-), periods (.), spaces ( ), colon(:) and "
            "slashes (/)."
        )
    if _path_not_unique(name):
        raise LiteError(f"Invalid value {name!r} for parameter '{what}' supplied")
    return name


def within_limit(what: str, limit: int, value, *, truncate: bool = False):
    """MLflow's ``_validate_length_limit``: a value cut to ``limit`` when ``truncate`` (and
    ``MLFLOW_TRUNCATE_LONG_VALUES`` is not off), else refused."""
    if value is None or len(value) <= limit:
        return value
    if truncate and not env_off("MLFLOW_TRUNCATE_LONG_VALUES"):
        return value[:limit]
    raise LiteError(f"'{what}' exceeds the maximum length of {limit} characters")


def checked_tag(key: str, value) -> tuple[str, str]:
    """A run tag as MLflow's ``_validate_tag`` returns it (its value cut at 8000)."""
    check_name(key, "key")
    return within_limit("key", MAX_KEY, key), within_limit(
        "value", MAX_TAG_VALUE, value, truncate=True
    )


def checked_param(key: str, value) -> tuple[str, str]:
    """A param as MLflow's ``_validate_param`` returns it (its value cut at 6000)."""
    check_name(key, "key")
    return within_limit("key", MAX_KEY, key), within_limit(
        "value", MAX_PARAM_VALUE, value, truncate=True
    )


def check_metric(key, value, ts, step) -> None:
    """MLflow's ``_validate_metric``."""
    check_name(key, "name")
    if value is None or isinstance(value, bool) or not isinstance(value, numbers.Number):
        raise LiteError(f"metric {key!r}: value {value!r} is not a valid double")
    if isinstance(ts, bool) or not isinstance(ts, numbers.Number) or ts < 0:
        raise LiteError(f"metric {key!r}: timestamp {ts!r} is not a nonnegative long")
    if isinstance(step, bool) or not isinstance(step, numbers.Number):
        raise LiteError(f"metric {key!r}: step {step!r} is not a valid long")
    within_limit("Metric name", MAX_KEY, key)


def sanitized(value: float) -> tuple[int, float]:
    """``(is_nan, stored value)`` as MLflow's ``sanitize_metric_value``: NaN as 0, +-inf as
    +-max float."""
    if math.isnan(value):
        return 1, 0
    if math.isinf(value):
        return 0, 1.7976931348623157e308 if value > 0 else -1.7976931348623157e308
    return 0, value


def check_model_name(name: str) -> None:
    """MLflow's ``_validate_model_name``."""
    if name is None or name.strip() == "":
        raise LiteError("Missing value for required parameter 'name'.")
    if "/" in name or ":" in name:
        raise LiteError(f"Invalid model name '{name}'. Names cannot contain '/' or ':'.")
    if _path_not_unique(name):
        raise LiteError(f"Invalid value {name!r} for parameter 'name' supplied")


def check_registry_tag(key: str, value) -> None:
    """MLflow's ``_validate_registered_model_tag``."""
    check_name(key, "key")
    within_limit("key", MAX_KEY, key)
    within_limit("value", MAX_REGISTRY_TAG_VALUE, value)
