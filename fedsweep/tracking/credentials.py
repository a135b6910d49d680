"""Credentials in a tracking URI never leave the process environment.

A user may type ``postgresql://alice:SECRET@db/mlflow`` or ``https://alice:SECRET@mlflow.lab``.
fedsweep logs its tracking URI as a param, writes it into ``config.yaml``, Ray's trial configs,
the sweep's state file, the console and the figures. So the URI is split once, where it is
resolved (:func:`absorb`): the rest of fedsweep only ever sees the *clean* URI (the user name
stays, the password goes) and the secret moves into this process's environment:

- ``http(s)``: into MLflow's own ``MLFLOW_TRACKING_USERNAME`` / ``MLFLOW_TRACKING_PASSWORD``,
  which MLflow's REST client reads for every request;
- a database URI (``postgresql``, ``mysql``, ``mssql``): into ``FEDSWEEP_TRACKING_SECRETS``
  (JSON, clean URI -> password), put back only when a database connection is opened
  (:func:`connect_uri`); without one, the driver's own mechanisms apply (``~/.pgpass``,
  ``PGPASSWORD`` for PostgreSQL).

Local Ray workers inherit the environment; a sweep hands :func:`secret_env` to its trials on
other nodes through Ray's object store (never through a trial's config, which Ray writes to
disk). :func:`redact` masks a password in any text (error messages that quote a URI).
"""

from __future__ import annotations

import json
import os
import re
from urllib.parse import quote, unquote, urlsplit, urlunsplit

USER_ENV = "MLFLOW_TRACKING_USERNAME"
PASSWORD_ENV = "MLFLOW_TRACKING_PASSWORD"
#: JSON object {clean database URI: password} (this process and the processes it starts)
SECRETS_ENV = "FEDSWEEP_TRACKING_SECRETS"
MASK = "***"

HTTP_SCHEMES = ("http", "https")
#: database URI schemes (``postgresql+psycopg`` counts as ``postgresql``)
DB_SCHEMES = ("postgresql", "postgres", "mysql", "mssql")

#: ``scheme://user:`` and all up to the last ``@`` before a space: a password typed without
#: percent-encoding may hold ``/`` or ``@`` (``postgresql://alice:p/w@host/db``), and masking
#: a little more than the password is better than showing part of it
_USERINFO = re.compile(r"(\b[A-Za-z][A-Za-z0-9+.\-]*://[^/\s:@]*):(\S*)@")


class CredentialsError(ValueError):
    """A credentialed URI fedsweep cannot take apart safely (the message never quotes the
    password)."""


def redact(text: str) -> str:
    """``text`` with the password of every ``scheme://user:password@`` in it masked."""
    return _USERINFO.sub(rf"\1:{MASK}@", text) if text else text


def scheme(uri: str) -> str:
    """A URI's scheme, lower case and without its driver (``postgresql+psycopg2`` ->
    ``postgresql``); "" for a bare path."""
    return uri.partition("://")[0].split("+")[0].lower() if "://" in uri else ""


def parse_problem(uri: str) -> str | None:
    """Why ``urllib`` cannot take the tracking URI ``uri`` apart, in one line without its
    password, or None. ``urlsplit`` raises ``ValueError`` for an unclosed IPv6 bracket
    (``postgresql://alice:pw@[::1/db``) and ``.port`` for a port out of range or not a number:
    tracebacks, before this check, from whichever command read the URI first."""
    try:
        urlsplit(uri).port  # noqa: B018 - parsed lazily: the property raises
    except ValueError as err:
        # urllib quotes the bad port, which is the password's start when it holds a "/"
        why = "its port is not a number 0-65535" if "port" in str(err).lower() else str(err)
        return (
            f"tracking URI {redact(uri)}: not a valid URI ({why}; allowed: "
            "scheme://user@host:port/path, a port 0-65535, an IPv6 address in brackets, a "
            "password percent-encoded)"
        )
    return None


def absorb(uri: str) -> str:
    """The clean form of ``uri`` (no password), its secret moved into this process's
    environment (see the module's doc). A URI without a password is returned as it is.
    Raises :class:`CredentialsError` when the URI's credentials contradict the environment's."""
    if "://" not in uri or "@" not in uri:
        return uri
    problem = parse_problem(uri)
    if problem:
        raise CredentialsError(problem)
    shown = redact(uri)
    parts = urlsplit(uri)
    port = parts.port
    kind = scheme(uri)
    if parts.password is None and not (kind in HTTP_SCHEMES and parts.username):
        return uri
    user = unquote(parts.username or "")
    password = unquote(parts.password or "")
    host = parts.hostname or ""
    if ":" in host:  # IPv6
        host = f"[{host}]"
    netloc = host + (f":{port}" if port else "")
    if kind in HTTP_SCHEMES:
        for env, value in ((USER_ENV, user), (PASSWORD_ENV, password)):
            old = os.environ.get(env)
            if old is not None and old != value:
                raise CredentialsError(
                    f"tracking URI {shown}: its credentials differ from ${env}; give them once "
                    f"(prefer ${USER_ENV} / ${PASSWORD_ENV} and a URI without them)"
                )
        os.environ[USER_ENV] = user
        os.environ[PASSWORD_ENV] = password
        return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
    clean_netloc = (quote(user, safe="") + "@" if user else "") + netloc
    clean = urlunsplit((parts.scheme, clean_netloc, parts.path, parts.query, parts.fragment))
    secrets = _secrets()  # not http(s): a password is there (the check above)
    secrets[clean] = password
    os.environ[SECRETS_ENV] = json.dumps(secrets)
    return clean


def _secrets() -> dict[str, str]:
    try:
        value = json.loads(os.environ.get(SECRETS_ENV) or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def connect_uri(clean: str) -> str:
    """The URI a database connection is opened with: ``clean`` with its password put back from
    ``FEDSWEEP_TRACKING_SECRETS`` (the URI as it is when none is held for it). Pass the result
    only to MLflow's client or SQLAlchemy, never to anything that logs or prints it."""
    password = _secrets().get(clean)
    if password is None:
        return clean
    parts = urlsplit(clean)
    user, _, hostport = parts.netloc.rpartition("@")
    netloc = f"{user}:{quote(password, safe='')}@{hostport}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def secret_env() -> dict[str, str]:
    """The environment variables that carry tracking credentials in this process (what a
    sweep's trials on other nodes need to reach the store)."""
    return {k: os.environ[k] for k in (USER_ENV, PASSWORD_ENV, SECRETS_ENV) if os.environ.get(k)}


def apply_env(env: dict[str, str] | None) -> None:
    """Set the credential variables a driver handed over (:func:`secret_env`, and an object
    storage's); a trial calls this before it opens the store."""
    for key, value in (env or {}).items():
        if key == SECRETS_ENV:  # merge: the worker may hold others already
            merged = {**_secrets(), **json.loads(value)}
            os.environ[SECRETS_ENV] = json.dumps(merged)
        else:  # MLflow's, or the object store's (sweep.remote_state.STORAGE_ENV)
            os.environ[key] = value
