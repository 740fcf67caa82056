"""The package's import layering, enforced: no import cycles, imports only downwards, torch only where training happens.

The graph is built with ``ast`` from every module of ``goodputlab/``: module-level and
function-level imports, absolute and relative, ``from pkg import submodule`` resolved to
the submodule, and the lazy loaders of the package ``__init__`` files
(``importlib.import_module`` of a literal name). Imports under ``if TYPE_CHECKING:``
never run and are left out. A package does not depend on its parent ``__init__``
(Python runs it first, but nothing in it is used).

The layers, lowest first (docs/ARCHITECTURE.md has the same table). A module may import
its own layer and the ones below, never one above:

====  =================  =====================================================================
 0    foundation         errors, validate, categories, safe_io, procs, machine (pure)
 1    models             theory.*, training.workload, checkpoints.registry, the pure parts of
                         efficiency and serving (numpy at most)
 2    run records        measure.* (the recorder, the event log, the ledger, the report: what measures any
                         job), engine.config, recovery's booking, distributed's pure rules (pure)
 3    training           training.*, pipeline.*, checkpoints.*, engine.worker, the efficiency
                         sweep, serving's model side: torch lives here
 4    launching          engine.supervisor, launch, supervision, torchrun_supervision, emulated_supervision, api, run_dir,
                         scratch, interrupts; serving.cluster
 5    experiments        experiments.*: real runs set beside the theory
 6    book               charts.*, widgets.*, labs.*, notebook, prose, captions, self_checks
 7    command line       cli.*
 8    the public API     goodputlab (its __init__ loads names lazily)
====  =================  =====================================================================

Two further rules: charts, widgets and the command line are imported only by the book
layer, the command line and the public API; and ``torch`` is imported only in
:data:`TORCH_MODULES`. There is no exception: no edge of the whole graph goes up, so no cycle
runs through the layers either (a ``RunResult`` draws through a small protocol,
``engine.api.RunCharts``, that the public API fills with ``charts.runs``).
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from conftest import ROOT

PACKAGE = ROOT / "goodputlab"

#: (prefix, layer): a module belongs to the layer of the longest prefix that matches its name.
LAYERS: tuple[tuple[str, int], ...] = (
    # 0 foundation: pure helpers every layer may use
    ("goodputlab.errors", 0),
    ("goodputlab.validate", 0),
    ("goodputlab.categories", 0),
    ("goodputlab.safe_io", 0),
    ("goodputlab.procs", 0),
    ("goodputlab.machine", 0),
    ("goodputlab.recovery.control", 0),
    # 1 models: pure, numpy at most
    ("goodputlab.theory", 1),
    ("goodputlab.training.workload", 1),
    ("goodputlab.checkpoints.registry", 1),
    ("goodputlab.efficiency.noise", 1),
    ("goodputlab.efficiency.sweep_config", 1),
    ("goodputlab.efficiency.analysis", 1),
    ("goodputlab.serving.slo", 1),
    ("goodputlab.serving.search", 1),
    ("goodputlab.serving.workload", 1),
    ("goodputlab.serving.analysis", 1),
    ("goodputlab.serving.config", 1),
    # 2 run records: what a run writes and reads, pure
    ("goodputlab.measure", 2),  # measuring any job: recorder, event log, ledger, report (torch-free: the light install)
    ("goodputlab.engine.config", 2),
    ("goodputlab.distributed.launch", 2),  # the torchrun command line and the rules of a distributed run
    ("goodputlab.distributed.binding", 2),  # where a distributed run's sockets listen
    ("goodputlab.distributed.straggler", 2),
    ("goodputlab.distributed.joblog", 2),  # the job's event log made from its ranks' logs
    ("goodputlab.distributed.replica_ledger", 2),  # an in-job recovery run's books from its replicas' logs
    ("goodputlab.recovery.modes", 2),
    ("goodputlab.recovery.booking", 2),
    ("goodputlab.recovery.watchdog", 2),
    ("goodputlab.recovery.omit", 2),
    ("goodputlab.recovery.resume", 2),
    # 3 training: the worker process and what runs a model (torch lives here)
    ("goodputlab.training", 3),
    ("goodputlab.pipeline", 3),
    ("goodputlab.checkpoints", 3),
    ("goodputlab.engine.worker", 3),
    ("goodputlab.distributed", 3),  # ranks, batch shards, DDP/FSDP, sharded checkpoints, the rank's worker
    ("goodputlab.efficiency", 3),  # the sweep trains; the package offers it (loaded on first use)
    ("goodputlab.serving.kv", 3),
    ("goodputlab.serving.engine", 3),
    ("goodputlab.serving.worker", 3),
    ("goodputlab.integrations", 3),  # callbacks in a framework's training loop (the framework imports torch)
    ("goodputlab.integrations.hooks", 2),  # a hook's time as the recorder's blocks (pure)
    ("goodputlab.recovery", 3),  # the worker's side: injection, the loop's hooks, a full disk, the standby
    # 4 launching: start and watch processes
    ("goodputlab.engine", 4),
    ("goodputlab.distributed.launcher", 4),  # torchrun and its ranks, as the supervisor sees them
    ("goodputlab.distributed.netns", 4),  # an emulated cluster's namespaces, links and their processes
    ("goodputlab.distributed.ft_nodes", 4),  # where a torchft run's lighthouse and replica groups live and listen
    ("goodputlab.serving", 4),  # the launcher, and the package that offers it (loaded on first use)
    ("goodputlab.recovery.injector", 4),
    ("goodputlab.recovery.spare", 4),
    ("goodputlab.recovery.forkserver", 4),  # the supervisor's side of the fork server of standbys
    # 5 experiments: real runs beside the theory
    ("goodputlab.experiments", 5),
    # 6 the book
    ("goodputlab.charts", 6),
    ("goodputlab.widgets", 6),
    ("goodputlab.labs", 6),
    ("goodputlab.notebook", 6),
    ("goodputlab.prose", 6),
    ("goodputlab.captions", 6),  # numbered figures
    ("goodputlab.self_checks", 6),  # the chapters' self-check questions
    # 7 the command line
    ("goodputlab.cli", 7),
)
PURE_LAYERS = {0, 1, 2}

#: Where ``import torch`` may appear: where training happens (the worker's objects, its
#: input pipeline, checkpoint state, and the stall benchmark, which trains a step).
TORCH_MODULES = {
    "goodputlab.training.model",
    "goodputlab.training.objects",
    "goodputlab.training.eager",
    "goodputlab.pipeline.loader",
    "goodputlab.pipeline.prefetch",
    "goodputlab.checkpoints.snapshot",
    "goodputlab.checkpoints.state",
    "goodputlab.checkpoints.store",
    "goodputlab.checkpoints.dcp_layout",
    "goodputlab.checkpoints.dcp_sharded_layout",
    "goodputlab.checkpoints.safe_unpickle",
    "goodputlab.checkpoints.strategies.dcp",
    "goodputlab.checkpoints.ram_tier",
    "goodputlab.engine.worker",
    "goodputlab.distributed.ranks",
    "goodputlab.distributed.parallel",
    "goodputlab.distributed.sharded",
    "goodputlab.distributed.worker",
    "goodputlab.distributed.ft_worker",
    "goodputlab.distributed.warm_agent",  # a torchrun agent started ahead of time: imports torch's launcher
    "goodputlab.distributed.node_agent",  # an emulated node's torchrun agent, its rendezvous store bound first
    "goodputlab.experiments.checkpoint_stall",
    "goodputlab.efficiency.sweep",
    "goodputlab.serving.kv",
    "goodputlab.serving.engine",
    "goodputlab.serving.worker",
}

#: Prefixes of the notebook- and terminal-facing layers, and who may import them.
FACING = ("goodputlab.charts", "goodputlab.widgets", "goodputlab.cli")
FACING_USERS = ("goodputlab.charts", "goodputlab.widgets", "goodputlab.labs", "goodputlab.notebook", "goodputlab.cli")

#: Packages that load their submodules by a name known only at run time (the strategies, by the
#: name a run asks for): they may import any of their submodules, and the graph says so.
DYNAMIC_LOADERS = ("goodputlab.checkpoints.strategies",)



def _is_relevant(name: str) -> bool:
    return name == "goodputlab" or name.startswith("goodputlab.") or name == "torch" or name.startswith("torch.")


def module_names() -> dict[str, Path]:
    """Every module of the package: dotted name -> file."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


