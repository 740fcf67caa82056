"""The JavaScript the charts draw with offline, bundled once per version and kept on disk.

Altair's offline live charts (``alt.JupyterChart.enable_offline``) and the website's calculators
(:func:`goodputlab.charts.site_pages.vega_bundle`) need Vega, Vega-Lite and vega-embed as one script,
which vl-convert bundles on the spot: about 2 CPU seconds, paid again by every kernel that draws a
chart (a workshop's dozens of kernels, every notebook ``make test`` runs). The bundle depends only
on the versions that make it, so it is kept in a folder (:func:`folder`), one file per versions,
and made again only when one of them changes.

The folder: ``GOODPUTLAB_CACHE`` where set, else ``$XDG_CACHE_HOME/goodputlab``, else
``~/.cache/goodputlab``. Where it cannot be written the bundle is made each time, as before.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Callable

ENV = "GOODPUTLAB_CACHE"


def folder() -> Path:
    """Where bundles are kept (see the module's docstring)."""
    if os.environ.get(ENV):
        return Path(os.environ[ENV])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "goodputlab"


def kept(name: str, build: Callable[[], str], where: str | Path | None = None) -> str:
    """The text ``build()`` makes, kept in ``where`` (default :func:`folder`) as ``name``: read when
    it is there, else made and written whole (a temporary file renamed into place, so two processes
    making it at once cannot leave half of it). ``name`` must change when what ``build`` makes does."""
    path = Path(where if where is not None else folder()) / name
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError):
        pass
    text = build()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
        partial.write_text(text)
        partial.replace(path)
    except OSError:  # a read-only home: the bundle still works, made again next time
        pass
    return text


def enable_offline() -> None:
    """``alt.JupyterChart.enable_offline()``, with its bundle kept on disk (:func:`kept`).

    The bundle is what Altair's own ``enable_offline`` makes: Altair's widget source, less its
    leading imports, bundled by vl-convert for Altair's Vega-Lite version."""
    import altair as alt

    if alt.JupyterChart._is_offline:
        return
    import vl_convert as vlc
    from altair.jupyter.jupyter_chart import load_js_src
    from altair.utils._importers import vl_version_for_vl_convert

    lines = load_js_src().split("\n")
    while lines and (not lines[0].strip() or lines[0].startswith("import") or lines[0].startswith("//")):
        lines.pop(0)
    src, vl_version = "\n".join(lines), vl_version_for_vl_convert()
    key = hashlib.sha256("\0".join([src, vl_version, vlc.__version__, alt.__version__]).encode()).hexdigest()[:16]
    alt.JupyterChart._esm = kept(f"altair-jupyterchart-{key}.js", lambda: vlc.javascript_bundle(src, vl_version=vl_version))
    alt.JupyterChart._is_offline = True
