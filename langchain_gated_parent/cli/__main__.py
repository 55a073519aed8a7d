"""``python -m langchain_gated_parent.cli``, the same as the ``gated-parent`` command."""

from langchain_gated_parent.cli.app import main

raise SystemExit(main())
