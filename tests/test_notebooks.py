"""Every notebook in book/ and labs/ runs top to bottom under papermill in SMOKE mode.

Per-notebook figures are asserted in tests/test_book_*.py and tests/test_labs*.py,
which share the same (cached) execution.
"""

import json

import pytest

from conftest import NOTEBOOKS, ROOT

pytestmark = pytest.mark.notebooks


@pytest.mark.parametrize("rel", NOTEBOOKS)
def test_committed_notebook_is_clean(rel):
    nb = json.loads((ROOT / rel).read_text())
    cells = nb["cells"]
    tagged = [c for c in cells if "parameters" in c.get("metadata", {}).get("tags", [])]
    assert len(tagged) == 1, "exactly one cell tagged 'parameters'"
    assert "GOODPUTLAB_SMOKE" in "".join(tagged[0]["source"])
    for c in cells:
        for o in c.get("outputs", []) or []:
            assert o.get("output_type") != "error", "a stored error output"


@pytest.mark.parametrize("rel", NOTEBOOKS)
def test_notebook_runs_and_records_metrics(rel, executed_notebook):
    nb, metrics, seconds = executed_notebook(rel)
    assert metrics, "the notebook recorded no metrics (goodputlab.notebook.record_metrics)"
    print(f"{rel}: {seconds:.1f} s in SMOKE mode")
