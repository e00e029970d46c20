"""Work the e2e test processes of one host share: locks, and the images of this tree built once per test run.

`make e2e` runs its test files in two pytest processes (pytest-xdist) against one cluster. Starting the harness,
building an image (images/build.sh reuses one build context per image and prunes Docker's dangling images) and
importing it into the node must not run in both at once, and an image built by one process for this run serves
the other as it is.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

__all__ = ["build_image", "host_lock", "image_on_node", "once_per_run"]

REPO = Path(__file__).resolve().parent.parent
LOCKS = Path(tempfile.gettempdir())


@contextlib.contextmanager
def host_lock(name: str) -> Iterator[None]:
    """Held by one process of this host at a time (an flock, released if the holder dies)."""
    with (LOCKS / f"rocketcluster-e2e-{name}.lock").open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def once_per_run(name: str, action: Callable[[], None]) -> None:
    """`action` under the lock `name`, unless another process of this pytest-xdist run has done it already
    (a stamp holds the run's id). Outside xdist it always runs."""
    run_id = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    stamp = LOCKS / f"rocketcluster-e2e-{name}.done"
    with host_lock(name):
        if run_id and stamp.exists() and stamp.read_text() == run_id:
            return
        action()
        if run_id:
            stamp.write_text(run_id)


def build_image(name: str) -> None:
    """`images/build.sh <name>`, one build on this host at a time."""
    with host_lock("image-build"):
        b = subprocess.run(["bash", str(REPO / "images" / "build.sh"), name], capture_output=True, text=True)
    assert b.returncode == 0, f"images/build.sh {name} failed:\n{b.stderr[-4000:]}"


def image_on_node(name: str, image: str) -> str:
    """`image`, which `images/build.sh <name>` builds from this tree, imported into the harness node's containerd:
    built and imported once per test run, however many test processes ask."""

    def build_and_load() -> None:
        build_image(name)
        load = ["bash", str(REPO / "e2e" / "cluster.sh"), "load-images", image]
        p = subprocess.run(load, capture_output=True, text=True)
        assert p.returncode == 0, f"loading {image} failed:\n{p.stderr[-4000:]}"

    once_per_run(f"image-{name}", build_and_load)
    return image
