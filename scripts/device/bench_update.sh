#!/usr/bin/env bash
# The Player's passes at the 1.5B shape on one lent GPU (benchmarks/bench_logprobs_gpu.py, then
# benchmarks/bench_update_gpu.py), in one burst of calls started straight after each other:
#
#   call 1  carry [.whl]   bash scripts/device/bench_update.sh start     (installs, starts in the background)
#   calls   (nothing)      bash scripts/device/bench_update.sh poll 420  (waits, copies what is done to $OUT)
#
# Knobs (environment): SETTINGS (bench_update_gpu.py --settings), BUDGET (--budget, tokens a micro-batch),
# UPDATE_ARGS (more options and Hydra overrides for bench_update_gpu.py, e.g. offload off), RUNS (how many
# update benchmarks, separated by ";" in SETTINGS / BUDGET / UPDATE_ARGS when > 1), TAG (a prefix for a second
# start's run folders), SKIP_LOGPROBS (non-empty: no log-prob micro-benchmark). With --profile in UPDATE_ARGS,
# the passes' profiles come back as profiles.tgz.
# Here, once: `bash ../shared/tools/make_device_bundle.sh .whl` (verl, Ray, Hydra as wheels), plus Liger for the
# GPU presets: `pip download --no-deps liger-kernel==0.8.5 -d .whl`.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 NCCL_NVLS_ENABLE=0
OUT=${OUT:-/tmp/cpmobius_gpu_out}; mkdir -p "$OUT"
WORK=/root/bench_update

copy_out() {
  cp $WORK/*.md $WORK/*.json "$OUT/" 2>/dev/null
  profiles=$(cd $WORK && ls -d ./*/profiles 2>/dev/null)
  [ -n "$profiles" ] && tar czf "$OUT/profiles.tgz" -C $WORK $profiles
  for log in $WORK/*.log; do [ -f "$log" ] && tail -c 2000000 "$log" > "$OUT/$(basename "$log")"; done
}

case "${1:-}" in
  start)
    mkdir -p $WORK; rm -f $WORK/done
    [ -d /tmp/site/verl ] || python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target /tmp/site .whl/*.whl || exit 1
    IFS=';' read -r -a settings <<< "${SETTINGS:-dyn_rmpad_ckpt,fused_triton,fused_triton_2x,fused_torch}"
    IFS=';' read -r -a budgets <<< "${BUDGET:-8192}"
    IFS=';' read -r -a extras <<< "${UPDATE_ARGS:-}"
    {
      echo "cd $PWD; export PYTHONPATH=/tmp/site:$PWD"
      [ -n "${SKIP_LOGPROBS:-}" ] || echo "python3 benchmarks/bench_logprobs_gpu.py --out $WORK/bench_logprobs_gpu.md > $WORK/logprobs.log 2>&1"
      for i in "${!settings[@]}"; do
        run=${TAG:-}run$i
        echo "python3 benchmarks/bench_update_gpu.py --out $WORK/$run --settings ${settings[$i]} --budget ${budgets[$i]:-${budgets[0]}} ${extras[$i]:-} > $WORK/update_$run.log 2>&1"
        echo "cp $WORK/$run/bench_update_gpu.md $WORK/update_$run.md; cp $WORK/$run/bench_update_gpu.json $WORK/update_$run.json"
      done
      echo "touch $WORK/done"
    } > $WORK/job.sh
    setsid nohup bash $WORK/job.sh > $WORK/job.out 2>&1 < /dev/null &
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
    echo "started: $(cat $WORK/job.sh | wc -l) lines"
    ;;
  poll)
    waited=0
    while [ $waited -lt "${2:-420}" ] && [ ! -f $WORK/done ]; do sleep 15; waited=$((waited + 15)); copy_out; done
    copy_out
    [ -f $WORK/done ] && echo "done" || echo "running"
    cat $WORK/bench_logprobs_gpu.md 2>/dev/null
    for md in $WORK/update_run*.md $WORK/run*/bench_update_gpu.md; do [ -f "$md" ] && { echo "--- $md"; cat "$md"; }; done
    grep -h "^\[bench\]" $WORK/update_run*.log 2>/dev/null | cut -c1-400 | tail -8
    ;;
  *) echo "usage: $0 start | poll [SECONDS]" >&2; exit 2 ;;
esac
