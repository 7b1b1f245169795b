"""Hybrid retrieval (dcsr.retrieval.fusion) on hand-computed examples."""

import pytest

from dcsr.errors import InputError
from dcsr.retrieval.fusion import choose_weight, fuse_runs, linear_fusion, reciprocal_rank_fusion

BM25 = [(1, 12.0), (2, 10.0), (3, 4.0)]  # normalized: 1 -> 1.0, 2 -> 0.75, 3 -> 0.0
DENSE = [(3, 0.9), (4, 0.5), (1, 0.1)]  # normalized: 3 -> 1.0, 4 -> 0.5, 1 -> 0.0


def test_linear_fusion_by_hand():
    # weight 0.4 on dense: 1: 0.6*1.0 + 0.4*0 = 0.6; 2: 0.6*0.75 = 0.45; 3: 0.4*1.0 = 0.4; 4: 0.4*0.5 = 0.2
    fused = linear_fusion(BM25, DENSE, 0.4)
    assert [pid for pid, _ in fused] == [1, 2, 3, 4]
    assert [s for _, s in fused] == pytest.approx([0.6, 0.45, 0.4, 0.2])
    # weight 0.8: 3: 0.8; 4: 0.4; 1: 0.2; 2: 0.15
    assert [pid for pid, _ in linear_fusion(BM25, DENSE, 0.8)] == [3, 4, 1, 2]
    assert [pid for pid, _ in linear_fusion(BM25, DENSE, 0.0, k=2)] == [1, 2]  # BM25 alone
    assert [pid for pid, _ in linear_fusion(BM25, DENSE, 1.0)][:2] == [3, 4]  # dense alone
    with pytest.raises(InputError, match="weight"):
        linear_fusion(BM25, DENSE, 1.5)


def test_reciprocal_rank_fusion_by_hand():
    # 1: 1/61 + 1/63; 3: 1/63 + 1/61; 2: 1/62; 4: 1/62 -> ties broken by passage id
    fused = reciprocal_rank_fusion([BM25, DENSE])
    assert [pid for pid, _ in fused] == [1, 3, 2, 4]
    assert fused[0][1] == pytest.approx(1 / 61 + 1 / 63) and fused[2][1] == pytest.approx(1 / 62)


def test_fusing_runs_of_other_questions_is_an_error():
    with pytest.raises(InputError, match="different questions"):
        fuse_runs({0: BM25, 1: BM25}, {0: DENSE}, "rrf")
    assert fuse_runs({0: BM25, 1: []}, {0: DENSE, 1: []}, "rrf")[1] == []


def test_the_weight_is_the_one_that_answers_the_dev_questions_best():
    # question 0's answer (passage 4) is second for BM25 and first for the dense run:
    #   fused 1: 1 - w, 4: 0.8 (1 - w) + w = 0.8 + 0.2 w, 2: 0.5 w -> 4 on top for w > 1/6;
    # question 1's answer (passage 7) is first for BM25 and last for the dense run:
    #   fused 7: 1 - w, 8: w -> 7 on top for w <= 0.5 (a tie goes to the lower passage id)
    bm25 = {0: [(1, 10.0), (4, 8.0), (2, 0.0)], 1: [(7, 10.0), (8, 0.0)]}
    dense = {0: [(4, 1.0), (2, 0.5), (1, 0.0)], 1: [(8, 1.0), (7, 0.0)]}
    gold = {0: 4, 1: 7}
    choice = choose_weight(bm25, dense, lambda q, pid: pid == gold[q], ks=[1])
    top1 = {w: r["top1"] for w, r in choice["grid"].items()}
    assert top1 == {"0": 50.0, "0.1": 50.0, "0.2": 100.0, "0.3": 100.0, "0.4": 100.0, "0.5": 100.0,
                    "0.6": 50.0, "0.7": 50.0, "0.8": 50.0, "0.9": 50.0, "1": 50.0}
    assert choice["weight"] == 0.5 and choice["questions"] == 2  # of the best, the closest to 0.5
