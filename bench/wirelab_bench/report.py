"""`wirelab report`: execute the report notebook on a results folder and export it to HTML."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from wirelab.contract.table import BY_ENV

from wirelab_bench.results import latest_run

# The knob table's default (the working directory's notebook when it has one, as in the bench
# image's mounted checkout, else the checkout's), without WIRELAB_REPORT_NOTEBOOK.
NOTEBOOK = Path(BY_ENV["WIRELAB_REPORT_NOTEBOOK"].value)


def render(
    run_dir: Path,
    output_dir: Path | None = None,
    notebook: Path = NOTEBOOK,
    timeout: int = 600,
    crosscheck: Path | None = None,
) -> Path:
    """Run notebooks/report.py top to bottom on ``run_dir`` (with a `wirelab perf crosscheck`
    file, if given, in place of the folder's own); returns the HTML report's path.

    The notebook takes its parameters from the environment, so the executed copy is the source
    file as stored plus outputs: no injected cell to explain.
    """
    import jupytext
    import nbformat
    from nbclient import NotebookClient
    from nbconvert import HTMLExporter
    from traitlets.config import Config

    out = output_dir or run_dir
    out.mkdir(parents=True, exist_ok=True)
    nb = jupytext.read(notebook)
    keys = ("WIRELAB_REPORT_RESULTS", "WIRELAB_REPORT_OUTPUT", "WIRELAB_REPORT_CROSSCHECK")
    # Set for the kernel, which inherits them, and put back after: the notebook reads them
    # through the knob table; nothing here reads a knob.
    saved = {k: os.environ.get(k) for k in keys}
    os.environ["WIRELAB_REPORT_RESULTS"] = str(run_dir.resolve())
    os.environ["WIRELAB_REPORT_OUTPUT"] = str(out.resolve())
    if crosscheck is not None:
        os.environ["WIRELAB_REPORT_CROSSCHECK"] = str(crosscheck.resolve())
    try:
        # The kernel on Unix sockets, not loopback TCP: no other user of the host can reach it,
        # and ipykernel stops warning of plain-text TCP on every render. The sockets' absolute
        # path: the kernel runs in ``out``, and a relative one would name two different places.
        with tempfile.TemporaryDirectory(prefix="wirelab-kernel-") as sockets:
            ipc = Config({"KernelManager": {"transport": "ipc", "ip": f"{sockets}/kernel"}})
            client = NotebookClient(
                nb, config=ipc, timeout=timeout, kernel_name="python3",
                resources={"metadata": {"path": str(out)}},
            )  # fmt: skip
            client.execute()
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    nbformat.write(nb, out / "report.ipynb")  # type: ignore[no-untyped-call]
    exporter = HTMLExporter(exclude_input=True)  # type: ignore[no-untyped-call]
    body, _ = exporter.from_notebook_node(nb)
    html = out / "report.html"
    html.write_text(body)
    return html


def resolve_run(given: str, results_root: str) -> Path:
    """The folder given, else the newest run under ``results_root``."""
    return Path(given) if given else latest_run(Path(results_root))
