"""Experiment: a small learned child ranker over a widened gate, fitted on QASPER train.

Usage:
    .. code-block:: bash

        python -m benchmarks.learn_fusion collect --data .../train.jsonl --out bench-out/lf/train.pkl
        python -m benchmarks.learn_fusion collect --data .../dev.jsonl --out bench-out/lf/dev.pkl
        python -m benchmarks.learn_fusion fit --train bench-out/lf/train.pkl \\
            --dev bench-out/lf/dev.pkl
        python -m benchmarks.learn_fusion package --data .../dev.jsonl   # the defaults (learned) vs alpha 0.4

``collect`` builds one gated index over the papers (embeddings from the benchmark's disk cache),
runs the package's defaults (``invoke``, k=60) per question in both settings (paper, corpus),
the exact flat-para of ``tune_defaults``, and a *widened* run that replicates the retriever's
pipeline but opens more parents (fill to ``--need`` children) and keeps every child of every
opened parent, recording per candidate child the features the ranker may use. ``fit`` fits a
linear listwise (softmax) ranker on train candidates and scores train and dev offline with the
same dedupe and metric code.
"""

# An experiment script: short array names, pickled intermediate files of our own.
# ruff: noqa: PLC0415, N806, S301, PLR0917, FBT001, FBT003, B007, PERF401, E501

from __future__ import annotations

import argparse
import json
import pickle
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import metrics
from benchmarks.qasper import DEFAULT_CACHE_DIR
from benchmarks.qasper_data import load_papers

K = 60
SETTINGS = ("paper", "corpus")


