"""PDFs and LangChain loaders into a real persistent index with the bundled embeddings.

The PDFs are real files the tests write (reportlab, pypdf) plus a typeset paper of the QASPER
PDF set; LangChain's own ``PyPDFLoader`` reads them page by page, the package's loader whole.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from langchain_core.documents import Document

from langchain_gated_parent import GatedParentIndex, keys
from langchain_gated_parent.loaders import GatedParentLoader
from langchain_gated_parent.structure import StructureWarning
from tests.integration_tests import pdfs

pytestmark = pytest.mark.slow

TYPESET = Path(__file__).resolve().parents[3] / "shared/data/qasper-pdf/pdf/1503.00841.pdf"
PAGE_PHRASES = (
    "knockdown of GAPDH slowed glycolysis",
    "transfected with 20 nM siRNA",
    "comet passing behind the moon",
)
"""One sentence of each page of :data:`pdfs.PAGES`, as a query."""


def pypdf_pages(path: Path) -> list[Document]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from langchain_community.document_loaders import PyPDFLoader

    return PyPDFLoader(str(path)).load()


def assert_every_page_retrievable(index: GatedParentIndex, doc_id: str) -> None:
    retriever = index.as_retriever(k=3)
    for phrase in PAGE_PHRASES:
        found = retriever.invoke(phrase, filter={keys.DOC_ID: doc_id})
        assert any(phrase in d.page_content for d in found), (phrase, found)
    assert index.stats()["documents"] == 1
    assert index.verify().ok


@pytest.fixture
def paper(tmp_path: Path) -> Path:
    return pdfs.write_pdf(tmp_path / "paper.pdf")


def test_pypdf_pages_one_by_one_keep_every_page(tmp_path, paper, embeddings):
    pages = pypdf_pages(paper)
    assert [p.metadata["page"] for p in pages] == [0, 1, 2]
    directory = tmp_path / "index"
    for page in pages:  # a fresh process-like open for every page
        report = GatedParentIndex(embeddings, directory=directory).add_documents([page])
        assert report.documents == 1
    index = GatedParentIndex(embeddings, directory=directory)
    assert_every_page_retrievable(index, str(paper))
    again = index.add_documents([pages[1]])  # a page already merged changes nothing
    assert (again.documents, again.unchanged) == (0, 1)


def test_a_later_page_embeds_only_the_texts_it_brings(tmp_path, paper, embeddings, monkeypatch):
    pages = pypdf_pages(paper)
    index = GatedParentIndex(embeddings, directory=tmp_path / "index")
    first = index.add_documents(pages[:2])
    asked: list[str] = []
    model = type(embeddings)
    real = model.embed_documents

    def recorded(self: object, texts: list[str]) -> list[list[float]]:
        asked.extend(texts)
        return real(self, texts)

    monkeypatch.setattr(model, "embed_documents", recorded)  # the real model, its calls listed
    later = index.add_documents([pages[2]])
    monkeypatch.undo()

    assert later.documents == 1
    assert later.reused > 0
    assert later.reused + len(asked) == later.children  # each child either kept or embedded
    assert len(asked) < later.children - first.children + 2  # the new page's, and its seam
    assert any(PAGE_PHRASES[2] in text for text in asked)
    assert not any(PAGE_PHRASES[0] in text for text in asked)
    assert_every_page_retrievable(index, str(paper))


def test_pypdf_pages_in_one_batch_keep_every_page(tmp_path, paper, embeddings):
    index = GatedParentIndex(embeddings, directory=tmp_path / "index")
    report = index.add_documents(pypdf_pages(paper))
    assert (report.documents, report.unchanged) == (1, 0)
    assert_every_page_retrievable(index, str(paper))


def test_a_later_page_merges_with_the_indexed_ones_in_page_order(tmp_path, paper, embeddings):
    pages = pypdf_pages(paper)
    index = GatedParentIndex(embeddings, directory=tmp_path / "index")
    index.add_documents([pages[2], pages[0]])
    index.add_documents([pages[1]])
    parents = index.as_retriever(k=3).invoke("siRNA glycolysis comet", return_parents=True)
    text = "\n".join(sorted((p.page_content for p in parents), key=len))
    assert all(phrase in text for phrase in PAGE_PHRASES)
    first = min(parents, key=lambda p: p.metadata[keys.START_INDEX])
    assert first.page_content.startswith("Knockdown notes\n1 Introduction")  # page 0 first
    assert index.delete([str(paper)]) == 1
    index.add_documents([pages[1]])  # a deleted document's pages are not resurrected
    found = index.as_retriever(k=3).invoke(PAGE_PHRASES[0])
    assert not any(PAGE_PHRASES[0] in d.page_content for d in found)


def test_loader_format_metadata_passes_through(fresh_index):
    document = Document(
        page_content="# Methods\n\nHeLa cells were transfected with siRNA against GAPDH.",
        metadata={"doc_id": "pymupdf", "format": "PDF 1.7", "start_index": 7, "level": "x"},
    )
    fresh_index.add_documents([document])
    retriever = fresh_index.as_retriever(k=2)
    found = retriever.invoke("siRNA transfection", filter={"format": "PDF 1.7"})
    assert found
    top = found[0]
    assert top.metadata["format"] == "PDF 1.7"
    assert top.metadata["start_index"] == 7  # the loader's own key, not overwritten
    assert top.metadata[keys.SECTION_PATH] == ["Methods"]
    assert top.metadata[keys.START_INDEX] == document.page_content.index("HeLa")


def test_gated_loader_reads_a_pdf_into_its_sections(paper, fresh_index):
    (document,) = GatedParentLoader(paper).lazy_load()
    assert document.metadata[keys.FORMAT] == "markdown"
    assert document.metadata["total_pages"] == 3
    starts = document.metadata[keys.PAGE_STARTS]
    assert len(starts) == 3
    assert document.page_content[starts[2] :].lstrip("# ").startswith("3 Results")
    fresh_index.add_documents([document])
    top = fresh_index.as_retriever(k=1).invoke("comet behind the moon")[0]
    assert top.metadata[keys.SECTION_PATH] == ["3 Results"]


def test_a_long_document_without_headings_warns_with_the_cause(fresh_index):
    flat = " ".join(f"Sentence {n} of a page whose markup a loader removed." for n in range(150))
    with pytest.warns(StructureWarning, match="BSHTMLLoader.*load the raw file"):
        fresh_index.add_documents([Document(flat, metadata={"doc_id": "stripped"})])
    with warnings.catch_warnings():
        warnings.simplefilter("error", StructureWarning)
        fresh_index.add_documents([Document(f"# Part\n\n{flat}", metadata={"doc_id": "ok"})])


# ---------------------------------------------------------------------------------- the CLI
def gated_parent(*argv):
    result = subprocess.run(
        [sys.executable, "-m", "langchain_gated_parent.cli", *map(str, argv)],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
        timeout=600,
        check=False,
    )
    assert "Traceback" not in result.stderr, result.stderr
    return result


def test_bad_pdfs_are_named_and_the_rest_of_the_batch_is_indexed(tmp_path, paper, embeddings):
    directory = tmp_path / "index"
    earlier = tmp_path / "earlier.md"
    earlier.write_text("# Storage\n\nThe freezer at minus eighty keeps the RNA samples.\n")
    assert gated_parent("index", earlier, "--index", directory).returncode == 0
    batch = tmp_path / "batch"
    batch.mkdir()
    pdfs.write_pdf(batch / "good.pdf")
    pdfs.write_encrypted_pdf(batch / "locked.pdf", paper)
    pdfs.write_image_only_pdf(batch / "scan.pdf")
    pdfs.write_truncated_pdf(batch / "cut.pdf", paper)
    pdfs.write_not_a_pdf(batch / "login.pdf")
    result = gated_parent("index", batch, "--index", directory)
    assert result.returncode == 1
    lines = result.stderr.splitlines()
    expected = {
        "cut.pdf": "truncated",
        "locked.pdf": "password",
        "login.pdf": "not a PDF",
        "scan.pdf": "run OCR first",
    }
    assert len(lines) == len(expected), result.stderr
    for line, (name, fix) in zip(sorted(lines), sorted(expected.items()), strict=True):
        assert line.startswith(f"gated-parent: error: {batch / name}: "), line
        assert fix in line, line
    assert result.stdout.startswith("indexed 1 documents (1 new or changed"), result.stdout
    index = GatedParentIndex(embeddings, directory=directory)
    assert index.stats()["documents"] == 2
    assert index.verify().ok
    retriever = index.as_retriever(k=1)
    assert "freezer" in retriever.invoke("where are the RNA samples kept")[0].page_content
    assert "comet" in retriever.invoke("comet passing behind the moon")[0].page_content


def test_an_encrypted_or_empty_pdf_gets_the_fix_the_cli_offers(tmp_path, paper):
    batch = tmp_path / "batch"
    batch.mkdir()
    pdfs.write_encrypted_pdf(batch / "locked.pdf", paper)
    (batch / "empty.pdf").write_bytes(b"")
    result = gated_parent("index", batch, "--index", tmp_path / "index")
    assert result.returncode == 1
    assert result.stdout == ""
    empty, locked = sorted(result.stderr.splitlines())
    assert empty == (
        f"gated-parent: error: {batch / 'empty.pdf'}: empty (0 bytes); download it again or "
        "leave it out"
    )
    assert locked == (  # the CLI has no password option: the one fix is to decrypt the file
        f"gated-parent: error: {batch / 'locked.pdf'}: it is encrypted; decrypt it first with "
        "its password: qpdf --password=PASSWORD --decrypt locked.pdf decrypted.pdf"
    )


def test_sections_json_prints_the_tree(tmp_path, paper):
    result = gated_parent("sections", paper, TYPESET, "--json")
    assert result.returncode == 0, result.stderr
    made, typeset = json.loads(result.stdout)
    assert made["doc_id"] == "paper.pdf"
    assert made["pages"] == 3
    assert made["warning"] is None
    headed = [s for s in made["sections"] if s["level"]]
    assert [(s["path"], s["level"], s["page"]) for s in headed] == [
        (["1 Introduction"], 1, 1),
        (["2 Methods"], 1, 2),
        (["3 Results"], 1, 3),
    ]
    assert all(s["start"] < s["end"] for s in made["sections"])
    assert [s["start"] for s in headed] == sorted(s["start"] for s in headed)
    assert typeset["title"] == "Robustly Leveraging Prior Knowledge in Text Classification"
    titles = [s["path"][-1] for s in typeset["sections"] if s["path"]]
    assert titles[:2] == ["Abstract", "Introduction"]
    pages = [s["page"] for s in typeset["sections"]]
    assert pages == sorted(pages)
    assert pages[-1] == typeset["pages"] or pages[-1] == typeset["pages"] - 1
    text = gated_parent("sections", paper)
    assert text.stdout.splitlines()[0] == "paper.pdf (Knockdown notes): 3 sections, 3 pages"


def test_an_index_with_the_old_unprefixed_keys_is_refused(tmp_path, embeddings):
    from langchain_gated_parent.formats import FORMAT_VERSION

    directory = tmp_path / "index"
    index = GatedParentIndex(embeddings, directory=directory)
    index.add_documents([Document("# A\n\nSome text.", metadata={"doc_id": "a"})])
    config = index.journal.config()
    assert config["format_version"] == FORMAT_VERSION == 7
    index.journal.put_config({**config, "format_version": 2}, index.journal.stamp())
    with pytest.raises(ValueError, match=r"format version 2, .* formats 3 to 7 .*rebuild it"):
        GatedParentIndex(embeddings, directory=directory)
