"""The mixed set of scenario 1 (and the traffic scenario 5 makes when run alone): one unit per kind that creates
Cloudflare objects and per way its object comes to be and goes — created and deleted, created and retained,
adopted (pre-seeded in the emulator) and kept — each unit in a namespace of its own, with its parents Ready.

A unit knows what Cloudflare must hold of it in each of its states, so that a check after any crash can say
how many objects are duplicated, orphaned or wrongly deleted, and how many resources are not Ready."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client
from kubernetes_asyncio.client.api_client import ApiClient

from app.api.constants import ADOPTION_POLICY_ANNOTATION, DELETION_POLICY_ANNOTATION
from app.controlplane import ControlPlane
from tests.chaos.secrets import register, register_secret_data
from tests.fixtures.controller import GROUP, PLURALS, VERSION, ControllerProcess, Kflare
from tests.fixtures.emulator import EmulatorProcess
from tests.fixtures.kube import TEST_LABEL, user_kubeconfig
from tests.kinds import SAMPLES, Sample

CONTROLLER_USER = "kflare-chaos-controller"
VARIANTS = ("create", "retain", "adopt")


@dataclass
class Unit:
    kind: str
    variant: str
    sample: Sample
    kflare: Kflare
    ctx: dict[str, Any] = field(default_factory=dict)
    state: str = "absent"
    """absent (not applied yet), live, or deleted."""
    updated: bool = False

    @property
    def label(self) -> str:
        return f"{self.kind}/{self.variant}"

    @property
    def retained(self) -> bool:
        """Whether its Cloudflare object outlives the resource: retain policy, or adopted (kept by default)."""
        return self.variant == "retain" or (self.variant == "adopt" and self.sample.adoptable)

    @property
    def preseeded(self) -> bool:
        return self.variant == "adopt"

    def annotations(self) -> dict[str, str]:
        if self.variant == "retain":
            return {DELETION_POLICY_ANNOTATION: "retain"}
        if self.variant == "adopt":
            return {ADOPTION_POLICY_ANNOTATION: "adopt"}
        return {}

    def phase(self, step: str) -> str:
        """The phase name of one of the unit's steps (birth, update, delete), as the figures report it."""
        if step == "birth":
            return "adopt" if self.preseeded and self.sample.adoptable else "create"
        if step == "delete":
            return "delete (kept)" if self.retained else "delete (deleted)"
        return step

    def writes_cloudflare(self, step: str) -> bool:
        """Whether the step surely writes to Cloudflare (an adoption may find nothing to correct)."""
        return {"birth": not self.preseeded, "update": True, "delete": not self.retained}[step]

    async def act(self, step: str) -> None:
        if step == "birth":
            await self.sample.apply(self.kflare, self.ctx, self.annotations())
            self.state = "live"
        elif step == "update":
            await self.kflare.patch(self.kind, self.sample.name, {"spec": self.sample.update(self.ctx)})
            self.updated = True
        else:
            await self.kflare.delete(self.kind, self.sample.name)
            self.state = "deleted"


@dataclass
class Verdict:
    duplicates: list[str] = field(default_factory=list)
    orphans: list[str] = field(default_factory=list)
    wrongly_deleted: list[str] = field(default_factory=list)
    not_as_described: list[str] = field(default_factory=list)
    not_ready: list[str] = field(default_factory=list)
    not_gone: list[str] = field(default_factory=list)

    def ok(self) -> bool:
        return not any(self.counts().values())

    def counts(self) -> dict[str, int]:
        return {name: len(value) for name, value in vars(self).items()}

    def line(self) -> str:
        return " ".join(f"{name}={count}" for name, count in self.counts().items())


def expected_held(unit: Unit) -> int:
    if unit.state == "absent":
        return 1 if unit.preseeded else 0
    if unit.state == "deleted":
        return 1 if unit.retained else 0
    return 1


async def check(units: list[Unit], emulator: EmulatorProcess, parallel: int = 8) -> Verdict:
    """What Cloudflare holds of each unit against what its manifests describe, and whether Kubernetes is done.
    Reads the emulator a few units at a time and Kubernetes with one listing per kind, so that a check of a few
    hundred units takes about a second (its time counts in the time to converge)."""
    gate = asyncio.Semaphore(parallel)
    objects = client.CustomObjectsApi(units[0].kflare.api) if units else None
    listed: dict[tuple[str, str, str], dict[str, Any]] = {}
    for kind in sorted({u.kind for u in units}):
        assert objects is not None
        listing = await objects.list_cluster_custom_object(GROUP, VERSION, PLURALS[kind])
        for item in listing["items"]:
            listed[kind, item["metadata"]["namespace"], item["metadata"]["name"]] = item

    async def read(unit: Unit) -> tuple[list[dict[str, Any]], bool]:
        async with gate:
            held = await asyncio.to_thread(unit.sample.held, emulator, unit.ctx)
            matches = True
            if unit.state == "live" and len(held) == 1:
                if unit.updated:
                    matches = await asyncio.to_thread(unit.sample.shows_update, held[0], unit.ctx)
                else:
                    matches = await asyncio.to_thread(unit.sample.matches_spec, held[0], unit.ctx)
            return held, matches

    verdict = Verdict()
    reads = await asyncio.gather(*(read(unit) for unit in units))
    for unit, (held, matches) in zip(units, reads, strict=True):
        want = expected_held(unit)
        if len(held) > max(want, 1):
            verdict.duplicates.append(unit.label)
        if want == 0 and held:
            verdict.orphans.append(unit.label)
        if want == 1 and not held:
            verdict.wrongly_deleted.append(unit.label)
        if not matches:
            verdict.not_as_described.append(unit.label)
        obj = listed.get((unit.kind, unit.kflare.namespace, unit.sample.name))
        if unit.state == "live" and (obj is None or not is_ready(obj)):
            verdict.not_ready.append(unit.label)
        if unit.state == "deleted" and obj is not None:
            verdict.not_gone.append(unit.label)
    return verdict


