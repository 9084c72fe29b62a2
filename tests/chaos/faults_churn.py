"""Churn over a mixed set of every kind, for the fault scenarios (Cloudflare faults, Kubernetes faults).

Every kind with a `Sample` (tests/kinds) gets one resource in a namespace of its own, beside its parents. The churn
then creates, updates and deletes DNS records in one zone, and deletes and re-creates the Samples' resources, so
that every kind's create and delete run while the faults do. Each change is written to the API server until it
took (a fault may be in the way of the test's own writes too), and remembered: `converged()` then checks that
Cloudflare holds exactly what the manifests say (no duplicates, nothing deleted that is described, nothing left
that is not) and that every resource is Ready.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import aiohttp
from kubernetes_asyncio import client
from kubernetes_asyncio.client.api_client import ApiClient
from kubernetes_asyncio.client.exceptions import ApiException

from tests.fixtures.controller import GROUP, NAMESPACED_KINDS, PLURALS, VERSION, Kflare
from tests.fixtures.emulator import EmulatorProcess
from tests.fixtures.kube import TEST_LABEL
from tests.kinds import SAMPLES, Sample, cf

T = TypeVar("T")

RECORD_KIND = "DNSRecord"


@dataclass
class Shared:
    """The one CloudflareAccount (and its token Secret) every Sample's namespace uses, as one installation has."""

    name: str
    secret_namespace: str = ""
    made: asyncio.Lock = field(default_factory=asyncio.Lock)
    account_made: bool = False


class ChurnKflare(Kflare):
    """A Sample's namespace. Its Sample's parents use the shared account, made once, whose token Secret holds the
    scenario's own token (its own rate-limit budget)."""

    def __init__(self, api: ApiClient, namespace: str, emulator: EmulatorProcess, token: str, shared: Shared) -> None:
        super().__init__(api, namespace, emulator)
        self.cf_token, self.shared = token, shared
        self.account = shared.name

    async def token_secret(self, token: str | None = None, name: str = "cf-token") -> None:
        async with self.shared.made:
            if not self.shared.secret_namespace:
                await super().token_secret(token or self.cf_token, name)
                self.shared.secret_namespace = self.namespace

    async def make_account(self, *, secret: str = "cf-token", annotations: dict[str, str] | None = None) -> None:
        async with self.shared.made:
            if self.shared.account_made:
                return
            await self.apply(
                {
                    "kind": "CloudflareAccount",
                    "metadata": {"name": self.account, "annotations": annotations or {}},
                    "spec": {
                        "accountID": self.emulator.account_id,
                        "tokenSecretRef": {"name": secret, "namespace": self.shared.secret_namespace},
                    },
                }
            )
            self.shared.account_made = True


async def persist(
    write: Callable[[], Awaitable[T]], *, done_on: tuple[int, ...] = (), timeout: float = 90.0
) -> T | None:
    """Make one write to the API server until it took: an API server that is restarting, or a connection it broke,
    is retried; `done_on` lists the statuses that mean the write had taken already (a create retried after its
    answer was lost finds 409, a delete 404)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return await write()
        except ApiException as exc:
            if exc.status in done_on:
                return None
            if exc.status not in (0, 429, 500, 502, 503, 504) or time.monotonic() > deadline:
                raise
        except (aiohttp.ClientError, TimeoutError, OSError):
            if time.monotonic() > deadline:
                raise
        await asyncio.sleep(0.5)


@dataclass
class Member:
    """One Sample's resource in its namespace."""

    sample: Sample
    kflare: ChurnKflare
    ctx: dict[str, Any]
    present: bool = True
    uid: str = ""


