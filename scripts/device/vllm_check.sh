#!/usr/bin/env bash
# The GPU checks of the scale path, in the last call of a burst on a lent GPU machine (no network).
#
# Earlier calls of the burst carry vLLM in parts (../shared/tools/VLLM_ON_DEVICE.md), the verl/ray
# wheel bundle `.whl` (../shared/tools/DEVICE_BUNDLE.md) and the few wheels vLLM's server needs beyond
# the parts (`.vllm_extras`, scripts/device/make_vllm_extras.sh); this script installs what it finds,
# runs the GPU tests and prints their tables, a peak-memory line and a summary. Logs go to $OUT.
#   call k (k < N):  carry [.vllm_parts/partNN]  mkdir -p /root/vllm_parts && mv .vllm_parts/partNN /root/vllm_parts/
#   call N-1:        carry [.whl, .vllm_extras]  bash scripts/device/vllm_check.sh --install-only
#   call N:          carry [.vllm_parts/<last>, .vllm_parts/SHA256SUM, .vllm_parts/install_vllm.sh, .whlb]
#                                               bash scripts/device/vllm_check.sh
# (`.whl` and `.whlb`: the bundle split in two so that each fits a call beside the tree; see real_model_run.sh.)
# Start each call as soon as the previous one returns: an idle machine goes back after 30 s.
# TESTS (default: the vLLM tests, then the GPU warm-up and evaluation tests; pytest node ids allowed)
# and PER_TEST_S (default 400) may be set; a call may run for at most 10 minutes, so split them.
# A fresh machine needs more than that for one test (tests/engine/test_vllm_gpu.py: the toy models' pretraining
# about 2 min, each vLLM server about 1 min to start): `--background` starts the same checks detached (setsid,
# so they outlive the call) and returns; `--poll [SECONDS]` (default 540) waits up to SECONDS, copying the logs
# into $OUT, and prints `checks done` with the summary once they end.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
OUT=${OUT:-/tmp/cpmobius_gpu_out}; mkdir -p "$OUT"

# --poll and --background come first: the detached checks install the bundles themselves, and a poll that
# reinstalled them would rewrite /tmp/site under the tests that import from it.
DETACHED=/root/vllm_check
if [ "${1:-}" = "--poll" ]; then
  deadline=$(( $(date +%s) + ${2:-540} ))
  while [ ! -f $DETACHED/done ] && [ "$(date +%s)" -lt "$deadline" ]; do sleep 10; done
  cp $DETACHED/out/* "$OUT"/ 2>/dev/null
  if [ -f $DETACHED/done ]; then echo "checks done"; tail -60 $DETACHED/summary.log; exit "$(cat $DETACHED/done)"; fi
  echo "still running:"; tail -5 $DETACHED/summary.log; exit 0
fi
if [ "${1:-}" = "--background" ]; then
  rm -rf $DETACHED && mkdir -p $DETACHED/out
  OUT=$DETACHED/out setsid nohup bash -c "bash '$0' > $DETACHED/summary.log 2>&1; echo \$? > $DETACHED/done" \
    < /dev/null > /dev/null 2>&1 &
  echo "checks started in the background: bash $0 --poll [SECONDS]"; exit 0
fi
for bundle in .whl .whlb; do
  if [ -d $bundle ] && ls $bundle/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
      $bundle/*.whl || { echo "wheel bundle install failed ($bundle)"; exit 3; }
    echo "wheel bundle $bundle installed into /tmp/site"
  fi
done
if [ -d .vllm_extras ] && ls .vllm_extras/*.whl >/dev/null 2>&1; then
  mkdir -p /tmp/vllm_extras && cp .vllm_extras/*.whl /tmp/vllm_extras/ && echo "vLLM server extras staged"
fi
[ "${1:-}" = "--install-only" ] && exit 0
[ -d /tmp/site/verl ] || { echo "no verl in /tmp/site: carry .whl in an earlier call of this burst"; exit 3; }
export PYTHONPATH=/tmp/site:$PWD
if [ ! -f /tmp/vsite.env ]; then
  bash .vllm_parts/install_vllm.sh || { echo "vLLM install failed"; exit 4; }
  if ls /tmp/vllm_extras/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/vsite /tmp/vllm_extras/*.whl || exit 4
  fi
fi
source /tmp/vsite.env
python3 -c "import vllm, verl, ray, torch; print('vllm', vllm.__version__, 'verl', verl.__version__, 'ray', ray.__version__, 'torch', torch.__version__)" || exit 4

nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 500 > "$OUT/gpu_mem.csv" 2>/dev/null &
sampler=$!
status=0
for test in ${TESTS:-tests/engine/test_vllm_gpu.py tests/warmup/test_warmup_gpu.py tests/eval/test_evaluation_gpu.py}; do
  name=$(echo "${test#tests/}" | sed 's/\.py//; s/[^A-Za-z0-9_.-]/_/g')
  start=$(date +%s)
  timeout "${PER_TEST_S:-400}" python3 -m pytest -x -s -q -p no:cacheprovider "$test" > "$OUT/$name.log" 2>&1
  rc=$?; [ $rc -ne 0 ] && status=1
  echo "=== $test: exit $rc in $(( $(date +%s) - start )) s"
  grep -E "^(start|step| +[0-9]|engine|GPU|served|parameters|warm-up|[a-z_]+ +[0-9.]+$)|passed|failed|Error|error:" "$OUT/$name.log" | tail -40
done
kill $sampler 2>/dev/null
echo "peak GPU memory in use (nvidia-smi, whole GPU, sampled every 0.5 s): $(sort -n "$OUT/gpu_mem.csv" | tail -1) MiB"
exit $status
