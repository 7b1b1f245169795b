"""Standard measures (dcsr.evaluation.trec_eval): our TREC runs and qrels are read by ir_measures
(pytrec_eval, trec_eval's code) exactly as we write them, and its numbers match hand computation."""

import json

import ir_measures
import pytest

from dcsr.data.runs import read_trec, write_trec
from dcsr.evaluation.trec_eval import (answer_match_qrels, gold_qrels, measure_run, read_qrels, write_qrels)

RUN = {0: [(7, 2.5), (5, 1.5), (9, 0.25)], 1: [(3, 0.9), (4, 0.8)], 2: []}


def test_runs_and_qrels_are_read_by_ir_measures_as_we_write_them(tmp_path):
    write_trec(tmp_path / "r.trec", RUN, tag="t")
    # trec_eval's reader takes every line as a hit: our '# no hits' comment is the one line to strip
    lines = (tmp_path / "r.trec").read_text().splitlines()
    assert [line for line in lines if line.startswith("#")] == ["# no hits: 2"]
    (tmp_path / "r.trec").write_text("\n".join(line for line in lines if not line.startswith("#")) + "\n")
    parsed = {}
    for doc in ir_measures.read_trec_run(str(tmp_path / "r.trec")):
        parsed.setdefault(doc.query_id, []).append((doc.doc_id, doc.score))
    ours = read_trec(tmp_path / "r.trec")
    # every hit, with its score; the "# no hits" line is a comment trec_eval skips
    assert {q: sorted(h) for q, h in parsed.items()} == {str(q): sorted((str(p), s) for p, s in h)
                                                        for q, h in ours.items() if h}
    qrels = {"0": {"5": 1, "7": 0}, "1": {"4": 1}, "2": {"8": 1}}
    write_qrels(tmp_path / "q.qrels", qrels)
    assert (tmp_path / "q.qrels").read_text().splitlines()[0] == "0 0 5 1"
    assert {(q.query_id, q.doc_id, q.relevance) for q in ir_measures.read_trec_qrels(str(tmp_path / "q.qrels"))} == {
        (q, d, r) for q, docs in qrels.items() for d, r in docs.items()}
    assert read_qrels(tmp_path / "q.qrels") == qrels


@pytest.mark.parametrize("relevance", ["1_0", "\u0663", "+1", "1.0", "\uff11"])
def test_a_qrels_relevance_that_is_not_plain_digits_is_refused_naming_its_line(tmp_path, relevance):
    """Python's int() read '1_0' as 10 and the Arabic-Indic digit three as 3: a judgment silently
    changed. A relevance is plain ASCII digits (a minus sign allowed); a file that is not UTF-8 is
    an error naming the line, not a UnicodeDecodeError traceback."""
    from dcsr.errors import InputError

    (tmp_path / "q.qrels").write_text(f"0 0 5 1\n1 0 4 {relevance}\n", encoding="utf-8")
    with pytest.raises(InputError) as e:
        read_qrels(tmp_path / "q.qrels")
    assert str(e.value) == (f"{tmp_path / 'q.qrels'}:2: relevance {relevance!r} is not an integer (plain digits, "
                            "as 0, 1 or 2)")
    (tmp_path / "q.qrels").write_bytes(b"0 0 5 1\n1 0 4\xff 1\n")
    with pytest.raises(InputError, match=r"q\.qrels:2: not UTF-8 text \(byte 0xff"):
        read_qrels(tmp_path / "q.qrels")
    (tmp_path / "q.qrels").write_text("0 0 5 2\n1 0 4 -1\n")
    assert read_qrels(tmp_path / "q.qrels") == {"0": {"5": 2}, "1": {"4": -1}}


