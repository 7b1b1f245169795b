"""A merged run holds one kind of vectors (dcsr.retrieval.shard_kinds): the merge refuses the
shards of one (corpus, passage encoder) embedded with different precisions, backends or kinds,
and the embedding jobs' shard-<n>.json are inputs of the merge."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dcsr.errors import InputError

REPO = Path(__file__).resolve().parents[1]
CPU = "AuthenticAMD/AVX2 fp32 torch"


def _stats(folder: Path, n: int, precision="fp32", backend="torch", kind=CPU, **extra) -> Path:
    path = folder / f"shard-{n}.json"
    path.write_text(json.dumps({"passages": 10, "device": "cpu", "precision": precision, "backend": backend,
                                "kind": kind, **extra}))
    return path


def test_shards_of_one_kind_pass_and_two_kinds_are_refused_naming_two_shards(tmp_path):
    from dcsr.retrieval.shard_kinds import check_one_kind

    same = [_stats(tmp_path, n) for n in range(3)]
    assert check_one_kind(same) == {"precision": "fp32", "backend": "torch", "kind": CPU}
    odd = _stats(tmp_path, 2, precision="bf16", kind="AuthenticAMD/AVX512 bf16 torch")
    with pytest.raises(InputError) as e:
        check_one_kind(same[:2] + [odd])
    assert str(e.value) == (
        f"{odd}: was embedded with precision bf16, kind AuthenticAMD/AVX512 bf16 torch, but {same[0]} with "
        f"precision fp32, kind {CPU}: the shards of one corpus and passage encoder must be embedded alike, or "
        "the merged run ranks vectors of two kinds against each other; embed the shards that differ again with "
        "the others' embed.precision, embed.backend and device")
    assert "\n" not in str(e.value)
    # the backend alone (openvino on one shard, torch on the others) is another kind too
    _stats(tmp_path, 2)
    _stats(tmp_path, 1, backend="openvino", kind=CPU.replace("torch", "openvino"))
    with pytest.raises(InputError, match=r"shard-1\.json: was embedded with backend openvino, kind .*, but .*shard-0"):
        check_one_kind(same)
    # a key a shard's job did not record yet is not compared
    (tmp_path / "shard-1.json").write_text(json.dumps({"passages": 10, "precision": "fp32"}))
    assert check_one_kind(same)["kind"] == CPU


def test_an_unreadable_sidecar_names_itself(tmp_path):
    from dcsr.retrieval.shard_kinds import check_one_kind

    (tmp_path / "shard-0.json").write_text("{")
    with pytest.raises(InputError, match=r"shard-0\.json: is not an embedding shard's stats file"):
        check_one_kind([tmp_path / "shard-0.json"])


def test_the_merge_reads_every_shard_sidecar_of_its_passage_encoder():
    from test_plan import Wildcards, load

    from dcsr.pipeline.plan import Plan

    plan = Plan(load("config.yaml"), basedir=REPO)
    corpus, qmodel, pmodel, dataset = sorted(plan.dense_runs())[0]
    inputs = plan.merge_inputs(Wildcards(corpus=corpus, qmodel=qmodel, pmodel=pmodel, dataset=dataset))
    assert inputs["shard_stats"] == [f"results/embeddings/{corpus}/{pmodel}/shard-{i}.json"
                                     for i in plan.shards(corpus)]
    assert "--shard-stats {input.shard_stats:q}" in (REPO / "rules" / "search.smk").read_text(encoding="utf-8")


def test_merge_runs_refuses_mixed_shards_in_one_line(tmp_path):
    import numpy as np

    from dcsr.integrity import seal

    for n in range(2):
        with open(tmp_path / f"hits-{n}.npz", "wb") as fh:
            np.savez(fh, scores=np.ones((2, 3), dtype=np.float32), ids=np.arange(6, dtype=np.int64).reshape(2, 3))
        seal(tmp_path / f"hits-{n}.npz")
    a, b = _stats(tmp_path, 0), _stats(tmp_path, 1, precision="bf16")
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    args = [sys.executable, str(REPO / "workflow" / "scripts" / "merge_runs.py"), str(tmp_path / "hits-0.npz"),
            str(tmp_path / "hits-1.npz"), "--output", str(tmp_path / "out" / "run.trec"), "--k", "3"]
    r = subprocess.run([*args, "--shard-stats", str(a), str(b)], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stderr
    assert r.stderr.splitlines()[-1].startswith(f"error: {b}: was embedded with precision bf16, but {a} with precision fp32")
    assert not (tmp_path / "out").exists()
    b.write_text(a.read_text())
    r = subprocess.run([*args, "--shard-stats", str(a), str(b)], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr and (tmp_path / "out" / "run.trec").is_file()
