import json

import pytest

from dcsr.errors import InputError
from dcsr.evaluation.metrics import evaluate_run, first_hit_ranks, topk_recall
from dcsr.data.formats import QA, Passage, write_corpus, write_qas
from dcsr.data.runs import write_trec


def test_topk_recall_by_hand():
    ranks = first_hit_ranks([[False, True], [True], [False, False], []])
    assert ranks == [2, 1, None, None]
    assert topk_recall(ranks, ks=(1, 2)) == {"top1": 25.0, "top2": 50.0}


def test_evaluate_run_end_to_end(tmp_path):
    write_corpus(tmp_path / "c.tsv", [Passage(1, "Paris is the capital of France.", "Paris"),
                                      Passage(2, "Berlin is in Germany.", "Berlin"),
                                      Passage(3, "Nothing here.", "X")])
    write_qas(tmp_path / "q.tsv", [QA("capital of France?", ["Paris"]), QA("where is Berlin?", ["Germany"]),
                                   QA("unanswerable?", ["Mars"])])
    write_trec(tmp_path / "r.trec", {0: [(3, 2.0), (1, 1.0)], 1: [(2, 5.0)], 2: []}, tag="t")
    assert (tmp_path / "r.trec").read_text().splitlines()[-1] == "# no hits: 2"
    m = evaluate_run(tmp_path / "r.trec", tmp_path / "q.tsv", tmp_path / "c.tsv", tmp_path / "m.json",
                     tmp_path / "per.jsonl", ks=(1, 2))
    assert m["top1"] == 100 / 3 and m["top2"] == 200 / 3 and m["questions"] == 3
    assert json.loads((tmp_path / "m.json").read_text()) == m
    per = [json.loads(l) for l in (tmp_path / "per.jsonl").read_text().splitlines()]
    assert [p["first_hit"] for p in per] == [2, 1, None]


def test_one_parser_reads_a_run_as_hits_and_as_arrays(tmp_path):
    from dcsr.data.runs import read_trec, run_arrays, write_trec

    write_trec(tmp_path / "r.trec", {0: [(7, 2.5), (3, 1.0)], 1: [], 2: [(9, 0.5)]}, tag="t")
    assert read_trec(tmp_path / "r.trec") == {0: [(7, 2.5), (3, 1.0)], 1: [], 2: [(9, 0.5)]}
    pids, scores = run_arrays(tmp_path / "r.trec", n_questions=3, depth=1)
    assert pids.tolist() == [[7], [-1], [9]] and scores.tolist() == [[2.5], [0.0], [0.5]]
    (tmp_path / "bad.trec").write_text("0 Q0 7 1 2.5 t\n0 Q0 x 2 1.0 t\n")
    for reader in (read_trec, lambda p: run_arrays(p, 1, 5)):
        with pytest.raises(InputError, match=r"bad.trec:2: qid, docid and rank must be integers"):
            reader(tmp_path / "bad.trec")


def test_a_rank_given_twice_for_one_question_is_refused_by_both_readers(tmp_path):
    """Some tools write every hit of a question as rank 1 (or 0). Sorting such a run by rank would
    order its ties by passage id, not by score, and move top-k silently (here: the answer-bearing
    passage 2, scored 9.5, would come second); both readers refuse it, naming the line."""
    from dcsr.data.runs import read_trec, run_arrays

    (tmp_path / "tied.trec").write_text("0 Q0 2 1 9.5 t\n0 Q0 1 1 3.0 t\n")
    for reader in (read_trec, lambda p: run_arrays(p, 1, 5)):
        with pytest.raises(InputError, match=r"tied.trec:2: rank 1 is given a second time for question 0 \(passage 1\)"):
            reader(tmp_path / "tied.trec")
    # the same ranks for different questions are fine
    (tmp_path / "ok.trec").write_text("0 Q0 2 1 9.5 t\n1 Q0 1 1 3.0 t\n")
    assert read_trec(tmp_path / "ok.trec") == {0: [(2, 9.5)], 1: [(1, 3.0)]}
    assert run_arrays(tmp_path / "ok.trec", 2, 1)[0].tolist() == [[2], [1]]
