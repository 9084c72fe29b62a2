"""An account without `spec.accountID` uses the one account its token reaches: detected once, recorded in its
status, read from there by everything that needs the ID; a token that reaches none or several says so."""

from __future__ import annotations

import base64
import copy
from typing import Any

import pytest

from app.api import Account, CloudflareAccount
from app.api.account import effective_account_id
from app.api.constants import Reason
from reconcilers.registry import KINDS
from tests.unit.reconcilers.harness import (
    ACCOUNT_ID,
    TOKEN,
    Cloudflare,
    KubeSecrets,
    MemoryKube,
    Runtime,
    emulator_state,
)

NS = "team"
OTHER_ID = "b" * 32
NARROW = "narrow-token-0123456789abcdef"
"""A token that reaches only the harness's account (`TOKEN` reaches every account)."""
OWNED = "owned-token-0123456789abcdef"
"""An account-owned token: Cloudflare lists no accounts for it."""
LISTINGS = r"/accounts$"


def state(*, second_account: bool = False) -> dict[str, Any]:
    seeded = emulator_state([])
    if second_account:
        seeded["accounts"].append({"id": OTHER_ID, "name": "other"})
    seeded["tokens"] += [
        {"name": "narrow", "value": NARROW, "permissions": ["*"], "accounts": [ACCOUNT_ID]},
        {"name": "owned", "value": OWNED, "permissions": ["*"], "owner": "account", "account_id": ACCOUNT_ID},
    ]
    return seeded


def world(token: str, **spec: Any) -> MemoryKube:
    kube = MemoryKube()
    kube.add(
        {
            "kind": "Secret",
            "metadata": {"name": "token", "namespace": NS},
            "data": {"CF_API_TOKEN": base64.b64encode(token.encode()).decode()},
        }
    )
    kube.add(
        {
            "kind": "CloudflareAccount",
            "metadata": {"name": "acct"},
            "spec": {"tokenSecretRef": {"name": "token", "namespace": NS}, **spec},
        }
    )
    kube.add(
        {
            "kind": "Zone",
            "metadata": {"name": "zone", "namespace": NS},
            "spec": {"name": "example.com", "accountRef": {"name": "acct"}},
        }
    )
    kube.add(
        {
            "kind": "DNSRecord",
            "metadata": {"name": "www", "namespace": NS},
            "spec": {"zoneRef": {"name": "zone"}, "name": "www", "type": "A", "content": "192.0.2.1"},
        }
    )
    return kube


def ready_of(kube: MemoryKube, kind: str, name: str, namespace: str = NS) -> dict[str, Any]:
    stored = kube.get(kind, name, namespace)
    assert stored is not None
    found = [c for c in (stored.get("status") or {}).get("conditions") or [] if c["type"] == "Ready"]
    assert found, f"{kind} {name} has no Ready condition"
    return dict(found[0])


def account(kube: MemoryKube) -> dict[str, Any]:
    stored = kube.get("CloudflareAccount", "acct")
    assert stored is not None
    return stored


def listings(cloudflare: Cloudflare) -> int:
    return len(cloudflare.emulator.calls.select(method="GET", path=LISTINGS))


def edit(kube: MemoryKube, kind: str, name: str, namespace: str = "", **spec: Any) -> None:
    """A user's edit of the spec: the generation moves."""
    obj = kube.objects[(kind, namespace, name)]
    obj["spec"] = {k: v for k, v in {**obj["spec"], **spec}.items() if v is not None}
    obj["metadata"]["generation"] += 1
    kube.version += 1
    obj["metadata"]["resourceVersion"] = str(kube.version)


def change_token(kube: MemoryKube, token: str) -> None:
    secret = kube.objects[("Secret", NS, "token")]
    secret["data"] = {"CF_API_TOKEN": base64.b64encode(token.encode()).decode()}
    kube.version += 1
    secret["metadata"]["resourceVersion"] = str(kube.version)


def visible_text(kube: MemoryKube) -> str:
    return repr([kube.get(kind, name, ns) for kind, ns, name in kube.objects if kind != "Secret"])


