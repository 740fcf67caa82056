"""Binder: the pinned environment matches the project's dependency list, it has every module the
notebooks (and the package they import) use, and postBuild sets JupyterLab up as `make lab` does."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

from conftest import ROOT

sys.path.insert(0, str(ROOT / "tools"))
import binder_requirements as BR  # noqa: E402
import launch_links  # noqa: E402

LOCK = ROOT / "binder" / "requirements.txt"


def pinned() -> dict[str, str]:
    return BR.parse(LOCK.read_text())


def test_every_requirement_is_pinned_and_satisfies_pyproject():
    pins = pinned()
    assert len(pins) > 20, "binder/requirements.txt should pin the whole environment, not only the direct dependencies"
    for req in BR.direct_requirements():
        name = canonicalize_name(req.name)
        assert name in pins, f"{req.name} (pyproject.toml) is not in binder/requirements.txt"
        spec = SpecifierSet(str(req.specifier))
        assert spec.contains(pins[name].split("+")[0], prereleases=True), f"{req} but binder pins {pins[name]}"
    # torch: the CPU build (Binder has no GPU), the version the Makefile installs on CPU machines
    cpu = (ROOT / "constraints" / "cpu.txt").read_text()
    want = next(line.split("==")[1].strip() for line in cpu.splitlines() if line.startswith("torch=="))
    assert pins["torch"] == f"{want}+cpu"
    assert f"--extra-index-url {BR.TORCH_CPU_INDEX}" in LOCK.read_text().splitlines()


def test_requirements_are_generated_from_this_environment():
    """binder/requirements.txt is exactly what tools/binder_requirements.py writes from .venv: the
    closure of pyproject's dependencies + the book extra, at the installed versions (`make install`
    installs those versions, so a fresh checkout agrees)."""
    if not metadata.version("torch").endswith("+cpu"):
        pytest.skip("torch here is not the CPU build; the lock is generated from a CPU install")
    assert LOCK.read_text() == BR.render(), "stale: run .venv/bin/python tools/binder_requirements.py"


def test_lock_is_closed():
    """Every pinned package's own requirements (for Linux, Python 3.11) are pinned too."""
    pins = pinned()
    for name, version in pins.items():
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            pytest.fail(f"{name}=={version} is pinned but not installed here (make install)")
        assert dist.version == version, f"{name}: pinned {version}, installed {dist.version}"
        for line in dist.requires or []:
            req = BR.Requirement(line)
            if BR._applies(req, set()) and canonicalize_name(req.name) != "goodputlab":
                assert canonicalize_name(req.name) in pins, f"{name} requires {req}, which is not pinned"


def _imports(source: str) -> set[str]:
    """Top-level modules a piece of Python imports (IPython magics and shell lines skipped)."""
    lines = [line for line in source.splitlines() if not line.lstrip().startswith(("%", "!"))]
    tree = ast.parse("\n".join(lines))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


def _unsatisfied(modules: dict[str, str], pins: dict[str, str]) -> list[str]:
    owners = metadata.packages_distributions()
    missing = []
    for module, where in sorted(modules.items()):
        if module in sys.stdlib_module_names or module in ("goodputlab", "__future__"):
            continue
        dists = {canonicalize_name(d) for d in owners.get(module, [])}
        if not dists & set(pins):
            missing.append(f"{module} (imported in {where}; distributions {sorted(dists) or 'none installed'})")
    return missing


def test_every_notebook_import_is_in_the_binder_environment():
    modules: dict[str, str] = {}
    for nb_path in launch_links.notebooks():
        nb = json.loads(nb_path.read_text())
        for cell in nb["cells"]:
            if cell["cell_type"] == "code":
                for m in _imports("".join(cell["source"])):
                    modules.setdefault(m, nb_path.relative_to(ROOT).as_posix())
    assert "goodputlab" in modules
    assert not _unsatisfied(modules, pinned()), _unsatisfied(modules, pinned())


#: Imports of an optional extra, left out of the book's environment (Binder, `make lab`): a run that
#: needs one says in one line how to install it (tests/test_torchft.py). Module -> extra.
OPTIONAL_IMPORTS = {"torchft": "ft",  # goodputlab run --fault-tolerance torchft
                    "transformers": "test", "lightning": "test",  # goodputlab.integrations: the user's framework
                    "pandas": "test"}  # RunResult.to_pandas(): pandas when the user has it


def test_every_package_import_is_in_the_binder_environment():
    """The notebooks run the package: its own imports must be on Binder too (but an optional extra's)."""
    modules: dict[str, str] = {}
    for py in (ROOT / "goodputlab").rglob("*.py"):
        for m in _imports(py.read_text()):
            modules.setdefault(m, py.relative_to(ROOT).as_posix())
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for module, extra in OPTIONAL_IMPORTS.items():
        assert any(req.startswith(module) for req in extras[extra]), f"{module} is not in the {extra} extra"
        modules.pop(module, None)
    assert not _unsatisfied(modules, pinned()), _unsatisfied(modules, pinned())


