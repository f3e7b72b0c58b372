"""Let Sphinx read the chapters two at a time.

Reading a chapter executes it, and one core runs one notebook: the test suite's
build (``tests/conftest.py``) asks Sphinx for two worker processes so that the
book takes less wall time on a two-core machine. Two things stand in the way.

Sphinx reads serially (and warns, which the strict build turns into a failure)
unless every extension says it is safe to read in parallel. Two that
jupyter-book 1.x loads say neither way, and both are safe:

- sphinx-multitoc-numbering 0.1.3 only replaces how section numbers are assigned,
  which Sphinx does once, in the main process, after the workers' environments
  are merged;
- sphinx-jupyterbook-latex 1.0 adds nodes and transforms that act for LaTeX
  builders only, and keeps nothing in the environment.

The workers share one jupyter-cache database, and two processes creating its
tables at once fail ("table settings already exists"): the main process creates
it before they start.

And Sphinx 7.4 hands each worker a run of consecutive documents (half of them
each, for two workers): the seven chapters sort before the appendices, so one
worker would get every chapter. Handing out one document at a time instead lets
a free worker take the next chapter.
"""

from __future__ import annotations

import sphinx.builders

SAFE_UNDECLARED = ("sphinx_multitoc_numbering", "sphinx_jupyterbook_latex")


def _one_document_a_chunk(docnames, nproc, maxbatch=10):
    return [[name] for name in docnames]


def _create_execution_cache(app, env, docnames):
    from jupyter_cache import get_cache

    path = getattr(getattr(env, "mystnb_config", None), "execution_cache_path", "")
    if path:
        get_cache(path).list_cache_records()  # opening the database creates its tables


def setup(app):
    for name in SAFE_UNDECLARED:
        app.setup_extension(name)
        app.extensions[name].parallel_read_safe = True
    # The builder calls this name for reading and for writing; both are safe per page.
    sphinx.builders.make_chunks = _one_document_a_chunk
    app.connect("env-before-read-docs", _create_execution_cache)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
