"""`python -m crs check proxmox`: test a Proxmox VE connection the way rounds will use it.

Host, port and token come from flags or from CRS_PVE_HOST, CRS_PVE_PORT and CRS_PVE_TOKEN
(prefer the variable for the token: a flag shows in the process list). The secret is never
printed. Exit 0 when every finding is fine, 1 when one is not.
"""

from __future__ import annotations

import argparse
import json
import os

from ..sources import proxmox_check
from ..sources.config import ConfigError
from ..sources.proxmox import config_from_env, parse_config
from ..sources.proxmox_check import Report, Target, check


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="system", required=True)
    p = sub.add_parser("proxmox", help=__doc__.splitlines()[0].split(": ", 1)[1], description=__doc__)
    p.add_argument("--host", default=None, help="a node's address (default: $CRS_PVE_HOST)")
    p.add_argument("--port", type=int, default=None, help="the API port (default: $CRS_PVE_PORT or 8006)")
    p.add_argument("--token", default=None, help="USER@REALM!TOKENID=SECRET (default: $CRS_PVE_TOKEN)")
    tls = p.add_mutually_exclusive_group()
    tls.add_argument("--ca-bundle", metavar="FILE", help="verify the certificate against this CA bundle")
    tls.add_argument("--fingerprint", metavar="SHA256", help="accept only the certificate with this fingerprint")
    tls.add_argument("--insecure", action="store_true", help="do not verify the certificate (labelled as such)")
    p.add_argument("--timeout", type=float, default=10.0, help="seconds per connection (default 10)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(handler=run)


def target(args: argparse.Namespace, environ: dict[str, str]) -> Target:
    """The connection as the connector reads it (crs.sources.proxmox: the environment, then
    the flags over it); TLS from the system's CAs unless CRS_PVE_VERIFY_SSL, --ca-bundle,
    --fingerprint or --insecure says otherwise."""
    flags = {"host": args.host, "port": args.port, "token": args.token}
    config = config_from_env(environ) | {k: v for k, v in flags.items() if v}
    if "token" not in config:
        raise ConfigError("no token: set CRS_PVE_TOKEN=USER@REALM!TOKENID=SECRET (or give --token)")
    if "host" not in config:
        raise ConfigError("no host: give --host or set CRS_PVE_HOST")
    if args.ca_bundle:
        if not os.path.isfile(args.ca_bundle):
            raise ConfigError(f"--ca-bundle {args.ca_bundle}: no such file")
        config["verify_ssl"] = args.ca_bundle
    elif args.insecure:
        config["verify_ssl"] = False
    elif args.fingerprint:
        config |= {"fingerprint": args.fingerprint, "verify_ssl": True}
    return proxmox_check.target(parse_config(config | {"timeout_s": args.timeout}))


def run(args: argparse.Namespace) -> int:
    report = check(target(args, dict(os.environ)))
    print(json.dumps(report.to_dict(), indent=2) if args.json else text(report))
    return 0 if report.ok else 1


def text(report: Report) -> str:
    lines = [f"Proxmox VE at {report.host}:{report.port}"]
    lines += [f"  {'ok' if f.ok else 'FAIL':<5} {f.topic:<11} {f.text}" for f in report.findings]
    lines.append("all well" if report.ok else "not ready: see FAIL above")
    return "\n".join(lines)
