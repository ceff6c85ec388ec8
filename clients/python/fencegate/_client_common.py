"""_client_common.py - what both clients read the same way.

Invariant: a key is read whole from its file and never shown.
"""

from __future__ import annotations

from typing import Optional


def read_key(key: Optional[str], key_file: Optional[str]) -> Optional[str]:
    if key is not None and key_file is not None:
        raise ValueError("give key or key_file, not both")
    if key_file is not None:
        with open(key_file, encoding="ascii") as f:
            key = f.read().strip()
    if key is not None and not key:
        raise ValueError("the key is empty")
    return key
