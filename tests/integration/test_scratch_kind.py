"""A kind is one declaration: adding one touches at most five hand-written files, and everything else follows.

This test adds a scratch kind, `Queue` (namespaced, in an account, with one field corrected in place and an example),
to a copy of the tree: it writes exactly the five files below (its model, its reconciler with its Cloudflare calls,
its emulated Cloudflare collection, its example, its lifecycle Sample), runs `kflare generate` there, and runs in the
copy what fails when anything else a kind needs is missing: the checks that generated files are fresh, the import
contracts (exhaustive layers), the registries, the webhook's refusals and the kind's lifecycle matrices, in process
and through `kflare run` against a real API server and the emulator. docs/adding-a-kind.md walks through the same
five files.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

REPO_ROOT = Path(__file__).resolve().parents[2]
COPIED = ("app", "webhooks", "reconcilers", "chart", "config", "docs", "openapi", "examples", "tests", "pyproject.toml")
"""What the copy holds: the code, what is generated from it, and the tests that check both."""
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", ".mypy_cache", ".pytest_cache", ".hypothesis")
MAX_FILES = 5

KIND_FILES: dict[str, str] = {
    "app/api/queue.py": '''\
"""Queue: a Cloudflare Queue of an account."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from app.api.base import KflareModel, KindInfo, Permission, PrinterColumn
from app.api.meta import Status
from app.api.refs import AccountReference
from app.api.resource import Resource


class QueueSpec(KflareModel):
    """The queue's name and delivery settings."""

    account_ref: AccountReference
    """The account the queue belongs to."""
    name: Annotated[str, Field(min_length=1, max_length=63, pattern=r"^[a-z0-9][a-z0-9-]*$")]
    """The queue's name, unique in the account: lower-case letters, digits and hyphens."""
    delivery_delay: Annotated[int, Field(ge=0, le=43200)] = 0
    """Seconds a message waits before it is delivered; corrected in place when it drifts."""


class QueueMetadata(KflareModel):
    """What Cloudflare reported of the queue."""

    queue_id: Annotated[str, Field(max_length=256)] | None = None
    """Cloudflare queue ID."""


class QueueStatus(Status):
    """What kflare last observed of the queue."""

    cloudflare_metadata: QueueMetadata | None = None
    """IDs and read-only data from Cloudflare."""


class Queue(Resource[QueueSpec, QueueStatus]):
    """Queue manages a Cloudflare Queue. Deleting it deletes the queue and the messages it holds."""

    info = KindInfo(
        kind="Queue",
        permissions=(Permission("Account · Queues · Edit", "to create, correct and delete queues"),),
        claim_label="kflare.dev/queue-id",
        plural="queues",
        short_names=("cfqueue",),
        columns=(
            PrinterColumn("Queue", ".spec.name"),
            PrinterColumn("Queue ID", ".status.cloudflareMetadata.queueID"),
        ),
        immutable=("accountRef", "name"),
    )
''',
    "reconcilers/queue.py": '''\
"""Queue: a member of its account's collection of queues, adopted by name; its delivery delay is corrected in
place. The Cloudflare calls are the kind's own (`/accounts/{account_id}/queues`), made through the client's generic
`fetch` and `iterate`."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from app.api.constants import Reason
from app.api.queue import Queue, QueueMetadata
from app.cloudflare.calls import segment
from app.cloudflare.models import CloudflareModel
from reconcilers.account_members import AccountMember, AccountScope


class QueueSettings(CloudflareModel):
    delivery_delay: int = 0


class CloudflareQueue(CloudflareModel):
    queue_id: str
    queue_name: str
    settings: QueueSettings = QueueSettings()

    def described(self) -> str:
        return f"queue {self.queue_name} ({self.queue_id})"


def _path(link: AccountScope, queue_id: str | None = None) -> str:
    base = f"/accounts/{segment(link.account.account_id)}/queues"
    return f"{base}/{segment(queue_id)}" if queue_id else base


class QueueKind(AccountMember[Queue, CloudflareQueue]):
    model = Queue
    observed_id = "queue_id"
    status_id = "queue_id"

    def list_members(self, link: AccountScope) -> AsyncIterator[CloudflareQueue]:
        return link.account.client.iterate(_path(link), CloudflareQueue, per_page=1000)

    async def get_member(self, link: AccountScope, object_id: str) -> CloudflareQueue:
        return await link.account.client.fetch("GET", _path(link, object_id), CloudflareQueue)

    def listed_key(self, observed: CloudflareQueue) -> str:
        return observed.queue_name

    async def find(self, link: AccountScope, obj: Queue) -> CloudflareQueue | None:
        return self.owners.first_unclaimed(
            await self.named(link, obj, obj.spec.name),
            obj,
            Reason.NAME_CONFLICT,
            lambda queue: f"queue {obj.spec.name} ({queue.queue_id})",
        )

    async def create(self, link: AccountScope, obj: Queue) -> CloudflareQueue:
        body = {"queue_name": obj.spec.name, "settings": {"delivery_delay": obj.spec.delivery_delay}}
        created = await link.account.client.fetch("POST", _path(link), CloudflareQueue, json=body)
        self.listings.put(link.collection, created)
        return created

    def diff(self, link: AccountScope, obj: Queue, observed: CloudflareQueue) -> dict[str, Any]:
        delay = obj.spec.delivery_delay
        return {"delivery_delay": delay} if observed.settings.delivery_delay != delay else {}

    async def update(
        self, link: AccountScope, obj: Queue, observed: CloudflareQueue, changes: dict[str, Any]
    ) -> CloudflareQueue:
        path = _path(link, observed.queue_id)
        updated = await link.account.client.fetch("PATCH", path, CloudflareQueue, json={"settings": changes})
        self.listings.put(link.collection, updated)
        return updated

    async def delete(self, link: AccountScope, obj: Queue, object_id: str) -> None:
        await link.account.client.request("DELETE", _path(link, object_id))
        self.listings.drop(link.collection, object_id)

    def record(self, link: AccountScope, obj: Queue, observed: CloudflareQueue) -> None:
        obj.status.cloudflare_metadata = QueueMetadata(queue_id=observed.queue_id)
''',
    "app/emulator/kinds/queues.py": '''\
"""Queues of an account: create, list, get, change settings (PATCH/PUT), delete.

