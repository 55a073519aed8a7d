"""The ``gated-parent`` command: build, query, inspect and demo a persistent gated index.

Subcommands (``gated-parent COMMAND --help`` for each), one module each:

* ``index PATH... --index DIR``: add files, or folders of them (recursively), to the index in
  ``DIR`` (see :mod:`langchain_gated_parent.loaders` for the formats and document ids). A
  changed file replaces its old version.
* ``query "TEXT" --index DIR``: the ranked children with their fused scores, as a table or
  (``--json``) a JSON list.
* ``delete DOC_ID... --index DIR``, ``stats --index DIR``, ``verify --index DIR``.
* ``recover --index DIR``: roll back what a writer that died left unfinished (every write
  also does this first).
* ``demo``: index the bundled demo corpus and run a few example questions.
* ``serve --index DIR``: serve the retriever over HTTP with LangServe (``[serve]`` extra).

Exit status: 0 on success, 1 when the work fails (no index in the folder, an unreadable or
invalid file, stores that disagree), 2 for a usage mistake or a bad option value, 130 after
Ctrl+C and 141 (quietly) when the reader of stdout closed it early (``| head``). Every failure
is one ``gated-parent: error: ...`` line on stderr, never a traceback.
"""

from langchain_gated_parent.cli.app import build_parser, main
from langchain_gated_parent.cli.common import EXIT_FAILURE, EXIT_USAGE

__all__ = ["EXIT_FAILURE", "EXIT_USAGE", "build_parser", "main"]