@dataclass
class Churn:
    api: ApiClient
    emulator: EmulatorProcess
    token: str
    rng: random.Random
    records: int = 20
    members: list[Member] = field(default_factory=list)
    contents: dict[int, str] = field(default_factory=dict)
    """The churned DNS records that exist, by number, and their content."""
    gone: set[int] = field(default_factory=set)
    changes: int = 0
    next_record: int = 0
    _label: str = field(default_factory=lambda: uuid.uuid4().hex[:5])

    @property
    def record_member(self) -> Member:
        return next(m for m in self.members if m.sample.kind == RECORD_KIND)

    @property
    def domain(self) -> str:
        return str(self.record_member.ctx["host"]).removeprefix("app.")

    async def setup(self) -> None:
        """Every Sample's parents and resource, Ready, then the records."""
        core = client.CoreV1Api(self.api)
        shared = Shared(f"churn-{self._label}")

        async def one(index: int, sample: Sample) -> Member:
            namespace = f"churn-{self._label}-{index}"
            await core.create_namespace(
                client.V1Namespace(metadata=client.V1ObjectMeta(name=namespace, labels={TEST_LABEL: "on"}))
            )
            kflare = ChurnKflare(self.api, namespace, self.emulator, self.token, shared)
            ctx = await sample.parents(kflare, f"c{self._label}{index}")
            ctx.setdefault("emulator", self.emulator)
            await sample.apply(kflare, ctx, {})
            await kflare.ready(sample.kind, sample.name, timeout=120)
            return Member(sample, kflare, ctx)

        self.members = list(await asyncio.gather(*(one(i, s) for i, s in enumerate(SAMPLES.values()))))
        for _ in range(self.records):
            await self.create_record()

    # -- changes ----------------------------------------------------------------------------------------------

    def _record_name(self, number: int) -> str:
        return f"c{number}.{self.domain}"

    async def create_record(self) -> None:
        number = self.next_record
        self.next_record += 1
        content = f"192.0.2.{self.rng.randint(1, 254)}"
        kflare = self.record_member.kflare
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": RECORD_KIND,
            "metadata": {"name": f"c{number}", "namespace": kflare.namespace},
            "spec": {"zoneRef": {"name": "zone"}, "name": self._record_name(number), "type": "A", "content": content},
        }
        await persist(
            lambda: kflare.objects.create_namespaced_custom_object(
                GROUP, VERSION, kflare.namespace, PLURALS[RECORD_KIND], body
            ),
            done_on=(409,),
        )
        self.contents[number] = content
        self.changes += 1

    async def update_record(self, number: int) -> None:
        content = f"198.51.100.{self.rng.randint(1, 254)}"
        kflare = self.record_member.kflare
        await persist(lambda: kflare.patch(RECORD_KIND, f"c{number}", {"spec": {"content": content}}))
        self.contents[number] = content
        self.changes += 1

    async def delete_record(self, number: int) -> None:
        kflare = self.record_member.kflare
        await persist(
            lambda: kflare.objects.delete_namespaced_custom_object(
                GROUP, VERSION, kflare.namespace, PLURALS[RECORD_KIND], f"c{number}"
            ),
            done_on=(404,),
        )
        del self.contents[number]
        self.gone.add(number)
        self.changes += 1

    async def toggle(self, member: Member) -> bool:
        """Delete a present Sample resource, or re-create an absent one once its deletion finished. Whether it
        changed anything (a re-create waits for the old object to be gone)."""
        kflare, sample = member.kflare, member.sample
        plural = PLURALS[sample.kind]
        if member.present:
            found = await persist(lambda: kflare.get(sample.kind, sample.name))
            member.uid = (found or {}).get("metadata", {}).get("uid", "")
            await persist(
                lambda: kflare.objects.delete_namespaced_custom_object(
                    GROUP, VERSION, kflare.namespace, plural, sample.name
                ),
                done_on=(404,),
            )
            member.present = False
            self.changes += 1
            return True
        try:
            await kflare.get(sample.kind, sample.name)
            return False  # still deleting
        except ApiException as exc:
            if exc.status != 404:
                return False
        except (aiohttp.ClientError, TimeoutError, OSError):
            return False
        await self._collect_garbage(kflare, member.uid)
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": sample.kind,
            "metadata": {"name": sample.name, "namespace": kflare.namespace},
            "spec": sample.spec(member.ctx),
        }
        if sample.kind == "Zone":
            body["spec"] = {"name": member.ctx["domain"], "accountRef": {"name": kflare.account}}
        await persist(
            lambda: kflare.objects.create_namespaced_custom_object(GROUP, VERSION, kflare.namespace, plural, body),
            done_on=(409,),
        )
        member.present = True
        self.changes += 1
        return True

    async def _collect_garbage(self, kflare: ChurnKflare, uid: str) -> None:
        """Delete the Secrets a deleted object owned, as Kubernetes' garbage collector would (the test control
        plane runs none)."""
        secrets = await persist(lambda: kflare.core.list_namespaced_secret(kflare.namespace))
        for secret in secrets.items if secrets is not None else []:
            if any(ref.uid == uid for ref in secret.metadata.owner_references or []):
                await persist(
                    lambda name=secret.metadata.name: kflare.core.delete_namespaced_secret(name, kflare.namespace),
                    done_on=(404,),
                )

    async def step(self) -> None:
        """One random change: most are DNS record changes (the bulk of any real churn), some a Sample's."""
        roll = self.rng.random()
        if roll < 0.25 or not self.contents:
            await self.create_record()
        elif roll < 0.55:
            await self.update_record(self.rng.choice(sorted(self.contents)))
        elif roll < 0.75:
            await self.delete_record(self.rng.choice(sorted(self.contents)))
        else:
            for member in self.rng.sample(self.members, len(self.members)):
                if await self.toggle(member):
                    return

    async def run(self, seconds: float, pace: float) -> None:
        """Churn for `seconds`, one change every `pace` seconds or so."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            await self.step()
            await asyncio.sleep(pace * self.rng.uniform(0.5, 1.5))

    async def restore(self, timeout: float = 240.0) -> None:
        """Re-create every Sample resource deleted by the churn, so the end state has every kind. A deletion that
        does not finish within `timeout` fails the scenario, naming what it waits for."""
        deadline = time.monotonic() + timeout
        for member in self.members:
            while not member.present:
                if await self.toggle(member):
                    continue
                if time.monotonic() > deadline:
                    raise AssertionError(f"not deleted within {timeout:.0f} s: {await self._describe(member)}")
                await asyncio.sleep(0.5)

    async def _describe(self, member: Member) -> str:
        """What a resource's metadata and status say (why its deletion may not have finished)."""
        where = f"{member.kflare.namespace}/{member.sample.kind}/{member.sample.name}"
        try:
            obj = await member.kflare.get(member.sample.kind, member.sample.name)
        except (ApiException, aiohttp.ClientError, TimeoutError, OSError) as exc:
            return f"{where}: not read ({exc})"
        meta = obj.get("metadata") or {}
        conditions = [
            {k: c.get(k) for k in ("type", "status", "reason", "message")}
            for c in (obj.get("status") or {}).get("conditions") or []
        ]
        return f"{where}: finalizers {meta.get('finalizers')}, conditions {conditions}"

    # -- checks -----------------------------------------------------------------------------------------------

    def cloudflare_mismatches(self) -> list[str]:
        """What Cloudflare holds that the manifests do not describe, or lacks: empty when they match."""
        wrong: list[str] = []
        for member in self.members:
            held = member.sample.held(self.emulator, member.ctx)
            if member.present:
                if len(held) != 1:
                    wrong.append(f"{member.sample.kind}: {len(held)} objects in Cloudflare, 1 described")
                elif not member.sample.matches_spec(held[0], member.ctx):
                    wrong.append(f"{member.sample.kind}: not as its spec says: {held[0]}")
            elif held:
                wrong.append(f"{member.sample.kind}: deleted, {len(held)} left in Cloudflare")
        zone_id = self.record_member.ctx["zone_id"]
        found = cf(self.emulator, "GET", f"/zones/{zone_id}/dns_records", params={"type": "A", "per_page": 5000})
        now = sorted((r["name"], r["content"]) for r in found)
        described = sorted((self._record_name(n), c) for n, c in self.contents.items())
        if now != described:
            extra = sorted(set(now) - set(described))[:5]
            missing = sorted(set(described) - set(now))[:5]
            wrong.append(
                f"records: {len(now)} in Cloudflare, {len(described)} described; extra {extra}, missing {missing}"
            )
        return wrong

    async def not_ready(self) -> list[str]:
        """Resources not Ready for their generation, or deleted and not gone."""

        async def of(member: Member) -> list[str]:
            kflare, out = member.kflare, []
            for kind in NAMESPACED_KINDS:
                listing = await kflare.objects.list_namespaced_custom_object(
                    GROUP, VERSION, kflare.namespace, PLURALS[kind]
                )
                out += [f"{kflare.namespace}/{kind}/{i['metadata']['name']}" for i in listing["items"] if not _ready(i)]
            account = await kflare.get("CloudflareAccount", kflare.account)
            if not _ready(account):
                out.append(f"CloudflareAccount/{kflare.account}")
            return out

        found = await asyncio.gather(*(of(m) for m in self.members))
        return [name for names in found for name in names]

    async def converged(self) -> bool:
        wrong = await asyncio.to_thread(self.cloudflare_mismatches)
        assert not wrong, wrong
        left = await self.not_ready()
        assert not left, f"{len(left)} not Ready: {left[:10]}"
        return True

    async def cleanup(self) -> None:
        await asyncio.gather(*(m.kflare.cleanup() for m in self.members), return_exceptions=True)
        core = client.CoreV1Api(self.api)
        for member in self.members:
            with contextlib.suppress(ApiException):
                await core.delete_namespace(member.kflare.namespace)


def _ready(obj: dict[str, Any]) -> bool:
    meta = obj["metadata"]
    if meta.get("deletionTimestamp"):
        return False
    return any(
        c["type"] == "Ready" and c["status"] == "True" and c.get("observedGeneration") == meta["generation"]
        for c in (obj.get("status") or {}).get("conditions") or []
    )
