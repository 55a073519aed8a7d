"""``gated-parent query "TEXT" --index DIR``: the ranked children with their fused scores.

Its search flags are made from the search-parameter model, one per knob, with the knob's range
and description: a knob added to :mod:`langchain_gated_parent.params` is a flag here at once.
"""

from __future__ import annotations

import argparse
import json
from types import NoneType, UnionType
from typing import TYPE_CHECKING, Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import TypeAdapter, ValidationError

from langchain_gated_parent import params
from langchain_gated_parent.cli.common import (
    EXIT_FAILURE,
    EXIT_USAGE,
    PROG,
    echo,
    open_index,
    refused,
)
from langchain_gated_parent.cli.options import (
    FilterValue,
    add_index_option,
    add_lock_timeout_option,
    filter_pair,
)
from langchain_gated_parent.cli.output import result_record, table
from langchain_gated_parent.stores.chroma import ConcurrentWriteError
from langchain_gated_parent.stores.vector_files import VectorFilesTimeoutError

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from langchain_gated_parent.cli.common import Subparsers

FILTER = "filter"
"""The knob given as ``--filter KEY=VALUE`` pairs rather than as one value."""
NULLABLE_WORD = "none"
"""What a flag takes for a knob's ``None`` (``--near-duplicate none`` turns it off)."""


def where(filters: Sequence[tuple[str, FilterValue]]) -> dict[str, Any] | None:
    """``--filter`` pairs as a metadata filter: a repeated key matches any of its values."""
    values: dict[str, list[FilterValue]] = {}
    for key, value in filters:
        values.setdefault(key, []).append(value)
    clauses = [{k: v[0] if len(v) == 1 else {"$in": v}} for k, v in values.items()]
    if len(clauses) > 1:
        return {"$and": clauses}
    return clauses[0] if clauses else None


def typed_filter_hint(filters: Sequence[tuple[str, FilterValue]]) -> str | None:
    """Why a search with no results may have missed: a string that reads as a number or boolean.

    Only ``KEY:=JSON`` matches a value stored as a number or boolean, so a ``--filter
    total_pages=41`` that finds nothing says so instead of failing silently.
    """
    for key, value in filters:
        if isinstance(value, str) and not isinstance(_json_or_text(value), str):
            return (
                f"no results; --filter {key}={value} matches the string {value!r}: if {key} "
                f"holds numbers or booleans, write --filter {key}:={value}"
            )
    return None


def _json_or_text(text: str) -> Any:
    """``text`` read as JSON, or itself when it is not JSON."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _members(annotation: Any) -> tuple[Any, ...]:
    """The alternatives of a knob's type (``float | "auto"`` has two), constraints dropped."""
    if get_origin(annotation) in (Union, UnionType):
        return tuple(m for member in get_args(annotation) for m in _members(member))
    if get_origin(annotation) is Annotated:
        return _members(get_args(annotation)[0])
    return (annotation,)


def _read(text: str, members: tuple[Any, ...]) -> Any:
    """The command-line text as a value of one of the knob's types (the model checks ranges)."""
    for member in members:
        if get_origin(member) is Literal and text in get_args(member):
            return text
        if member is NoneType and text.casefold() == NULLABLE_WORD:
            return None
    for member in members:
        if member in (int, float):
            try:
                return member(text)
            except ValueError:
                continue
    return text  # the model names it as not of the knob's type


def value_of(name: str) -> Callable[[str], Any]:
    """The argparse ``type`` of a knob's flag: its text read and checked against the model."""
    annotation = params.annotation_of(name)
    checker: TypeAdapter[Any] = TypeAdapter(annotation)
    members = _members(annotation)

    def convert(text: str) -> Any:
        try:
            return checker.validate_python(_read(text, members))
        except ValidationError:
            msg = f"expected {params.rule(name, nouns=True)}, got {text!r}"
            raise argparse.ArgumentTypeError(msg) from None

    convert.__name__ = name  # argparse names the type in some messages
    return convert


def add_knob_flags(parser: argparse.ArgumentParser) -> None:
    """One flag per knob of the model: ``--k N``, ``--fill/--no-fill``, ``--filter KEY=VALUE``.

    An omitted flag leaves the knob to the retriever: it is ``None`` (or absent, for a knob
    whose ``None`` is a value or for a switch) in the parsed arguments.
    """
    for name, info in params.SearchFields.model_fields.items():
        flag = "--" + name.replace("_", "-")
        members = _members(info.annotation)
        help_text = f"{info.description} Default: {info.default!r}."
        if name == FILTER:
            parser.add_argument(
                flag,
                type=filter_pair,
                action="append",
                default=[],
                metavar="KEY=VALUE",
                help="metadata filter (repeatable; repeated keys match any value, keys must "
                "all match). KEY=VALUE matches the string VALUE (doc_id=2003.13032 is a "
                "string); KEY:=JSON matches a JSON number, true, false or quoted string, for "
                "keys stored as numbers or booleans (total_pages:=41)",
            )
        elif bool in members:
            parser.add_argument(
                flag,
                action=argparse.BooleanOptionalAction,
                default=argparse.SUPPRESS,
                help=help_text,
            )
        else:
            parser.add_argument(
                flag,
                type=value_of(name),
                metavar="N" if int in members else "X",
                default=argparse.SUPPRESS if NoneType in members else None,
                help=f"{params.rule(name, nouns=True)}. {help_text}",
            )


def knob_options(args: argparse.Namespace) -> dict[str, Any]:
    """The knobs given on the command line (omitted ones keep the retriever's defaults)."""
    given = vars(args)
    options = {
        name: given[name]
        for name in params.KNOBS
        if name != FILTER
        and name in given
        and (given[name] is not None or NoneType in _members(params.annotation_of(name)))
    }
    found = where(args.filter)
    if found is not None:
        options[FILTER] = found
    return options


def run(args: argparse.Namespace) -> int:
    """Search with the retriever's defaults, overridden by the options given."""
    index = open_index(args.index, lock_timeout=args.lock_timeout)
    with (
        refused(EXIT_USAGE, ValueError, TypeError),
        refused(EXIT_FAILURE, ConcurrentWriteError, VectorFilesTimeoutError),
    ):
        documents = index.as_retriever().invoke(args.text, **knob_options(args))
    if args.json:
        echo(json.dumps([result_record(d) for d in documents], indent=2, ensure_ascii=False))
    else:
        echo(table(documents))
    if not documents and (hint := typed_filter_hint(args.filter)):
        echo(f"{PROG}: note: {hint}", err=True)
    return 0


def add(commands: Subparsers) -> None:
    """Add the ``query`` subcommand."""
    parser = commands.add_parser(
        "query",
        help="search the index",
        description="Search the index: the gate opens the best parents (sections), then the "
        "best children (paragraphs) inside them are ranked by the learned ranker or, with a "
        "number for --alpha, by the fused score alpha * s_p + (1 - alpha) * s_c. Omitted "
        "options take the retriever's defaults.",
    )
    parser.add_argument("text", help="the question or keywords")
    add_index_option(parser)
    add_knob_flags(parser)
    parser.add_argument("--json", action="store_true", help="print a JSON list of results")
    add_lock_timeout_option(parser)
    parser.set_defaults(run=run)
