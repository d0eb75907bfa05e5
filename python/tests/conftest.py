"""Shared fixtures: the repository (pipelines, samples), an engine, the `pipefuse`
command the package installs (for reference runs of the C implementation)."""
import os
import shutil
from pathlib import Path

import pytest

import pipefuse

ROOT = Path(os.environ.get("PIPEFUSE_SOURCE_DIR", Path(__file__).resolve().parents[2]))
PIPELINES = ROOT / "pipelines"
SAMPLES = ROOT / "samples" / "images"


def cli_path():
    """The pipefuse command: $PIPEFUSE_CLI, else the one installed inside the package."""
    env = os.environ.get("PIPEFUSE_CLI")
    if env:
        return env
    here = Path(pipefuse.__file__).parent / "bin" / "pipefuse"
    if here.exists():
        return str(here)
    return shutil.which("pipefuse")


@pytest.fixture(scope="session")
def engine():
    return pipefuse.Engine()


@pytest.fixture(scope="session")
def cli():
    path = cli_path()
    if not path:
        pytest.skip("no pipefuse command (set PIPEFUSE_CLI)")
    return path


def cpu(engine, source, **options):
    """A pipeline on the CPU backend (the machine may or may not have a GPU)."""
    return engine.load(source, backend="cpu", **options)