def test_postbuild_installs_the_package_and_turns_the_news_feed_off(tmp_path):
    """Run binder/postBuild for real in a fresh virtual environment (Binder's NB_PYTHON_PREFIX is
    the environment's prefix): the package is installed from the checkout and JupyterLab's
    settings switch the news feed off, as `make lab` does."""
    venv = tmp_path / "env"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    env = {k: v for k, v in os.environ.items() if k not in ("NB_PYTHON_PREFIX", "VIRTUAL_ENV")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env['PATH']}"
    proc = subprocess.run(["bash", "binder/postBuild"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    # what `pip show` calls the editable project location: the record pip wrote (PEP 610), read here
    (record,) = venv.glob("lib/python*/site-packages/goodputlab-*.dist-info/direct_url.json")
    installed = json.loads(record.read_text())
    assert installed["dir_info"] == {"editable": True} and installed["url"] == ROOT.as_uri(), installed
    settings = venv / "share" / "jupyter" / "lab" / "settings" / "overrides.json"
    assert json.loads(settings.read_text()) == json.loads((ROOT / "binder" / "overrides.json").read_text())
    notification = json.loads(settings.read_text())["@jupyterlab/apputils-extension:notification"]
    assert notification["fetchNews"] == "false" and notification["checkForUpdates"] is False


def test_jupyterlab_reads_settings_where_postbuild_writes_them(monkeypatch):
    """JupyterLab's application settings folder is <prefix>/share/jupyter/lab/settings (the folder
    postBuild writes on Binder and the Makefile writes in .venv). ``get_app_dir`` reads the
    environment on each call: asked here without JUPYTERLAB_DIR, as a fresh JupyterLab would be."""
    from jupyterlab.commands import get_app_dir

    monkeypatch.delenv("JUPYTERLAB_DIR", raising=False)
    assert Path(get_app_dir()) == Path(sys.prefix) / "share" / "jupyter" / "lab"


def test_instructor_guide_tells_binder_users_what_to_do():
    guide = (ROOT / "labs" / "INSTRUCTOR.md").read_text()
    section = guide.split("## On Binder", 1)[1].split("\n## ", 1)[0]
    assert "make lab" in section and "labpath=" in section


def test_dockerfile_installs_binders_pins_with_a_cuda_torch(tmp_path):
    """The Dockerfile's install step, run with `pip install` replaced by a print (no Docker daemon in
    CI): every package at Binder's pin, torch at constraints/cpu.txt's version without the CPU tag
    (PyPI's Linux torch is the CUDA build), the project's dependencies all installed; the image runs
    Binder's Python and opens chapter 1; the shared-memory flag is documented where it is needed."""
    import re
    import shlex

    text = (ROOT / "Dockerfile").read_text()
    lines = text.replace("\\\n", " ").splitlines()
    install = next(line[4:] for line in lines if line.startswith("RUN ") and "binder/requirements.txt" in line)
    pinned_file = tmp_path / "pinned.txt"
    script = install.replace("/tmp/pinned.txt", shlex.quote(str(pinned_file))).replace("pip install", "echo PIP")
    out = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=ROOT, capture_output=True, text=True,
                         timeout=30)
    assert out.returncode == 0, out.stderr
    calls = [line.split()[1:] for line in out.stdout.splitlines() if line.startswith("PIP ")]
    assert len(calls) == 2, out.stdout
    pins = pinned()
    constraints = BR.parse(pinned_file.read_text())
    assert constraints == {k: v for k, v in pins.items() if k != "torch"}, "the constraints are Binder's pins less torch"
    cpu = (ROOT / "constraints" / "cpu.txt").read_text()
    want = next(line.split("==")[1].strip() for line in cpu.splitlines() if line.startswith("torch=="))
    assert calls[0][-1] == f"torch=={want}", calls[0]
    args = [a for a in calls[1] if "==" in a]
    installed = {canonicalize_name(a.split("==")[0]): a.split("==")[1] for a in args}
    project = {canonicalize_name(r.name) for r in BR.direct_requirements() if not r.marker} - {"torch"}
    assert project <= set(installed), f"the image leaves out {project - set(installed)}"
    assert all(pins[name] == version for name, version in installed.items()), installed
    # Binder's Python; chapter 1 opens; postBuild sets JupyterLab up as on Binder
    runtime = (ROOT / "binder" / "runtime.txt").read_text().strip().removeprefix("python-")
    assert re.search(rf"^FROM python:{re.escape(runtime)}-slim$", text, re.M)
    url = re.search(r"default_url=/lab/tree/(\S+?)\"", text).group(1)
    assert (ROOT / url).exists(), url
    assert "RUN bash binder/postBuild" in text
    readme = (ROOT / "README.md").read_text()
    assert "--shm-size" in text and "--shm-size" in readme


def test_binder_and_the_image_can_serve_the_dashboard():
    """Voila is pinned for Binder (and so installed in the Docker image), and there `make dashboard`
    uses the environment's own tools (GOODPUTLAB_ENV=system, set by binder/start and the Dockerfile)
    instead of building a .venv."""
    pins = (ROOT / "binder" / "requirements.txt").read_text()
    assert re.search(r"^voila==", pins, re.M)
    assert "GOODPUTLAB_ENV=system" in (ROOT / "binder" / "start").read_text()
    assert "ENV GOODPUTLAB_ENV=system" in (ROOT / "Dockerfile").read_text()
    env = {**os.environ, "GOODPUTLAB_ENV": "system"}
    dry = subprocess.run(["make", "-n", "dashboard"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert dry.returncode == 0, dry.stderr
    assert "pip install" not in dry.stdout and "-m venv" not in dry.stdout  # nothing is installed
    assert re.search(r"\S*/voila --template=goodputlab", dry.stdout) and ".venv/bin/voila" not in dry.stdout
