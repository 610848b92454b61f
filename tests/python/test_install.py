"""The package installs with `cmake --install BUILD --prefix P --component python` and imports
from P with Debian's python3 (the acceptance line of docs/python.md), outside the build tree."""
import os
import subprocess
import sys

import pytest

from conftest import TRACES


def test_installed_package_imports_and_runs(tmp_path):
    build = os.environ.get("KERNALYSE_BUILD")
    cmake = os.environ.get("KERNALYSE_CMAKE", "cmake")
    if not build:
        pytest.skip("KERNALYSE_BUILD unset (run through ctest)")
    prefix = tmp_path / "prefix"
    subprocess.run([cmake, "--install", build, "--prefix", str(prefix), "--component", "python"],
                   check=True, capture_output=True)
    v = f"python{sys.version_info.major}.{sys.version_info.minor}"
    site = prefix / "lib" / v / "dist-packages"
    assert (site / "kernalyse" / "__init__.py").exists() and (site / "kernalyse" / "hta.py").exists()
    env = {k: x for k, x in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(site)
    pair = os.path.join(TRACES, "hta", "trace_filter")
    code = ("import kernalyse, sys; print(kernalyse.__file__); "
            "r = kernalyse.open(sys.argv[1], quiet=True); print(r.stragglers()[0].head())"
            if os.path.isdir(pair) else "import kernalyse; print(kernalyse.__file__)")
    p = subprocess.run(["/usr/bin/python3", "-c", code, pair], capture_output=True, text=True,
                       env=env, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith(str(site)), p.stdout
    if os.path.isdir(pair):
        assert "op" in p.stdout and "last_rank" in p.stdout, p.stdout
