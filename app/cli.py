"""The `kflare` command line: one subcommand per way of running the process."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from app import __version__
from app.memory import skip_last_collection

if TYPE_CHECKING:
    from app.settings import Settings


def _version(_: argparse.Namespace) -> int:
    print(__version__)
    return 0


def _rate(value: str) -> tuple[int, float]:
    calls, _, seconds = value.partition("/")
    try:
        parsed = int(calls), float(seconds)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected CALLS/SECONDS such as 1200/300, got {value!r}") from None
    if parsed[0] <= 0 or parsed[1] <= 0:
        raise argparse.ArgumentTypeError(f"both parts of {value!r} must be positive")
    return parsed


def _emulator(args: argparse.Namespace) -> int:
    # Imported here so that `kflare version` and friends do not pay for the emulator's imports.
    from app.emulator.serve import serve

    return serve(
        host=args.host,
        port=args.port,
        state=args.state,
        rate_limit=args.rate_limit,
        lockout=args.lockout,
    )


def _crds(args: argparse.Namespace) -> int:
    from app.api.crds import main_write

    return main_write(args.out, plain=args.plain)


def _docs(args: argparse.Namespace) -> int:
    from app.api.docs import main_write

    return main_write(args.out)


def _openapi(args: argparse.Namespace) -> int:
    from app.openapi import main_write

    return main_write(args.out)


def _generate(_: argparse.Namespace) -> int:
    from app.generate import main_write

    return main_write()


def _count(value: str) -> int:
    try:
        count = int(value.replace(",", "").replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a count such as 5000, got {value!r}") from None
    if count < 0:
        raise argparse.ArgumentTypeError(f"expected 0 or more, got {value!r}")
    return count


def _sizing(args: argparse.Namespace) -> int:
    from app.settings import parse_duration
    from app.sizing import Counts, recommend

    try:
        interval = parse_duration(args.drift_check_interval)
    except ValueError as exc:
        print(f"kflare sizing: --drift-check-interval: {exc}", file=sys.stderr)
        return 2
    counts = Counts(
        records=args.records,
        zones=args.zones,
        workers=args.workers,
        gateways=args.gateways,
        routes=args.routes,
        other=args.resources,
    )
    print(recommend(counts, interval).render())
    return 0


def _run(args: argparse.Namespace) -> int:
    import asyncio

    from pydantic import ValidationError

    from app import logs
    from app.server import serve

    try:
        settings = settings_from(args)
    except ValidationError as exc:
        for error in exc.errors(include_url=False):
            message = str(error["msg"]).removeprefix("Value error, ")
            print(f"kflare run: {_flag(error['loc'])}{message}", file=sys.stderr)
        return 2
    logs.configure(
        settings.log_level,
        settings.log_format.value,
        time_encoding=settings.zap_time_encoding,
        stacktrace_level=settings.zap_stacktrace_level,
    )
    if settings.enable_http2:
        logging.getLogger("app.cli").warning(
            "--enable-http2=true has no effect: kflare's listeners serve HTTP/1.1 only",
            extra={"flag": "--enable-http2"},
        )
    return asyncio.run(serve(settings))


def settings_from(args: argparse.Namespace) -> Settings:
    """The settings `kflare run`'s flags give (and `KFLARE_*` for the rest); raises pydantic's ValidationError."""
    from app.settings import Settings

    return Settings(
        **{name: value for name, value in vars(args).items() if name in Settings.model_fields and value is not None}
    )


def _flag(loc: tuple[int | str, ...]) -> str:
    return "--" + str(loc[0]).replace("_", "-") + ": " if loc else ""


def go_flags(argv: Sequence[str]) -> list[str]:
    """The Go controller's flags as its flag package takes them: `-leader-elect` with one dash is `--leader-elect`."""
    from app.settings import Settings

    names = {name.replace("_", "-") for name in Settings.model_fields}
    return [
        "-" + arg if arg[:1] == "-" and arg[1:2] != "-" and arg[1:].split("=", 1)[0] in names else arg for arg in argv
    ]


def _settings_flags(parser: argparse.ArgumentParser) -> None:
    """One flag per setting (`drift_check_interval` -> `--drift-check-interval`), validated by the settings model."""
    from app.settings import Settings

    for name, info in Settings.model_fields.items():
        flag = "--" + name.replace("_", "-")
        default = info.default
        shown = f" (default: {default})" if default not in (None, "") else ""
        if info.annotation is bool:
            parser.add_argument(flag, nargs="?", const="true", metavar="BOOL", help=(info.description or "") + shown)
        else:
            parser.add_argument(flag, help=(info.description or "") + shown)


