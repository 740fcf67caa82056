"""``goodputlab claim``: what a claim about goodput implies, and whether that is plausible.

    goodputlab claim --lever memory --before 85 --after 95 --gpus 8192
    goodputlab claim --lever hot-spare --before 50 --after 99 --gpus 1000 --json

The logic is :mod:`goodputlab.theory.claim` (pure); this module reads the flags (percentages of
goodput, a whole number of GPUs, billions of parameters, and what the user knows of the cluster:
``--storage-gbps`` or ``--save-s``, ``--restart-s``, ``--detect-s``) and prints the explanation, or
with ``--json`` one object with ``plausible``, ``implied`` (keys carry their units: ``storage_gbps``,
``device_mtbf_h``, ``restart_s``, ...), ``ettr`` (the two goodputs read as ETTR) and ``definitions``.
Bad input raises :class:`~goodputlab.errors.ConfigError`: the main CLI prints one line and exits with 2.
"""

from __future__ import annotations

import argparse
import json
import math

from ..errors import ConfigError
from ..theory import claim as model
from ..validate import ascii_number
from .common import UnreadableValue
from .theory_read import DEFINITIONS, definition_lines

FLAGS = {"lever": "--lever", "before": "--before", "after": "--after", "gpus": "--gpus",
         "model_params_b": "--model-params-b", "storage_gbps": "--storage-gbps", "save_s": "--save-s",
         "restart_s": "--restart-s", "detect_s": "--detect-s"}
_PERCENT = "a goodput in percent, above 1 and below 100 (85 for 85%)"

EXAMPLES = """\
examples:
  goodputlab claim --lever memory --before 85 --after 95 --gpus 8192
      "RAM-tier checkpoints took our goodput from 85% to 95% on 8,192 GPUs": what storage and
      failure rate would make that true, and are they plausible?
  goodputlab claim --lever hot-spare --before 50 --after 99 --gpus 1000 --json
      the same as JSON: plausible (true or false), implied (storage_gbps, device_mtbf_h, restart_s, ...)
  goodputlab claim --lever async --before 88 --after 94 --gpus 2048 --model-params-b 13 --save-s 90
      pinning what you know: the synchronous save before was 90 s, so only the failure rate is left,
      and the claim's two goodputs are held against each other
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``claim`` to ``subparsers``."""
    p = subparsers.add_parser(
        "claim",
        help="what a claim 'lever X took goodput from B%% to A%% on N GPUs' implies, and whether it is plausible",  # %%: argparse formats help
        description="Invert chapter 10's cluster model: the failure rate and the lever's setting under which a "
                    "claim holds, each held against published ranges.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--lever", metavar="LEVER", required=True, help=f"what changed: {', '.join(model.LEVERS)}")
    p.add_argument("--before", metavar="PERCENT", required=True, help="goodput before the change, percent")
    p.add_argument("--after", metavar="PERCENT", required=True, help="goodput after the change, percent")
    p.add_argument("--gpus", metavar="N", required=True, help="GPUs of the job")
    p.add_argument("--model-params-b", metavar="BILLIONS", default="70",
                   help="the model's parameters, billions (default 70; sets the checkpoint's size)")
    p.add_argument("--storage-gbps", metavar="GB/S", default=None,
                   help="pin the storage's aggregate bandwidth before the lever, GB/s (default: Llama 3's per GPU)")
    p.add_argument("--save-s", metavar="SECONDS", default=None,
                   help="pin a synchronous save before the lever, seconds (instead of --storage-gbps)")
    p.add_argument("--restart-s", metavar="SECONDS", default=None,
                   help="pin the cold restart (reschedule and initialise), seconds (default 300)")
    p.add_argument("--detect-s", metavar="SECONDS", default=None,
                   help="pin the time to notice a failure, seconds (default 90; for --lever detection, the detection "
                        "before it, default 600)")
    p.add_argument("--json", action="store_true", help="print one JSON object (plausible, implied, checks, reasons)")
    p.set_defaults(func=run_claim, flags=FLAGS)


def _percent(field: str, text: str) -> float:
    try:
        value = float(ascii_number(text.strip().removesuffix("%")))
    except ValueError:
        raise UnreadableValue(field, text, _PERCENT) from None
    if not (math.isfinite(value) and 1 < value < 100):
        raise ConfigError(field, text, _PERCENT)
    return value


def _read(args: argparse.Namespace) -> dict:
    """The flags' values, each checked where it was typed (one line per bad value)."""
    if args.lever not in model.LEVERS:
        raise ConfigError("lever", args.lever, "one of " + ", ".join(model.LEVERS))
    before, after = _percent("before", args.before), _percent("after", args.after)
    if after <= before:
        raise ConfigError("after", args.after, f"a goodput above --before ({args.before}): a lever that helps")
    try:
        gpus = int(ascii_number(args.gpus.strip(), whole=True))
    except ValueError:
        raise UnreadableValue("gpus", args.gpus, "a whole number of GPUs >= 1 and <= 10,000,000") from None
    if not 1 <= gpus <= 10_000_000:
        raise ConfigError("gpus", args.gpus, "a whole number of GPUs >= 1 and <= 10,000,000")
    allowed = "a number of billions of parameters > 0 and <= 100000"
    try:
        params = float(ascii_number(args.model_params_b.strip()))
    except ValueError:
        raise UnreadableValue("model_params_b", args.model_params_b, allowed) from None
    if not (math.isfinite(params) and 0.001 <= params <= 100_000):
        raise ConfigError("model_params_b", args.model_params_b, allowed)
    pins = {}
    for field, allowed_pin, positive in (("storage_gbps", "a number of GB/s > 0", True),
                                         ("save_s", "a number of seconds > 0", True),
                                         ("restart_s", "a number of seconds >= 0", False),
                                         ("detect_s", "a number of seconds >= 0", False)):
        text = getattr(args, field)
        if text is None:
            continue
        try:
            value = float(ascii_number(text.strip()))
        except ValueError:
            raise UnreadableValue(field, text, allowed_pin) from None
        if not (math.isfinite(value) and (value > 0 if positive else value >= 0)):
            raise ConfigError(field, text, allowed_pin)
        pins[field] = value
    if "storage_gbps" in pins and "save_s" in pins:
        raise ConfigError("save_s", args.save_s, "not with --storage-gbps: pin the storage or the save, not both")
    return {"lever": args.lever, "before": before / 100, "after": after / 100, "gpus": gpus, "model_params_b": params,
            "pins": model.Pins(**pins)}


def run_claim(args: argparse.Namespace) -> int:
    """Explain the claim; print the text or the JSON object. Exit 0 either way (a verdict is not an error)."""
    claim = model.explain(**_read(args))
    if args.json:
        print(json.dumps({**claim.to_dict(), "definitions": DEFINITIONS}, indent=2))
    else:
        print("\n".join(model.lines(claim)))
        for line in definition_lines():
            print(line)
    return 0
