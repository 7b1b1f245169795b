from dcsr.answers import has_answer, tokens


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
