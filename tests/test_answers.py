from dcsr.data.answers import has_answer, tokens


def test_tokens_are_drqa_simple_tokens():
    assert tokens("Hello, World! It's 3.5") == ["hello", ",", "world", "!", "it", "'", "s", "3", ".", "5"]


def test_token_sequence_match_not_substring():
    text = "The Eiffel Tower was finished in 1889 in Paris."
    assert has_answer(["eiffel tower"], text)
    assert has_answer(["1889"], text)
    assert not has_answer(["889"], text)  # a substring of a token is not a match
    assert not has_answer(["Paris France"], text)
    assert has_answer(["London", "paris"], text)


def test_unicode_normalisation_matches_decomposed_forms():
    assert has_answer(["Zürich"], "He moved to Zu\u0308rich in 1902.")
    assert has_answer(["Mo\u0308tley"], "Mötley Crüe played.")


def test_regex_mode_as_curatedtrec():
    assert has_answer([r"19[56]\d"], "released in 1964 worldwide", match_type="regex")
    assert not has_answer([r"^1964$"], "released in 1964 worldwide", match_type="regex")
    assert not has_answer(["(unclosed"], "anything", match_type="regex")


def test_empty_answer_matches_every_passage_as_in_dpr():
    # DPR's loop compares the empty token list with text[i:i], which is always equal
    assert has_answer([""], "any passage")
    assert has_answer([""], "")


def test_passage_matcher_agrees_with_has_answer_and_tokenizes_each_passage_once(monkeypatch):
    import dcsr.data.answers as answers

    passages = {1: "The Eiffel Tower was finished in 1889 in Paris.", 2: "He moved to Zu\u0308rich in 1902.", 3: ""}
    questions = [["eiffel tower"], ["889"], ["Zürich", "nowhere"], [""], ["Paris France"], ["in"]]
    # by hand (has_answer itself runs on PassageMatcher, so it is no independent reference):
    # passages 1, 2, 3 per question; "" matches every passage, even the empty one
    truth = [(True, False, False), (False, False, False), (False, True, False), (True, True, True),
             (False, False, False), (True, True, False)]
    expected = {(q, pid): truth[q][pid - 1] for q in range(len(questions)) for pid in passages}
    # has_answer agrees (and has tokenized, and cached, the answers before tokens is counted)
    assert {(q, pid): has_answer(a, text) for q, a in enumerate(questions) for pid, text in passages.items()} == expected
    calls = []
    real_tokens = answers.tokens
    monkeypatch.setattr(answers, "tokens", lambda text: calls.append(text) or real_tokens(text))
    matcher = answers.PassageMatcher("string")
    got = {(q, pid): matcher(a, pid, text) for q, a in enumerate(questions) for pid, text in passages.items()}
    assert got == expected
    assert any(got.values()) and not all(got.values())
    assert sorted(calls) == sorted(passages.values())  # once per passage, not per (question, passage)

    regex_matcher = answers.PassageMatcher("regex")
    for pattern, text, hit in [(r"19[56]\d", "released in 1964", True), (r"^1964$", "released in 1964", False),
                               ("(bad", "x", False)]:
        assert regex_matcher([pattern], text, text) is hit
