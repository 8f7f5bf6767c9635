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
    """Raise ServiceCertificateRefused, naming the URL, the host and the option to set, when a broker of a
    pulsar+ssl:// `service_url` shows a certificate the readers would refuse. Every host of a multi-host URL
    (pulsar+ssl://h1:6651,h2:6651) is looked at: the client sends lookups to each in turn, so a refused second
    host would surface as a reader's retries as well."""
    if not service_url.startswith("pulsar+ssl://") or client_kwargs.get("tls_allow_insecure_connection"):
        return
    context = ssl.create_default_context(cafile=client_kwargs.get("tls_trust_certs_file_path") or None)
    context.check_hostname = bool(client_kwargs.get("tls_validate_hostname", True))
    for host, port in _hosts(service_url):
        try:
            with socket.create_connection((host, port), timeout=timeout_s) as sock, context.wrap_socket(sock, server_hostname=host):
                continue
        except ssl.SSLCertVerificationError as e:
            raise ServiceCertificateRefused(_refused(service_url, f"{host}:{port}", e)) from None
        except (OSError, ssl.SSLError):
            continue  # not reachable now, or refused for another reason (a client certificate): the readers report it


def _hosts(service_url: str) -> list[tuple[str, int]]:
    """pulsar+ssl://h1:6651,h2/ -> [("h1", 6651), ("h2", 6651)]: the port defaults to 6651."""
    hosts = []
    for address in service_url[len("pulsar+ssl://"):].split("/", 1)[0].split(","):
        host, _, port = address.strip().rpartition(":")
        hosts.append((host, int(port)) if host and port.isdigit() else (address.strip(), DEFAULT_TLS_PORT))
    return [(host, port) for host, port in hosts if host]


def _refused(service_url: str, address: str, error: ssl.SSLCertVerificationError) -> str:
    reason = error.verify_message or str(error)
    hostname = error.verify_code == 62  # X509_V_ERR_HOSTNAME_MISMATCH
    at = service_url if service_url.rstrip("/").endswith(address) and "," not in service_url else f"{service_url} (host {address})"
    return f"TLS failed with the Pulsar broker at {at} ({reason}): {certificate_fix(reason, 'service.url', hostname)}."


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