MODULES = module_names()


def _resolve(module: str, is_package: bool, level: int, name: str | None) -> str:
    """The absolute name of a relative import ``from <level dots><name> import ...`` in ``module``."""
    if level == 0:
        return name or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join(base + ([name] if name else []))


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    """ids of the nodes inside ``if TYPE_CHECKING:`` blocks."""
    skipped = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                skipped.update(id(n) for n in ast.walk(child))
    return skipped


def imports_of(module: str, tree: ast.AST | None = None) -> set[str]:
    """What ``module`` imports (package modules and torch), at any level of its code."""
    path = MODULES[module]
    is_package = path.name == "__init__.py"
    tree = tree if tree is not None else ast.parse(path.read_text(), str(path))
    skipped = _type_checking_nodes(tree)
    targets: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(module, is_package, node.level, node.module)
            for alias in node.names:
                candidate = f"{base}.{alias.name}"
                targets.add(candidate if candidate in MODULES else base)
    if "importlib" in path.read_text():
        # lazy loaders: every string literal that names a module of this package, relative or not
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value:
                text = node.value
                if text.startswith("."):
                    name = _resolve(module, is_package, len(text) - len(text.lstrip(".")), text.lstrip("."))
                else:
                    name = f"{module}.{text}"
                if name in MODULES and name != module:
                    targets.add(name)
    if module in DYNAMIC_LOADERS:
        targets.update(m for m in MODULES if m.rsplit(".", 1)[0] == module)
    targets = {t for t in targets if _is_relevant(t)}
    targets = {"torch" if t.startswith("torch") else t for t in targets}
    # importing a module runs its parent packages first, but a package is not a dependency of its children
    return {t for t in targets if t != module and not module.startswith(t + ".")}


