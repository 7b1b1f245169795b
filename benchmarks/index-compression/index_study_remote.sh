#!/usr/bin/env bash
# The compressed-index study of benchmarks/index-compression/index-compression.md on a machine without Snakemake
# (a lent GPU node): embed one passage encoder's corpus, then index, search, merge and score it
# once per FAISS factory, replaying the jobs Snakemake printed here, and compare every factory
# with Flat (benchmarks/index-compression/index_compression.py).
#   benchmarks/index-compression/index_study_remote.sh STUDY OUT [core|sweep]
# STUDY (benchmarks/index-compression/index_study_pack.sh makes it) holds:
#   study.env      RESULTS, CORPUS, MODEL, DATASET, TIMED (questions timed by index_compression.py)
#   results.tar.xz the results folder's inputs of embed_shard, search_shard and merge_runs
#   encoder/       the passage encoder, benchmarks/index-compression/carry_encoder.py pack
#   variants.txt   NAME|FACTORY|SEARCH_PARAMS|REUSE (REUSE: the variant whose index is searched
#                  again with other SEARCH_PARAMS; empty: build the index); the first is Flat
#   jobs/NAME.json its jobs (benchmarks/index-compression/replay_jobs.py parse of a dry run)
# "core" runs the variants without REUSE, "sweep" those with it; each ends with the comparison.
set -euo pipefail
study=$1 out=$2 part=${3:-core}
source "$study/study.env"
if [ ! -d "$RESULTS/models/$MODEL" ]; then
  tar -xJf "$study/results.tar.xz"
  python benchmarks/index-compression/carry_encoder.py unpack "$study/encoder" "$RESULTS/models/$MODEL"
fi
runs=()
while IFS='|' read -r name factory params reuse; do
  [ -n "$name" ] || continue
  dst="$RESULTS-$name"
  [ "$name" = Flat ] && dst=$RESULTS
  if { [ "$part" = core ] && [ -z "$reuse" ]; } || { [ "$part" = sweep ] && [ -n "$reuse" ]; }; then
    if [ "$name" != Flat ]; then
      src=$RESULTS
      [ -n "$reuse" ] && src=$RESULTS-$reuse
      KEEP_INDEX=$reuse benchmarks/index-compression/variant_copy.sh "$src" "$dst" "$CORPUS" "$MODEL"
    fi
    echo "== $name: $factory $params"
    python benchmarks/index-compression/replay_jobs.py run "$study/jobs/$name.json" --parallel 2
  fi
  [ -f "$dst/metrics/$CORPUS/$MODEL/$MODEL/$DATASET.questions.jsonl" ] && runs+=(--run "$name=$dst${params:+:$params}")
done < "$study/variants.txt"
python benchmarks/index-compression/index_compression.py --corpus "$CORPUS" --model "$MODEL" --dataset "$DATASET" \
    --timed-questions "$TIMED" --json "$out/index_compression_$part.json" "${runs[@]}"