async def test_the_one_account_a_token_reaches_is_used_and_read_once() -> None:
    cloudflare = Cloudflare(state(second_account=True))
    kube = world(NARROW)
    try:
        runtime = Runtime(kube, cloudflare, KINDS, KubeSecrets(kube))
        await runtime.settle()
        assert ready_of(kube, "CloudflareAccount", "acct", "")["reason"] == Reason.VALIDATED
        assert account(kube)["status"]["accountID"] == ACCOUNT_ID
        assert ready_of(kube, "DNSRecord", "www")["reason"] == Reason.SYNCED
        zone = await cloudflare.get("/zones", name="example.com")
        assert [z["account"]["id"] for z in zone] == [ACCOUNT_ID]
        assert listings(cloudflare) == 1

        # Drift checks of the account and reconciles of its dependants, in this life and the next, list nothing.
        await runtime.reconcile("CloudflareAccount", "acct")
        await Runtime(kube, cloudflare, KINDS, KubeSecrets(kube)).reconcile("CloudflareAccount", "acct")
        await runtime.reconcile("DNSRecord", "www", NS)
        assert listings(cloudflare) == 1
        assert ready_of(kube, "CloudflareAccount", "acct", "")["status"] == "True"
    finally:
        await cloudflare.aclose()


@pytest.mark.parametrize(
    ("second_account", "token", "said"),
    [
        (True, TOKEN, f"the token reaches 2 accounts ({ACCOUNT_ID} 'harness', {OTHER_ID} 'other')"),
        (False, OWNED, "an account-owned token cannot list them"),
    ],
)
async def test_a_token_that_reaches_no_single_account_says_so_and_dependants_wait(
    second_account: bool, token: str, said: str
) -> None:
    cloudflare = Cloudflare(state(second_account=second_account))
    kube = world(token)
    try:
        runtime = Runtime(kube, cloudflare, KINDS, KubeSecrets(kube))
        outcome = await runtime.reconcile("CloudflareAccount", "acct")
        condition = ready_of(kube, "CloudflareAccount", "acct", "")
        assert (condition["status"], condition["reason"]) == ("False", Reason.ACCOUNT_NOT_DETECTED)
        assert said in condition["message"]
        assert "set spec.accountID" in condition["message"]
        assert outcome.requeue_after is not None  # a token's reach changes in Cloudflare without an event
        assert "accountID" not in (account(kube).get("status") or {})

        # Past its grace period, the Zone says what it waits for.
        kube.objects[("Zone", NS, "zone")]["metadata"]["creationTimestamp"] = "2020-01-01T00:00:00Z"
        await runtime.reconcile("Zone", "zone", NS)
        assert ready_of(kube, "Zone", "zone")["reason"] == Reason.ACCOUNT_NOT_READY
        assert await cloudflare.get("/zones") == []
        assert token not in visible_text(kube)
    finally:
        await cloudflare.aclose()


async def test_a_token_that_reaches_no_account() -> None:
    seeded = state()
    seeded["tokens"].append(
        {"name": "none", "value": "none-token-0123456789abcdef", "permissions": ["*"], "accounts": []}
    )
    cloudflare = Cloudflare(seeded)
    kube = world("none-token-0123456789abcdef")
    try:
        await Runtime(kube, cloudflare, KINDS, KubeSecrets(kube)).reconcile("CloudflareAccount", "acct")
        condition = ready_of(kube, "CloudflareAccount", "acct", "")
        assert condition["reason"] == Reason.ACCOUNT_NOT_DETECTED
        assert "the token reaches no account" in condition["message"]
    finally:
        await cloudflare.aclose()


async def test_an_unknown_token_is_an_invalid_token() -> None:
    cloudflare = Cloudflare(state())
    kube = world("unknown-token-0123456789abcdef")
    try:
        await Runtime(kube, cloudflare, KINDS, KubeSecrets(kube)).reconcile("CloudflareAccount", "acct")
        condition = ready_of(kube, "CloudflareAccount", "acct", "")
        assert (condition["status"], condition["reason"]) == ("False", Reason.INVALID_TOKEN)
    finally:
        await cloudflare.aclose()


