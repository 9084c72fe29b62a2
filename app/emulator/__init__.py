"""A stateful in-memory stand-in for Cloudflare's v4 API, served by FastAPI under ``/client/v4``.

Tests, benchmarks and the local dev mode point Cloudflare clients at it. It answers in Cloudflare's envelope with
Cloudflare's status and error codes, pages like Cloudflare, enforces Free-plan limits, the API-token permissions of
:mod:`app.emulator.permissions` and the global per-token rate limit of :mod:`app.emulator.ratelimit`, and has an admin
API under ``/__emulator`` (:mod:`app.emulator.admin`) to seed state, inject faults and read the log of calls.

Layout, one module per concern:

- ``app``: the application factory; ``serve``: the uvicorn runner behind ``kflare emulator``.
- ``envelope``: the response envelope and :class:`~app.emulator.envelope.CloudflareError`; ``multipart``: form bodies
  (Worker uploads, KV writes).
- ``permissions`` (the token model and its grants), ``auth`` (request authentication as FastAPI dependencies).
- ``collection``: the generic object type (:class:`~app.emulator.collection.Kind`): identity, scope, uniqueness,
  limits, the six verbs, paging, seeding and dumping; ``state`` (a table per kind), ``seed`` (the state-file format),
  ``paging`` (page-number lists and Cloudflare's filter operators).
- ``edge`` (what happens before a request reaches a route: faults, rate limit, call log), ``ratelimit``, ``faults``,
  ``calls``, ``admin``; ``verify`` (token verification, which is no object type).
- ``kinds/<kind>``: one object type in one module: its fields, validation, limits, errors and special endpoints
  (accounts, zones, DNS records, Workers scripts and routes, KV, R2, D1, rulesets, custom lists, managed headers,
  tunnels).

Adding an object type means a ``kinds`` module declaring a :class:`~app.emulator.collection.Kind` subclass, listed in
:data:`app.emulator.kinds.KINDS`; its table, routes, paging, seeding and dumping follow from the declaration.

Importing the package imports none of them: a process that only starts the emulator (`app.emulator.process`) need
not load its application; the factory is `app.emulator.app.create_app`.
"""
