"""The options of a write (df.write / df.writeStream .format("pulsar-throttled")), parsed into one frozen WriteOptions.

A write takes the reader's connection, TLS and authentication options (read by the same code: options.values,
options.auth, options.passthrough), `topic` (or a topic column per row) and the producer's settings
(`pulsar.producer.*`, writing.producer_settings). An option only a read uses is refused on a write, and a
write's own option on a read (refuse_write_options, called by the data source before it parses a read), each
naming the option, so nothing given is silently ignored.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..admin_endpoint import AdminEndpoint
from ..credentials import Credentials, TlsSettings
from ..options import auth, passthrough, values
from ..options.parse import ADAPTIVE_KNOBS, adaptive_config, broker_urls
from ..options.spec import BY_KEY
from ..quota_settings import AdaptiveConfig
from ..read_task import ClientConfig
from ..topics import TopicName
from .effectively_once import GUARANTEES
from .producer_settings import PRODUCER, ProducerSettings, producer_settings
from .write_quota import WriteQuota

# The reader's options a write takes too; every other option of the table is a read's own.
SHARED = ("service.url", "admin.url", "topic", "adminTimeoutMs", "ratePeriodInSecond", "quotaStatePath", "quotaStore",
          "quotaStorePassword", *(name for name in ("adaptiveThrottling", *ADAPTIVE_KNOBS)
                                  if name != "adaptiveThrottlingTriggerInterval"))  # batch duration: a read's signal
SHARED_PREFIXES = (passthrough.CLIENT, passthrough.ADMIN)
WRITE_PREFIXES = (PRODUCER,)  # a write's own
WRITE_OPTIONS = ("deliveryGuarantee", "sinkId", "publishThrottlingRateInMsg", "publishThrottlingRateInByte", "sendPath")  # docs/guides/writing.md
_SINK_ID = re.compile(r"[A-Za-z0-9_.\-]{1,100}")
# What Spark adds to a write's options itself: save(path), a stream's checkpointLocation and its queryName
# (DataStreamWriter.queryName puts the name among the sink's options).
_NOT_OPTIONS = ("path", "checkpointlocation", "queryname")
READS = "reads (spark.read, spark.readStream)"
WRITES = "writes (df.write, df.writeStream)"


@dataclass(frozen=True)
class WriteOptions:
    """Every option of one write, validated; pickled into every write task."""

    service_url: str
    admin_url: str
    topic: TopicName | None  # None: each row's topic column
    producer: ProducerSettings
    # client_kwargs may hold pass-through secrets (e.g. a TLS key password): kept out of repr.
    client_kwargs: tuple[tuple[str, Any], ...] = field(repr=False)
    credentials: Credentials | None = None
    admin_credentials: Credentials | None = None
    admin_tls: TlsSettings = TlsSettings()
    admin_timeout_ms: int = 30_000
    guarantee: str = "atLeastOnce"  # deliveryGuarantee: atLeastOnce or effectivelyOnce
    sink_id: str | None = None  # sinkId: names the producers of an effectively-once write (a stream: the query's id)
    quota: WriteQuota = WriteQuota()  # publishThrottlingRate*: per partition topic and window
    # effectivelyOnce: the `topic` option's partition count, read once at the start, so a retried task routes as before
    pinned_partitions: int | None = None
    send_path: str = "auto"  # sendPath: auto, native or python (writing.native_write)
    adaptive: AdaptiveConfig | None = None  # adaptiveThrottling: the quotas scaled by the cluster's m (writing.write_congestion)

    @property
    def effectively_once(self) -> bool:
        return self.guarantee == "effectivelyOnce"

    @property
    def client(self) -> ClientConfig:
        """How a write task connects: the reader's ClientConfig, so one pulsar.Client per worker serves both."""
        return ClientConfig(self.service_url, self.client_kwargs, (), self.credentials, poll_timeout_ms=0, max_rows_per_batch=0,
                            admin=self.admin)

    @property
    def admin(self) -> AdminEndpoint:
        return AdminEndpoint(self.admin_url, self.admin_credentials, self.admin_tls, self.admin_timeout_ms)