async def test_setting_the_account_id_wins_and_the_detection_follows_the_token() -> None:
    cloudflare = Cloudflare(state(second_account=True))
    kube = world(TOKEN)
    try:
        runtime = Runtime(kube, cloudflare, KINDS, KubeSecrets(kube))
        await runtime.reconcile("CloudflareAccount", "acct")
        assert ready_of(kube, "CloudflareAccount", "acct", "")["reason"] == Reason.ACCOUNT_NOT_DETECTED

        # The user names the account: no listing, the spec's ID is used and shown.
        before = listings(cloudflare)
        edit(kube, "CloudflareAccount", "acct", accountID=OTHER_ID)
        await runtime.reconcile("CloudflareAccount", "acct")
        assert ready_of(kube, "CloudflareAccount", "acct", "")["reason"] == Reason.VALIDATED
        assert account(kube)["status"]["accountID"] == OTHER_ID
        assert listings(cloudflare) == before

        # Unset again, with a token that reaches one account: detected anew, not kept from the spec.
        change_token(kube, NARROW)
        edit(kube, "CloudflareAccount", "acct", accountID=None)
        await runtime.reconcile("CloudflareAccount", "acct")
        assert account(kube)["status"]["accountID"] == ACCOUNT_ID
        assert listings(cloudflare) == before + 1

        # A new token in the Secret is asked again (the Secret's watch enqueues the account): it reaches two now.
        change_token(kube, TOKEN)
        await runtime.reconcile("CloudflareAccount", "acct")
        assert ready_of(kube, "CloudflareAccount", "acct", "")["reason"] == Reason.ACCOUNT_NOT_DETECTED
        assert listings(cloudflare) == before + 2
    finally:
        await cloudflare.aclose()


async def test_an_account_id_set_from_the_start_lists_nothing() -> None:
    cloudflare = Cloudflare(state(second_account=True))
    kube = world(TOKEN, accountID=ACCOUNT_ID)
    try:
        await Runtime(kube, cloudflare, KINDS, KubeSecrets(kube)).settle()
        assert ready_of(kube, "DNSRecord", "www")["reason"] == Reason.SYNCED
        assert account(kube)["status"]["accountID"] == ACCOUNT_ID
        assert listings(cloudflare) == 0
    finally:
        await cloudflare.aclose()


async def test_a_teams_own_account_is_detected_too() -> None:
    cloudflare = Cloudflare(state(second_account=True))
    kube = world(NARROW)
    del kube.objects[("CloudflareAccount", "", "acct")]
    kube.add(
        {"kind": "Account", "metadata": {"name": "own", "namespace": NS}, "spec": {"tokenSecretRef": {"name": "token"}}}
    )
    kube.objects[("Zone", NS, "zone")]["spec"]["accountRef"] = {"name": "own", "kind": "Account"}
    try:
        await Runtime(kube, cloudflare, KINDS, KubeSecrets(kube)).settle()
        stored = kube.get("Account", "own", NS)
        assert stored is not None
        assert stored["status"]["accountID"] == ACCOUNT_ID
        assert ready_of(kube, "DNSRecord", "www")["reason"] == Reason.SYNCED
    finally:
        await cloudflare.aclose()


def test_the_effective_account_id_prefers_the_spec() -> None:
    spec = {"tokenSecretRef": {"name": "t", "namespace": NS}}
    detected = {"kind": "CloudflareAccount", "metadata": {"name": "a"}, "spec": spec, "status": {"accountID": OTHER_ID}}
    named = copy.deepcopy(detected)
    named["spec"]["accountID"] = ACCOUNT_ID
    assert effective_account_id(detected) == OTHER_ID
    assert effective_account_id(named) == ACCOUNT_ID
    assert effective_account_id(CloudflareAccount.model_validate(detected)) == OTHER_ID
    assert effective_account_id(CloudflareAccount.model_validate(named)) == ACCOUNT_ID
    team = {"kind": "Account", "metadata": {"name": "a", "namespace": NS}, "spec": {"tokenSecretRef": {"name": "t"}}}
    assert effective_account_id(Account.model_validate(team)) is None
    assert effective_account_id({"metadata": {"name": "a"}, "spec": {}}) is None
    assert effective_account_id(None) is None