def is_ready(obj: dict[str, Any]) -> bool:
    return any(
        c["type"] == "Ready" and c["status"] == "True" and c.get("observedGeneration") == obj["metadata"]["generation"]
        for c in (obj.get("status") or {}).get("conditions") or []
    )


async def converge(units: list[Unit], emulator: EmulatorProcess, timeout: float) -> Verdict:
    """Check until everything holds or `timeout` passes; the last verdict."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        verdict = await check(units, emulator)
        if verdict.ok() or loop.time() > deadline:
            return verdict
        await asyncio.sleep(0.3)


class ChaosController(ControllerProcess):
    """`kflare run` as a user of its own, so that the audit log tells its writes from the test's."""

    def __init__(self, plane: ControlPlane, emulator: EmulatorProcess, workdir: Path, *args: str) -> None:
        super().__init__(plane, emulator, workdir, *args)
        kubeconfig = plane.workdir / f"kubeconfig-{CONTROLLER_USER}"
        if not kubeconfig.exists():
            kubeconfig = user_kubeconfig(plane, CONTROLLER_USER, groups=["system:masters"])
        self.argv = [f"--kubeconfig={kubeconfig}" if a.startswith("--kubeconfig=") else a for a in self.argv]


def start_controller(plane: ControlPlane, emulator: EmulatorProcess, workdir: Path, *args: str) -> ChaosController:
    """A ready controller; another one if a port it was given was taken meanwhile (the machine is shared)."""
    for attempt in range(3):
        proc = ChaosController(plane, emulator, workdir, *args).start()
        try:
            proc.wait_ready(60)
            return proc
        except AssertionError:
            proc.stop()
            if attempt == 2 or "address already in use" not in proc.log():
                raise
    raise AssertionError("unreachable")


def sample_units(copies: int = 1) -> Iterator[tuple[str, str]]:
    for _ in range(copies):
        for kind in sorted(SAMPLES):
            for variant in VARIANTS:
                yield kind, variant


class TokenKflare(Kflare):
    """A test's helper whose token Secrets hold a token of its own, not the emulator's starting one."""

    def __init__(self, api: ApiClient, namespace: str, emulator: EmulatorProcess, token: str) -> None:
        super().__init__(api, namespace, emulator)
        self.token = token

    async def token_secret(self, token: str | None = None, name: str = "cf-token") -> None:
        await super().token_secret(token or self.token, name)


async def make_units(
    api: ApiClient,
    emulator: EmulatorProcess,
    pairs: list[tuple[str, str]],
    parallel: int = 6,
    token: str | None = None,
) -> list[Unit]:
    """A namespace per unit with its parents Ready (a controller must be running), then the pre-seeded objects
    of the units that adopt. The accounts use `token` if given, else the emulator's starting token."""
    core = client.CoreV1Api(api)
    gate = asyncio.Semaphore(parallel)
    register(emulator.token)

    async def one(index: int, kind: str, variant: str) -> Unit:
        namespace = f"c-{kind.lower()[:12]}-{variant[:1]}{index}-{uuid.uuid4().hex[:4]}"
        meta = client.V1ObjectMeta(name=namespace, labels={TEST_LABEL: "on"})
        await core.create_namespace(client.V1Namespace(metadata=meta))
        helper = Kflare(api, namespace, emulator) if token is None else TokenKflare(api, namespace, emulator, token)
        unit = Unit(kind, variant, SAMPLES[kind], helper)
        async with gate:
            unit.ctx = await unit.sample.parents(unit.kflare, f"{kind.lower()}{variant[0]}{index}")
        unit.ctx.setdefault("emulator", emulator)
        unit.ctx.setdefault("account_id", emulator.account_id)
        return unit

    units = await asyncio.gather(*(one(i, kind, variant) for i, (kind, variant) in enumerate(pairs)))
    for unit in units:
        if unit.preseeded:
            await asyncio.to_thread(unit.sample.make_existing, emulator, unit.ctx)
    return list(units)


async def register_written_secrets(units: list[Unit]) -> int:
    """Register what the controller wrote into the units' Secrets (tunnel tokens and credentials)."""
    found = 0
    for unit in units:
        secrets = await unit.kflare.core.list_namespaced_secret(unit.kflare.namespace)
        for secret in secrets.items:
            found += register_secret_data(secret.data)
    return found


async def clean_up(units: list[Unit], parallel: int = 8) -> None:
    gate = asyncio.Semaphore(parallel)

    async def one(unit: Unit) -> None:
        async with gate:
            await unit.kflare.cleanup()
            await unit.kflare.core.delete_namespace(unit.kflare.namespace)

    await asyncio.gather(*(one(unit) for unit in units))
