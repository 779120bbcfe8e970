"""examples/quickstart.ipynb runs from top to bottom in a real Jupyter kernel (this venv's Python) on the bundled
model; any cell that raises fails the suite. Its outputs are never committed."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "examples" / "quickstart.ipynb"
KERNEL = "metagen-test-venv"


def test_the_committed_notebook_has_no_outputs() -> None:
    nb = nbformat.read(NOTEBOOK, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and all(c.outputs == [] and c.execution_count is None for c in code)


def _kernel_here(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A kernelspec for this interpreter, found first (JUPYTER_PATH comes before the user's and system folders),
    so the notebook runs on this venv on any machine without `ipykernel install`."""
    spec = folder / "kernels" / KERNEL
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "metagen test (venv)", "language": "python"}), encoding="utf-8")
    monkeypatch.setenv("JUPYTER_PATH", str(folder))
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(folder / "runtime"))
    monkeypatch.setenv("JUPYTER_PLATFORM_DIRS", "1")
    monkeypatch.setenv("IPYTHONDIR", str(folder / "ipython"))
    monkeypatch.setenv("PYTHONPATH", str(ROOT))  # this checkout's metagen, installed or not


@pytest.mark.model
def test_quickstart_notebook_runs_in_a_kernel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _kernel_here(tmp_path / "jupyter", monkeypatch)
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = NotebookClient(nb, kernel_name=KERNEL, timeout=900, allow_errors=False,
                            resources={"metadata": {"path": str(ROOT)}})
    client.execute()  # CellExecutionError on the first cell that raises
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    html = "".join(o.get("data", {}).get("text/html", "") for o in outputs)
    assert "mg-workflow-graph" in html, "the workflow drew its graph"
    assert "mg-eval-points" in html, "the evaluation showed its points table"
    frames = [o for o in outputs if "<table" in o.get("data", {}).get("text/html", "") and "think.n" in
              o.get("data", {}).get("text/html", "")]
    assert frames, "the points DataFrame was shown"
