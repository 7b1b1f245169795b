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
:func:`ties_moved`). Runs of one test set are compared question by question on nDCG@10
(:func:`paired_comparisons`) with the claims ledger's statistics: its paired bootstrap interval
and sign test (:func:`dcsr.evaluation.claims.compare_paired`), Holm over every comparison
(:func:`dcsr.evaluation.claims.holm`).
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from dcsr.data.beir import CORPUS, QUERIES, iter_corpus, qrels_file, read_queries
from dcsr.data.formats import iter_passages, iter_qas, one_line
from dcsr.errors import InputError
from dcsr.evaluation.claims import RESAMPLES, Comparison, compare_paired, holm, p_text, points_text
from dcsr.evaluation.trec_eval import BEIR_RUN_MEASURES, beir_run_by_question, measure_beir_run
from dcsr.pipeline.config import DEV_VARIANT
from dcsr.pipeline.plan import Plan
from dcsr.yamlutil import strict_load

SCRIPT = Path("workflow") / "scripts" / "squad_to_beir.py"
#: Success@k against answer-match qrels is top-k answer recall (the metrics file's ``top<k>``)
SUCCESS_IS_TOP_K = {"Success@1": "top1", "Success@20": "top20", "Success@100": "top100"}
TOLERANCE = 1e-9
#: the measure the runs are compared on, question by question (BEIR's headline)
PAIRED_MEASURE = "nDCG@10"


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
    #: PAIRED_MEASURE of each test question in order (0 to 1), of the run's ranking
    by_question: list[float] = field(default_factory=list, repr=False, compare=False)

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
    return [sys.executable, str(Path(plan.basedir) / SCRIPT), "--source", plan.squad_source(corpus),
            *plan.squad_args(corpus),
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
    from dcsr.data.literals import read_json_object

    test_sets = {d: convert_test_set(plan, d, out) for d in squad_test_sets(plan)}
    if not test_sets:
        raise InputError("config", "has no SQuAD dataset of a group of articles (datasets.<name>.squad.articles) to "
                                   "score as a BEIR collection")
    rows = []
    for retriever, d, trained_on, run, metrics in scored_runs(plan):
        answer_match = read_json_object(metrics, "a run's metrics (a JSON object)")
        t = test_sets[d]
        if answer_match.get("questions") != len(t.query_ids):
            raise InputError(metrics, f"scores {answer_match.get('questions')} questions, the test set has "
                                      f"{len(t.query_ids)}")
        rows.append(ScoredRun(retriever, d, trained_on, run, measure_beir_run(run, t.query_ids, t.qrels, measures),
                              {k: answer_match[k] for k in SUCCESS_IS_TOP_K.values() if k in answer_match},
                              measure_beir_run(run, t.query_ids, t.qrels, measures, order="score"),
                              beir_run_by_question(run, t.query_ids, t.qrels, [PAIRED_MEASURE])[PAIRED_MEASURE]))
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


#: the kinds of comparison, in the table's order
DCSR_VS_DPR, AGAINST_BM25, ZERO_SHOT_VS_IN_DOMAIN = "DCSR vs DPR", "vs BM25", "zero-shot vs in-domain"


def comparison_pairs(rows: Sequence[ScoredRun], models: Mapping[str, Mapping[str, Any]]
                     ) -> list[tuple[str, ScoredRun, ScoredRun]]:
    """``(kind, baseline, other)`` of every comparison the page makes, on each test set: a DCSR
    model against the DPR model of the same config (``method`` aside: the same training
    data and init); every dense and hybrid run against BM25; a model trained on the other
    group (zero-shot) against the one of the same config trained on this group (in-domain).
    ``models``: the config's ``models``."""
    def twin(model: str, key: str, value) -> str | None:
        """The model whose config is ``model``'s with ``key`` set to ``value``."""
        want = {**{k: v for k, v in models[model].items() if k != key}, key: value}
        return next((m for m, mc in models.items() if dict(mc) == want), None)

    out: dict[str, list] = {DCSR_VS_DPR: [], AGAINST_BM25: [], ZERO_SHOT_VS_IN_DOMAIN: []}
    for d in dict.fromkeys(r.dataset for r in rows):
        by = {r.retriever: r for r in rows if r.dataset == d}
        for r in by.values():
            if r.retriever == "bm25":
                continue
            if "bm25" in by:
                out[AGAINST_BM25].append((AGAINST_BM25, by["bm25"], r))
            if r.retriever not in models or r.trained_on is None:
                continue
            if models[r.retriever].get("method") == "dcsr":
                dpr = twin(r.retriever, "method", "dpr")
                if dpr in by:
                    out[DCSR_VS_DPR].append((DCSR_VS_DPR, by[dpr], r))
            if r.trained_on != d:
                own = twin(r.retriever, "train_on", d)
                if own in by:
                    out[ZERO_SHOT_VS_IN_DOMAIN].append((ZERO_SHOT_VS_IN_DOMAIN, by[own], r))
    return [pair for kind in out.values() for pair in kind]


@dataclass(frozen=True)
class PairedComparison:
    """``other`` against ``baseline`` on one test set's questions, on :data:`PAIRED_MEASURE`."""

    kind: str
    dataset: str
    baseline: str
    other: str
    comparison: Comparison  # other - baseline, points; 95% paired bootstrap interval; sign test
    p_holm: float  # Holm-adjusted over every comparison of the family

    @property
    def reading(self) -> str:
        """``higher`` / ``lower`` when the interval of the mean difference and the sign test
        (Holm-adjusted) agree; else what each says: they ask different things (the mean, and on
        how many questions one side is above the other)."""
        c = self.comparison
        mean = "higher" if c.low > 0 else "lower" if c.high < 0 else None
        more = "higher" if c.only_method > c.only_baseline else "lower"
        sign = self.p_holm < 0.05
        if mean and sign:
            return mean if more == mean else f"mean {mean}, but {more} on more questions"
        if mean:
            return f"mean {mean}; sign test not significant"
        if sign:
            return f"{more} on more questions; the mean's CI spans 0"
        return "no difference shown"


def paired_comparisons(rows: Sequence[ScoredRun], models: Mapping[str, Mapping[str, Any]],
                       seed: int = 0) -> list[PairedComparison]:
    """Every comparison of :func:`comparison_pairs`, question by question on :data:`PAIRED_MEASURE`,
    as the claims ledger compares two runs (:func:`dcsr.evaluation.claims.compare_paired`: the
    mean difference, a 95% percentile bootstrap interval over questions, ``seed``ed, and the
    two-sided exact sign test on the questions where the two differ), the p-values Holm-adjusted
    together (one family)."""
    found = []
    for kind, base, other in comparison_pairs(rows, models):
        if len(base.by_question) != len(other.by_question) or not base.by_question:
            raise InputError(other.run, f"has {len(other.by_question)} questions' {PAIRED_MEASURE}, {base.run} "
                                        f"{len(base.by_question)}: the two runs are not paired")
        found.append((kind, base, other, compare_paired(base.by_question, other.by_question, seed=seed)))
    adjusted = holm([c.p_value for *_, c in found])
    return [PairedComparison(kind, other.dataset, base.retriever, other.retriever, c, p)
            for (kind, base, other, c), p in zip(found, adjusted)]


def comparisons_table(comparisons: Sequence[PairedComparison], seed: int = 0) -> str:
    """The comparisons as a Markdown table, with how they were made."""
    lines = [f"Paired on {PAIRED_MEASURE}, question by question (same test questions): difference in points, "
             f"95% percentile bootstrap interval over questions ({RESAMPLES:,} resamples, seed {seed}), two-sided "
             f"exact sign test on the questions where the two differ, Holm-adjusted over all {len(comparisons)} "
             "comparisons.", "",
             "| comparison | kind | test set | difference | 95% CI | lower / higher | p | Holm p | reading |",
             "|---|---|---|---:|---|---:|---:|---:|---|"]
    for pc in comparisons:
        c = pc.comparison
        # written to the side of 0 and of 0.05 that the reading took them on (claims.points_text, p_text)
        lines.append(f"| {pc.other} - {pc.baseline} | {pc.kind} | {pc.dataset} | {points_text(c.difference, 2)} | "
                     f"[{points_text(c.low, 2)}, {points_text(c.high, 2)}] | {c.only_baseline} / {c.only_method} | "
                     f"{p_text(c.p_value, 2)} | {p_text(pc.p_holm, 2)} | {pc.reading} |")
    return "\n".join(lines) + "\n"
