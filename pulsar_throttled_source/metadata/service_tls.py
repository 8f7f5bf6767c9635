"""A look at the broker's TLS certificate at load(), before any read task connects.

pulsar-client reports a certificate it refuses as a ConnectError, the error of a broker that is down,
which read tasks retry for pollTimeoutMs: a wrong CA or host name would fail a query minutes later
with the wrong diagnosis. One TLS handshake from the driver, with the trust settings the readers
use, tells the two apart at once. A broker that cannot be reached now is left to the read tasks.
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Mapping
from typing import Any

DEFAULT_TLS_PORT = 6651
HANDSHAKE_TIMEOUT_S = 5.0


class ServiceCertificateRefused(ValueError):
    """The broker's certificate is not one the query's TLS settings accept."""


def check_service_certificate(service_url: str, client_kwargs: Mapping[str, Any], timeout_s: float = HANDSHAKE_TIMEOUT_S) -> None:
    """Raise ServiceCertificateRefused, naming the URL and the option to set, when the first broker of
    a pulsar+ssl:// `service_url` shows a certificate the readers would refuse."""
    if not service_url.startswith("pulsar+ssl://") or client_kwargs.get("tls_allow_insecure_connection"):
        return
    host, port = _first_host(service_url)
    context = ssl.create_default_context(cafile=client_kwargs.get("tls_trust_certs_file_path") or None)
    context.check_hostname = bool(client_kwargs.get("tls_validate_hostname", True))
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as sock, context.wrap_socket(sock, server_hostname=host):
            return
    except ssl.SSLCertVerificationError as e:
        raise ServiceCertificateRefused(_refused(service_url, e)) from None
    except (OSError, ssl.SSLError):
        return  # not reachable now, or refused for another reason (a client certificate): the readers report it


def _first_host(service_url: str) -> tuple[str, int]:
    """pulsar+ssl://h1:6651,h2:6651/ -> ("h1", 6651); the port defaults to 6651."""
    first = service_url[len("pulsar+ssl://"):].split("/", 1)[0].split(",", 1)[0]
    host, _, port = first.rpartition(":")
    return (host, int(port)) if host and port.isdigit() else (first, DEFAULT_TLS_PORT)


def _refused(service_url: str, error: ssl.SSLCertVerificationError) -> str:
    reason = error.verify_message or str(error)
    hostname = error.verify_code == 62  # X509_V_ERR_HOSTNAME_MISMATCH
    return f"TLS failed with the Pulsar broker at {service_url} ({reason}): {certificate_fix(reason, 'service.url', hostname)}."


def certificate_fix(reason: str, url_option: str, hostname: bool = False) -> str | None:
    """What to set when OpenSSL refused a broker's certificate for `reason` (the broker's binary port or
    its admin API, named by `url_option`); None when the reason is not the broker's certificate."""
    if hostname or "hostname" in reason.lower() or "match" in reason.lower():
        return (f"its certificate does not name that host: use the host name the certificate was issued for in '{url_option}', "
                "or set 'pulsar.client.tlsValidateHostname' to false (not recommended)")
    if "certificate verify failed" in reason.lower() or "unable to get local issuer" in reason.lower():
        return ("its certificate is not signed by a CA this query trusts: set 'pulsar.client.tlsTrustCertsFilePath' to the file "
                "of the CA that signed it (or 'pulsar.admin.tlsTrustCertsFilePath' for the admin API alone)")
    return None
