"""A worker trains eagerly: it need not import torch's compiler (TorchDynamo) to build and step its optimizer.

Torch marks some of ``torch.optim``'s code for its compiler, lazily, by importing ``torch._dynamo``
on the first call: the methods wrapped in ``torch._disable_dynamo`` (``add_param_group``, which
building an AdamW calls, ``state_dict``, ``load_state_dict``, ``zero_grad``), and every optimizer's
``step`` (``_use_grad_for_differentiable``: it sets grad mode, and calls
``torch._dynamo.graph_break()`` around the step). So every worker imported the compiler: about 2
CPU-seconds, as much again as ``import torch`` (torch 2.13 on CPU), paid by each of the hundreds of
worker launches a chapter or the test suite makes, for a compiler no worker uses (nothing in
goodputlab calls ``torch.compile``).

:func:`skip_compiler_import` gives those methods what they do in a process that does not compile:
each ``torch._disable_dynamo`` method its own function (with no frame evaluator installed, TorchDynamo's
``disable`` only calls it), and each ``step`` the same grad-mode switch around the same function,
less ``graph_break()`` (a no-op outside a compiled frame). Same calls, same numbers, same bits
(the resume tests compare ``final_state_sha256`` across launches). It is for a process that will
not compile (the workers call it first thing): it leaves alone a process that has imported the
compiler already, a class whose ``step`` an optimizer has hooked already, and a torch whose
wrappers do not have the shape read here (the compiler is then imported as before: slower, never
wrong).
"""

from __future__ import annotations

import functools
import sys


def skip_compiler_import() -> int:
    """Give ``torch.optim``'s compiler-marked methods their eager selves; how many were changed
    (0: nothing to do, or a torch this does not recognise)."""
    if "torch._dynamo" in sys.modules:  # the compiler is here (perhaps compiling): its wrappers are real
        return 0
    import torch
    import torch.optim
    from torch.optim import optimizer as optim_module

    disable = getattr(torch, "_disable_dynamo", None)
    use_grad = getattr(optim_module, "_use_grad_for_differentiable", None)
    if disable is None or use_grad is None:
        return 0
    disabled_code = disable(lambda: None).__code__  # the lazy wrapper torch puts on those methods
    step_code = use_grad(lambda self: None).__code__  # the grad-mode wrapper of every step
    changed = 0
    for cls in {torch.optim.Optimizer, *_subclasses(torch.optim.Optimizer)}:
        for name, member in list(vars(cls).items()):
            fn = getattr(member, "__wrapped__", None)
            code = getattr(member, "__code__", None)
            if fn is None or code is None:
                continue
            if code is disabled_code and not hasattr(fn, "__dynamo_disable"):
                setattr(fn, "__dynamo_disable", fn)  # what the wrapper caches on its first call, less the compiler
                changed += 1
            elif code is step_code and name == "step":
                setattr(cls, name, _eager_step(fn))
                changed += 1
    return changed


def _eager_step(step):
    """torch's ``_use_grad_for_differentiable`` less its ``torch._dynamo.graph_break()`` calls."""
    import torch

    @functools.wraps(step)
    def _use_grad(*args, **kwargs):
        self = args[0]
        prev_grad = torch.is_grad_enabled()
        try:
            torch.set_grad_enabled(self.defaults["differentiable"])
            return step(*args, **kwargs)
        finally:
            torch.set_grad_enabled(prev_grad)

    return _use_grad


def _subclasses(cls) -> list:
    found = []
    for sub in cls.__subclasses__():
        found += [sub, *_subclasses(sub)]
    return found
