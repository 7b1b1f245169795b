#!/usr/bin/env bash
# A hard-linked copy of a results folder without what follows one passage encoder's index on one
# corpus (its index, hits, runs, metrics and HasAns temperatures, with the index's and search's
# benchmark files and logs), for that to be made again with another FAISS factory or search
# parameters (benchmarks/index-compression/index_variants.sh,
# benchmarks/index-compression/index_study_remote.sh). Outputs are written atomically (a new file
# renamed over the link), so the source is never changed.
#   benchmarks/index-compression/variant_copy.sh SOURCE_RESULTS DEST CORPUS MODEL
# KEEP_INDEX=1 keeps the index (a search-effort sweep).
set -euo pipefail
src=$1 dst=$2 corpus=$3 model=$4
rm -rf "$dst"
cp -al "$src" "$dst"
if [ -z "${KEEP_INDEX:-}" ]; then
  rm -rf "$dst/index/$corpus/$model" "$dst/benchmarks/index_shard/$corpus/$model" "$dst/logs/index_shard/$corpus/$model"
fi
rm -rf "$dst/hits/$corpus/$model" "$dst/benchmarks/search_shard/$corpus/$model" "$dst/logs/search_shard/$corpus/$model"
find "$dst/runs/$corpus" "$dst/metrics/$corpus" "$dst/temperature/$corpus" -path "*/$model/*" -prune -exec rm -rf {} + 2>/dev/null || true
