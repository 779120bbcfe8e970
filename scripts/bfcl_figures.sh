#!/bin/bash
# BFCL simple on Gemma 3 270M and the bundled model: greedy, grammar-constrained greedy, tool_self_consistency N=8
# Usage: MODELS="gemma bundled" LIMIT=8 scripts/bfcl_figures.sh   (after make setup; prints to $TMPDIR/bfcl_MODEL.txt)
set -e
cd "$(dirname "$0")/.."
D=${TMPDIR:-/tmp}/bfcl_wf; mkdir -p $D
GEMMA=$(.venv/bin/python -c "from tests.second_model import gemma_model_path; print(gemma_model_path())")
for m in gemma bundled; do
  if [ $m = gemma ]; then spec="{path: $GEMMA}"; else spec="{source: bundled}"; fi
  sed "s|  main: {source: bundled}|  main: $spec|" workflows/tool_greedy.yaml | sed "s|^name: tool-greedy|name: greedy-$m|" > $D/greedy_$m.yaml
  sed "s|  main: {source: bundled}|  main: $spec|; s|    constrained: false|    constrained: true|" workflows/tool_greedy.yaml | sed "s|^name: tool-greedy|name: constrained-$m|" > $D/constrained_$m.yaml
  sed "s|  main: {source: bundled}|  main: $spec|; s|    tool_calls: true|    tool_calls: true\n    constrained: true|" workflows/tool_self_consistency.yaml | sed "s|^name: .*|name: sc8-$m|" > $D/sc8_$m.yaml
done
for m in $MODELS; do
  .venv/bin/metagen eval $D/greedy_$m.yaml $D/constrained_$m.yaml $D/sc8_$m.yaml --task bfcl_simple --limit $LIMIT --baseline constrained_$m > ${TMPDIR:-/tmp}/bfcl_$m.txt 2>&1 || true
done
