"""The one search-parameter model and what is made from it: fields, per-call settings,
config specs, ``as_retriever`` and the ``query`` flags.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from pydantic import ValidationError

from langchain_gated_parent import GatedParentIndex, GatedParentRetriever, cli, params
from langchain_gated_parent.cli import query as query_command

if TYPE_CHECKING:
    import argparse

pytestmark = pytest.mark.disable_socket

BAD: dict[str, Any] = {
    "k": 0,
    "alpha": 1.5,
    "parent_top_k": 0,
    "child_per_parent": -2,
    "gate_margin": -0.1,
    "fill": "yes",
    "lexical_weight": 1.5,
    "title_weight": -0.5,
    "sparse_weight": 2.0,
    "child_weight": -1.0,
    "return_parents": 1,
    "dedupe": "no",
    "near_duplicate": 1.5,
    "filter": ["doc_id", "a"],
}
"""An out-of-range or ill-typed value for every knob."""
GOOD: dict[str, Any] = {
    "k": 2,
    "alpha": "auto",
    "parent_top_k": 1,
    "child_per_parent": 1,
    "gate_margin": 0.05,
    "fill": False,
    "lexical_weight": 0.0,
    "title_weight": 1.0,
    "sparse_weight": 0.0,
    "child_weight": 1.0,
    "return_parents": True,
    "dedupe": False,
    "near_duplicate": None,
    "filter": {"doc_id": "a"},
}
"""A valid value, other than the default, for every knob."""


def test_the_tables_cover_every_knob() -> None:
    assert set(BAD) == set(GOOD) == set(params.KNOBS)
    assert all(
        GOOD[name] != field.default for name, field in params.SearchFields.model_fields.items()
    )


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> GatedParentIndex:
    index = GatedParentIndex(
        DeterministicFakeEmbedding(size=16), directory=tmp_path_factory.mktemp("params")
    )
    body = "# Cost\n\nCost is measured.\n\n# Memory\n\nMemory is measured.\n\nAgain memory."
    index.add_documents([Document(page_content=body, metadata={"doc_id": "a"})])
    return index


@pytest.fixture
def retriever(index: GatedParentIndex) -> GatedParentRetriever:
    return index.as_retriever()


# ---------------------------------------------------------------- the model


def test_search_params_are_frozen_and_closed() -> None:
    settings = params.SearchParams()
    with pytest.raises(ValidationError, match="frozen"):
        settings.k = 3  # type: ignore[misc]
    with pytest.raises(ValidationError, match="extra"):
        params.SearchParams(top_k=3)  # type: ignore[call-arg]


@pytest.mark.parametrize("name", sorted(BAD))
def test_a_bad_value_is_refused_naming_the_knob_its_range_and_the_value(name: str) -> None:
    with pytest.raises(ValueError, match=f"{name} must be ") as refused:
        params.resolve({}, {name: BAD[name]})
    assert params.rule(name) in str(refused.value)
    assert repr(BAD[name]) in str(refused.value)


@pytest.mark.parametrize("name", sorted(GOOD))
def test_a_good_value_is_kept(name: str) -> None:
    assert getattr(params.resolve({}, {name: GOOD[name]}), name) == GOOD[name]


def test_near_duplicate_has_a_range() -> None:
    assert params.rule("near_duplicate") == "in [0, 1] or None"
    with pytest.raises(ValueError, match=r"near_duplicate must be in \[0, 1\] or None, got 1.5"):
        params.resolve({}, {"near_duplicate": 1.5})


def test_rules_are_read_from_the_constraints() -> None:
    assert params.rule("k") == "an integer >= 1"
    assert params.rule("alpha") == "in [0, 1] or 'auto' or 'learned'"
    assert params.rule("alpha", nouns=True) == "a number in [0, 1] or 'auto' or 'learned'"
    assert params.rule("gate_margin", nouns=True) == "a number >= 0"
    assert params.rule("fill") == "true or false"


def test_an_unknown_argument_is_named_with_the_knobs() -> None:
    with pytest.raises(TypeError, match=r"unknown argument\(s\) top_n; per-call arguments are k, "):
        params.resolve({}, {"top_n": 3})


# ---------------------------------------------------------------- the retriever's fields


def test_the_retriever_has_every_knob_as_a_field() -> None:
    fields = GatedParentRetriever.model_fields
    for name, field in params.SearchFields.model_fields.items():
        assert fields[name].default == field.default
        assert fields[name].description == field.description


@pytest.mark.parametrize("name", sorted(BAD))
def test_assigning_a_bad_value_raises_at_once(retriever: GatedParentRetriever, name: str) -> None:
    before = getattr(retriever, name)
    with pytest.raises(ValidationError, match=name):
        setattr(retriever, name, BAD[name])
    assert getattr(retriever, name) == before


def test_assigning_a_good_value_changes_the_next_query(retriever: GatedParentRetriever) -> None:
    retriever.k = 1
    assert len(retriever.invoke("Memory")) == 1


@pytest.mark.parametrize("name", sorted(BAD))
def test_a_bad_constructor_value_is_refused(index: GatedParentIndex, name: str) -> None:
    with pytest.raises(ValidationError, match=name):
        GatedParentRetriever(index=index, **{name: BAD[name]})


@pytest.mark.parametrize("name", sorted(BAD))
def test_a_bad_per_call_value_is_refused_by_name(
    retriever: GatedParentRetriever, name: str
) -> None:
    with pytest.raises(ValueError, match=re.escape(f"{name} must be {params.rule(name)}, got")):
        retriever.invoke("Memory", **{name: BAD[name]})


def test_every_per_call_override_is_accepted(retriever: GatedParentRetriever) -> None:
    for name, value in GOOD.items():
        assert isinstance(retriever.invoke("Memory", **{name: value}), list), name
    assert len(retriever.invoke("Memory", k=1)) == 1


# ---------------------------------------------------------------- config specs


def test_config_specs_declare_every_knob_with_its_range_and_description(
    retriever: GatedParentRetriever,
) -> None:
    specs = {spec.id: spec for spec in retriever.config_specs}
    assert list(specs) == list(params.KNOBS)
    schema = retriever.config_schema(include=["configurable"]).model_json_schema()
    declared = schema["$defs"]["Configurable"]["properties"]
    model = params.SearchParams.model_json_schema()["properties"]
    for name in params.KNOBS:
        assert specs[name].description == params.SearchFields.model_fields[name].description
        assert declared[name]["description"] == specs[name].description
        assert declared[name]["default"] is None
        own = {k: v for k, v in model[name].items() if k not in {"default", "title", "description"}}
        alternatives = own.get("anyOf", [own])
        assert all(alt in declared[name]["anyOf"] for alt in alternatives), name
    assert {"minimum": 0, "maximum": 1, "type": "number"} in declared["near_duplicate"]["anyOf"]
    assert {"minimum": 0, "type": "number"} in declared["gate_margin"]["anyOf"]


def test_every_knob_is_read_from_configurable(retriever: GatedParentRetriever) -> None:
    for name, value in GOOD.items():
        by_config = retriever.invoke("Memory", config={"configurable": {name: value}})
        by_keyword = retriever.invoke("Memory", **{name: value})
        assert [(d.id, d.metadata) for d in by_config] == [
            (d.id, d.metadata) for d in by_keyword
        ], name


# ---------------------------------------------------------------- as_retriever


def test_search_kwargs_set_the_knobs(index: GatedParentIndex) -> None:
    retriever = index.as_retriever(search_kwargs={"k": 3, "filter": {"doc_id": "a"}})
    assert retriever.k == 3
    assert retriever.filter == {"doc_id": "a"}
    assert index.as_retriever(search_kwargs=GOOD).model_dump(include=set(GOOD)) == GOOD
    assert index.as_retriever(k=2).k == 2


def test_tags_and_metadata_pass_through(index: GatedParentIndex) -> None:
    retriever = index.as_retriever(tags=["docs"], metadata={"team": "a"}, search_type="similarity")
    assert retriever.tags == ["docs"]
    assert retriever.metadata == {"team": "a"}


@pytest.mark.parametrize("search_type", ["mmr", "similarity_score_threshold"])
def test_other_search_types_are_refused_naming_the_supported_one(
    index: GatedParentIndex, search_type: str
) -> None:
    with pytest.raises(ValueError, match=f"search_type '{search_type}' is not supported") as no:
        index.as_retriever(search_type=search_type)
    assert "'similarity'" in str(no.value)


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"top_n": 3}, "top_n"),
        ({"search_kwargs": {"fetch_k": 20, "lambda_mult": 0.5}}, "fetch_k, lambda_mult"),
        ({"search_kwargs": {"score_threshold": 0.5}}, "score_threshold"),
    ],
)
def test_unknown_arguments_are_refused_by_name(
    index: GatedParentIndex, kwargs: dict[str, Any], named: str
) -> None:
    with pytest.raises(TypeError, match=f"unknown argument.s. {named}; as_retriever takes"):
        index.as_retriever(**kwargs)


def test_a_knob_given_twice_is_refused(index: GatedParentIndex) -> None:
    with pytest.raises(ValueError, match="k given both as keyword and in search_kwargs"):
        index.as_retriever(k=2, search_kwargs={"k": 3})


def test_search_kwargs_values_are_checked(index: GatedParentIndex) -> None:
    with pytest.raises(ValidationError, match="near_duplicate"):
        index.as_retriever(search_kwargs={"near_duplicate": 2.0})


# ---------------------------------------------------------------- the query flags


def _query_parser() -> argparse.ArgumentParser:
    commands = cli.build_parser()._subparsers._group_actions[0].choices
    parser: argparse.ArgumentParser = commands["query"]
    return parser


def test_every_knob_is_a_query_flag_with_its_description() -> None:
    actions = {a.dest: a for a in _query_parser()._actions}
    for name, field in params.SearchFields.model_fields.items():
        assert name in actions, name
        if name != query_command.FILTER:
            assert field.description in (actions[name].help or "")


FLAG_VALUES = [
    ("k", "2", 2),
    ("alpha", "auto", "auto"),
    ("alpha", "0.25", 0.25),
    ("parent_top_k", "1", 1),
    ("child_per_parent", "1", 1),
    ("gate_margin", "0.05", 0.05),
    ("lexical_weight", "0", 0.0),
    ("title_weight", "1", 1.0),
    ("near_duplicate", "none", None),
    ("near_duplicate", "0.9", 0.9),
]


@pytest.mark.parametrize(("name", "text", "value"), FLAG_VALUES)
def test_a_flag_reads_its_knob(name: str, text: str, value: object) -> None:
    flag = "--" + name.replace("_", "-")
    args = _query_parser().parse_args(["q", "--index", "i", flag, text])
    assert query_command.knob_options(args) == {name: value}


def test_switch_flags_and_omitted_flags() -> None:
    args = _query_parser().parse_args(
        ["q", "--index", "i", "--no-fill", "--return-parents", "--no-dedupe"]
    )
    assert query_command.knob_options(args) == {
        "fill": False,
        "return_parents": True,
        "dedupe": False,
    }
    assert query_command.knob_options(_query_parser().parse_args(["q", "--index", "i"])) == {}


@pytest.mark.parametrize(
    ("flag", "text"),
    [
        ("--k", "0"),
        ("--alpha", "1.5"),
        ("--parent-top-k", "two"),
        ("--child-per-parent", "1.5"),
        ("--gate-margin", "-1"),
        ("--lexical-weight", "2"),
        ("--title-weight", "-0.1"),
        ("--near-duplicate", "1.5"),
    ],
)
def test_a_bad_flag_value_names_the_range(
    flag: str, text: str, capsys: pytest.CaptureFixture[str]
) -> None:
    status = cli.main(["query", "q", "--index", "i", flag, text])
    err = capsys.readouterr().err
    name = flag[2:].replace("-", "_")
    assert status == 2
    assert f"argument {flag}: expected {params.rule(name, nouns=True)}, got '{text}'" in err
