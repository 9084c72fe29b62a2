"""The `kflare` command line: one subcommand per way of running the process."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from app import __version__


def _version(_: argparse.Namespace) -> int:
    print(__version__)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kflare", description="Cloudflare as Kubernetes custom resources.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    version = commands.add_parser("version", help="print the version")
    version.set_defaults(func=_version)

    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    result: int = args.func(args)
    return result


if __name__ == "__main__":
    sys.exit(main())
