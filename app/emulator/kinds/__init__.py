"""Every object type the emulator serves, one module each (see :mod:`app.emulator.collection`).

:data:`KINDS` is ordered parents first, and what an object refers to before it (a Worker's bindings, the lists a
rule names), so that a state file seeds in this order; the store makes a table per kind and the app serves each
kind's router.
"""

from __future__ import annotations

from app.emulator.collection import Kind
from app.emulator.kinds import (
    accounts,
    d1,
    dns,
    kv,
    lists,
    managed_headers,
    r2,
    rulesets,
    tunnels,
    worker_routes,
    workers,
    zones,
)

KINDS: tuple[Kind, ...] = (
    accounts.KIND,
    zones.KIND,
    dns.KIND,
    kv.NAMESPACES,
    kv.VALUES,
    r2.BUCKETS,
    r2.OBJECTS,
    d1.KIND,
    workers.SCRIPTS,
    worker_routes.ROUTES,
    lists.LISTS,
    lists.ITEMS,
    lists.OPERATIONS,
    rulesets.KIND,
    managed_headers.KIND,
    tunnels.KIND,
)
