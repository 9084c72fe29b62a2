"""A stateful in-memory stand-in for Cloudflare's v4 API, served by FastAPI under ``/client/v4``.

Tests, benchmarks and the local dev mode point Cloudflare clients at it. It answers in Cloudflare's envelope with
Cloudflare's status and error codes, pages like Cloudflare, enforces Free-plan limits, the API-token permissions of
:mod:`app.emulator.permissions` and the global per-token rate limit of :mod:`app.emulator.ratelimit`, and has an admin
API under ``/__emulator`` (:mod:`app.emulator.admin`) to seed state, inject faults and read the log of calls.

Layout, one module per concern:

- ``app``: the application factory; ``serve``: the uvicorn runner behind ``kflare emulator``.
- ``envelope``: the response envelope and :class:`~app.emulator.envelope.CloudflareError`.
- ``permissions`` (the token model and its grants), ``auth`` (request authentication as FastAPI dependencies).
- ``state`` (tables of objects), ``seed`` (the state-file format: seeding, dumping), ``paging`` (page-number lists and
  Cloudflare's filter operators, shared by every object type).
- ``edge`` (what happens before a request reaches a route: faults, rate limit, call log), ``ratelimit``, ``faults``,
  ``calls``, ``admin``.
- ``objects/<kind>``: the rules of one object type (validation, normalisation, uniqueness, quotas, rendering), used by
  both its routes and the seeder; ``routes/<kind>``: its HTTP endpoints.

Adding an object type means a table in :class:`~app.emulator.state.Store`, an ``objects`` module, a ``routes`` module
listed in :data:`app.emulator.routes.ROUTERS`, and a section in :mod:`app.emulator.seed`.
"""

from app.emulator.app import create_app

__all__ = ["create_app"]
