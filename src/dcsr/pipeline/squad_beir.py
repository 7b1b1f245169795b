"""A finished run's SQuAD test sets as BEIR collections, and its retrievers scored on them
(issue 42: meet IR researchers in their own tools; benchmarks/beir/beir.md).

Each SQuAD test set of the config (``datasets.<name>.squad.articles``) is written as a BEIR
folder by ``workflow/scripts/squad_to_beir.py`` with the arguments ``prepare_squad_dataset``
gave ``prepare_squad.py`` (:meth:`~dcsr.pipeline.config_view.ConfigView.squad_args`, the
dataset's ``--articles``), so its queries are the test set's questions in the same order; that,
and that its corpus is the run's, is checked (:func:`check_same_questions`,
:func:`check_same_corpus`), not assumed. Every BM25, dense (question and passage encoder the
same model) and hybrid run of those test sets is then measured against the folder's qrels with
ir_measures (:func:`dcsr.evaluation.trec_eval.measure_beir_run`). The qrels come from DPR's
answer matching over the whole corpus, so Success@k must be the run's answer-match top-k, as
its metrics file has it (:func:`success_differs_from_top_k`): one measure, two tools. Both read
the run's ranking, its rank column; trec_eval, reading the file, orders equal scores by docid
instead, which moves reciprocal rank fusion's numbers a little (``ScoredRun.by_score``,
:func:`ties_moved`).
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from dcsr.data.beir import CORPUS, QUERIES, iter_corpus, qrels_file, read_queries
from dcsr.data.formats import iter_passages, iter_qas, one_line
from dcsr.errors import InputError
from dcsr.evaluation.trec_eval import BEIR_RUN_MEASURES, measure_beir_run
from dcsr.pipeline.config import DEV_VARIANT
from dcsr.pipeline.plan import Plan
from dcsr.yamlutil import strict_load

SCRIPT = Path("workflow") / "scripts" / "squad_to_beir.py"
#: Success@k against answer-match qrels is top-k answer recall (the metrics file's ``top<k>``)
SUCCESS_IS_TOP_K = {"Success@1": "top1", "Success@20": "top20", "Success@100": "top100"}
TOLERANCE = 1e-9


@dataclass(frozen=True)
class BeirTestSet:
    """A test set of the run written as a BEIR folder: its query ``_id`` in question order, and
    the command that wrote it."""

    dataset: str
    folder: Path
    query_ids: list[str]
    command: list[str]

    @property
    def qrels(self) -> Path:
        return qrels_file(self.folder, "test")


@dataclass(frozen=True)
class ScoredRun:
    """One run measured against its test set's BEIR qrels, beside its answer-match top-k."""

    retriever: str  # bm25, a model, or hybrid-<fusion>/<model>
    dataset: str
    trained_on: str | None  # the dense model's training dataset(s); None: untrained, or BM25
    run: str
    measured: dict[str, float]  # BEIR_RUN_MEASURES of the run's ranking (its rank column), in %
    top_k: dict[str, float]  # the run's metrics file: top1, top20, top100, in %
    by_score: dict[str, float]  # the same measures of the run's scores, as trec_eval reads the file (ties by docid)

    @property
    def relation(self) -> str:
        """How the test set's articles stand to the model's training (all test articles are
        unseen in training: prepare_squad splits by article)."""
        if self.retriever == "bm25":
            return "baseline (no training)"
        if self.trained_on is None:
            return "zero-shot (untrained)"
        if self.trained_on == self.dataset:
            return "in-domain (its group's unseen test articles)"
        return "zero-shot (the other group's articles)"


def load_plan(config: str | os.PathLike, results: str | os.PathLike, basedir: str | os.PathLike) -> Plan:
    """The :class:`Plan` of the config that made ``results`` (its ``results`` key set to it)."""
    cfg = strict_load(Path(config))
    cfg["results"] = str(results)
    return Plan(cfg, basedir=basedir)


def squad_test_sets(plan: Plan) -> list[str]:
    """The config's SQuAD datasets of a group of articles, as test sets (not their dev variants)."""
    return [d for d in plan.squad_article_datasets() if not d.endswith(DEV_VARIANT)]