def test_measures_by_hand(tmp_path):
    write_trec(tmp_path / "r.trec", RUN, tag="t")
    qrels = {"0": {"5": 1, "7": 0, "9": 1}, "1": {"3": 0, "4": 0}, "2": {"8": 1}}
    # question 0: first relevant at rank 2 -> RR 1/2; question 1: none -> 0; question 2: no hits -> 0
    got = measure_run(read_trec(tmp_path / "r.trec"), qrels, ["RR@10", "R@2"], questions=3)
    assert got["RR@10"] == pytest.approx(100 * (0.5 + 0 + 0) / 3)
    assert got["R@2"] == pytest.approx(100 * (0.5 + 0 + 0) / 3)  # q0: 1 of its 2 relevant in the top 2
    # without the question count, the mean over the questions ir_measures reports: those of the
    # qrels, a judged question without hits counting 0; with it, unjudged questions count 0 too
    assert measure_run(read_trec(tmp_path / "r.trec"), qrels, ["RR@10"])["RR@10"] == pytest.approx(100 * 0.5 / 3)
    assert measure_run(read_trec(tmp_path / "r.trec"), qrels, ["RR@10"], questions=4)["RR@10"] == pytest.approx(100 * 0.5 / 4)


def test_answer_match_and_gold_qrels(tmp_path):
    (tmp_path / "q.jsonl").write_text("\n".join(json.dumps(r) for r in [
        {"qid": 0, "hits": [7, 5], "has_answer": [False, True], "first_hit": 2},
        {"qid": 1, "hits": [], "has_answer": [], "first_hit": None}]) + "\n")
    assert answer_match_qrels(tmp_path / "q.jsonl") == {"0": {"7": 0, "5": 1}, "1": {}}
    records = [{"positive_ctxs": [{"passage_id": "12"}, {"passage_id": "13"}]}, {"positive_ctxs": [{"text": "x"}]}]
    assert gold_qrels(records) == {"0": {"12": 1, "13": 1}}
    # the command reads a DPR file whose records may lack a positive (DPR's TriviaQA): those have none
    from dcsr.data.formats import write_biencoder
    from dcsr.evaluation.trec_eval import main

    write_biencoder(tmp_path / "dev.json", [
        {"question": "a?", "answers": ["x"], "positive_ctxs": [{"title": "", "text": "x", "passage_id": "4"}]},
        {"question": "b?", "answers": ["y"], "positive_ctxs": []},
        {"question": "c?", "answers": ["z"], "positive_ctxs": [{"title": "", "text": "z", "passage_id": "9"}]}])
    main(["gold", str(tmp_path / "dev.json"), str(tmp_path / "gold.qrels")])
    assert read_qrels(tmp_path / "gold.qrels") == {"0": {"4": 1}, "2": {"9": 1}}


def test_a_scored_run_carries_its_standard_measures(tmp_path):
    from dcsr.evaluation.metrics import evaluate_run

    (tmp_path / "corpus.tsv").write_text("id\ttext\ttitle\n5\tthe river is long\tR\n7\tan apple\tA\n9\triver again\tR\n")
    (tmp_path / "qas.csv").write_text('which river?\t["river"]\n')
    write_trec(tmp_path / "r.trec", {0: [(7, 3.0), (5, 2.0), (9, 1.0)]}, tag="t")
    (tmp_path / "dev.json").write_text(json.dumps([{"question": "which river?", "answers": ["river"],
                                                    "positive_ctxs": [{"title": "R", "text": "river again",
                                                                       "passage_id": "9"}]}]))
    m = evaluate_run(tmp_path / "r.trec", tmp_path / "qas.csv", tmp_path / "corpus.tsv", tmp_path / "m.json",
                     ks=[1, 2], gold_json=tmp_path / "dev.json")
    assert m["top1"] == 0.0 and m["top2"] == 100.0
    # answer-match measures need the pool of every run (tests/test_pooled_qrels.py): not per run
    assert "trec_eval" not in m
    # gold: passage 9 only, at rank 3
    assert m["trec_eval_gold"]["RR@10"] == pytest.approx(100 / 3) and m["trec_eval_gold"]["R@20"] == 100.0
    assert json.loads((tmp_path / "m.json").read_text())["trec_eval_gold"] == m["trec_eval_gold"]


