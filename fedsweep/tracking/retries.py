"""Seeing a tracking server's outage: MLflow's REST client retries a request that fails to
connect (urllib3's ``Retry``, minutes with backoff) and says so only in urllib3's log
(``Retrying (Retry(total=4, ...)) after connection broken by ...``). :func:`watching` turns
those log records into one line for a console, at most once per :data:`EVERY_S` seconds."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager

#: the logger urllib3 writes its retries to
LOGGER = "urllib3.connectionpool"
#: seconds between two lines about the same outage
EVERY_S = 60.0


class _RetryLines(logging.Handler):
    def __init__(self, say, every_s: float):
        super().__init__(logging.WARNING)
        self.say, self.every_s = say, every_s
        self._last = -float("inf")

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = record.getMessage()
        except Exception:  # noqa: BLE001
            return
        if not text.startswith("Retrying"):
            return
        now = time.monotonic()
        if now - self._last < self.every_s:
            return
        self._last = now
        why = re.search(
            r"(Connection refused|timed out|Name or service not known|\d{3} error)", text
        )
        path = re.search(r": (/\S*)\s*$", text)
        try:
            self.say(
                "note: the tracking server does not answer"
                + (f" ({why.group(1)})" if why else "")
                + (f" on {path.group(1)}" if path else "")
                + "; MLflow retries the request (nothing is lost unless the retries run out)"
            )
        except Exception:  # noqa: BLE001 - a display must never stop a run
            pass


@contextmanager
def watching(say, every_s: float = EVERY_S) -> Iterator[None]:
    """While inside, ``say(line)`` is called when MLflow retries a tracking-server request."""
    handler = _RetryLines(say, every_s)
    logger = logging.getLogger(LOGGER)
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)