def parse_write_options(raw: Mapping[str, str]) -> WriteOptions:
    opts = {str(k).lower(): ("" if v is None else str(v)) for k, v in raw.items()}
    check_write_names(opts)
    client_kwargs = passthrough.client_kwargs(opts)
    passthrough.check_admin_settings(opts)
    credentials = auth.credentials(opts, passthrough.CLIENT)
    admin_credentials = auth.admin_credentials(opts, credentials)
    topic = TopicName.parse(opts["topic"], "topic") if values.is_set(opts, "topic") else None
    guarantee = _guarantee(opts)
    producer = producer_settings(opts)
    service_url, admin_url = broker_urls(opts)  # both required, as a read's
    quota = WriteQuota(_rate(opts, "publishThrottlingRateInMsg"), _rate(opts, "publishThrottlingRateInByte"),
                       values.number(opts, "ratePeriodInSecond"), values.quota_store(opts), values.path(opts, "quotaStatePath"))
    adaptive = adaptive_config(opts)
    if adaptive is not None and not quota.limited:
        raise ValueError("Option 'adaptiveThrottling': the controller scales the write's quotas, and none is set; set "
                         "publishThrottlingRateInMsg or publishThrottlingRateInByte (the ceiling), or remove adaptiveThrottling.")
    return WriteOptions(
        service_url=service_url,
        admin_url=admin_url,
        topic=topic,
        producer=producer.effectively_once() if guarantee == "effectivelyOnce" else producer,
        client_kwargs=client_kwargs,
        credentials=credentials,
        admin_credentials=admin_credentials,
        admin_tls=auth.admin_tls(opts, dict(client_kwargs), admin_credentials),
        admin_timeout_ms=values.number(opts, "adminTimeoutMs"),
        guarantee=guarantee,
        sink_id=_sink_id(opts),
        quota=quota,
        send_path=_send_path(opts),
        adaptive=adaptive,
    )


def _rate(opts: Mapping[str, str], name: str) -> int:
    """A publish quota per partition topic and window: a positive integer, or -1 (the default) for none."""
    raw = opts.get(name.lower(), "").strip()
    if not raw:
        return -1
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value != -1 and value <= 0:
        raise ValueError(f"Option '{name}': '{raw}' is not allowed; expected a positive integer, or -1 for no limit.")
    return value


def _guarantee(opts: Mapping[str, str]) -> str:
    raw = opts.get("deliveryguarantee", "").strip()
    for name in GUARANTEES:
        if raw.lower() == name.lower():
            return name
    if not raw:
        return GUARANTEES[0]
    raise ValueError(f"Option 'deliveryGuarantee': '{raw}' is not allowed; expected {' or '.join(GUARANTEES)}.")


SEND_PATHS = ("auto", "native", "python")


def _send_path(opts: Mapping[str, str]) -> str:
    raw = opts.get("sendpath", "").strip()
    if not raw:
        return SEND_PATHS[0]
    if raw.lower() not in SEND_PATHS:
        raise ValueError(f"Option 'sendPath': '{raw}' is not allowed; expected {', '.join(SEND_PATHS)} (native: the package "
                         "pulsar-throttled-source-native's sender, python: pulsar-client's, auto: native where it can send the write).")
    return raw.lower()


def _sink_id(opts: Mapping[str, str]) -> str | None:
    raw = opts.get("sinkid", "").strip()
    if not raw:
        return None
    if not _SINK_ID.fullmatch(raw):
        raise ValueError(f"Option 'sinkId': '{raw}' is not allowed; expected up to 100 letters, digits, '_', '-', '.' "
                         "(it names the write's producers).")
    return raw


def check_write_names(opts: Mapping[str, str]) -> None:
    """Every option of a write is a shared one or a write's own: a read's own option is refused by name."""
    shared = {BY_KEY[name.lower()].key for name in SHARED}
    read_only = sorted(k for k in opts if k in BY_KEY and k not in shared)
    read_only += sorted(k for k in opts if k.startswith(passthrough.READER))
    if read_only:
        names = ", ".join(repr(_shown(k)) for k in read_only)
        raise ValueError(f"Option(s) {names} apply to {READS} only; a write takes {', '.join((*SHARED, *WRITE_OPTIONS))}, "
                         f"{', '.join(p + '*' for p in (*SHARED_PREFIXES, *WRITE_PREFIXES))}. Remove them from the write.")
    prefixes = (*SHARED_PREFIXES, *WRITE_PREFIXES)
    own = {name.lower() for name in WRITE_OPTIONS}
    unknown = sorted(k for k in opts if k not in BY_KEY and k not in own and not k.startswith(prefixes) and k not in _NOT_OPTIONS)
    if unknown:
        raise ValueError(f"Unknown option(s) {', '.join(repr(k) for k in unknown)} for a write; a write takes "
                         f"{', '.join((*SHARED, *WRITE_OPTIONS))}, {', '.join(p + '*' for p in prefixes)}.")


def refuse_write_options(raw: Mapping[str, str]) -> None:
    """A read refuses a write's own options, naming them (before options.parse_options, which would call them unknown)."""
    own = {name.lower() for name in WRITE_OPTIONS}
    given = sorted(str(k) for k in raw if str(k).lower().startswith(WRITE_PREFIXES) or str(k).lower() in own)
    if given:
        raise ValueError(f"Option(s) {', '.join(repr(k) for k in given)} apply to {WRITES} only; a read "
                         "(spark.read, spark.readStream) does not produce. Remove them from the read.")


def _shown(key: str) -> str:
    """An option's documented spelling (Spark hands them over lowercased)."""
    spec = BY_KEY.get(key)
    return spec.name if spec else key
