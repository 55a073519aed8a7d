"""LangChain's standard embeddings suite, run against the real local model."""

from langchain_tests.integration_tests import EmbeddingsIntegrationTests

from langchain_gated_parent.embeddings import MiniLMEmbeddings


class TestMiniLMEmbeddingsStandard(EmbeddingsIntegrationTests):
    @property
    def embeddings_class(self) -> type[MiniLMEmbeddings]:
        return MiniLMEmbeddings

    @property
    def embedding_model_params(self) -> dict[str, int]:
        # A batch smaller than the suite's inputs, so sorted batching is exercised too.
        return {"batch_size": 2}
