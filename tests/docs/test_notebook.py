"""examples/reference_policy.ipynb runs top to bottom (slow: it evaluates the reference policy)."""

from __future__ import annotations

import pytest

from tests.conftest import REPO

NOTEBOOK = REPO / "examples" / "reference_policy.ipynb"


@pytest.mark.slow
def test_reference_policy_notebook_executes(tmp_path):
    nbformat = pytest.importorskip("nbformat", reason="the dev extra installs nbformat")
    nbclient = pytest.importorskip("nbclient", reason="the dev extra installs nbclient")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbclient.NotebookClient(
        nb, timeout=900, kernel_name="python3", resources={"metadata": {"path": str(REPO)}}
    ).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    text = "".join(str(o.get("data", {}).get("text/markdown", "")) for o in outputs)
    assert "ppo:reference@0" in text and "crius" in text  # the headline table
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(images) == 2  # the bare network's schedule and Crius's
