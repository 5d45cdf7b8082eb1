"""Export a cluster's current snapshot as crs-snapshot/1 JSON, from any source.

The file can be attached to a bug report, imported as a read-only what-if cluster,
or fed to `python -m crs plan`. For Proxmox the connection settings may come from
CRS_PVE_HOST, CRS_PVE_PORT, CRS_PVE_TOKEN and CRS_PVE_VERIFY_SSL, so the token need
not appear on the command line.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from .. import snapshot as contract
from ..sources import KINDS, open_source
from ..sources.config import ConfigError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("kind", choices=KINDS, help="the source adapter")
    parser.add_argument(
        "--config",
        default="{}",
        metavar="JSON|@FILE",
        help='adapter settings as a JSON object, e.g. \'{"host": "pve1.lab"}\', or @file.json',
    )
    parser.add_argument("--settings", metavar="JSON", help="balancing policy to store in the snapshot (JSON object)")
    parser.add_argument("-o", "--output", metavar="PATH", help="write here instead of stdout")


def run(args: argparse.Namespace) -> int:
    """Refusals (bad config or settings, unreachable source) are reported by the CLI, exit 2."""
    config = _config(args.config)
    if args.kind == "proxmox":
        from ..sources.proxmox import config_from_env

        config = config_from_env(os.environ) | config
    snap = open_source(args.kind, config, None).collect(time.time())
    if args.settings:
        snap = snap.with_settings(contract.parse_settings(_json(args.settings, "--settings"), "--settings"))
    text = contract.dumps(snap) + "\n"
    if args.output:
        Path(args.output).write_text(text)
    else:
        sys.stdout.write(text)
    return 0


def _config(value: str) -> dict[str, Any]:
    if value.startswith("@"):
        try:
            value = Path(value[1:]).read_text()
        except OSError as exc:
            raise ConfigError(f"--config {value}: cannot read ({exc.strerror})") from exc
    config = _json(value, "--config")
    if not isinstance(config, dict):
        raise ConfigError(f"--config: expected a JSON object, got {type(config).__name__}")
    return config


def _json(text: str, option: str) -> object:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{option}: not JSON ({exc.msg} at column {exc.colno})") from exc