def conversion_command(plan: Plan, dataset: str, folder: str | os.PathLike) -> list[str]:
    """squad_to_beir.py with prepare_squad_dataset's arguments for ``dataset``: the same source,
    seed, passage length, split and articles."""
    corpus = plan.corpus_of(dataset)
    return [sys.executable, str(Path(plan.basedir) / SCRIPT), *plan.squad_args(corpus),
            "--articles", str(plan.dataset_cfg(dataset)["squad"]["articles"]),
            "--download-dir", f"{plan.results}/downloads/squad", "--output", str(folder)]


def check_same_questions(folder: str | os.PathLike, test_qas: str | os.PathLike) -> list[str]:
    """The query ``_id`` of the BEIR folder's queries, after checking that their texts are the
    test set's questions (``*-test.qa.csv``) in the same order: the run's question ``i`` is then
    query ``i``."""
    queries = read_queries(Path(folder) / QUERIES)
    questions = [one_line(qa.question) for qa in iter_qas(test_qas)]
    texts = list(queries.values())
    if texts != questions:
        first = next((i for i, (a, b) in enumerate(zip(texts, questions)) if a != b), min(len(texts), len(questions)))
        raise InputError(str(Path(folder) / QUERIES), f"its {len(texts)} queries are not the {len(questions)} "
                         f"questions of {test_qas} in order (first difference at question {first}); the BEIR "
                         "conversion did not select the run's test questions: were the run's SQuAD options "
                         "(seed, split, articles, source) others than the config's?")
    return list(queries)


def check_same_corpus(folder: str | os.PathLike, corpus_tsv: str | os.PathLike) -> None:
    """The BEIR folder's documents are the run's passages: the same ids, titles and texts, in order."""
    docs = list(iter_corpus(Path(folder) / CORPUS))
    ours = [(str(p.id), p.title, p.text) for p in iter_passages(corpus_tsv)]
    if docs != ours:
        first = next((i for i, (a, b) in enumerate(zip(docs, ours)) if a != b), min(len(docs), len(ours)))
        raise InputError(str(Path(folder) / CORPUS), f"its {len(docs)} documents are not the {len(ours)} passages of "
                         f"{corpus_tsv} (first difference at document {first}): the run was made over another corpus")


def convert_test_set(plan: Plan, dataset: str, out: str | os.PathLike) -> BeirTestSet:
    """``dataset``'s test questions as the BEIR folder ``<out>/<dataset>`` (:func:`conversion_command`),
    checked against the run's question file and corpus."""
    folder = Path(out) / dataset
    command = conversion_command(plan, dataset, folder)
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise InputError(str(SCRIPT), f"converting {dataset} failed ({done.returncode}): {done.stderr[-2000:]}")
    query_ids = check_same_questions(folder, plan.dataset_file(dataset, "test"))
    check_same_corpus(folder, plan.corpus_tsv(plan.corpus_of(dataset)))
    return BeirTestSet(dataset, folder, query_ids, command)


def scored_runs(plan: Plan) -> list[tuple[str, str, str | None, str, str]]:
    """``(retriever, dataset, trained_on, run, metrics)`` of every run to score: on each SQuAD
    test set, BM25, every dense run whose question and passage encoder are one model (the
    config's models in order), and every hybrid run of the tables that fuses such a dense run."""
    test_sets = squad_test_sets(plan)
    dense = {(q, d) for _, q, p, d in plan.dense_runs() if q == p and d in test_sets}
    hybrid = [(f, q, d) for _, f, q, p, d in plan.hybrid_runs() if q == p and d in test_sets]
    paths = plan.paths
    out = []
    for d in test_sets:
        corpus = plan.corpus_of(d)
        out.append(("bm25", d, None, *(pattern.format(corpus=corpus, qmodel="bm25", pmodel="bm25", dataset=d)
                                      for pattern in (paths.RUN, paths.METRICS))))
        for m in plan.config["models"]:
            if (m, d) in dense:
                out.append((m, d, _trained_on(plan, m), *(pattern.format(corpus=corpus, qmodel=m, pmodel=m, dataset=d)
                                                          for pattern in (paths.RUN, paths.METRICS))))
        for f, m, _ in sorted(h for h in hybrid if h[2] == d):
            out.append((f"hybrid-{f}/{m}", d, _trained_on(plan, m),
                        *(pattern.format(corpus=corpus, fusion=f, qmodel=m, pmodel=m, dataset=d)
                          for pattern in (paths.HYBRID_RUN, paths.HYBRID_METRICS))))
    return out


