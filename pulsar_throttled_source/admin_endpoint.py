"""Where and how to reach the admin REST API (``AdminEndpoint``), for planning's sessions and read tasks', and
``redacted``: a URL without its password, for option values, metrics URLs and quota-store errors."""

from __future__ import annotations

import re
from dataclasses import dataclass

from .credentials import Credentials, TlsSettings


@dataclass(frozen=True)
class AdminEndpoint:
    """Where and how to reach the admin REST API: built once from the options (SourceOptions.admin),
    carried by every read task (ClientConfig.admin), opened by metadata.admin.PulsarAdmin."""

    url: str = ""
    credentials: Credentials | None = None  # shows no secret in its repr
    tls: TlsSettings = TlsSettings()
    timeout_ms: int = 30_000  # per request


def redacted(url: str) -> str:
    """The URL without its password (redis://user:secret@host -> redis://user:***@host)."""
    return re.sub(r"(://[^:/@]*:)[^@]*@", r"\1***@", url)
