"""The search parameters: one model, the single source of every knob's type, range and meaning.

:class:`SearchFields` declares the knobs once. From it come the retriever's fields (it inherits
them, validated on assignment), the settings of one call (:func:`resolve`, a frozen
:class:`SearchParams`), the per-request settings a chain or a LangServe client may send
(:func:`config_specs`, hence the server's config schema) and the flags of
``gated-parent query``. A range is written here as an ``Annotated`` constraint and nowhere else;
:func:`rule` states it in words for error messages and help texts.
"""

from __future__ import annotations

from types import NoneType, UnionType
from typing import TYPE_CHECKING, Annotated, Any, Literal, Union, get_args, get_origin

from annotated_types import Ge, Interval
from langchain_core.runnables import ConfigurableFieldSpec
from pydantic import BaseModel, ConfigDict, Strict, ValidationError

if TYPE_CHECKING:
    from collections.abc import Mapping

    from pydantic.fields import FieldInfo

PositiveInt = Annotated[int, Strict(), Ge(1)]
Share = Annotated[float, Strict(), Interval(ge=0, le=1)]
"""A weight or a cosine threshold: a number in [0, 1]."""
Margin = Annotated[float, Strict(), Ge(0)]
Switch = Annotated[bool, Strict()]


class SearchFields(BaseModel):
    """The knobs of a search, with their defaults (see BENCHMARKS.md).

    ``alpha="learned"`` (the ranker fitted on QASPER train), ``sparse_weight`` and
    ``child_weight`` were chosen on QASPER train (both settings) and reported on dev; the
    others were chosen on dev and re-checked on train.

    With ``alpha=0.4``, ``title_weight=0``, ``lexical_weight=0``, ``sparse_weight=0``,
    ``child_weight=0`` and ``fill=False`` the search is the method as published.
    """

    model_config = ConfigDict(use_attribute_docstrings=True)

    k: PositiveInt = 8
    """How many results to return."""
    alpha: Share | Literal["auto", "learned"] = "learned"
    """"learned" ranks every child of the opened parents with the linear ranker fitted on
    QASPER train (scoring.LEARNED_WEIGHTS; child_per_parent then only sizes the gate); a number
    is the parent score's weight in the fused score alpha * s_parent + (1 - alpha) * s_child
    (0.4 as published); "auto" picks that weight per question."""
    parent_top_k: PositiveInt = 3
    """How many parents the gate opens."""
    child_per_parent: PositiveInt = 6
    """At most this many children from one parent under a fused score (a number for alpha); the
    learned ranker ranks every child of the opened parents, and this only sizes the gate."""
    gate_margin: Margin = 0.0
    """Also open parents scoring within this margin of the last one kept (0: hard gate)."""
    fill: Switch = True
    """Open further parents, best first, until the opened ones can supply k children."""
    lexical_weight: Share = 0.3
    """Share of BM25 in the child score (over the gated candidates' heading path and text); the
    learned ranker reads BM25 at its own fitted share."""
    title_weight: Share = 0.3
    """Share of BM25 over heading titles in the parent score ("What datasets?" finds "Datasets")."""
    sparse_weight: Share = 0.25
    """Share of the term search over all parents in the gate's parent score (0: not run)."""
    child_weight: Share = 0.25
    """Share of the child-vector search (a parent's best child) in the parent score (0: not run)."""
    return_parents: Switch = False
    """Return the parents of the best children instead (each with its best child's scores)."""
    dedupe: Switch = True
    """Drop children repeating a span, a text or (see near_duplicate) a vector."""
    near_duplicate: Share | None = 0.95
    """Cosine above which two children count as the same fact; None turns it off."""
    filter: dict[str, Any] | None = None
    """Metadata filter, e.g. {"doc_id": "P-GAPDH-01"} or {"doc_id": {"$in": ["a", "b"]}}."""


class SearchParams(SearchFields):
    """The settings of one call: a retriever's fields with that call's overrides applied."""

    model_config = ConfigDict(frozen=True, extra="forbid")


KNOBS: tuple[str, ...] = tuple(SearchFields.model_fields)
"""Every knob's name, in declaration order."""


def annotation_of(name: str) -> Any:
    """A knob's full type, its constraints included (as a config spec or a converter needs)."""
    info: FieldInfo = SearchFields.model_fields[name]
    if not info.metadata:
        return info.annotation
    parts = (info.annotation, *info.metadata)
    return Annotated[parts]


def rule(name: str, *, nouns: bool = False) -> str:
    """A knob's type and range in words: "an integer >= 1" (``k``), "in [0, 1]".

    ``nouns`` names the type of a bounded number too ("a number in [0, 1]"), for a text
    that does not follow the knob's name.
    """
    return _describe(annotation_of(name), nouns=nouns)


def _describe(annotation: Any, *, nouns: bool) -> str:
    origin = get_origin(annotation)
    if origin in (Union, UnionType):
        return " or ".join(_describe(member, nouns=nouns) for member in get_args(annotation))
    if origin is Literal:
        return " or ".join(repr(value) for value in get_args(annotation))
    if origin is Annotated:
        base, *constraints = get_args(annotation)
        bounds = [_bound(c) for c in constraints if isinstance(c, (Ge, Interval))]
        noun = _describe(base, nouns=nouns) if nouns or base is int or not bounds else ""
        return " ".join(part for part in (noun, *bounds) if part)
    if origin is dict:
        return "a mapping"
    return {NoneType: "None", bool: "true or false", int: "an integer", float: "a number"}[
        annotation
    ]


def _bound(constraint: Ge | Interval) -> str:
    if isinstance(constraint, Interval):
        return f"in [{constraint.ge}, {constraint.le}]"
    return f">= {constraint.ge}"


def refusal(error: ValidationError) -> ValueError:
    """One message naming each refused knob, its value and its range."""
    refused: dict[str, Any] = {}
    for detail in error.errors():
        name = str(detail["loc"][0]) if detail["loc"] else ""
        refused.setdefault(name, detail["input"])
    parts = [
        f"{name} must be {rule(name)}, got {value!r}"
        for name, value in refused.items()
        if name in SearchFields.model_fields
    ]
    return ValueError("; ".join(parts) or str(error))


def resolve(base: Mapping[str, Any], overrides: Mapping[str, Any]) -> SearchParams:
    """The settings of one call: ``base`` (a retriever's fields) with ``overrides`` applied.

    Raises:
        TypeError: An override is not a knob (its name and the knobs' names are given).
        ValueError: A value is outside its knob's range (named with the range).
    """
    unknown = sorted(set(overrides) - set(KNOBS))
    if unknown:
        msg = f"unknown argument(s) {', '.join(unknown)}; per-call arguments are {', '.join(KNOBS)}"
        raise TypeError(msg)
    try:
        return SearchParams.model_validate({**base, **overrides})
    except ValidationError as error:
        raise refusal(error) from None


def config_specs() -> list[ConfigurableFieldSpec]:
    """Every knob as a per-request setting, with its range (for schemas) and its description.

    The default of each is ``None``, meaning "the retriever's own value": the specs are then the
    same for every retriever, so two can sit in one chain without a conflict.
    """
    return [
        ConfigurableFieldSpec(
            id=name,
            name=name,
            annotation=annotation_of(name) | None,
            description=SearchFields.model_fields[name].description,
            default=None,
        )
        for name in KNOBS
    ]
