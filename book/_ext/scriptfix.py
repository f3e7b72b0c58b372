"""Write each script tag once per page.

Sphinx 7.4 can list the same inline script twice in a page's context (fixed in
Sphinx 8.2, which jupyter-book 1.x cannot use). sphinx-thebe's inline script
declares a ``const``, so the second copy throws a SyntaxError in every reader's
console. Dropping exact duplicates, keeping the first, changes nothing else.
"""

from __future__ import annotations


def _drop_duplicate_scripts(app, pagename, templatename, context, doctree):
    seen = set()
    unique = []
    for script in context.get("script_files", []):
        key = (script.filename or "", tuple(sorted(script.attributes.items())))
        if key not in seen:
            seen.add(key)
            unique.append(script)
    context["script_files"] = unique


def setup(app):
    app.connect("html-page-context", _drop_duplicate_scripts, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
