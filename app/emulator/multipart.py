"""``multipart/form-data`` bodies (Worker uploads, KV writes), read with the standard library's MIME parser."""

from __future__ import annotations

import email.policy
from dataclasses import dataclass
from email.message import Message
from email.parser import BytesParser

from app.emulator.envelope import CloudflareError


@dataclass(frozen=True)
class Part:
    name: str
    filename: str | None
    content_type: str
    data: bytes

    def text(self) -> str:
        return self.data.decode("utf-8", errors="replace")


def is_multipart(content_type: str) -> bool:
    return content_type.lower().startswith("multipart/form-data")


def parse_form(content_type: str, body: bytes) -> list[Part]:
    """The parts of a form, in order; a body that is not one is refused with 400/10001 (Unsupported or unexpected
    Content Type, the Workers API's code for it; unverified for other APIs)."""
    if not is_multipart(content_type) or "boundary=" not in content_type:
        raise CloudflareError.single(400, 10001, "Unsupported or unexpected Content Type")
    head = f"Content-Type: {content_type}\r\nMIME-Version: 1.0\r\n\r\n".encode()
    message = BytesParser(policy=email.policy.HTTP).parsebytes(head + body)
    if not message.is_multipart():
        raise CloudflareError.single(400, 10001, "Unsupported or unexpected Content Type")
    parts = []
    for item in message.iter_parts():
        assert isinstance(item, Message)
        name = item.get_param("name", header="content-disposition")
        filename = item.get_filename()
        payload = item.get_payload(decode=True)
        parts.append(
            Part(
                name=str(name) if name is not None else "",
                filename=filename,
                content_type=item.get_content_type(),
                data=payload if isinstance(payload, bytes) else b"",
            )
        )
    return parts
