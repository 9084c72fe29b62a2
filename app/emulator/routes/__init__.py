"""The HTTP endpoints, one module per object type; :data:`ROUTERS` is what the app serves under ``/client/v4``."""

from fastapi import APIRouter

from app.emulator.routes import accounts, dns, subscriptions, tokens, zones

ROUTERS: tuple[APIRouter, ...] = (tokens.router, accounts.router, zones.router, subscriptions.router, dns.router)
