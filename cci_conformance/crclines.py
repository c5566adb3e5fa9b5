"""CRC-checked JSON lines, ``<crc32 as 8 hex digits> <JSON>\\n``: the record format of the project's journals."""

from __future__ import annotations

import json
import re
import zlib
from typing import Any

_LINE = re.compile(r"([0-9a-f]{8}) (\{.*\})\Z")


def crc_hex(text: str) -> str:
    # Integrity against torn or damaged files, not an adversary: CRC-32 is enough and 10x cheaper than SHA-256.
    return f"{zlib.crc32(text.encode()):08x}"


def encode_line(text: str) -> bytes:
    """One record: the CRC-32/IEEE of the UTF-8 bytes of ``text``, a space, ``text`` and a newline."""
    return f"{crc_hex(text)} {text}\n".encode()


def _object(text: str) -> dict[str, Any] | None:
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None


def parse_line(line: str) -> dict[str, Any] | None:
    """The JSON object of one whole line whose CRC matches, else None."""
    m = _LINE.match(line)
    if m is None or crc_hex(m.group(2)) != m.group(1):
        return None
    return _object(m.group(2))


def unchecked(line: str) -> dict[str, Any] | None:
    """The JSON object of a line of the right shape, its CRC not checked (to tell damage from a tear)."""
    m = _LINE.match(line)
    return None if m is None else _object(m.group(2))


def split_lines(raw: bytes) -> list[tuple[dict[str, Any] | None, int, str]]:
    """Each newline-terminated line as (record or None when torn/damaged, byte offset after it, its text).

    Bytes after the last newline are left out: a write cut short never has its newline.
    """
    out, pos = [], 0
    for line in raw.split(b"\n")[:-1]:
        pos += len(line) + 1
        text = line.decode("utf-8", errors="replace")
        out.append((parse_line(text), pos, text))
    return out
