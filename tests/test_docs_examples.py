"""The Python examples of the guides run as written (a page whose example breaks is worse than
no example): every ```python block of docs/rl.md and docs/difficulty.md, in order, each page in
one namespace."""
import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parent.parent / "docs"
PAGES = ["rl.md", "difficulty.md"]


def _blocks(page: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", (DOCS / page).read_text(), re.S)


@pytest.mark.parametrize("page", PAGES)
def test_the_examples_of_a_guide_run(page, capsys):
    blocks = _blocks(page)
    assert blocks, f"docs/{page} has no python example"
    namespace = {"__name__": f"docs_{page}"}
    for k, code in enumerate(blocks):
        exec(compile(code, f"docs/{page} example {k + 1}", "exec"), namespace)
