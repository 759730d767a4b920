"""The report's notebook kernel listens on Unix sockets in a private folder, never on a TCP port
another user of the host could reach (and ipykernel's plain-text TCP warning stays away)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from wirelab_bench.report import render

pytestmark = pytest.mark.integration

# A notebook (jupytext percent format) whose one cell prints how its kernel is connected.
PROBE = """# %%
from ipykernel.kernelapp import IPKernelApp

app = IPKernelApp.instance()
print(app.transport, app.ip)
"""


def test_the_report_kernel_runs_on_unix_sockets(tmp_path: Path) -> None:
    notebook = tmp_path / "probe.py"
    notebook.write_text(PROBE)
    out = tmp_path / "out"
    render(tmp_path, out, notebook, timeout=60)
    executed = json.loads((out / "report.ipynb").read_text())
    (output,) = executed["cells"][0]["outputs"]
    transport, ip = "".join(output["text"]).split()
    assert transport == "ipc"
    assert Path(ip).is_absolute() and not Path(ip).parent.exists()  # removed with the render