A queue: ``{queue_id, queue_name, created_on, modified_on, producers, consumers, settings: {delivery_delay,
message_retention_period, delivery_paused}}``, addressed by its ID. Names are unique per account: 400/11009 "A queue
with this name already exists". Reading needs ``queues:read``, writing ``queues:edit``.

Unverified: the duplicate and not-found codes, the page bounds.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from app.emulator.collection import Ctx, Kind, Unique
from app.emulator.envelope import CloudflareError
from app.emulator.ids import now_iso
from app.emulator.paging import PageNumbers, PageSpec, sort_by
from app.emulator.state import Obj, Store


class Settings(BaseModel):
    model_config = ConfigDict(extra="ignore")

    delivery_delay: int = Field(default=0, ge=0, le=43200)
    message_retention_period: int = Field(default=345600, ge=60, le=1209600)
    delivery_paused: bool = False


class QueueBody(BaseModel):
    model_config = ConfigDict(extra="ignore")

    queue_name: str | None = Field(default=None, min_length=1, max_length=63)
    settings: Settings | None = None


def _duplicate(_obj: Obj) -> CloudflareError:
    return CloudflareError.single(400, 11009, "A queue with this name already exists")


class Queues(Kind):
    name = "queues"
    parent = "accounts"
    parent_field = "account_id"
    path = "/accounts/{account_id}/queues"
    scope_param = "account_id"
    item_param = "queue_id"
    id_field = "queue_id"
    resource = "queues"
    paging = PageNumbers(PageSpec(default=100, minimum=1, maximum=1000))
    unique = (Unique(("queue_name",), _duplicate),)
    create_body = update_body = patch_body = QueueBody
    summary_fields = ("queue_name",)

    def not_found(self) -> CloudflareError:
        return CloudflareError.single(404, 11000, "Queue does not exist")

    def build(self, store: Store, parent: Obj | None, body: BaseModel, previous: Obj | None, partial: bool) -> Obj:
        assert isinstance(body, QueueBody)
        settings = body.settings.model_dump() if body.settings else None
        if previous is not None:
            return {
                **previous,
                "queue_name": body.queue_name or previous["queue_name"],
                "settings": {**previous["settings"], **(settings or {})},
                "modified_on": now_iso(),
            }
        if body.queue_name is None:
            raise CloudflareError.single(400, 11001, "queue_name is required")
        now = now_iso()
        return {
            "queue_id": self.new_id(),
            "queue_name": body.queue_name,
            "created_on": now,
            "modified_on": now,
            "producers": [],
            "consumers": [],
            "settings": settings or Settings().model_dump(),
        }

    def order(self, ctx: Ctx, items: Any) -> list[Obj]:
        return sort_by(items, lambda q: (q["created_on"], q["queue_id"]), "asc")


QUEUES = Queues()
''',
    "examples/60-queue.yaml": """\
# A queue in the demo account; kflare corrects its delivery delay when it is changed outside.
apiVersion: kflare.dev/v1alpha1
kind: Queue
metadata:
  name: orders
  namespace: demo
spec:
  accountRef:
    name: demo-account
  name: demo-orders
  deliveryDelay: 30
""",
    "tests/kinds/queue.py": '''\
"""The Queue's lifecycle Sample: found by its name in the account; its delivery delay is its drift."""

from __future__ import annotations

from typing import Any

from tests.fixtures.driver import CloudflareEndpoint, Driver
from tests.kinds import Sample, cf, ready_account


