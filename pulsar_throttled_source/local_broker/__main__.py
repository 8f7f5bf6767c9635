"""The command line: `python -m pulsar_throttled_source.local_broker <start|stop|status|fetch>` (a standalone broker)
and `... cluster <start|stop|status>` (a local cluster: cluster.py), also installed as the `pulsar-local-broker`
console script. Exit codes: 0 ok, 1 `status` of a broker that is not running, 2 a
BrokerError (printed as one `error:` message, no traceback)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .broker_error import BrokerError
from .cluster import DEFAULT_CLUSTER_TIMEOUT_S, ClusterSettings, cluster_status, start_cluster, stop_cluster
from .config import parse_broker_config
from .distribution import resolve_broker_jars
from .process import DEFAULT_START_TIMEOUT_S, make_class_archive, start, status, stop
from .tls import TlsFiles


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m pulsar_throttled_source.local_broker",
                                     description="Run a real Apache Pulsar standalone broker (pinned, from Maven Central).")
    sub = parser.add_subparsers(dest="command", required=True)
    p_start = sub.add_parser("start", help="start a broker in the background and print its URLs as one JSON line")
    p_start.add_argument("--data-dir", help="broker data directory (default: a new temp dir)")
    p_start.add_argument("--max-entries-per-ledger", type=int, help="roll ledgers over after N entries")
    p_start.add_argument("--auth-token", action="store_true",
                         help="enable token authentication; the admin token is in DATA_DIR/auth/admin.token")
    p_start.add_argument("--broker-config", action="append", default=[], metavar="KEY=VALUE",
                         help="a broker setting (standalone.conf key), repeatable; e.g. transactionCoordinatorEnabled=true")
    tls = p_start.add_argument_group("TLS (both ports; all three of cert, key and ca)")
    tls.add_argument("--tls-cert", help="the broker's certificate (PEM)")
    tls.add_argument("--tls-key", help="its private key (PEM, PKCS#8: -----BEGIN PRIVATE KEY-----)")
    tls.add_argument("--tls-ca", help="the CA certificate the broker trusts for client certificates (PEM)")
    tls.add_argument("--tls-client-cert", help="a certificate (and --tls-client-key) for the broker's internal client")
    tls.add_argument("--tls-client-key")
    p_start.add_argument("--timeout", type=float, default=DEFAULT_START_TIMEOUT_S, help="seconds to wait for readiness")
    for name in ("stop", "status"):
        p = sub.add_parser(name, help=f"{name} the broker of a data dir (default: the last one started)")
        p.add_argument("--data-dir")
    p_fetch = sub.add_parser("fetch", help="only download the broker jars into the cache")
    p_fetch.add_argument("--class-archive", action="store_true",
                         help="also make a class-data archive of them (once per machine and Java; starts are faster with it)")
    _add_cluster_parser(sub)
    return parser


def _add_cluster_parser(sub: argparse._SubParsersAction) -> None:
    p_cluster = sub.add_parser("cluster", help="a local cluster: ZooKeeper, 3 bookies, 2 brokers and a proxy, "
                                               "each its own process on its own 127.0.0.N address")
    actions = p_cluster.add_subparsers(dest="action", required=True)
    p_start = actions.add_parser("start", help="start it in the background and print its URLs as one JSON line")
    p_start.add_argument("--data-dir", help="the cluster's data directory (default: a new temp dir)")
    p_start.add_argument("--max-entries-per-ledger", type=int, help="brokers roll ledgers over after N entries")
    p_start.add_argument("--broker-config", action="append", default=[], metavar="KEY=VALUE",
                         help="a broker setting (broker.conf key) for every broker, repeatable")
    p_start.add_argument("--secure", action="store_true",
                         help="TLS on brokers' and proxy's ports and token authentication (RS256 JWTs: the CA, the "
                              "token signing key and the admin token are under DATA_DIR/security/)")
    p_start.add_argument("--timeout", type=float, default=DEFAULT_CLUSTER_TIMEOUT_S,
                         help="seconds to wait until every member is ready")
    for name in ("stop", "status"):
        p = actions.add_parser(name, help=f"{name} the cluster of a data dir (default: the last one started)")
        p.add_argument("--data-dir")


def _cluster(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    if args.action == "start":
        if args.max_entries_per_ledger is not None and args.max_entries_per_ledger < 1:
            parser.error("--max-entries-per-ledger must be a positive integer")
        settings = ClusterSettings(max_entries_per_ledger=args.max_entries_per_ledger,
                                   broker_extra=tuple(parse_broker_config(args.broker_config).items()),
                                   secured=args.secure)
        print(start_cluster(args.data_dir, settings, args.timeout).to_json(), flush=True)
    elif args.action == "stop":
        print(json.dumps({"stopped": stop_cluster(args.data_dir)}))
    else:
        st = cluster_status(args.data_dir)
        print(json.dumps(st))
        return 0 if st["running"] else 1
    return 0


def _tls_files(parser: argparse.ArgumentParser, args: argparse.Namespace) -> TlsFiles | None:
    given = {name: getattr(args, f"tls_{name}") for name in ("cert", "key", "ca", "client_cert", "client_key")}
    if not any(given.values()):
        return None
    if not (given["cert"] and given["key"] and given["ca"]):
        parser.error("TLS needs --tls-cert, --tls-key and --tls-ca together")
    if bool(given["client_cert"]) != bool(given["client_key"]):
        parser.error("--tls-client-cert and --tls-client-key go together")
    return TlsFiles(**{k: Path(v) for k, v in given.items() if v})


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "cluster":
            return _cluster(parser, args)
        if args.command == "start":
            if args.max_entries_per_ledger is not None and args.max_entries_per_ledger < 1:
                parser.error("--max-entries-per-ledger must be a positive integer")
            extra = parse_broker_config(args.broker_config)
            print(start(args.data_dir, args.max_entries_per_ledger, args.timeout, args.auth_token,
                        broker_config=extra, tls=_tls_files(parser, args)).to_json(), flush=True)
        elif args.command == "stop":
            print(json.dumps({"stopped": stop(args.data_dir)}))
        elif args.command == "status":
            st = status(args.data_dir)
            print(json.dumps(st))
            return 0 if st["running"] else 1
        elif args.command == "fetch":
            print(resolve_broker_jars(quiet=False))
            if args.class_archive:
                print(make_class_archive() or "no class archive (Java wrote none)")
    except BrokerError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
