"""Shared fixtures: where the reference recordings live, and a small JSONL reader."""
import json
import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("VISGYM_SHARED", REPO.parent / "shared"))
PARITY = SHARED / "parity"


def load_parity(family: str) -> list:
    path = PARITY / f"{family}.jsonl"
    if not path.exists():
        pytest.skip(f"reference recordings not found at {path} (set VISGYM_SHARED)")
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]
