"""fragola_nb as a user installs it: the sdist and the wheel built from a clean copy of the
checkout (the files git tracks or would add, nothing it ignores), and fresh venvs that
``pip install`` the wheel, not editable, with its dependencies. Used by
tests/package/test_wheel_install.py and tests/browser/test_browser_wheel.py; each thing is made once
per pytest run.

Why not the checkout: an editable install reads every file from the work tree, so a file the
wheel forgets (the panels' JavaScript and CSS once were) is never missed by the other tests.

    art = built()                       # .sdist, .wheel (the wheel is built from the sdist)
    env = venv()                        # the plain install (plus ipykernel, to run a kernel)
    env = venv("otel")                  # the wheel with that extra only
    with WheelKernel(env) as kernel:    # a kernel running the venv's python
        ...
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import KernelManager

from support.kernel_harness import Kernel

ROOT = Path(__file__).resolve().parents[2]
KERNEL_NAME = "fragola-wheel"


@functools.cache
def _scratch() -> Path:
    """One temp dir for the whole run, outside the checkout, removed at exit."""
    path = Path(tempfile.mkdtemp(prefix="fragola-wheel-"))
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def run(cmd: list[str | Path], *, cwd: Path | None = None, timeout: float = 300,
        env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run a command; a failure raises with its output (what a person would need to see)."""
    done = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout, check=False)
    if done.returncode != 0:
        raise AssertionError(f"{' '.join(map(str, cmd))} exited {done.returncode}\n"
                             f"{done.stdout[-4000:]}\n{done.stderr[-4000:]}")
    return done


def tracked(under: str = "") -> list[str]:
    """The files of the work tree that git tracks or would add (not ignored), under a folder:
    a clone of the checkout once it is committed. Not ``git archive HEAD``: a change is
    tested before it is committed, like every other test tests it."""
    out = run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--",
               under or "."], cwd=ROOT).stdout
    return [name for name in out.split("\0") if name and (ROOT / name).is_file()]


@dataclass(frozen=True)
class Built:
    source: Path  # the clean copy the sdist was built from
    sdist: Path
    wheel: Path


@functools.cache
def built() -> Built:
    """``python -m build`` on a copy of the tracked files: the sdist, then the wheel from the
    sdist (as ``build`` does by default), so the wheel also proves the sdist is complete."""
    source = _scratch() / "source"
    for name in tracked():
        target = source / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, target)
    dist = _scratch() / "dist"
    run([sys.executable, "-m", "build", "--outdir", dist, source], cwd=_scratch())
    (sdist,) = dist.glob("*.tar.gz")
    (wheel,) = dist.glob("*.whl")
    return Built(source, sdist, wheel)


def clean_env(**extra: str) -> dict[str, str]:
    """This environment less what would make a child read the checkout or reach a real model:
    no PYTHONPATH, no OPENAI_* (the scripted model answers), no VIRTUAL_ENV."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("OPENAI_") and k not in {"PYTHONPATH", "VIRTUAL_ENV"}}
    env.update(extra)
    return env


@dataclass(frozen=True)
class Venv:
    path: Path

    @property
    def python(self) -> Path:
        return self.path / "bin" / "python"

    @property
    def site_packages(self) -> Path:
        code = "import sysconfig; print(sysconfig.get_path('purelib'))"
        return Path(run([self.python, "-c", code], env=clean_env()).stdout.strip())

    def outside(self) -> Path:
        """A fresh working directory outside the checkout."""
        return Path(tempfile.mkdtemp(dir=_scratch(), prefix="cwd-"))


@functools.cache
def venv(extras: str = "") -> Venv:
    """A fresh venv of this Python with the wheel pip-installed (not editable) with its
    dependencies: ``fragola_nb`` alone, or ``fragola_nb[EXTRAS]``. The plain one also gets
    ipykernel, which a notebook's kernel needs and fragola_nb does not require.

    pip is this venv's (``pip --python``: none is installed in the new one) and compiles no
    bytecode ahead: both only save time."""
    path = _scratch() / f"venv-{extras or 'plain'}"
    run([sys.executable, "-m", "venv", "--without-pip", path])
    wheel = built().wheel
    wants = [f"{wheel}[{extras}]" if extras else str(wheel)]
    if not extras:
        wants.append("ipykernel")
    run([sys.executable, "-m", "pip", "--python", path / "bin" / "python", "install", "-q",
         "--no-compile", *wants], timeout=600)
    return Venv(path)


def kernel_specs(env: Venv) -> Path:
    """A kernels/ folder holding one kernelspec, ``fragola-wheel``, that runs ``env``'s python
    by its full path (a spec whose argv says only ``python`` would run the caller's)."""
    kernels = _scratch() / f"kernels-{env.path.name}"
    spec = kernels / KERNEL_NAME
    spec.mkdir(parents=True, exist_ok=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [str(env.python), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "fragola_nb from its wheel",
        "language": "python",
    }), encoding="utf-8")
    return kernels


class WheelKernel(Kernel):
    """The test harness's kernel, running the wheel venv's python in a directory outside the
    checkout."""

    def __init__(self, env: Venv) -> None:
        super().__init__()
        self._env = clean_env()
        self.venv = env
        self.cwd = env.outside()

    def __enter__(self) -> WheelKernel:
        specs = KernelSpecManager(kernel_dirs=[str(kernel_specs(self.venv))])
        self.km = KernelManager(kernel_name=KERNEL_NAME, kernel_spec_manager=specs)
        self.km.start_kernel(env=self._env, cwd=str(self.cwd))
        self.kc = self.km.client()
        self.kc.start_channels()
        self.kc.wait_for_ready(timeout=60)
        return self
