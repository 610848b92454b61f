"""examples/notebooks/kernalyse.ipynb runs clean: executed by Debian's jupyter-nbconvert on the
python3 kernel (python3-ipykernel); any cell's error fails the test."""
import json
import os
import shutil
import subprocess

import pytest

from conftest import BIN, SRC


def test_notebook_runs_clean(tmp_path):
    nbconvert = shutil.which("jupyter-nbconvert") or "/usr/bin/jupyter-nbconvert"
    if not os.path.exists(nbconvert):
        pytest.skip("jupyter-nbconvert absent (Debian's jupyter-nbconvert, .ci/install-deps)")
    pytest.importorskip("ipykernel", reason="python3-ipykernel absent (.ci/install-deps)")
    pytest.importorskip("matplotlib", reason="python3-matplotlib absent (.ci/install-deps)")
    nb = os.path.join(SRC, "examples", "notebooks", "kernalyse.ipynb")
    # TMPDIR: the notebook's generated job (tempfile.mkdtemp) lands in tmp_path, removed after,
    # instead of one more /tmp/kernalyse-nb-* per run.
    env = dict(os.environ, KERNALYSE_BIN=BIN, MPLBACKEND="Agg", TMPDIR=str(tmp_path))
    env.pop("KERNALYSE_DEMO_RUN", None)
    # The notebook's cells run in its own folder; its output goes to tmp_path.
    p = subprocess.run([nbconvert, "--to", "notebook", "--execute", nb, "--output-dir",
                        str(tmp_path), "--output", "executed.ipynb",
                        "--ExecutePreprocessor.timeout=600"],
                       capture_output=True, text=True, env=env)
    assert p.returncode == 0, p.stderr[-3000:]
    done = json.load(open(tmp_path / "executed.ipynb"))
    outputs = [o for c in done["cells"] if c["cell_type"] == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    # The plot and the inline report were drawn.
    assert any("image/png" in o.get("data", {}) for o in outputs)
    assert any("<iframe srcdoc=" in "".join(o.get("data", {}).get("text/html", []))
               for o in outputs)
