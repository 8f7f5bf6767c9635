"""What the admin API's answers and failures tell a user: the broker's reason, the request's kind, the permission
a call needs, a TLS failure's fix, the host a redirect led to. admin_http composes its errors and log lines from them."""

from __future__ import annotations

from urllib.parse import urlparse

import requests

from .service_tls import certificate_fix


def redirect_target(base: str, error: requests.exceptions.RequestException) -> str | None:
    """scheme://host:port of the request that failed, when a redirect led it away from `base` (None otherwise).
    Only the origin: no path, no user info."""
    failed = urlparse(error.request.url) if error.request is not None and error.request.url else None
    if failed is None or not failed.hostname:
        return None
    origin = f"{failed.scheme}://{failed.hostname}:{failed.port or (443 if failed.scheme == 'https' else 80)}"
    own = urlparse(base)
    own_origin = f"{own.scheme}://{own.hostname}:{own.port or (443 if own.scheme == 'https' else 80)}"
    return origin if origin != own_origin else None


def tls_failure(base: str, what: str, reason: str) -> str:
    fix = certificate_fix(reason, "admin.url") or ("check 'admin.url', the CA in 'pulsar.client.tlsTrustCertsFilePath' "
                                                   "and the client certificate")
    return f"TLS failed with the Pulsar admin API at {base} while {what}: {fix}. ({reason[:300]})"


def permission_needed(path: str) -> str:
    """What Pulsar requires of a role for an admin call of the source (tests/integration/test_secured_broker.py
    measures it on Pulsar 4.0: consume covers every call but the rate policies)."""
    kind = request_kind(path)
    if kind in ("dispatchRate", "subscriptionDispatchRate"):
        return ("the tenant's admin role, the only one Pulsar lets read rate policies (quotaSource=broker or both read "
                "them; quotaSource=options does not)")
    namespace_listing = path.startswith(("persistent/", "namespaces/")) and path.count("/") == 2 + path.startswith("namespaces/")
    if namespace_listing:
        return ("'consume' on the namespace (pulsar-admin namespaces grant-permission --role <role> --actions consume "
                "<tenant>/<namespace>): topicsPattern lists the namespace's topics")
    return ("'consume' on the topic or its namespace (pulsar-admin namespaces grant-permission --role <role> --actions "
            "consume <tenant>/<namespace>, or topics grant-permission)")


def broker_reason(resp: requests.Response) -> str:
    """The broker's reason for an error answer: its JSON "reason", else the body's text."""
    try:
        body = resp.json()
    except ValueError:
        body = None
    return str(body.get("reason")) if isinstance(body, dict) and body.get("reason") else resp.text.strip()


def request_kind(path: str) -> str:
    """A request's kind for counting: its path's last segment that is not a number (internalStats,
    partitioned-stats, entry, schema, ...)."""
    if path.startswith("transactions/"):  # transactions/transactionBufferStats/<topic>
        return path.split("/")[1]
    return next((part for part in reversed(path.split("/")) if not part.isdigit()), path)
