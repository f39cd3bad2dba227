"""The run widget (anywidget) and its static markdown fallback.

``transcript`` is importable without IPython; ``RunWidget`` needs anywidget and ipywidgets.
"""

from .transcript import RunDigest, digest, render_markdown, transcript_markdown

__all__ = ["RunDigest", "RunWidget", "digest", "render_markdown", "transcript_markdown"]


def __getattr__(name: str) -> object:
    if name == "RunWidget":
        from .run_widget import RunWidget

        return RunWidget
    raise AttributeError(name)
