"""Serve the retriever with LangServe and call it with ``RemoteRunnable`` and plain HTTP.

Starts the server on a free 127.0.0.1 port in a background thread, calls invoke, batch and
stream, changes ``alpha`` and ``k`` for one request through ``config``, shows that a bad request
is a 422 naming the problem (and the server goes on), then stops the server.

For a long-running server use the CLI instead: ``gated-parent serve --index DIR --port 8000``
(playground at http://127.0.0.1:8000/retriever/playground/).

Run:
    python cookbook/langserve_server_client.py [--index DIR]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
from langserve import RemoteRunnable

from langchain_gated_parent import GatedParentIndex, keys
from langchain_gated_parent.demo import demo_documents
from langchain_gated_parent.server import RETRIEVER_PATH, create_app, running_server

if TYPE_CHECKING:
    from langchain_core.documents import Document

QUESTION = "What is the GhostVLAD approach?"


def show(docs: list[Document]) -> None:
    for doc in docs:
        meta = doc.metadata
        path = " > ".join([meta[keys.DOC_ID], *meta[keys.SECTION_PATH]])
        print(
            f"  {meta[keys.SCORE]:.3f} (s_p {meta[keys.PARENT_SCORE]:.3f}, "
            f"s_c {meta[keys.CHILD_SCORE]:.3f})  {path}"
        )


def run(directory: Path) -> None:
    index = GatedParentIndex(directory=directory)
    index.add_documents(demo_documents())
    app = create_app(index.as_retriever(k=3))

    with running_server(app) as url:
        print(f"server: {url}{RETRIEVER_PATH}/  (health: {httpx.get(f'{url}/health').json()})\n")
        remote: RemoteRunnable[str, list[Document]] = RemoteRunnable(
            f"{url}{RETRIEVER_PATH}/", timeout=60
        )

        print(f"invoke {QUESTION!r}:")
        show(remote.invoke(QUESTION))

        print("\nthe same request with alpha 1.0 (score = s_p) and k 2, set by the client:")
        show(remote.invoke(QUESTION, config={"configurable": {"alpha": 1.0, "k": 2}}))

        print("\nbatch of two questions (one embedding call on the server):")
        for docs in remote.batch([QUESTION, "48 h RNA extraction"]):
            show(docs[:1])

        print("\nstream:")
        for chunk in remote.stream("What user variations have been tested?"):
            show(chunk)

        print("\nplain HTTP, a bad request (alpha 3) and then a good one:")
        with httpx.Client(base_url=url, timeout=60) as client:
            bad = client.post(
                f"{RETRIEVER_PATH}/invoke",
                json={"input": QUESTION, "config": {"configurable": {"alpha": 3}}},
            )
            error = bad.json()["detail"][0]  # pydantic lists one error per accepted type
            print(f"  {bad.status_code}: {error['msg']} (at {error['loc']})")
            good = client.post(f"{RETRIEVER_PATH}/invoke", json={"input": QUESTION})
            print(f"  {good.status_code}: {len(good.json()['output'])} results")
    print("\nserver stopped")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--index", type=Path, help="index folder (default: a temporary one)")
    args = parser.parse_args()
    if args.index is not None:
        run(args.index)
        return
    with tempfile.TemporaryDirectory(prefix="gated-serve-") as tmp:
        run(Path(tmp))


if __name__ == "__main__":
    main()
