"""A wrapper that keeps an API token out of logs, reprs and exception messages.

`Secret` holds the token; `repr()`, `str()` and `format()` show only a short fingerprint (the first 12 hex digits of
the token's SHA-256), which is also how budgets and statistics name a token. The value itself is read only through
`reveal()`, at the one place that builds the `Authorization` header, and by `redact()` to scrub text a server sent.
"""

from __future__ import annotations

import hashlib
from typing import NoReturn, final

FINGERPRINT_LENGTH = 12


@final
class Secret:
    """An API token whose value never shows in `repr`, `str`, `format`, pickles or comparisons' output."""

    __slots__ = ("_digest", "_value")

    _value: str
    _digest: str

    def __init__(self, value: str) -> None:
        if not isinstance(value, str):
            raise TypeError("a Secret wraps a str")
        stripped = value.strip()
        if not stripped:
            raise ValueError("the token is empty")
        if not all(33 <= ord(char) <= 126 for char in stripped):
            # Would be refused as a header value, and the refusal could quote it.
            raise ValueError("the token has characters other than visible ASCII")
        object.__setattr__(self, "_value", stripped)
        object.__setattr__(self, "_digest", hashlib.sha256(stripped.encode()).hexdigest())

    @classmethod
    def of(cls, value: str | Secret) -> Secret:
        """Wrap `value` unless it is already a `Secret`."""
        return value if isinstance(value, Secret) else cls(value)

    def reveal(self) -> str:
        """The token itself. Only for the `Authorization` header."""
        return self._value

    @property
    def key(self) -> str:
        """The token's full SHA-256 in hex: a registry key that cannot be turned back into the token."""
        return self._digest

    @property
    def fingerprint(self) -> str:
        """A short hash that names the token in logs and statistics."""
        return self._digest[:FINGERPRINT_LENGTH]

    def redact(self, text: str) -> str:
        """`text` with every occurrence of the token replaced by a mask."""
        if self._value in text:
            return text.replace(self._value, f"<token {self.fingerprint}>")
        return text

    def __repr__(self) -> str:
        return f"Secret(fingerprint={self.fingerprint!r})"

    def __str__(self) -> str:
        return f"<token {self.fingerprint}>"

    def __format__(self, format_spec: str) -> str:
        return format(str(self), format_spec)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._digest == self._digest

    def __hash__(self) -> int:
        return hash(self._digest)

    def __setattr__(self, name: str, value: object) -> NoReturn:
        raise AttributeError("Secret is immutable")

    def __copy__(self) -> Secret:
        return self

    def __deepcopy__(self, memo: dict[int, object]) -> Secret:
        return self

    def __reduce__(self) -> NoReturn:
        raise TypeError("a Secret cannot be pickled")