class QueueSample(Sample):
    kind = "Queue"

    async def parents(self, kflare: Driver, label: str) -> dict[str, Any]:
        return {**await ready_account(kflare), "queue": f"{label}-orders"}

    def spec(self, ctx: dict[str, Any]) -> dict[str, Any]:
        return {"accountRef": {"name": ctx["account"]}, "name": ctx["queue"], "deliveryDelay": 30}

    def make_existing(self, emulator: CloudflareEndpoint, ctx: dict[str, Any]) -> str:
        body = {"queue_name": ctx["queue"], "settings": {"delivery_delay": 5}}
        return str(cf(emulator, "POST", f"{ctx['base']}/queues", json=body)["queue_id"])

    def held(self, emulator: CloudflareEndpoint, ctx: dict[str, Any]) -> list[dict[str, Any]]:
        found = cf(emulator, "GET", f"{ctx['base']}/queues", params={"per_page": 1000})
        return [{**q, "id": q["queue_id"]} for q in found if q["queue_name"] == ctx["queue"]]

    def matches_spec(self, held: dict[str, Any], ctx: dict[str, Any]) -> bool:
        return bool(held["settings"]["delivery_delay"] == 30)

    def update(self, ctx: dict[str, Any]) -> dict[str, Any] | None:
        return {"deliveryDelay": 60}

    def shows_update(self, held: dict[str, Any], ctx: dict[str, Any]) -> bool:
        return bool(held["settings"]["delivery_delay"] == 60)
''',
}
"""The scratch kind, file by file: all a new kind is written as."""


CHECKS = (
    "tests/unit/test_generated_fresh.py",
    "tests/unit/test_crds_fresh.py",
    "tests/unit/test_docs_fresh.py",
    "tests/unit/test_openapi_fresh.py",
    "tests/unit/reconcilers/test_registry.py",
    "tests/chart/test_docs.py::test_token_permissions_cover_every_kind",
)
"""Every generated file is fresh, the reconcilers' registry finds the kind's reconciler, the deploy guide lists its
token permission."""
MATRICES = (
    "tests/unit/webhooks/test_validate.py",
    "tests/unit/webhooks/test_app.py",
    "tests/unit/reconcilers/test_lifecycle_matrices.py",
    "tests/integration/test_lifecycle_matrices.py",
)
"""The webhook's answers (a valid spec allowed, a missing spec and an unknown field refused), the adoption and
deletion matrices in process, and the lifecycle through `kflare run` against the API server: the Queue's cases, and
the tests that every kind has what they need."""


def digests(root: Path) -> dict[str, str]:
    return {
        str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file() and "__pycache__" not in path.parts
    }


def run(copy: Path, *argv: str, timeout: float = 240) -> None:
    env = {**os.environ, "PYTHONPATH": str(copy), "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run(argv, cwd=copy, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    assert done.returncode == 0, f"{' '.join(argv)} failed in the copy:\n{done.stdout[-6000:]}\n{done.stderr[-3000:]}"


@pytest.fixture(scope="module")
def copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("scratch-kind")
    for name in COPIED:
        source = REPO_ROOT / name
        if source.is_dir():
            shutil.copytree(source, root / name, ignore=IGNORED)
        else:
            shutil.copy2(source, root / name)
    return root


def test_a_new_kind_is_five_files_and_everything_else_follows(copy: Path) -> None:
    assert len(KIND_FILES) <= MAX_FILES
    before = digests(copy)
    assert not set(KIND_FILES) & set(before), "the scratch kind's files are new files"
    for name, text in KIND_FILES.items():
        (copy / name).write_text(text, encoding="utf-8")
    written = {name for name, digest in digests(copy).items() if before.get(name) != digest}
    assert written == set(KIND_FILES), "nothing but the kind's own files was written by hand"

    python = sys.executable
    run(copy, python, "-m", "app.cli", "generate")
    generated = {name for name, digest in digests(copy).items() if before.get(name) != digest} - set(KIND_FILES)
    assert {
        "chart/kflare/templates/crds/kflare.dev_queues.yaml",
        "config/crd/bases/kflare.dev_queues.yaml",
        "chart/kflare/templates/_kinds.tpl",
        "docs/api/queues.md",
        "docs/api/README.md",
        "docs/deploy.md",
        "pyproject.toml",
    } <= generated, sorted(generated)

    sources = sorted(name for name in KIND_FILES if name.endswith(".py"))
    run(copy, str(Path(python).with_name("ruff")), "check", *sources)
    run(copy, str(Path(python).with_name("ruff")), "format", "--check", *sources)
    run(copy, str(Path(python).with_name("lint-imports")), "--no-cache")
    common = ("-q", "-p", "no:randomly", "-p", "no:cacheprovider", "-n", "0")
    run(copy, python, "-m", "pytest", *common, *CHECKS)
    run(copy, python, "-m", "pytest", *common, "-k", "Queue or queues or every_kind", *MATRICES)
