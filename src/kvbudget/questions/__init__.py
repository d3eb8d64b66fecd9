"""Questions asked of any engine, each written once against the engine interface (``engines/base.py``):
``fit`` (and ``explain``, a fit of a pasted command), ``check`` (a start-up log), ``compare``."""