GRAPH: dict[str, set[str]] = {m: imports_of(m) for m in MODULES}


def layer_of(module: str) -> int:
    if module == "goodputlab":
        return 8  # the public API: its __init__ loads names lazily
    matches = [(len(prefix), layer) for prefix, layer in LAYERS if module == prefix or module.startswith(prefix + ".")]
    if not matches:
        raise AssertionError(f"{module} has no layer: add it to LAYERS (and to docs/ARCHITECTURE.md)")
    return max(matches)[1]


def _edges(include_torch: bool = False):
    for source, targets in GRAPH.items():
        for target in sorted(targets):
            if target == "torch" and not include_torch:
                continue
            yield source, target


def test_every_module_has_a_layer():
    for module in MODULES:
        layer_of(module)


def test_the_graph_sees_module_and_function_level_imports():
    # cheap sanity checks that the parser finds what is there
    assert "goodputlab.theory.closed_forms" in GRAPH["goodputlab.theory"]  # re-exports
    assert "goodputlab.engine.api" in GRAPH["goodputlab.experiments.interval_sweep"]  # a function-level import
    assert "torch" in GRAPH["goodputlab.training.model"]
    assert "goodputlab.theory.data_stall" in GRAPH["goodputlab.pipeline.loader"]  # a relative import of a submodule
    assert "goodputlab.engine.api" in GRAPH["goodputlab"]  # the public API's lazy loader


def test_no_import_cycles():
    graph = defaultdict(set)
    for source, target in _edges():
        graph[source].add(target)
    state: dict[str, int] = {}  # 1: on the stack, 2: done
    cycles = []

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, stack)
        stack.pop()
        state[node] = 2

    for node in sorted(MODULES):
        if node not in state:
            visit(node, [])
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_imports_go_only_downwards():
    wrong = [f"{s} (layer {layer_of(s)}) imports {t} (layer {layer_of(t)})" for s, t in _edges() if layer_of(t) > layer_of(s)]
    assert not wrong, "imports against the layering:\n" + "\n".join(wrong)


def test_the_layers_form_no_cycle():
    """The whole graph folded onto its layers: every edge stays in its layer or goes down, with no
    exception (a method that draws included), so no chain of imports comes back up."""
    layer_edges = {(layer_of(s), layer_of(t)) for s, t in _edges() if layer_of(s) != layer_of(t)}
    assert all(low < high for high, low in layer_edges), sorted(layer_edges)