def _dev(args: argparse.Namespace) -> int:
    import asyncio

    from app import dev, logs

    bin_dir = args.bin_dir or dev.default_bin_dir()
    if bin_dir is None:
        print("kflare dev: no kube-apiserver found: run `make test-bins` or set KUBEBUILDER_ASSETS", file=sys.stderr)
        return 2
    logs.configure("warning", "text")
    return asyncio.run(
        dev.run(
            bin_dir, args.apply, once=args.once, timeout=args.timeout, drift=args.drift_check_interval, keep=args.keep
        )
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kflare", description="Cloudflare as Kubernetes custom resources.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    version = commands.add_parser("version", help="print the version")
    version.set_defaults(func=_version)

    run = commands.add_parser("run", help="run the controller, webhooks, metrics and probes")
    _settings_flags(run)
    run.set_defaults(func=_run)

    dev = commands.add_parser("dev", help="run everything locally: API server, Cloudflare emulator, controller")
    dev.add_argument("--apply", type=Path, default=Path("examples"), help="manifests to apply (default: examples)")
    dev.add_argument("--once", action="store_true", help="exit 0 once every resource is Ready, 1 on timeout")
    dev.add_argument("--timeout", type=float, default=120.0, help="seconds --once waits (default: %(default)s)")
    dev.add_argument("--drift-check-interval", default="1m", help="drift check interval (default: %(default)s)")
    dev.add_argument("--bin-dir", type=Path, help="directory of kube-apiserver, etcd and kubectl")
    dev.add_argument("--keep", action="store_true", help="keep the working directory (logs, kubeconfig)")
    dev.set_defaults(func=_dev)

    emulator = commands.add_parser("emulator", help="serve an emulated Cloudflare v4 API")
    emulator.add_argument("--host", default="127.0.0.1", help="address to listen on (default: %(default)s)")
    emulator.add_argument("--port", type=int, default=8787, help="port to listen on (default: %(default)s)")
    emulator.add_argument("--state", type=Path, help="JSON file seeding accounts, tokens and objects")
    emulator.add_argument(
        "--rate-limit",
        type=_rate,
        default=(1200, 300.0),
        metavar="CALLS/SECONDS",
        help="global per-token limit (default: 1200/300)",
    )
    emulator.add_argument(
        "--lockout",
        type=float,
        default=300.0,
        metavar="SECONDS",
        help="how long every call of a token is refused once it passes the limit (default: %(default)s)",
    )
    emulator.set_defaults(func=_emulator)

    crds = commands.add_parser("crds", help="generate the CRDs from the models into the chart")
    crds.add_argument(
        "--out",
        type=Path,
        metavar="DIR",
        help="directory to write to (default: the chart's templates/crds, and config/crd/bases as plain manifests)",
    )
    crds.add_argument("--plain", action="store_true", help="plain manifests, without the chart's Helm conditionals")
    crds.set_defaults(func=_crds)

    docs = commands.add_parser("docs", help="generate the API reference of every kind from the models")
    docs.add_argument("--out", type=Path, metavar="DIR", help="directory to write to (default: docs/api/)")
    docs.set_defaults(func=_docs)

    openapi = commands.add_parser("openapi", help="write the OpenAPI documents of the listeners and the emulator")
    openapi.add_argument("--out", type=Path, metavar="DIR", help="directory to write to (default: openapi/)")
    openapi.set_defaults(func=_openapi)

    generate = commands.add_parser(
        "generate",
        help="write every file derived from the kinds (CRDs, API reference, OpenAPI documents, import layers)",
    )
    generate.set_defaults(func=_generate)

    sizing = commands.add_parser(
        "sizing",
        help="print the pod's resources (and their helm --set flags) for the resources kflare will manage",
        description="Recommended memory request and limit and CPU request of the controller's pod, from what was "
        "measured with bench/converge.py (see app/sizing.py). Counts add up; every kind counts as one resource.",
    )
    for flag, what in (
        ("--resources", "kflare resources of any kind not counted by the flags below"),
        ("--records", "DNSRecords"),
        ("--zones", "Zones"),
        ("--workers", "WorkerScripts and WorkerRoutes"),
        ("--gateways", "Gateways of the cloudflare-tunnel class (counting any turns the class on)"),
        ("--routes", "HTTPRoutes and GRPCRoutes of the class"),
    ):
        sizing.add_argument(flag, type=_count, default=0, metavar="N", help=f"{what} (default: 0)")
    sizing.add_argument(
        "--drift-check-interval",
        default="0s",
        metavar="DURATION",
        help="the chart's driftCheckInterval, whose checks add CPU (default: %(default)s, off)",
    )
    sizing.set_defaults(func=_sizing)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    # `run` and the emulator stop on every test and benchmark.
    skip_last_collection()
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["run"]:
        argv = go_flags(argv)
    args = build_parser().parse_args(argv)
    result: int = args.func(args)
    return result


if __name__ == "__main__":
    sys.exit(main())
