#!/usr/bin/env bash
# The device check of issues 26 and 6, as one prepared script for a lent GPU machine (no
# Snakemake, Java or FAISS there; see benchmarks/index-compression/index-compression.md, "On a GPU machine"):
#   smoke: the interpreter, the imports, the FAISS wheel and the encoder's unpack (one short
#          call first: timeout_s 120)
#   rates: issue 6's GPU rates (gpu_throughput.py, train_steps.py for DPR and DCSR)
#   index: issue 26's compressed-index study (benchmarks/index-compression/index_study_remote.sh core, then sweep)
#   study: rates, then index (one call; on a warm machine rates and index can be two calls)
#   benchmarks/gpu/device_study.sh STUDY OUT smoke|rates|index|study
# STUDY is benchmarks/index-compression/index_study_pack.sh's folder (carried with the run's `carry`), holding
# the FAISS wheel (pip download faiss-cpu) and, for the rates, train/train.json and train/dev.json.
set -uo pipefail
study=$1 out=$2 part=${3:-smoke}
mkdir -p "$out"
# pip into a fresh folder; `python` is a wrapper script written to a fresh path: a symbolic link
# to a virtual environment's python3 loses its packages, and writing through an old link with
# `>` overwrites the interpreter itself (the first GPU session lost its 15 minutes to both)
rm -rf /tmp/site && python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site "$study"/*.whl || exit 1
rm -rf /tmp/bin && mkdir -p /tmp/bin
printf '#!/bin/sh\nexec %s "$@"\n' "$(command -v python3)" > /tmp/bin/python && chmod +x /tmp/bin/python
extra=""
[ -d "$study/site" ] && extra=":$PWD/$study/site"
export PATH=/tmp/bin:$PATH PYTHONPATH=/tmp/site:$PWD/src$extra PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
nvidia-smi -L; lscpu | grep -E "Model name|^CPU\(s\)"
python -c "import torch, transformers, faiss; print(torch.__version__, transformers.__version__, faiss.__version__, torch.cuda.is_available())" || exit 1
source "$study/study.env"
t0=$(date +%s)
if [ ! -d "$RESULTS/models/$MODEL" ]; then
  tar -xJf "$study/results.tar.xz" && python benchmarks/index-compression/carry_encoder.py unpack "$study/encoder" "$RESULTS/models/$MODEL" || exit 1
fi
echo "unpacked at $(( $(date +%s) - t0 )) s"
[ "$part" = smoke ] && exit 0
if [ "$part" = rates ] || [ "$part" = study ]; then
  python benchmarks/gpu/gpu_throughput.py --passages 10000 --vectors 1000000 --queries 2048 --keep-checkpoint /tmp/bb \
      --out "$out/gpu_throughput.json"; echo "gpu_throughput rc=$? at $(( $(date +%s) - t0 )) s"
  if [ -f "$study/train/train.json" ]; then
    for m in dpr dcsr; do
      python benchmarks/gpu/train_steps.py --method $m --sentences "$RESULTS/sentences/$CORPUS/sentences.tsv" --init /tmp/bb \
          --train "$study/train/train.json" --dev "$study/train/dev.json" --passage-max-length 256 --question-max-length 256 \
          --steps 24 --epochs 4 --out "$out/train_steps_$m.json"; echo "train_steps $m rc=$? at $(( $(date +%s) - t0 )) s"
    done
  fi
fi
if [ "$part" = index ] || [ "$part" = study ]; then
  # the jobs' logs after each part, so that a call stopped at its limit in the sweep still brings the core's back
  logs() { tar -czf "$out/logs.tgz" "$RESULTS"*/logs "$RESULTS"*/benchmarks; }
  bash benchmarks/index-compression/index_study_remote.sh "$study" "$out" core; echo "core rc=$? at $(( $(date +%s) - t0 )) s"; logs
  bash benchmarks/index-compression/index_study_remote.sh "$study" "$out" sweep; echo "sweep rc=$? at $(( $(date +%s) - t0 )) s"; logs
fi
