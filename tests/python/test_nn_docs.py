"""The Python examples of docs/interop.md run as written."""
import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "interop.md"
EXAMPLES = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)


def test_the_doc_has_examples():
    assert len(EXAMPLES) >= 5


@pytest.mark.parametrize("index", range(len(EXAMPLES)))
def test_example_runs(index, restore_threads):
    code = EXAMPLES[index]
    if "transformers" in code:
        pytest.importorskip("transformers")
        pytest.importorskip("accelerate")
    exec(compile(code, f"docs/interop.md example {index + 1}", "exec"), {"__name__": "__doc_example__"})
