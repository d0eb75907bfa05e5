"""Wheels: `pip wheel ./python` once (keeping its build folder), then install it anywhere.
The installed package carries the library, the plugins and the command inside it; the
docs give the commands. PF_TEST_WHEEL=1 also builds a CPU-only wheel twice with one build
folder (the second compiles nothing) and installs it into a fresh venv (minutes)."""
import os
import subprocess
import sys
import venv
from pathlib import Path

import numpy as np
import pytest

import pipefuse
from conftest import ROOT

PKG = Path(pipefuse.__file__).parent


def test_pyproject_declares_the_command_and_mirrors_the_root():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    sub = tomllib.loads((ROOT / "python" / "pyproject.toml").read_text())
    top = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert sub["project"]["scripts"] == {"pipefuse": "pipefuse._cli:main"}
    assert top["project"] == sub["project"]


def test_the_guide_says_how_to_build_once_and_install_many():
    text = (ROOT / "docs" / "python.md").read_text()
    assert "pip wheel ./python -w dist --config-settings=build-dir=build/python-wheel" in text
    assert "pip install dist/pipefuse-" in text
    ci = (ROOT / ".ci" / "run").read_text()
    assert "--config-settings=build-dir=" in ci


def test_an_installed_package_is_self_contained():
    if not (PKG / "bin").is_dir():
        pytest.skip("a build tree on PYTHONPATH, not an installed wheel")
    assert os.access(PKG / "bin" / "pipefuse", os.X_OK)
    assert list((PKG / "lib").glob("libpipefuse.so*"))
    plugins = list((PKG / "lib" / "pipefuse" / "plugins").glob("*.so"))
    assert {"color.so", "filter.so"} <= {p.name for p in plugins}
    e = pipefuse.Engine(use_env_path=False)
    assert all(s.file.startswith(str(PKG)) for s in e.stages())  # its own plugins


@pytest.mark.skipif(os.environ.get("PF_TEST_WHEEL") != "1",
                    reason="builds a wheel (minutes): set PF_TEST_WHEEL=1")
def test_build_once_install_many(tmp_path):
    build = tmp_path / "build"
    env = dict(os.environ, PIPEFUSE_CUDA="OFF")
    cmd = [sys.executable, "-m", "pip", "wheel", str(ROOT / "python"), "--no-deps",
           "-w", str(tmp_path / "dist"), f"--config-settings=build-dir={build}"]
    if os.environ.get("PF_TEST_WHEEL_ISOLATION") != "1":
        cmd.append("--no-build-isolation")  # scikit-build-core from this environment
    subprocess.run(cmd, check=True, env=env, capture_output=True)
    log = build / ".ninja_log"

    def objects():  # lines "start end mtime output hash" of compiled objects
        return sum(1 for line in log.read_text().splitlines()[1:]
                   if line.split("\t")[3].endswith(".o"))

    compiled = objects()
    assert compiled > 50
    subprocess.run(cmd, check=True, env=env, capture_output=True)
    again = objects()
    # The build folder is reused: nothing recompiles but what changed in between (in a
    # shared working tree, files others edit meanwhile); a fresh build would double it.
    assert again - compiled < compiled // 4
    wheels = list((tmp_path / "dist").glob("pipefuse-*.whl"))
    assert len(wheels) == 1
    for name in ("a", "b"):  # install many
        d = tmp_path / name
        venv.create(d, with_pip=True)
        py = d / "bin" / "python"
        site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()"
                               "['purelib'])"], capture_output=True, text=True, check=True)
        numpy_dir = Path(np.__file__).resolve().parents[1]  # this environment's NumPy
        (Path(site.stdout.strip()) / "numpy_here.pth").write_text(f"{numpy_dir}\n")
        subprocess.run([str(py), "-m", "pip", "install", "--no-deps", "-q", str(wheels[0])],
                       check=True)
        clean = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the installed one
        r = subprocess.run([str(d / "bin" / "pipefuse"), "--version"], capture_output=True,
                           text=True, env=clean)
        assert r.returncode == 0 and r.stdout.startswith("pipefuse ")
        r = subprocess.run([str(py), "-c", "import pipefuse, numpy; print(pipefuse.__file__); "
                            "print(pipefuse.Engine().load('" + str(ROOT / "pipelines" / "demo.json")
                            + "', backend='cpu').run(numpy.zeros((8, 8, 3), numpy.uint8))"
                            "['result'].shape)"], capture_output=True, text=True, env=clean,
                           cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        assert r.stdout.startswith(str(d)) and "(8, 8, 3)" in r.stdout