def test_scores_are_written_in_full_so_trec_eval_ranks_as_we_do(tmp_path):
    """Scores differing only past the 6th decimal (1e-9 apart; DCSR's HasAns probabilities far
    down a ranking; two neighbouring float32 values) are written apart: read back exactly, and
    ranked by ir_measures and by trec_eval's code (pytrec_eval: by score, ties by docid
    descending) in our order, not by docid."""
    import numpy as np

    hasans = np.float32([3.1e-7, 2.9e-7, 2.5e-7, 1.2e-8, 4e-9, 3e-45])  # float32 probabilities, 3e-45 subnormal
    run = {0: [(1, 2e-9), (2, 1e-9), (3, 0.0)],
           1: [(pid, float(p)) for pid, p in zip((10, 20, 30, 40, 50, 60), hasans)],
           2: [(5, float(np.nextafter(np.float32(0.3), np.float32(1)))), (9, float(np.float32(0.3)))]}
    write_trec(tmp_path / "r.trec", run, tag="t")
    assert read_trec(tmp_path / "r.trec") == run  # exactly the floats written
    ranked = {}
    for doc in ir_measures.read_trec_run(str(tmp_path / "r.trec")):
        ranked.setdefault(doc.query_id, []).append((doc.doc_id, doc.score))
    for q, hits in run.items():
        assert [(d, s) for d, s in ranked[str(q)]] == [(str(p), s) for p, s in hits]
        assert len({s for _, s in ranked[str(q)]}) == len(hits)  # no tie left for docids to break
        assert [d for d, _ in sorted(ranked[str(q)], key=lambda h: -h[1])] == [str(p) for p, _ in hits]
    # trec_eval's own measures (they rank by score, whatever the list order) see our rank 1: only
    # it is relevant, so RR@10 is 1 for each question
    qrels = {"0": {"1": 1}, "1": {"10": 1}, "2": {"5": 1}}
    judged = [ir_measures.Qrel(q, d, r) for q, docs in qrels.items() for d, r in docs.items()]
    assert measure_run(read_trec(tmp_path / "r.trec"), qrels, ["RR@10"], order="score") == {"RR@10": 100.0}
    assert measure_run({q: hits[::-1] for q, hits in run.items()}, qrels, ["RR@10"], order="score") == {"RR@10": 100.0}
    # measured by default on the list's own ranking, the reversed list has its relevant hit last
    assert measure_run({q: hits[::-1] for q, hits in run.items()}, qrels, ["RR@10"]) == \
        {"RR@10": pytest.approx(100 * (1 / 3 + 1 / 6 + 1 / 2) / 3)}
    # trec_eval's own code (pytrec_eval; ir_measures' default for RR is its msmarco provider)
    trec_eval = ir_measures.pytrec_eval
    rr = ir_measures.RR @ 10
    assert trec_eval.calc_aggregate([rr], judged, ir_measures.read_trec_run(str(tmp_path / "r.trec")))[rr] == 1.0
    # as runs were written before (6 decimals), all three questions tie and trec_eval orders by
    # docid, descending: doc 1 comes 3rd (behind 3, 2), doc 10 6th (behind 60 ... 20), doc 5 2nd (behind 9)
    (tmp_path / "6.trec").write_text("".join(f"{q} Q0 {p} {r} {s:.6f} t\n" for q, hits in run.items()
                                             for r, (p, s) in enumerate(hits, start=1)))
    old = trec_eval.calc_aggregate([rr], judged, ir_measures.read_trec_run(str(tmp_path / "6.trec")))
    assert old[rr] == pytest.approx((1 / 3 + 1 / 6 + 1 / 2) / 3)
    # trec_eval keeps a score as a 32-bit float: doubles closer than that (0.1 + 0.2 and 0.3) tie
    # there whatever is written (FAISS's scores are float32; HasAns and fusion are float64)
    close = [ir_measures.ScoredDoc("0", "1", 0.1 + 0.2), ir_measures.ScoredDoc("0", "2", 0.3)]
    assert trec_eval.calc_aggregate([rr], judged[:1], close)[rr] == 0.5
