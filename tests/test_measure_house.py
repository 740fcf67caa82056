"""The measuring subpackage's house rules (issue 46, item 7): it needs numpy at most (the light install is it),
imports nothing of the run engine; and no function of the whole package is over 80 lines."""

from __future__ import annotations

import ast
import subprocess
import sys

from conftest import ROOT

MAX_FUNCTION_LINES = 80
CHECKED = sorted((ROOT / "goodputlab").rglob("*.py"))


def test_no_function_of_the_package_is_over_80_lines():
    long = {}
    for path in CHECKED:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    long[f"{path.relative_to(ROOT)}:{node.name}"] = n
    assert not long, f"split these (at most {MAX_FUNCTION_LINES} lines a function): {long}"


def test_every_measuring_module_imports_without_torch_or_the_engine():
    code = ("import importlib, pkgutil, sys, goodputlab.measure as m\n"
            "for info in pkgutil.iter_modules(m.__path__):\n"
            "    importlib.import_module('goodputlab.measure.' + info.name)\n"
            "heavy = sorted({n.split('.')[0] for n in sys.modules} & {'torch', 'altair', 'ipywidgets', 'anywidget', "
            "'vl_convert', 'pandas', 'transformers', 'lightning'})\n"
            "engine = sorted(n for n in sys.modules if n.startswith('goodputlab.engine'))\n"
            "print(heavy, engine)\n")  # fmt: skip
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[] []", r.stdout