def _trained_on(plan: Plan, model: str) -> str | None:
    return plan.training_label(model) if model in plan.trained_models() else None


def score_on_squad_beir(plan: Plan, out: str | os.PathLike,
                        measures: Sequence[str] = BEIR_RUN_MEASURES) -> tuple[dict[str, BeirTestSet], list[ScoredRun]]:
    """Every SQuAD test set of ``plan``'s results as a BEIR folder under ``out``, and every run of
    :func:`scored_runs` measured against its qrels, with its answer-match top-k beside."""
    import json

    test_sets = {d: convert_test_set(plan, d, out) for d in squad_test_sets(plan)}
    if not test_sets:
        raise InputError("config", "has no SQuAD dataset of a group of articles (datasets.<name>.squad.articles) to "
                                   "score as a BEIR collection")
    rows = []
    for retriever, d, trained_on, run, metrics in scored_runs(plan):
        with open(metrics, encoding="utf-8") as fh:
            answer_match = json.load(fh)
        t = test_sets[d]
        if answer_match.get("questions") != len(t.query_ids):
            raise InputError(metrics, f"scores {answer_match.get('questions')} questions, the test set has "
                                      f"{len(t.query_ids)}")
        rows.append(ScoredRun(retriever, d, trained_on, run, measure_beir_run(run, t.query_ids, t.qrels, measures),
                              {k: answer_match[k] for k in SUCCESS_IS_TOP_K.values() if k in answer_match},
                              measure_beir_run(run, t.query_ids, t.qrels, measures, order="score")))
    return test_sets, rows


def success_differs_from_top_k(rows: Sequence[ScoredRun], tolerance: float = TOLERANCE) -> list[str]:
    """Every (run, k) whose Success@k against the qrels is not its answer-match top-k (within
    ``tolerance`` points), and every Success@k that could not be compared: empty when they agree."""
    problems = []
    for r in rows:
        for success, top in SUCCESS_IS_TOP_K.items():
            if success not in r.measured or top not in r.top_k:
                problems.append(f"{r.run}: {success} or {top} missing")
            elif abs(r.measured[success] - r.top_k[top]) > tolerance:
                problems.append(f"{r.run}: {success} {r.measured[success]!r} != {top} {r.top_k[top]!r}")
    return problems


def ties_moved(rows: Sequence[ScoredRun], measures: Sequence[str] = BEIR_RUN_MEASURES,
               at_least: float = 0.005) -> list[tuple[ScoredRun, str, float, float]]:
    """``(run, measure, of its ranking, of its scores)`` where trec_eval's order of equal scores
    (by docid) moves a measure by ``at_least`` points."""
    return [(r, m, r.measured[m], r.by_score[m]) for r in rows for m in measures
            if abs(r.measured[m] - r.by_score[m]) >= at_least]


def markdown_table(rows: Sequence[ScoredRun]) -> str:
    """The rows as a Markdown table: retriever, training, test set, nDCG@10, RR@10, R@100 and
    Success@100 (= answer-match top-100)."""
    lines = ["| retriever | trained on | test set | its test articles | nDCG@10 | RR@10 | R@100 "
             "| Success@100 = top-100 |", "|---|---|---|---|---:|---:|---:|---:|"]
    for r in rows:
        m = r.measured
        lines.append(f"| {r.retriever} | {r.trained_on or '-'} | {r.dataset} | {r.relation} | {m['nDCG@10']:.2f} | "
                     f"{m['RR@10']:.2f} | {m['R@100']:.2f} | {m['Success@100']:.2f} |")
    return "\n".join(lines) + "\n"