@pytest.fixture(scope="module")
def fresh_import():
    """One fresh interpreter for the import checks below, each stage printing that it passed:
    ``import goodputlab`` loads nothing; a formula loads its theory only; a recorded run names its
    charts without loading them; every public name resolves without torch."""
    code = (
        "import sys, goodputlab as gl\n"
        "loaded = sorted(m for m in sys.modules if m.startswith('goodputlab.'))\n"
        "assert loaded == [], loaded\n"
        "gl.daly_interval(60, 10000)\n"
        "assert 'goodputlab.theory' in sys.modules and 'goodputlab.engine.api' not in sys.modules\n"
        "print('nothing until asked', flush=True)\n"
        "name = next(iter(gl.recorded_runs()))\n"  # handing out runs names the charts that draw them
        "r = gl.recorded_run(name)\n"
        "assert 'goodputlab.charts' not in sys.modules  # named, not loaded: the first chart loads them\n"
        "assert r.timeline_chart().to_dict() and r.breakdown_chart().to_dict() and r.loss_chart().to_dict()\n"
        "assert 'goodputlab.charts.runs' in sys.modules\n"
        # Altair's jsonschema without the grammar jsonschema 4.25 builds at import (pyproject.toml)
        "assert 'rfc3987_syntax' not in sys.modules and 'lark' not in sys.modules\n"
        "print('a run draws', flush=True)\n"
        "for name in gl.__all__: getattr(gl, name)\n"
        "assert 'torch' not in sys.modules\n"
        "print('every name without torch', flush=True)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    return r, r.stdout.splitlines()


def test_a_run_result_draws_through_the_protocol_the_public_api_fills(fresh_import):
    r, passed = fresh_import
    assert "a run draws" in passed, r.stderr
    alone = (  # the engine alone names no charts: a clear error, not an import of the book layer
        "from goodputlab.engine.recorded import recorded_run, recorded_runs\n"
        "recorded_run(next(iter(recorded_runs()))).timeline_chart()\n"
    )
    r = subprocess.run([sys.executable, "-c", alone], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode != 0 and "draws with goodputlab.charts" in r.stderr, r.stderr


def test_charts_widgets_and_the_cli_are_imported_only_by_what_faces_the_reader():
    wrong = [f"{s} imports {t}" for s, t in _edges() if t.startswith(FACING) and not (s == "goodputlab" or s.startswith(FACING_USERS))]
    assert not wrong, "\n".join(wrong)


def test_torch_only_where_training_happens():
    wrong = [s for s, t in _edges(include_torch=True) if t == "torch" and s not in TORCH_MODULES]
    assert not wrong, f"these modules import torch but train nothing: {wrong}"
    pure = [m for m in MODULES if layer_of(m) in PURE_LAYERS and "torch" in GRAPH[m]]
    assert not pure, pure


def test_every_package_folder_is_a_package():
    """A folder of modules without ``__init__.py`` is a namespace package: it imports from a checkout,
    but the installed package (``packages.find``) leaves it out."""
    folders = {p.parent for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts}
    missing = sorted(str(f.relative_to(ROOT)) for f in folders if not (f / "__init__.py").exists())
    assert not missing, missing


@pytest.mark.parametrize(
    "module",
    ["goodputlab", "goodputlab.theory", "goodputlab.validate", "goodputlab.engine.config", "goodputlab.measure.ledger",
     "goodputlab.measure.report", "goodputlab.experiments", "goodputlab.cli"],
)
def test_importing_stays_torch_free(module):
    code = (
        f"import sys, goodputlab, {module}\n"
        "assert 'torch' not in sys.modules, sorted(m for m in sys.modules if m.startswith('torch'))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert r.returncode == 0, r.stderr


def test_import_goodputlab_loads_nothing_until_asked(fresh_import):
    r, passed = fresh_import
    assert r.returncode == 0, r.stderr
    assert passed == ["nothing until asked", "a run draws", "every name without torch"], r.stderr


# --- the house: small modules, every one on the map ------------------------------------------------
MAX_MODULE_LINES = 500
ARCHITECTURE = ROOT / "docs" / "ARCHITECTURE.md"


def test_no_module_is_over_500_lines():
    long = {str(p.relative_to(ROOT)): n for p in MODULES.values() if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES}
    assert not long, f"split these along their seams (at most {MAX_MODULE_LINES} lines a module): {long}"


def _named_in_the_map(relative: str, rows: list[str]) -> bool:
    """``relative`` (``engine/config.py``) is named when a module-map row gives its path, or gives a
    sibling's path first and then its file name (`` `serving/kv.py`, `engine.py` ``); ``labNN`` names
    the labs' numbered modules."""
    folder, _, name = relative.rpartition("/")
    for row in rows:
        first = row.split("|")[1]
        if f"`{relative}`" in first:
            return True
        if folder and f"`{folder}/" in first and f"`{name}`" in first:
            return True
        if re.fullmatch(r"labs/lab\d\d\.py", relative) and "`labs/labNN.py`" in first:
            return True
    return False


def test_every_module_is_named_in_the_architecture_map():
    """docs/ARCHITECTURE.md's module map has a row for every module (a package's ``__init__`` is
    described by its own docstring, and the map's row for the package's modules)."""
    text = ARCHITECTURE.read_text()
    rows = [line for line in text[text.index("## Module map"):].splitlines() if line.startswith("| `")]
    modules = [str(p.relative_to(PACKAGE)) for p in MODULES.values()]
    missing = [m for m in modules if not m.endswith("/__init__.py") and not _named_in_the_map(m, rows)]
    assert not missing, f"give these a row in docs/ARCHITECTURE.md's module map: {missing}"
    assert not _named_in_the_map("engine/no_such_module.py", rows)  # the check can fail
