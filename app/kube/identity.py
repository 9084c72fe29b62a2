"""How kflare's own writes are told apart from anyone else's."""

from __future__ import annotations

from typing import Final

FIELD_MANAGER: Final = "kflare"
"""The field manager of every write the controller makes (`?fieldManager=`): the API server records it in
managedFields, and the webhook lets only writes of this manager set the claim labels."""
