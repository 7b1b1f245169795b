#!/usr/bin/env bash
# The GPU kit: the checks a lent GPU machine is for, as parts of one prepared script (README.md
# beside this file gives the `run` calls). Pack first, here: .venv/bin/python benchmarks/gpu/pack.py
#   smoke  the interpreter, torch / CUDA / GPU, transformers, faiss, snakemake, every import of the
#          kit (pack.py --verify), the precision `auto` resolves to on CUDA, the pins' machine kind
#   cuda   pytest -m cuda tests/test_cuda.py (GradCache per precision, GradScaler, resume, NCCL,
#          two processes on one GPU, embedding on CUDA against the CPU)
#   dag    the ci config's real DAG (tiny BERT) on CUDA from the carried BM25 part, GPU processes
#          sampled each second, then check_pins.py against the ci pins
#   speed  gpu_throughput.py; then training steps at the paper's batch (128, lengths 256/256) with
#          and without GradCache, DCSR too, a bert-base-shaped random encoder
#   bundle every output file but the logs into one outputs-<n>.tgz (a call brings back 8 files)
#   bash benchmarks/gpu/kit.sh PART...        (in the repository's root; results go to $OUT)
# Each part prints its seconds. A `run` call pipes it into `tee $OUT/kit.log` (README.md), which
# comes back even when the call is stopped at its limit.
# Here (no GPU, cp311): KIT_SKIP_INSTALL=1 DCSR_CUDA_SUITE_ON_CPU=1 KIT_SPEED=cpu runs the parts on this
# venv, to try the script itself.
set -uo pipefail
[ $# -ge 1 ] || { echo "usage: $0 smoke|cuda|dag|speed|bundle ..." >&2; exit 2; }
OUT=${OUT:-/tmp/kit-out}
KIT=${KIT:-.kit}
REPO=$PWD
mkdir -p "$OUT"
T0=$(date +%s)
since() { echo "[kit] $1 at $(( $(date +%s) - T0 )) s"; }

# ---------------------------------------------------------------- the environment (once a machine)
# pip into a fresh folder; `python` is a wrapper script written to a fresh path: a symbolic link to a
# virtual environment's python3 loses its packages, and writing through an old link with `>` overwrites
# the interpreter itself (the first GPU session lost its 15 minutes to both)
if [ -z "${KIT_SKIP_INSTALL:-}" ]; then
  if ! cmp -s "$KIT/MANIFEST.json" /tmp/site/.kit-manifest.json 2>/dev/null; then
    rm -rf /tmp/site && python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site \
        "$KIT"/wheels/*.whl || { echo "[kit] pip install of $KIT/wheels failed"; exit 1; }
    cp "$KIT/MANIFEST.json" /tmp/site/.kit-manifest.json
  fi
  rm -rf /tmp/bin && mkdir -p /tmp/bin
  printf '#!/bin/sh\nexec %s "$@"\n' "$(command -v python3)" > /tmp/bin/python && chmod +x /tmp/bin/python
  export PATH=/tmp/bin:$PATH PYTHONPATH=/tmp/site:$REPO/src
  since "installed"
else
  export PYTHONPATH=$REPO/src${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export DCSR_CACHE=${DCSR_CACHE:-/tmp/dcsr-cache}

smoke() {
  nvidia-smi -L 2>/dev/null || echo "no nvidia-smi"
  lscpu | grep -E "Model name|^CPU\(s\)"
  python -c '
import sys, torch, transformers, faiss
print("python", sys.version.split()[0], sys.executable)
print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available(),
      "gpu", torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
      "bf16", torch.cuda.is_bf16_supported() if torch.cuda.is_available() else None)
print("transformers", transformers.__version__, "faiss", faiss.__version__,
      "faiss gpus", faiss.get_num_gpus() if hasattr(faiss, "get_num_gpus") else 0)
from dcsr.models.precision import resolve
print("precision auto on cuda:", resolve("auto", "cuda") if torch.cuda.is_available() else "(no cuda)",
      "| on cpu:", resolve("auto", "cpu"))
' || return 1
  local v
  v=$(python -m snakemake --version) || return 1
  echo "snakemake $v"
  # the kind the pins know this machine's runs by (device, precision, runtime); machine_key() before 2026-11-27
  python workflow/scripts/check_pins.py --kind \
      || python -c "from dcsr.evaluation.pins import machine_key; print('pins machine kind:', machine_key())"
  python benchmarks/gpu/pack.py --verify || return 1
}

cuda() {
  local timeout=""
  python -c "import pytest_timeout" 2>/dev/null && timeout="--timeout=90"
  # tests/test_cuda.py rather than tests/: other test modules import what the device lacks (the Slurm
  # plugin, openvino), and one collection error stops pytest before any test runs
  python -m pytest -m cuda tests/test_cuda.py -v -s -p no:cacheprovider $timeout --junitxml "$OUT/cuda-junit.xml" \
      2>&1 | tee "$OUT/cuda.log"
  local rc=${PIPESTATUS[0]}
  grep -o "\[cuda-suite\].*" "$OUT/cuda.log" > "$OUT/cuda-measured.txt"
  cat "$OUT/cuda-measured.txt"
  return $rc
}

dag() {
  local work=/tmp/dag results=/tmp/dag/results
  rm -rf "$work" && mkdir -p "$work" && tar -xzf "$KIT/dag.tar.gz" -C "$work" || return 1  # tar keeps the mtimes
  since "unpacked the BM25 part"
  # the GPU's processes each second, to see how many jobs share it
  # (a '#' line: the time, the GPU's utilization and memory in use; then one line a process)
  (while :; do echo "# $(date +%T) $(nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader)"
      nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader; sleep 1; done) \
      > "$OUT/gpu_apps.txt" 2>&1 &
  local sampler=$!
  # --rerun-triggers mtime: the BM25 jobs were made on another machine, whose code digests, paths
  # and software differ; their outputs are newer than their inputs, which is what counts here
  # stopped inside the call's limit (README: 360 s), so that the table, the pins and the logs still come back
  # DCSR_JOBS_PER_GPU: the tiny BERT's jobs share the GPU (dcsr.pipeline.gpus); one a GPU, on
  # 2026-11-28's H200, ran 26 of the 169 jobs in 290 s, each GPU job holding the GPU through its
  # ~10 s of imports and CUDA start. -k: Snakemake stopped by TERM did not exit within 75 s there
  DCSR_JOBS_PER_GPU=${DCSR_JOBS_PER_GPU:-6} timeout -k 15 "${KIT_DAG_SECONDS:-290}" python -m snakemake --snakefile "$REPO/Snakefile" --directory "$work" --cores "${KIT_CORES:-16}" \
      --scheduler greedy --rerun-triggers mtime --keep-going --show-failed-logs \
      --configfile "$REPO/config/generated.yaml" "$REPO/config/ci.yaml" "$work/over.yaml" \
      "$REPO/benchmarks/gpu/ci_cuda.yaml" > "$OUT/dag-snakemake.log" 2>&1
  local rc=$?
  kill "$sampler" 2>/dev/null
  since "snakemake rc=$rc"
  tail -5 "$OUT/dag-snakemake.log"
  python - "$OUT/gpu_apps.txt" <<'EOF'
import sys
samples, now = [], []
for line in open(sys.argv[1]):
    if line.startswith("#"):
        samples.append(now); now = []
    elif line.strip() and "No running" not in line and "not found" not in line:
        now.append(line)
samples.append(now)
busy = [len(s) for s in samples if s]
print(f"[kit] GPU processes: {len(samples)} samples, {len(busy)} with any, at most {max(busy, default=0)} at once, "
      f"mean {sum(busy) / max(1, len(busy)):.1f} when busy")
EOF
  cp "$results/tables/dpr_dcsr.csv" "$OUT/dpr_dcsr.csv" 2>/dev/null
  python workflow/scripts/check_pins.py --run ci --table "$results/tables/dpr_dcsr.csv" > "$OUT/check_pins.txt" 2>&1
  echo "[kit] check_pins rc=$? (1: cells moved)"; cat "$OUT/check_pins.txt"
  python benchmarks/demo/job_times.py --results "$results" > "$OUT/job_times.txt" 2>&1 || true
  tar -czf "$OUT/dag-logs.tgz" -C "$work" results/logs results/benchmarks results/tables 2>/dev/null
  return $rc
}

speed() {
  # embedding first (the issue's bar: 11,700 passages/s of real SQuAD passages with a bert-base-shaped
  # encoder on one H100; torch-cast: the weights in bf16, not measured before), then a training step
  # at the paper's batch of 128 with GradCache at 256/256
  local emb="--passages 20000 --batch-sizes 512 1024 --repeats 1 --compile off --profile --vectors 0 --backends torch torch-cast"
  [ "${KIT_SPEED:-}" = cpu ] && emb="--passages 64 --batch-sizes 16 --repeats 1 --compile off --vectors 0 --layers 2 --hidden 64 --heads 2 --intermediate 128"
  python benchmarks/gpu/gpu_throughput.py $emb --out "$OUT/gpu_throughput.json"; since "gpu_throughput rc=$?"
  local scale="--init bert-base-random --batch-size 128 --question-max-length 256 --passage-max-length 256 --steps 12 --warmup 2"
  [ "${KIT_SPEED:-}" = cpu ] && scale="--init tiny --batch-size 8 --question-max-length 256 --passage-max-length 256 --steps 3 --warmup 1"
  python benchmarks/gpu/train_steps.py $scale --grad-cache-chunk 32 --out "$OUT/train_steps_dpr_gc32.json"; since "train_steps dpr gc32 rc=$?"
  python benchmarks/gpu/train_steps.py $scale --method dcsr --grad-cache-chunk 32 --out "$OUT/train_steps_dcsr_gc32.json"; since "train_steps dcsr gc32 rc=$?"
  python benchmarks/gpu/train_steps.py $scale --grad-cache-chunk 0 --out "$OUT/train_steps_dpr_onepass.json"; since "train_steps dpr one pass rc=$?"
}

bundle() {
  # every file of $OUT but the kit-*.log files into one outputs-<n>.tgz: a call brings back at most 8 files
  # (2026-11-28 lost the training steps' JSON files and the smoke log to that limit)
  local n=1 files
  while [ -e "$OUT/outputs-$n.tgz" ]; do n=$((n + 1)); done
  files=$(cd "$OUT" && find . -maxdepth 1 -type f ! -name 'kit-*.log' ! -name 'outputs-*.tgz' -printf '%P\n')
  [ -n "$files" ] || return 0
  (cd "$OUT" && tar -czf "outputs-$n.tgz" $files && rm -f $files) && echo "[kit] bundled into outputs-$n.tgz:" $files
}

main() {  # a function, so that bash has read the whole script before it runs any part
  local rc=0 part r
  for part in "$@"; do
    case $part in
      smoke|cuda|dag|speed|bundle) since "$part starts"; $part; r=$?; since "$part ends rc=$r"; [ $r -eq 0 ] || rc=$r ;;
      *) echo "unknown part $part" >&2; rc=2 ;;
    esac
  done
  return $rc
}
main "$@"
exit $?