# ---------------------------------------------------------------------------------- collect
def widened_plan(retriever: Any, query: str, vector: list[float], where: Any, need: int) -> Any:
    """The retriever's pipeline with the parent score's parts kept and a wider gate.

    Runs ``GatedParentRetriever``'s own candidate step at the default knobs, then fills the
    gate until ``need`` children (at 6 per parent) are available and keeps every child of the
    opened parents (no per-parent cap).
    """
    from langchain_gated_parent import scoring
    from langchain_gated_parent.retriever import _Begin, _FetchChildren
    from langchain_gated_parent.scoring import GateSource

    s = retriever._params({"filter": where})  # noqa: SLF001
    n = max(4 * s.parent_top_k, -(-2 * s.k // s.child_per_parent))
    _, every = yield _Begin(query, False, where)
    sections, fused = yield from retriever._candidates(query, vector, n, s, every=every)  # noqa: SLF001
    ids = list(sections)
    parts = {
        p: (
            *fused.parts[i],
            *(float(source in fused.sources[i]) for source in GateSource),
        )
        for i, p in enumerate(ids)
    }
    gate = scoring.select_gate(ids, fused.scores, s.parent_top_k)
    gate = scoring.fill_gate(
        gate,
        ids,
        fused.scores,
        [sections[p].child_count for p in ids],
        need=need,
        child_per_parent=s.child_per_parent,
    )
    # the default gate (need = k) is a prefix of this one
    default_gate = scoring.fill_gate(
        scoring.select_gate(ids, fused.scores, s.parent_top_k),
        ids,
        fused.scores,
        [sections[p].child_count for p in ids],
        need=s.k,
        child_per_parent=s.child_per_parent,
    )
    rows = yield _FetchChildren([g.parent_id for g in gate])
    return rows, gate, len(default_gate), parts, len(ids)


def collect(args: argparse.Namespace) -> None:
    from benchmarks.tune_defaults import build_gated, flat_para, load_split
    from langchain_gated_parent import keys, scoring
    from langchain_gated_parent.lexical import bm25_of_terms

    split = load_split(args.data, args.limit_papers, args.cache_dir, progress=False)
    questions, vectors, score = split.questions, split.vectors, split.score
    out: dict[str, Any] = {"data": str(args.data), "need": args.need, "n_questions": len(questions)}
    texts: dict[str, tuple[str, int, int, str]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        index = build_gated(split, Path(tmp))
        print(f"built in {time.perf_counter() - t0:.0f}s: {index.stats()}", flush=True)
        out["flat"] = flat_para(split)
        print(f"flat-para: {json.dumps(out['flat'])}", flush=True)
        retriever = index.as_retriever(k=K)
        for setting in SETTINGS:
            t0 = time.perf_counter()
            base_found = []
            per_q = []
            for q, vector in zip(questions, vectors, strict=True):
                where = {"doc_id": q.paper_id} if setting == "paper" else None
                v = vector.tolist()
                docs = retriever.invoke(q.question, query_vector=v, filter=where)
                base_found.append(docs)
                rows, gate, n_default_gate, parts, n_cand = retriever._run(  # noqa: SLF001
                    widened_plan(retriever, q.question, v, where, args.need)
                )
                per_q.append(
                    _features(
                        q,
                        v,
                        rows,
                        gate,
                        n_default_gate,
                        parts,
                        n_cand,
                        texts,
                        scoring,
                        bm25_of_terms,
                        keys,
                    )
                )
            cell = score.cell(setting, questions, base_found)
            out[f"{setting}_baseline"] = cell
            out[f"{setting}_baseline_ids"] = [
                [d.metadata[keys.CHUNK_ID] for d in docs] for docs in base_found
            ]
            for docs in base_found:
                for d in docs:
                    texts.setdefault(
                        d.metadata[keys.CHUNK_ID],
                        (
                            d.metadata["doc_id"],
                            d.metadata["gp_start_index"],
                            d.metadata["gp_end_index"],
                            d.page_content,
                        ),
                    )
            out[f"{setting}_queries"] = per_q
            print(
                f"{setting}: baseline {json.dumps(cell)} ({time.perf_counter() - t0:.0f}s)",
                flush=True,
            )
    out["texts"] = texts
    out["questions"] = [(q.qid, q.paper_id, q.question, sorted(q.evidence)) for q in questions]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("wb") as f:
        pickle.dump(out, f)
    print(f"wrote {args.out}")


FEATURES_RAW = (
    "cos",
    "bm25",
    "s_p",
    "p_dense",
    "p_title",
    "p_child",
    "p_sparse",
    "p_in_dense",
    "p_in_sparse",
    "p_in_child",
    "gate_rank",
    "in_default_gate",
    "rank_in_parent",
    "child_index",
    "child_count",
    "tokens",
    "chars",
    "level",
    "start",
    "parent_start",
    "kind",
)


def _features(
    q: Any,
    v: list[float],
    rows: Any,
    gate: Any,
    n_default_gate: int,
    parts: Any,
    n_cand: int,
    texts: Any,
    scoring: Any,
    bm25: Any,
    keys: Any,
) -> dict[str, Any]:
    if not rows.ids:
        return {
            "ids": [],
            "X": np.zeros((0, len(FEATURES_RAW)), np.float32),
            "dups": [],
            "n_default_children": 0,
            "n_children": 0,
            "n_parents": len(gate),
            "n_default_parents": n_default_gate,
            "n_cand": n_cand,
        }
    cos = scoring.similarity(rows.vectors @ np.asarray(v, np.float32))
    lex = bm25(q.question, rows.bm25_terms)
    s_c = scoring.blend(cos, lex, 0.3)
    g_of = {g.parent_id: g for g in gate}
    pids = rows.parent_ids
    by_parent: dict[str, list[int]] = {}
    for r, p in enumerate(pids):
        by_parent.setdefault(p, []).append(r)
    rank_in_parent = np.zeros(len(pids))
    for p, rs in by_parent.items():
        for i, r in enumerate(sorted(rs, key=lambda r: (-s_c[r], rows.ids[r])), start=1):
            rank_in_parent[r] = i
    kind = {"numeric": 1, "definition": 2, "other": 0}[scoring.classify_question(q.question).value]
    X = []
    default_parents = {g.parent_id for g in gate[:n_default_gate]}
    n_default_children = 0
    for r, p in enumerate(pids):
        meta = rows.metadatas[r]
        parent_meta = rows.parents[p].metadata
        g = g_of[p]
        cid = str(meta[keys.CHUNK_ID])
        idx = int(cid.rsplit("-", 1)[1])
        start, end = int(meta[keys.START_INDEX]), int(meta[keys.END_INDEX])
        texts.setdefault(cid, (meta[keys.DOC_ID], start, end, rows.texts[r]))
        n_default_children += p in default_parents
        X.append(
            (
                cos[r],
                lex[r],
                g.score,
                *parts[p],
                g.rank,
                float(p in default_parents),
                rank_in_parent[r],
                idx,
                int(parent_meta.get(keys.CHILD_COUNT, 0) or 0),
                int(meta.get(keys.TOKENS, 0) or 0),
                end - start,
                int(parent_meta.get(keys.LEVEL, 0) or 0),
                start,
                int(parent_meta.get(keys.START_INDEX, 0) or 0),
                kind,
            )
        )
    # duplicate pairs as scoring.dedupe sees them (span, normalized text, cosine > 0.95)
    spans = rows.spans
    norm = [scoring.normalize_text(t) for t in rows.texts]
    cosines = rows.vectors @ rows.vectors.T
    dups = []
    n = len(pids)
    for i in range(n):
        for j in range(i + 1, n):
            if spans[i] == spans[j] or norm[i] == norm[j] or cosines[i, j] > 0.95:
                dups.append((i, j))
    return {
        "ids": [str(m[keys.CHUNK_ID]) for m in rows.metadatas],
        "X": np.asarray(X, np.float32),
        "dups": dups,
        "n_children": n,
        "n_default_children": n_default_children,
        "n_parents": len(gate),
        "n_default_parents": n_default_gate,
        "n_cand": n_cand,
    }


def package_main(args: argparse.Namespace) -> None:
    """The package's own retriever on one split: its defaults, and the cells ``--cells`` names."""
    from benchmarks.tune_defaults import build_gated, flat_para, load_split, search_all

    split = load_split(args.data, args.limit_papers, args.cache_dir, progress=False)
    with tempfile.TemporaryDirectory() as tmp:
        index = build_gated(split, Path(tmp))
        flat = flat_para(split)
        print(f"flat-para: {json.dumps(flat)}", flush=True)
        retriever = index.as_retriever(k=K)
        for changes in json.loads(args.cells):
            cell: dict[str, Any] = {"changes": changes}
            for setting in SETTINGS:
                t0 = time.perf_counter()
                found = search_all(retriever, split, setting, changes)
                cell.update(split.score.cell(setting, split.questions, found))
                cell[f"{setting}_ndcg@10_vs_flat"] = (
                    cell[f"{setting}_ndcg@10"] / flat[f"{setting}_ndcg@10"]
                )
                cell[f"{setting}_seconds"] = round(time.perf_counter() - t0, 1)
            print(json.dumps(cell), flush=True)


# ---------------------------------------------------------------------------------- fit


def design(q: dict[str, Any], spec: str) -> tuple[np.ndarray, list[str]]:
    """Model features of one query's candidates (columns named), from the raw ones."""
    if spec.startswith("pick:") or "~" in spec:
        F, names = design(q, "full")
        if spec.startswith("pick:"):
            chosen = spec[5:].split(",")
        else:
            dropped = set(spec.split("~", 1)[1].split(","))
            chosen = [n for n in names if n not in dropped]
        return F[:, [names.index(n) for n in chosen]], chosen
    x = {n: q["X"][:, i].astype(np.float64) for i, n in enumerate(FEATURES_RAW)}
    cols: dict[str, np.ndarray] = {}
    cols["cos"] = x["cos"]
    cols["bm25"] = x["bm25"]
    cols["s_p"] = x["s_p"]
    if spec == "base":
        return np.column_stack(list(cols.values())), list(cols)
    cols["p_dense"] = x["p_dense"]
    cols["p_title"] = x["p_title"]
    cols["p_child"] = x["p_child"]
    cols["p_sparse"] = x["p_sparse"]
    cols["log_gate_rank"] = np.log(x["gate_rank"])
    cols["log_rank_in_parent"] = np.log(x["rank_in_parent"])
    cols["top1_in_parent"] = (x["rank_in_parent"] == 1).astype(float)
    if spec == "small":
        return np.column_stack(list(cols.values())), list(cols)
    cols["p_in_dense"] = x["p_in_dense"]
    cols["p_in_sparse"] = x["p_in_sparse"]
    cols["p_in_child"] = x["p_in_child"]
    cols["in_default_gate"] = x["in_default_gate"]
    cols["first_child"] = (x["child_index"] == 1).astype(float)
    cols["rel_pos_in_section"] = (x["child_index"] - 1) / np.maximum(x["child_count"] - 1, 1)
    cols["log_tokens"] = np.log1p(x["tokens"])
    cols["log_chars"] = np.log1p(x["chars"])
    cols["log_start_k"] = np.log1p(x["start"] / 1000)
    cols["cos_gap"] = x["cos"] - (x["cos"].max() if len(x["cos"]) else 0)
    cols["s_p_gap"] = x["s_p"] - (x["s_p"].max() if len(x["s_p"]) else 0)
    order = np.argsort(-x["cos"], kind="stable")
    rank = np.empty(len(order))
    rank[order] = np.arange(1, len(order) + 1)
    cols["log_cos_rank"] = np.log(rank)
    num = (x["kind"] == 1).astype(float)
    dfn = (x["kind"] == 2).astype(float)
    cols["num_x_cos"] = num * x["cos"]
    cols["num_x_bm25"] = num * x["bm25"]
    cols["num_x_s_p"] = num * x["s_p"]
    cols["def_x_cos"] = dfn * x["cos"]
    cols["def_x_s_p"] = dfn * x["s_p"]
    if spec == "full":
        return np.column_stack(list(cols.values())), list(cols)
    raise ValueError(spec)


class Data:
    """Every candidate of one split and setting, with labels and query boundaries."""

    def __init__(
        self,
        blob: dict[str, Any],
        setting: str,
        papers: Any,
        spec: str,
        keep: set[str] | None = None,
    ) -> None:
        self.setting = setting
        by_id = {p.paper_id: p for p in papers}
        self.locator = metrics.ParagraphLocator(
            {p.paper_id: [(x.key, x.start, x.end) for x in p.paragraphs] for p in papers}
        )
        self.texts = blob["texts"]
        self.queries = []
        for (qid, pid, text, ev), q, base in zip(
            blob["questions"],
            blob[f"{setting}_queries"],
            blob[f"{setting}_baseline_ids"],
            strict=True,
        ):
            if keep is not None and pid not in keep:
                continue
            evidence = frozenset(tuple(e) for e in ev)
            spans = [self.texts[c][:3] for c in q["ids"]]
            y = np.array(
                [bool(set(self.locator.overlapping(sp)) & evidence) for sp in spans], float
            )
            F, names = design(q, spec)
            self.names = names
            paper = by_id[pid]
            self.queries.append(
                {
                    "q": q,
                    "F": F,
                    "y": y,
                    "evidence": evidence,
                    "base": base,
                    "evidence_texts": [paper.paragraph(k).text for k in sorted(evidence)],
                }
            )

    def stacked(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        F = np.vstack([d["F"] for d in self.queries if len(d["y"])])
        y = np.concatenate([d["y"] for d in self.queries if len(d["y"])])
        g = np.concatenate(
            [np.full(len(d["y"]), i) for i, d in enumerate(self.queries) if len(d["y"])]
        )
        return F, y, g


def fit_listwise(
    parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]],
    l2: float,
    steps: int = 600,
    lr: float = 0.05,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Softmax (ListNet, uniform over positives) linear ranker; returns w, mean, std."""
    F = np.vstack([p[0] for p in parts])
    y = np.concatenate([p[1] for p in parts])
    offset = 0
    groups = []
    for part in parts:
        groups.append(part[2] + offset)
        offset = groups[-1].max() + 1
    g = np.concatenate(groups)
    mu, sd = F.mean(0), F.std(0) + 1e-9
    Z = (F - mu) / sd
    n_groups = g.max() + 1
    pos = np.bincount(g, weights=y, minlength=n_groups)
    has = pos > 0
    tgt = np.where(has[g], y / np.maximum(pos[g], 1), 0.0)
    w = np.zeros(Z.shape[1])
    m = np.zeros_like(w)
    v = np.zeros_like(w)
    nq = has.sum()
    for t in range(1, steps + 1):
        s = Z @ w
        smax = np.full(n_groups, -np.inf)
        np.maximum.at(smax, g, s)
        e = np.exp(s - smax[g])
        den = np.bincount(g, weights=e, minlength=n_groups)
        p = e / den[g]
        p = np.where(has[g], p, 0.0)
        grad = Z.T @ (p - tgt) / nq + l2 * w
        m = 0.9 * m + 0.1 * grad
        v = 0.999 * v + 0.001 * grad**2
        w -= lr * (m / (1 - 0.9**t)) / (np.sqrt(v / (1 - 0.999**t)) + 1e-8)
    return w, mu, sd


def rank_query(
    d: dict[str, Any],
    scores: np.ndarray,
    *,
    cap: int | None = None,
    default_gate_only: bool = False,
) -> list[str]:
    """Order by score (ties by chunk id), optional cap per parent, dedupe, top K ids."""
    q = d["q"]
    ids = q["ids"]
    X = q["X"]
    allowed = np.ones(len(ids), bool)
    if default_gate_only:
        allowed &= X[:, FEATURES_RAW.index("in_default_gate")] > 0
    order = sorted((i for i in range(len(ids)) if allowed[i]), key=lambda i: (-scores[i], ids[i]))
    if cap is not None:
        gate = X[:, FEATURES_RAW.index("gate_rank")]
        seen: dict[float, int] = {}
        capped = []
        for i in order:
            seen[gate[i]] = seen.get(gate[i], 0) + 1
            if seen[gate[i]] <= cap:
                capped.append(i)
        order = capped
    dup: dict[int, set[int]] = {}
    for i, j in q["dups"]:
        dup.setdefault(i, set()).add(j)
        dup.setdefault(j, set()).add(i)
    kept: list[int] = []
    kept_set: set[int] = set()
    for i in order:
        if len(kept) >= K:
            break
        if dup.get(i, set()) & kept_set:
            continue
        kept.append(i)
        kept_set.add(i)
    return [ids[i] for i in kept]


def evaluate(data: Data, ranked_ids: list[list[str]], encoding: Any) -> dict[str, float]:
    ndcg, evr = [], []
    for d, found in zip(data.queries, ranked_ids, strict=True):
        spans = [data.texts[c][:3] for c in found]
        ndcg.append(metrics.ndcg_at_k(data.locator.ranked_paragraphs(spans), d["evidence"], 10))
        evr.append(
            metrics.evidence_recall(
                [data.texts[c][3] for c in found], d["evidence_texts"], 2048, encoding
            )
        )
    return {"ndcg@10": float(np.mean(ndcg)), "evr@2048": float(np.mean(evr))}


def fit_main(args: argparse.Namespace) -> None:
    from langchain_gated_parent.tokens import get_encoding

    enc = get_encoding("cl100k_base")
    train_blob = pickle.loads(args.train.read_bytes())
    dev_blob = pickle.loads(args.dev.read_bytes()) if args.dev else None
    train_papers = load_papers(Path(train_blob["data"]))
    rng = np.random.default_rng(0)
    ids = sorted(p.paper_id for p in train_papers)
    rng.shuffle(ids)
    fifth = len(ids) // 5
    hold = set(ids[args.fold * fifth : (args.fold + 1) * fifth if args.fold < 4 else None])
    fitp = set(ids) - hold
    report: dict[str, Any] = {"flat_train": train_blob["flat"]}
    if dev_blob:
        report["flat_dev"] = dev_blob["flat"]
    cells = []

    def run_cell(
        spec: str, l2: float, cap: int | None, gate_only: bool, which: str
    ) -> dict[str, Any]:
        # fit on train (fit part for 'holdout', all of it for 'dev'/'train')
        keep = fitp if which == "holdout" else None
        tr = [
            Data(train_blob, s, train_papers, "base" if spec == "default" else spec, keep)
            for s in SETTINGS
        ]
        if spec == "default":  # the shipped formula, on the widened pool's features
            mu, sd = np.zeros(3), np.ones(3)
            w = np.array([0.6 * 0.7, 0.6 * 0.3, 0.4])  # cos, bm25, s_p
        else:
            parts = [x.stacked() for x in tr]
            w, mu, sd = fit_listwise(parts, l2, steps=args.steps)
        cell = {
            "spec": spec,
            "l2": l2,
            "cap": cap,
            "gate_only": gate_only,
            "on": which,
            "names": tr[0].names,
            "w_std": w.tolist(),
            "w_raw": (w / sd).tolist(),
            "b_raw": float(-(w / sd) @ mu),
        }
        if which == "holdout":
            sp = "base" if spec == "default" else spec
            ev = {s: (Data(train_blob, s, train_papers, sp, hold), train_blob) for s in SETTINGS}
            flat = None
        elif which == "train":
            ev = {s: (x, train_blob) for s, x in zip(SETTINGS, tr, strict=True)}
            flat = train_blob["flat"]
        else:
            if dev_blob is None:
                msg = "--on dev needs --dev (the dev split's features)"
                raise SystemExit(msg)
            dev_papers = load_papers(Path(dev_blob["data"]))
            sp = "base" if spec == "default" else spec
            ev = {s: (Data(dev_blob, s, dev_papers, sp), dev_blob) for s in SETTINGS}
            flat = dev_blob["flat"]
        for s, (data, _) in ev.items():
            learned = [
                rank_query(d, ((d["F"] - mu) / sd) @ w, cap=cap, default_gate_only=gate_only)
                if len(d["y"])
                else []
                for d in data.queries
            ]
            base = [d["base"] for d in data.queries]
            lm, bm = evaluate(data, learned, enc), evaluate(data, base, enc)
            cell[f"{s}_learned"] = lm
            cell[f"{s}_baseline"] = bm
            if flat:
                cell[f"{s}_learned_vs_flat"] = lm["ndcg@10"] / flat[f"{s}_ndcg@10"]
                cell[f"{s}_baseline_vs_flat"] = bm["ndcg@10"] / flat[f"{s}_ndcg@10"]
            cell[f"{s}_gain"] = lm["ndcg@10"] / bm["ndcg@10"] - 1
        print(
            json.dumps({k: v for k, v in cell.items() if k not in ("w_std", "w_raw", "names")}),
            flush=True,
        )
        cells.append(cell)
        return cell

    for spec, l2, cap, gate_only in json.loads(args.cells):
        run_cell(spec, l2, cap, gate_only, args.on)
    report["cells"] = cells
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("collect")
    c.add_argument("--data", type=Path, required=True)
    c.add_argument("--out", type=Path, required=True)
    c.add_argument("--limit-papers", type=int, default=None)
    c.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE_DIR)
    c.add_argument(
        "--need",
        type=int,
        default=2 * K,
        help="children (at 6 per parent) the widened gate fills to",
    )
    f = sub.add_parser("fit")
    f.add_argument("--train", type=Path, required=True)
    f.add_argument("--dev", type=Path, default=None)
    f.add_argument("--out", type=Path, required=True)
    f.add_argument("--on", choices=("holdout", "train", "dev"), default="holdout")
    f.add_argument("--steps", type=int, default=600)
    f.add_argument("--fold", type=int, default=0, help="which fifth of train is held out")
    f.add_argument(
        "--cells",
        default='[["base", 0.0, null, false], ["small", 0.001, null, false], ["full", 0.001, null, false]]',
    )
    k = sub.add_parser("package")
    k.add_argument("--data", type=Path, required=True)
    k.add_argument("--limit-papers", type=int, default=None)
    k.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE_DIR)
    k.add_argument("--cells", default='[{}, {"alpha": 0.4}]')
    args = parser.parse_args()
    if args.cmd == "package":
        package_main(args)
        return
    if args.cmd == "collect":
        collect(args)
    else:
        fit_main(args)


if __name__ == "__main__":
    main()
