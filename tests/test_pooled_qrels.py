"""Standard measures against pooled qrels (issue 25): the answer-match judgments of every run of
a test set, pooled (TREC pooling), so that every row of a table has the same ideal DCG."""

import copy
import json
import math

import pytest

from dcsr.errors import InputError
from dcsr.evaluation.trec_eval import PooledMeasures, measure_run, pool_answer_match_qrels, pooled_qrels
from test_plan import REPO, Wildcards, load


def _results(path, rows):
    with open(path, "w", encoding="utf-8") as fh:
        for qid, hits, flags in rows:
            fh.write(json.dumps({"qid": qid, "hits": hits, "has_answer": flags}) + "\n")
    return path


def test_every_measure_ranks_tied_hits_as_the_run_does():
    # reciprocal rank fusion ties: passage 3 at rank 1, the relevant 5 at rank 2, both scored 1/61 + 1/62.
    # By score, ir_measures put 5 first for nDCG (docid descending) and second for RR (ascending).
    run = {0: [(3, 1 / 61 + 1 / 62), (5, 1 / 61 + 1 / 62)], 1: [(30, 0.5), (5, 0.5), (8, 0.25)]}
    qrels = {"0": {"3": 0, "5": 1}, "1": {"30": 0, "5": 1, "8": 0}}
    measures = ["RR@10", "RR", "nDCG@10", "Success@1"]
    got = measure_run(run, qrels, measures, questions=2)
    second = 100 / math.log2(3)  # the relevant passage at rank 2, as both runs rank it
    assert got == pytest.approx({"RR@10": 50.0, "RR": 50.0, "nDCG@10": second, "Success@1": 0.0})
    by_score = measure_run(run, qrels, measures, questions=2, order="score")
    assert by_score["RR@10"] != by_score["RR"]  # what the two tie rules did to one row
    with pytest.raises(InputError, match="order: is 'docid'"):
        measure_run(run, qrels, measures, order="docid")


def test_every_run_is_measured_against_the_same_pooled_judgments(tmp_path):
    # question 0: run A finds one answer passage (5) at rank 2; run B finds 5 and another (9)
    a = _results(tmp_path / "a.jsonl", [(0, [7, 5, 8], [False, True, False]), (1, [1], [False])])
    b = _results(tmp_path / "b.jsonl", [(0, [9, 5], [True, True]), (1, [2], [True])])
    qrels, about = pooled_qrels([a, b], depth=100)
    assert qrels == {"0": {"7": 0, "5": 1, "8": 0, "9": 1}, "1": {"1": 0, "2": 1}}
    assert about == {"depth": 100, "runs": [str(a), str(b)], "questions": 2, "judged": 6, "relevant": 3}
    run_a = {0: [(7, 3.0), (5, 2.0), (8, 1.0)], 1: [(1, 1.0)]}
    pooled = measure_run(run_a, qrels, ["nDCG@10"], questions=2)["nDCG@10"]
    own = measure_run(run_a, {"0": {"7": 0, "5": 1, "8": 0}, "1": {"1": 0}}, ["nDCG@10"], questions=2)["nDCG@10"]
    # against the pool, question 0's ideal DCG has two relevant passages (1 + 1/log2 3): A's nDCG is lower
    # than against its own judgments, where the ideal is A's one passage at rank 1
    assert own == pytest.approx(100 * (1 / math.log2(3)) / 2)
    assert pooled == pytest.approx(100 * (1 / math.log2(3)) / (1 + 1 / math.log2(3)) / 2)
    # the depth limits what is judged
    assert pooled_qrels([a, b], depth=1)[0] == {"0": {"7": 0, "9": 1}, "1": {"1": 0, "2": 1}}


def test_a_pool_of_runs_that_disagree_or_differ_in_questions_fails(tmp_path):
    a = _results(tmp_path / "a.jsonl", [(0, [5], [True])])
    with pytest.raises(InputError, match="judges passage 5 for question 0 as 0, another run of the pool as the opposite"):
        pooled_qrels([a, _results(tmp_path / "b.jsonl", [(0, [5], [False])])], depth=10)
    with pytest.raises(InputError, match="has 2 questions, the other runs of the pool 1"):
        pooled_qrels([a, _results(tmp_path / "c.jsonl", [(0, [5], [True]), (1, [6], [False])])], depth=10)


def test_a_table_reads_the_pool_it_was_measured_against(tmp_path):
    from dcsr.data.runs import write_trec

    a = _results(tmp_path / "a.jsonl", [(0, [7, 5], [False, True])])
    b = _results(tmp_path / "b.jsonl", [(0, [9], [True])])
    pool_answer_match_qrels([a, b], 100, tmp_path / "t.qrels", tmp_path / "t.pool.json")
    write_trec(tmp_path / "a.trec", {0: [(7, 2.0), (5, 1.0)]}, tag="a")
    pm = PooledMeasures()
    got = pm.measures(tmp_path / "a.trec", tmp_path / "t.qrels", ["RR@10"], questions=1)
    assert got["RR@10"] == pytest.approx(50.0) and "pooled" in got["qrels"]
    assert pm.notes() == ["Pooled qrels t.qrels: the top 100 of 2 runs of this table on these questions, 3 (question, "
                          "passage) pairs judged, 2 holding an answer."]


def test_a_table_pools_its_own_runs_and_unrelated_runs_change_nothing():
    """The pool was every run of the config on the test set: an overlay adding seed runs or
    attribution pairs moved the hybrid table's nDCG@10, and its pins."""
    from dcsr.pipeline.plan import Plan

    cfg = load("config.yaml")
    plan = Plan(copy.deepcopy(cfg), basedir=REPO)
    pool = plan.pool("hybrid", "squad", "squad-a")
    names = {"/".join(p.split("/")[-4:]) for p in pool}
    # BM25, the table's dense rows, its hybrids
    assert "squad/bm25/bm25/squad-a.questions.jsonl" in names
    assert "squad/dpr-a/dpr-a/squad-a.questions.jsonl" in names
    assert "hybrid-rrf/dcsr-a/dcsr-a/squad-a.questions.jsonl" in names
    assert "squad/dpr-b/dpr-a/squad-a.questions.jsonl" not in names  # an attribution pair, not a row of the table
    assert not any("squad-b" in p or ".dev." in p for p in pool)
    inputs = plan.table_inputs(Wildcards(table="hybrid"))
    assert inputs["qrels"] == ["results/qrels/hybrid/squad/squad-a.qrels", "results/qrels/hybrid/squad/squad-b.qrels"]
    assert len(inputs["runs"]) == len(inputs["metrics"])
    assert "qrels" not in plan.table_inputs(Wildcards(table="dpr_dcsr"))  # no measures, no pool
    # seeds for every claim's models and another table: the hybrid table's pool is the same
    for claim in cfg["claims"]:
        claim.pop("seeds_note", None)
    for model in ("dpr-a", "dcsr-a", "dpr-b", "dcsr-b"):
        cfg["models"][model]["seeds"] = 2
    cfg["tables"]["extra"] = {"title": "x", "test_sets": ["squad-a"], "rows": [
        {"label": "b x a", "question": "dpr-b", "passage": "dpr-a"}], "measures": ["nDCG@10"]}
    assert Plan(cfg, basedir=REPO).pool("hybrid", "squad", "squad-a") == pool
