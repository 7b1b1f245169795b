"""benchmarks/real-answers/check_real_answers.py on small files of the three public formats: what
it reports for a CuratedTREC pattern DPR never finds, an escaped accent that compiles, and
answer lists that pass."""

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "real-answers" / "check_real_answers.py"


def test_the_check_reports_what_dpr_never_finds(tmp_path):
    (tmp_path / "curated.tsv").write_text(
        "1\tfactoid\tWho led Vichy France?\tLaval|Petain|Marshal Philippe P\\étain\n"
        "2\tfactoid\tWho explored the Southwest?\tCoronado|Francisco V\\ázquez de Coronado\n"
        "3\tfactoid\tWhat is the capital of France?\tParis\n", encoding="utf-8")
    (tmp_path / "nq.jsonl").write_text('{"question": "capital of france", "answer": ["Paris"]}\n', encoding="utf-8")
    (tmp_path / "wq.json").write_text('[{"qId": "wqs0", "answers": ["Paris"], "qText": "capital of france?"}]',
                                      encoding="utf-8")
    (tmp_path / "squad.json").write_text(json.dumps({"data": [{"title": "T", "paragraphs": [{"context": "Paris.", "qas": [
        {"id": "1", "question": "capital of france?", "answers": [{"text": "Paris", "answer_start": 0}] * 2},
        {"id": "2", "question": "what ends it?", "answers": [{"text": "Paris", "answer_start": 0},
                                                             {"text": "\u200b", "answer_start": 5}]}]}]}]}),
        encoding="utf-8")
    out = tmp_path / "out.json"
    r = subprocess.run([sys.executable, str(SCRIPT), "--curatedtrec", str(tmp_path / "curated.tsv"),
                        "--nq-open", str(tmp_path / "nq.jsonl"), "--webquestions", str(tmp_path / "wq.json"),
                        "--squad", str(tmp_path / "squad.json"),
                        "--out", str(out)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    curated, nq, wq, squad = json.loads(out.read_text())["files"]
    assert curated["questions"] == 3 and curated["read_by_default"].startswith("refused: ")
    assert ":1: answer 0 " in curated["read_by_default"] and curated["read_with_never_found"] == 3
    assert [x["line"] for x in curated["answers_never_found"]] == ["1"]
    assert curated["dpr_never_compiles"] == 1 and curated["same_as_dpr"] is True
    assert [x["line"] for x in curated["escaped_accent_that_compiles"]] == [2]  # \á is \a, a bell, after NFD
    assert (nq["questions"], nq["read_by_default"]) == (1, 1) and (wq["questions"], wq["read_by_default"]) == (1, 1)
    assert (nq["answers"], nq["answers_without_a_token"], wq["answers_without_a_token"]) == (1, 0, 0)
    # an answer of invisible characters has no token: DPR finds it in every passage; the reader refuses it
    assert (squad["questions"], squad["answers"], squad["answers_without_a_token"]) == (2, 4, 1)
    assert squad["questions_without_answers"] == 0 and squad["read_by_default"].startswith("refused: ")
