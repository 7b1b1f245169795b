"""The real DAG: lint, a dry run, and one end-to-end run on a tiny config."""

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

SNAKEMAKE = str(Path(sys.executable).parent / "snakemake")


def snakemake(repo, workdir, *args, timeout=900):
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}", "HF_HUB_OFFLINE": "1"}
    return subprocess.run(
        [SNAKEMAKE, "--snakefile", str(repo / "Snakefile"), "--directory", str(workdir), *args],
        cwd=workdir, env=env, capture_output=True, text=True, timeout=timeout,
    )


def test_lint_has_no_findings(repo, tmp_path):
    r = snakemake(repo, tmp_path, "--lint")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Congratulations, your workflow is in a good condition!" in r.stdout + r.stderr


def test_dry_run_lists_every_stage(repo, tmp_path):
    r = snakemake(repo, tmp_path, "-n", "--quiet", "rules")
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout + r.stderr
    for rule in ["generate_corpus", "generate_dataset", "index_bm25", "mine_bm25_negatives", "search_bm25",
                 "export_encoder", "train_biencoder", "embed_shard", "embed_questions", "index_shard",
                 "search_shard", "merge_runs", "evaluate_topk", "make_table"]:
        assert rule in out, f"{rule} missing from the dry run:\n{out}"


def test_config_type_error_names_the_key(repo, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("embed: {shards: two, batch_size: 8}\n")
    r = snakemake(repo, tmp_path, "-n", "--configfile", str(repo / "config" / "config.yaml"), str(bad))
    assert r.returncode != 0
    assert "'two' is not of type 'integer'" in r.stdout + r.stderr
    assert not (tmp_path / "results").exists()


@pytest.mark.slow
def test_pipeline_end_to_end_on_tiny_config(repo, tmp_path, tiny_bert):
    over = tmp_path / "over.yaml"
    over.write_text(yaml.safe_dump({"results": str(tmp_path / "results"), "encoders": {"tiny": str(tiny_bert)}}))
    r = snakemake(repo, tmp_path, "--cores", "2", "--configfile", str(repo / "config" / "config.yaml"), str(repo / "config" / "ci.yaml"), str(over))
    assert r.returncode == 0, (r.stdout + r.stderr)[-6000:]
    results = tmp_path / "results"
    rows = list(csv.DictReader(open(results / "tables" / "dpr_dcsr.csv")))
    got = {(row["row"], row["metric"]): float(row["ours"]) for row in rows}
    labels = ("BM25", "Untrained MiniLM (passages)", "Untrained MiniLM (sentences + HasAns)", "DPR", "DCSR")
    assert set(r for r, _ in got) == set(labels)
    for (row, metric), value in got.items():
        assert 0.0 <= value <= 100.0
    # recall is monotone in k for every row
    for row in labels:
        vals = [got[(row, f"top{k}")] for k in (1, 5, 20, 100)]
        assert vals == sorted(vals), (row, vals)
    # the tiny corpus has fewer than 100 passages per question's reach: top-100 sees them all
    assert got[("BM25", "top100")] == 100.0
    # every rule wrote a log, and the trained models have the documented layout
    for model, method in (("dpr", "dpr"), ("dcsr", "dcsr")):
        assert (results / "logs" / "train_biencoder" / f"{model}.log").stat().st_size > 0
        for part in ("question_encoder", "passage_encoder", "dcsr.json"):
            assert (results / "models" / model / part).exists()
        assert json.loads((results / "models" / model / "dcsr.json").read_text())["method"] == method
    # DCSR trains on sentences: its log reports the questions it could use
    assert "questions have an answer-bearing sentence" in (results / "logs" / "train_biencoder" / "dcsr.log").read_text()
    # DCSR's index holds one vector per sentence: more vectors than passages, passage ids repeat
    ids = np.concatenate([np.load(results / "embeddings" / "demo" / "dcsr" / f"shard-{i}.ids.npy") for i in (0, 1)])
    sents = np.concatenate([np.load(results / "embeddings" / "demo" / "dcsr" / f"shard-{i}.sents.npy") for i in (0, 1)])
    dpr_ids = np.concatenate([np.load(results / "embeddings" / "demo" / "dpr" / f"shard-{i}.ids.npy") for i in (0, 1)])
    assert len(ids) > len(dpr_ids) and set(ids) == set(dpr_ids) and sents.min() == 0
    # the DCSR run ranks distinct passages (HasAns), 100 per question
    run = (results / "runs" / "demo" / "dcsr" / "dcsr" / "encyclopedia.trec").read_text().splitlines()
    first_q = [line.split()[2] for line in run if line.split()[0] == run[0].split()[0]]
    assert len(first_q) == len(set(first_q)) == min(100, len(dpr_ids))
    md = (results / "tables" / "dpr_dcsr.md").read_text()
    assert "| DCSR | encyclopedia |" in md
    # DCSR Table 1 (questions per gold passage) and Figure 4 (dev accuracy per epoch, DPR and DCSR)
    table1 = list(csv.DictReader(open(results / "tables" / "table1_questions_per_passage.csv")))
    assert {r["row"] for r in table1} == {"encyclopedia"} and "encyclopedia (ours)" in (results / "tables" / "table1_questions_per_passage.md").read_text()
    assert (results / "figures" / "validation-encyclopedia.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    curves = list(csv.DictReader(open(results / "figures" / "validation-encyclopedia.csv")))
    assert {r["label"] for r in curves} == {"dpr", "dcsr"}


@pytest.mark.slow
def test_killed_training_resumes_when_snakemake_runs_again(repo, tmp_path, tiny_bert):
    import json
    import signal
    import time

    results = tmp_path / "results"
    over = tmp_path / "over.yaml"
    over.write_text(yaml.safe_dump({
        "results": str(results), "encoders": {"tiny": str(tiny_bert)},
        "train": {"max_steps": 200, "epochs": 40, "checkpoint_every_steps": 10},
    }))
    target = str(results / "models" / "dpr")
    # the target goes first: --configfile takes every following argument as a file
    args = [target, "--cores", "2", "--configfile", str(repo / "config" / "config.yaml"), str(repo / "config" / "ci.yaml"), str(over)]
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    proc = subprocess.Popen([SNAKEMAKE, "--snakefile", str(repo / "Snakefile"), "--directory", str(tmp_path), *args],
                            cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    state = results / "checkpoints" / "dpr" / "last" / "trainer_state.pt"
    deadline = time.time() + 600
    while not state.exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.2)
    assert state.exists(), "training never wrote a checkpoint"
    os.killpg(proc.pid, signal.SIGKILL)  # the whole job: snakemake and the training process
    proc.wait()
    assert not (results / "models" / "dpr").exists(), "a killed run must leave no final model"

    # A hard kill leaves Snakemake's lock behind: unlock once, as the README says, then rerun.
    assert snakemake(repo, tmp_path, "--unlock", *args).returncode == 0
    r = snakemake(repo, tmp_path, "--rerun-incomplete", *args)
    assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]
    log = (results / "logs" / "train_biencoder" / "dpr.log").read_text()
    assert "resuming from step" in log, log[-2000:]
    meta = json.loads((results / "models" / "dpr" / "dcsr.json").read_text())
    assert meta["step"] == 200
