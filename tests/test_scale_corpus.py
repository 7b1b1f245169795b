"""A generated corpus topped up to a stated size (dcsr.fixtures.scale): the rehearsal's corpus."""

import pytest

from dcsr.errors import InputError
from dcsr.fixtures.scale import sized_corpus
from dcsr.fixtures.synth import build_demo


@pytest.fixture(scope="module")
def world():
    return build_demo(seed=5, n_entities=60)


def test_the_corpus_has_the_size_asked_for_distinct_passages_and_the_question_world_first(world):
    n = len(world.passages) + 1500
    out = list(sized_corpus(world.passages, n, seed=5))
    assert len(out) == n
    assert [p.id for p in out] == list(range(1, n + 1))
    assert len({p.text for p in out}) == n
    # the questions' passages keep their ids and texts
    assert [(p.id, p.text, p.title) for p in out[: len(world.passages)]] == \
        [(p.id, p.text, p.title) for p in world.passages]
    filler = out[len(world.passages):]
    assert all(60 <= len(p.text.split()) <= 140 and p.title for p in filler)


def test_the_same_seed_gives_the_same_corpus_and_another_seed_another_filler(world):
    n = len(world.passages) + 300
    a = [p.text for p in sized_corpus(world.passages, n, seed=5)]
    assert a == [p.text for p in sized_corpus(world.passages, n, seed=5)]
    b = [p.text for p in sized_corpus(world.passages, n, seed=6)]
    assert a[: len(world.passages)] == b[: len(world.passages)] and a[len(world.passages):] != b[len(world.passages):]


def test_fewer_passages_than_the_question_world_is_an_error_naming_the_key(world):
    with pytest.raises(InputError, match=r"corpora\.wiki\.generate\.passages.*fewer than"):
        list(sized_corpus(world.passages, len(world.passages) - 1, seed=5, key="corpora.wiki.generate.passages"))
    assert len(list(sized_corpus(world.passages, len(world.passages), seed=5))) == len(world.passages)
