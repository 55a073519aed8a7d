"""Serve one index to several tenants: API keys, a filter the client cannot widen, bounds.

Tags the demo documents with a ``tenant`` (two labs), writes an API keys file
(``{"api key": "tenant"}``) and serves the index with ``tenant_key="tenant"``: every search is
confined to the caller's tenant, whatever filter the client sends. Then shows a request without
a key (401), with a wrong key (403), a hostile filter that only narrows, and a request over a
bound (``k`` above ``max_k``: 422 naming it). The server stops at the end.

The same server from the command line, with two worker processes:

    gated-parent serve --index DIR --tenant-key tenant --api-keys api-keys.json --workers 2

Run:
    python cookbook/serve_tenants.py [--index DIR]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
from langserve import RemoteRunnable

from langchain_gated_parent import GatedParentIndex, keys
from langchain_gated_parent.demo import demo_documents
from langchain_gated_parent.server import RETRIEVER_PATH, create_app, running_server
from langchain_gated_parent.server_settings import ServerSettings

if TYPE_CHECKING:
    from langchain_core.documents import Document
    from langchain_core.runnables import RunnableConfig

QUESTION = "Which dataset do they use?"
API_KEYS = {"key-of-speech-lab": "speech-lab", "key-of-text-lab": "text-lab"}
"""Example keys; make real ones long and random (``secrets.token_urlsafe()``)."""
SPEECH = {"2002.01320", "2002.01664"}
"""The speech papers of the demo corpus go to one lab, every other document to the other."""


def run(directory: Path) -> None:
    documents = demo_documents()
    for doc in documents:
        doc.metadata["tenant"] = "speech-lab" if doc.metadata[keys.DOC_ID] in SPEECH else "text-lab"
    index = GatedParentIndex(directory=directory / "index")
    index.add_documents(documents)
    key_file = directory / "api-keys.json"
    key_file.write_text(json.dumps(API_KEYS))
    settings = ServerSettings(tenant_key="tenant", api_keys_file=key_file, max_k=10)
    app = create_app(index.as_retriever(k=4), settings)

    with running_server(app) as url:
        print(f"server: {url}{RETRIEVER_PATH}/ (tenant_key 'tenant', {len(API_KEYS)} API keys)")
        foreign = 0
        for key, tenant in API_KEYS.items():
            remote: RemoteRunnable[str, list[Document]] = RemoteRunnable(
                f"{url}{RETRIEVER_PATH}/", headers={"X-API-Key": key}, timeout=60
            )
            docs = remote.invoke(QUESTION)
            seen = sorted({doc.metadata[keys.DOC_ID] for doc in docs})
            print(f"\n{tenant} asks {QUESTION!r}: documents {', '.join(seen)}")
            # a hostile filter: "anything that is not mine" -- $and-ed with the tenant's own
            hostile: RunnableConfig = {"configurable": {"filter": {"tenant": {"$ne": tenant}}}}
            stolen = remote.invoke(QUESTION, config=hostile)
            print(f"{tenant} with {hostile['configurable']}: {len(stolen)} results")
            foreign += sum(d.metadata["tenant"] != tenant for d in [*docs, *stolen])
        print(f"\ndocuments of other tenants returned: {foreign}")

        with httpx.Client(base_url=url, timeout=60) as client:
            body = {"input": QUESTION}
            no_key = client.post(f"{RETRIEVER_PATH}/invoke", json=body)
            print(f"\nno key: {no_key.status_code} {no_key.json()['detail']}")
            wrong = client.post(f"{RETRIEVER_PATH}/invoke", json=body, headers={"X-API-Key": "x"})
            print(f"wrong key: {wrong.status_code} {wrong.json()['detail']}")
            too_many = client.post(
                f"{RETRIEVER_PATH}/invoke",
                json={**body, "config": {"configurable": {"k": 500}}},
                headers={"X-API-Key": "key-of-text-lab"},
            )
            print(f"k 500: {too_many.status_code} {too_many.json()['detail']}")
    print("\nserver stopped")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--index", type=Path, help="working folder (default: a temporary one)")
    args = parser.parse_args()
    if args.index is not None:
        args.index.mkdir(parents=True, exist_ok=True)
        run(args.index)
        return
    with tempfile.TemporaryDirectory(prefix="gated-tenants-") as tmp:
        run(Path(tmp))


if __name__ == "__main__":
    main()
