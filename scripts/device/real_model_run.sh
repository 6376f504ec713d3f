#!/usr/bin/env bash
# A measured CPMöbius run with a real model on one lent GPU machine (no network, <= 10 min a call),
# in one burst of calls started straight after each other (an idle machine goes back after 30 s).
#
# Here, once: build the wheel bundle (../shared/tools/make_device_bundle.sh, plus the `gguf` and `liger-kernel`
# wheels: `pip download --no-deps gguf==0.19.0 liger-kernel==0.8.5`) in two folders that each fit a call beside the
# tree: `.whl` (ray and its jsonschema/referencing/rpds wheels) and `.whlb` (the rest: verl, gguf, liger, ...);
# `.vllm_parts` (PART_MIB=45 ../shared/tools/make_vllm_parts.sh), `.vllm_extras` (scripts/device/make_vllm_extras.sh),
# `.evaldata/eval/<name>/<name>.jsonl` (the benchmark files) and the model's assembled GGUF file split into
# chunks of 45 MiB (a call carries 64 MiB, the tree's 17 MiB included): `split -b 47185920 -d -a 2 <file>.gguf
# .m51/<name>.gguf.part`. Order (each call started as soon as the previous one returns):
#
#   call         carry [.whl, .vllm_extras]    bash scripts/device/vllm_check.sh --install-only
#   calls        carry [one chunk]             bash scripts/device/real_model_run.sh stage <chunk>
#   call         carry [last chunk, .whlb]     python3 -m pip install -q --no-index --no-deps --no-compile
#                    --no-cache-dir --upgrade --target /tmp/site .whlb/*.whl &&
#                    MODEL=<name> bash scripts/device/real_model_run.sh stage --convert <last chunk>
#   calls        carry [one vLLM part]         mkdir -p /root/vllm_parts && mv .vllm_parts/partNN /root/vllm_parts/
#   call         carry [last vLLM part, .vllm_parts/SHA256SUM, .vllm_parts/install_vllm.sh, .evaldata]
#                                              MODEL=<name> bash scripts/device/real_model_run.sh start
#   calls        (nothing carried)             bash scripts/device/real_model_run.sh poll 540
#   last call                                  bash scripts/device/real_model_run.sh finish
#
# `stage --convert` assembles and converts the model in the background while vLLM's parts arrive (the GPU
# machine's own torch and transformers; gguf from /tmp/site); without it, `start` does both.
# `start` installs vLLM, assembles and converts the model (python -m cpmobius.models convert), then
# starts in the background (setsid, so they outlive the call) one pipeline — the training loop, then
# the merge of its last Player checkpoint into a HF folder (verl's model merger), then that model's
# evaluation with the same settings as the base — and, beside it, the evaluation of the base model;
# `poll` waits, printing the step table as it grows; `finish` packs logs, metrics, problem archive,
# result tables and the evaluations' completions (scored here if the GPU machine did not finish)
# into $OUT/real_run.tar.gz. Knobs (environment): MODEL (cpmobius.models name), PRESET (model=...),
# STEPS, VAL_SET / VAL_SIZE (the Δt validation set: MATH-500's first 100 by default, since the base
# model's AMC accuracy, ~5 %, makes Δt on 83 problems mostly noise), RUN_ARGS (more Hydra overrides),
# EVAL_ARGS (cpmobius.eval options).
#
# The real-model yardstick (docs/gpu.md, "A real-model yardstick"): `yardstick_start` in place of `start`,
# with ARM=cpmobius|random|frozen (the method; the same schedule with random Player rewards; the Coach frozen)
# and SEED; 20 steps of a short shape, then base and trained on MATH-500 (500, greedy) and AMC (avg@8), paired.
# BASE_FROM=results/yardstick_<arm>_seed<k>_<date> pairs the trained model with that folder's base responses
# (eval/<set>/base/completions.jsonl.gz, same read-outs) instead of generating the base model's again.
# PLAYER_LR: the Player's learning rate (1e-5, the first design's; the second design's is 1e-6, docs/gpu.md).
#
# The GPU step benchmark (benchmarks/bench_step_gpu.py) goes through the same burst with
# `bench_start` (MODEL=qwen2.5-coder-1.5b; BENCH_ARGS: the benchmark's options), `bench_poll [SECONDS]`
# and `bench_finish` (its table, figures, compressed log, vLLM's start-up lines and, with --profile-startup, the model builds' profiles into
# $OUT) in place of start / poll / finish; then `rollout_bench`: benchmarks/bench_rollout.py on the same model
# (the HF rollout server on CUDA, with and without per-request seeds, beside plain batched generate);
# `gen_start` / `gen_poll`: benchmarks/bench_generation_gpu.py (validation's generation under vLLM engine
# settings: batch width, n-gram speculative decoding) on the same model, before `bench_start` or after it ends.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 VLLM_USE_FLASHINFER_SAMPLER=0
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-/tmp/cpmobius_gpu_out}; mkdir -p "$OUT"
MODEL=${MODEL:-qwen2.5-coder-0.5b}
PRESET=${PRESET:-qwen2p5_coder_0p5b}
STEPS_GIVEN=${STEPS:-}  # the yardstick has its own default (20): a user STEPS wins over either
STEPS=${STEPS:-10}
WORK=/root/real_run
STAGE=/root/stage
export CPMOBIUS_CACHE=/root/cache CPMOBIUS_DATA_DIR=$WORK/data
EVAL_ARGS=${EVAL_ARGS:---benchmarks aime24 aime25 amc math500 minerva_math olympiadbench --k aime24=8 aime25=8 amc=4 math500=2 minerva_math=2 olympiadbench=2 --max-new-tokens 1024 --temperature 0.6 --top-p 1.0 --seed 0 --backend vllm --validation-set ${VAL_SET:-math500}}

bench_results_out() {  # the benchmark's table and figures so far into $OUT (what comes back from a call)
  cp $WORK/bench/bench_step_gpu.md $WORK/bench/bench_step_gpu.json "$OUT/" 2>/dev/null
}

env_setup() {
  export PYTHONPATH=/tmp/site:$PWD
  # shellcheck disable=SC1091
  [ -f /tmp/vsite.env ] && source /tmp/vsite.env
}

show_steps() {  # the step table as the driver prints it, and the last lines of the log
  [ -f $WORK/train.log ] || { echo "no training log yet"; return; }
  grep -E "^ *(step|[0-9]+) " $WORK/train.log | tail -25
  echo "--- last lines of the training log:"; tail -n 6 $WORK/train.log
  [ -f $WORK/pipeline.log ] && { echo "--- pipeline:"; cat $WORK/pipeline.log; }
  for f in $WORK/eval_*.log; do [ -f "$f" ] && { echo "--- $f:"; grep -v "it/s" "$f" | tail -n 4; }; done
  nvidia-smi --query-gpu=memory.used,utilization.gpu --format=csv,noheader
}

ckpt_watch() {  # while the loop runs: each new checkpoint folder's size and its files' first/last write times
  until grep -q "loop: exit" $WORK/pipeline.log 2>/dev/null; do
    for d in $WORK/run/global_step_*; do
      [ -d "$d" ] || continue
      grep -q "^$(basename "$d") " $WORK/saves.txt 2>/dev/null && continue
      sleep 3  # the folder appears by rename, written whole; the tracker file follows
      echo "$(basename "$d") bytes=$(du -sb "$d" | cut -f1) first_write=$(find "$d" -type f -printf '%T@\n' | sort -n | head -1) last_write=$(find "$d" -type f -printf '%T@\n' | sort -n | tail -1) seen=$(date +%s)" >> $WORK/saves.txt
    done
    sleep 2
  done
}

eval_sets() {  # the evaluation sets, "name|cpmobius.eval options" a line: EVAL_ARGS, or the yardstick's two read-outs
  if [ "${YARDSTICK:-0}" = 1 ]; then
    echo "math500_greedy|--benchmarks math500 --greedy --max-new-tokens 1024 --seed 0 --backend vllm"
    echo "amc_avg8|--benchmarks amc --k 8 --temperature 0.6 --top-p 1.0 --max-new-tokens 1024 --seed 0 --backend vllm --validation-set amc"
  else
    echo "all|$EVAL_ARGS"
  fi
}

evaluate() {  # evaluate LABEL MODEL: every evaluation set, one after the other, into $WORK/eval_<set>_<LABEL>
  local label=$1 model=$2 name args t
  while IFS='|' read -r name args; do
    t=$(date +%s)
    for attempt in 1 2 3; do
      # shellcheck disable=SC2086
      python3 -m cpmobius.eval --model "$model" --label "$label" --gpu-memory-utilization 0.4 \
        --data-dir $WORK/data/eval --out $WORK/eval_${name}_$label $args > $WORK/eval_${name}_$label.log 2>&1
      rc=$?
      # Two evaluations share the card: a vLLM engine that profiles memory while the other process allocates
      # or frees some aborts at start-up (seen on 2026-12-06: the trained model's MATH-500 run, 66 s in). The
      # other engine is up by then, so a second start measures a steady card.
      [ $rc -ne 0 ] && grep -q "Engine core initialization failed" $WORK/eval_${name}_$label.log || break
      mv $WORK/eval_${name}_$label.log $WORK/eval_${name}_${label}_failed$attempt.log; sleep 15
    done
    echo "$label, $name: exit $rc in $(( $(date +%s) - t )) s"
  done < <(eval_sets)
}

pair() {  # pair TRAINED_LABEL: each set's base and trained responses scored side by side (paired CIs), eval_<set>_paired
  local name args
  while IFS='|' read -r name args; do
    # shellcheck disable=SC2046
    python3 -m cpmobius.eval --data-dir $WORK/data/eval --out $WORK/eval_${name}_paired \
      $(grep -o -- "--validation-set [^ ]*" <<< "$args") --completions \
      $WORK/eval_${name}_base/base/completions.jsonl* $WORK/eval_${name}_$1/$1/completions.jsonl* \
      > $WORK/eval_${name}_paired.log 2>&1
    echo "paired, $name: exit $?"
  done < <(eval_sets)
}

prepare() {  # install vLLM (once per machine), copy the benchmark files, assemble and convert the staged model
  local start=$(date +%s) t
  if [ ! -f /tmp/vsite.env ]; then
    export PYTHONPATH=/tmp/site:$PWD
    bash .vllm_parts/install_vllm.sh || { echo "vLLM install failed"; return 4; }
    if ls /tmp/vllm_extras/*.whl >/dev/null 2>&1; then
      python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/vsite /tmp/vllm_extras/*.whl || return 4
    fi
  fi
  env_setup
  if [ ! -f /tmp/site.compiled ]; then
    # The wheels go in with --no-compile and every call runs with PYTHONDONTWRITEBYTECODE: without this, each
    # process (Ray workers, vLLM servers, engine cores) compiles vLLM, verl and Ray from source on import, which a
    # user's pip install does not: the suspect for the ~90 s from a vLLM server actor's start to its engine's
    # start measured on 2026-12-02 (to be measured with this in place).
    python3 -m compileall -q -j 0 /tmp/site /tmp/vsite > /dev/null 2>&1; touch /tmp/site.compiled
  fi
  echo "install: $(( $(date +%s) - start )) s"
  mkdir -p $WORK/data
  if [ -d .evaldata/eval ]; then
    cp -r .evaldata/eval $WORK/data/
  elif [ ! -d $WORK/data/eval ]; then
    echo "no benchmark files: carry .evaldata in this call"; return 5
  fi
  if [ -f $WORK/convert.pid ]; then  # the conversion `stage --convert` started in the background
    t=$(date +%s)
    while kill -0 "$(cat $WORK/convert.pid)" 2>/dev/null; do sleep 2; done
    echo "background conversion (waited $(( $(date +%s) - t )) s for it):"; cat $WORK/convert.log; rm -f $WORK/convert.pid
  fi
  if ls $STAGE/*.gguf.part* >/dev/null 2>&1; then
    cat $STAGE/*.gguf.part* > $WORK/model.gguf && rm -f $STAGE/*.gguf.part*
  fi
  # A second start on the same machine (a call that failed after the conversion) finds no staged parts and no
  # GGUF file: the model converted then is used as it is. A GGUF file left means a conversion failed: again here.
  if [ ! -f $WORK/model.gguf ]; then
    python3 -m cpmobius.models path "$MODEL" >/dev/null 2>&1 && { echo "model $MODEL already converted"; return 0; }
    echo "no staged model parts and no converted $MODEL: stage the chunks first"; return 5
  fi
  convert_model
}

convert_model() {  # $WORK/model.gguf (the assembled chunks) into the cache's HF folder; the GGUF goes once converted
  local t=$(date +%s)
  python3 -m cpmobius.models convert --gguf $WORK/model.gguf --name "$MODEL" || { echo "convert failed"; return 5; }
  echo "convert: $(( $(date +%s) - t )) s"
  rm -f $WORK/model.gguf
}

case "${1:-}" in
stage)  # stage [--convert] CHUNK...: --convert with the last chunk (gguf installed in /tmp/site, MODEL set)
  shift; mkdir -p $STAGE $WORK
  convert=0; [ "${1:-}" = "--convert" ] && { convert=1; shift; }
  for f in "$@"; do mv "$f" $STAGE/ && echo "staged $(basename "$f") ($(du -m $STAGE/$(basename "$f") | cut -f1) MiB)"; done
  if [ $convert = 1 ]; then
    # The model is assembled and converted (about 75 s) in the background while the next calls carry vLLM's
    # parts; `start` waits for it, and converts again if it failed.
    setsid nohup bash "$0" convert > $WORK/convert.log 2>&1 < /dev/null &
    echo $! > $WORK/convert.pid; echo "conversion of $MODEL started in the background"
  fi ;;

convert)  # started by `stage --convert`; not meant to be called by hand
  # From a copy of the package: the next call's tree may replace this one while the conversion runs.
  rm -rf $WORK/code && mkdir -p $WORK/code && cp -r cpmobius $WORK/code/ && export PYTHONPATH=/tmp/site:$WORK/code
  cat $STAGE/*.gguf.part* > $WORK/model.gguf && rm -f $STAGE/*.gguf.part* && convert_model ;;

start)
  start=$(date +%s)
  prepare || exit $?
  # setsid: the memory log outlives this call, as the pipeline does (without it, it stopped with the call).
  setsid nohup nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 1000 > $WORK/gpu_mem.csv 2>/dev/null < /dev/null &
  # One background pipeline (setsid: it outlives this call): the loop, then the merge of its last Player
  # checkpoint and the trained model's evaluation, so no call boundary decides what gets measured. The
  # base model's evaluation starts when the loop ends, beside the merge and the trained evaluation: beside
  # the loop it would not fit an 80 GB card at the 1.5B shape (the loop's peak was 68.6 GiB), and a vLLM
  # engine that profiles memory while another process frees some aborts ("Error in memory profiling").
  setsid nohup bash "$0" pipeline > $WORK/pipeline.log 2>&1 < /dev/null &
  echo "started at $(date +%T): training loop ($STEPS steps) → merge → trained evaluation, beside the base evaluation; $(( $(date +%s) - start )) s"
  sleep 30; show_steps ;;

base_eval)  # started by the pipeline once the loop has ended
  env_setup
  base=$(python3 -m cpmobius.models path "$MODEL") || exit 5
  echo "base evaluation starts at $(date +%T)"
  evaluate base "$base" ;;

pipeline)  # started by `start`; not meant to be called by hand
  env_setup
  t=$(date +%s)
  ckpt_watch &  # each checkpoint's size and write time, before the next one prunes it
  train() {
    # shellcheck disable=SC2086
    python3 -m cpmobius.main model=$PRESET backend=vllm trainer.total_training_steps=$STEPS \
      trainer.default_local_dir=$WORK/run trainer.save_freq=2 trainer.max_actor_ckpt_to_keep=1 \
      validation.dataset=${VAL_SET:-math500} validation.size=${VAL_SIZE:-100} validation.data_dir=$WORK/data \
      ${RUN_ARGS:-} "$@" > $WORK/train.log 2>&1 < /dev/null
  }
  train; rc=$?
  grep -h "checkpoints: \|not enough disk" $WORK/train.log > $WORK/space.txt
  if [ $rc -eq 2 ] && grep -q "not enough disk for this run's checkpoints" $WORK/train.log; then
    # The start-up space check refused (before any model loaded): follow its advice, weights-only saves.
    echo "space check refused full checkpoints; weights-only saves (actor.checkpoint.save_contents=[model,extra])"
    mv $WORK/train.log $WORK/train_refused.log
    train "actor_rollout_ref.actor.checkpoint.save_contents=[model,extra]"; rc=$?
    grep -h "checkpoints: \|not enough disk" $WORK/train.log >> $WORK/space.txt
  fi
  echo "loop: exit $rc in $(( $(date +%s) - t )) s"
  if [ -n "${BASE_FROM:-}" ]; then
    # The base model's responses of an earlier run with the same read-outs (a results folder of this repository):
    # the base is one fixed measurement that every arm and seed is paired against, so it is not generated again.
    while IFS='|' read -r name _; do
      mkdir -p $WORK/eval_${name}_base && cp -r "$BASE_FROM/eval/$name/base" $WORK/eval_${name}_base/
    done < <(eval_sets)
    echo "base: the responses in $BASE_FROM/eval/*/base" > $WORK/eval_base.log
  else
    setsid nohup bash "$0" base_eval > $WORK/eval_base.log 2>&1 < /dev/null &
  fi
  step=$(cat $WORK/run/latest_checkpointed_iteration.txt 2>/dev/null)
  [ -n "$step" ] || { echo "no Player checkpoint to evaluate"; exit 1; }
  t=$(date +%s)
  python3 -m verl.model_merger merge --backend fsdp --local_dir $WORK/run/global_step_$step/player \
    --target_dir $WORK/hf_player > $WORK/merge.log 2>&1 || { echo "merge failed: $WORK/merge.log"; exit 1; }
  echo "merged step $step: $(( $(date +%s) - t )) s, $(du -sh $WORK/hf_player | cut -f1)"
  evaluate "trained-step$step" $WORK/hf_player
  while pgrep -f "real_model_run.sh base_eval" >/dev/null; do sleep 5; done
  cat $WORK/eval_base.log
  pair "trained-step$step"
  echo "pipeline done" ;;

yardstick_start)  # the real-model yardstick: ARM=cpmobius|random|frozen, SEED (docs/gpu.md, "A real-model yardstick")
  case "${ARM:-cpmobius}" in
    cpmobius) arm="" ;;
    random) arm="player.reward=random" ;;
    frozen) arm="coach.update=false" ;;
    *) echo "ARM must be cpmobius, random or frozen, not ${ARM}"; exit 2 ;;
  esac
  export YARDSTICK=1 MODEL=qwen2.5-coder-1.5b PRESET=qwen2p5_coder_1p5b STEPS=${STEPS_GIVEN:-20} VAL_SET=amc VAL_SIZE=null
  export RUN_ARGS="experiment=paper_qwen_1p5b trainer.n_gpus_per_node=1 warmup.enabled=false seed=${SEED:-1} \
filter.quota=8 player.n=8 data.max_response_length=1024 player.verl.actor.optim.lr=${PLAYER_LR:-1e-5} \
validation.samples_per_problem=4 trainer.save_freq=$STEPS actor_rollout_ref.actor.checkpoint.save_contents=[model,extra] \
$arm ${RUN_ARGS:-}"
  if [ -n "${BASE_FROM:-}" ]; then  # copied now: the tree of a later call may be another copy
    [ -d "$BASE_FROM/eval" ] || { echo "BASE_FROM=$BASE_FROM has no eval/ folder"; exit 2; }
    mkdir -p $WORK/base_from && cp -r "$BASE_FROM/eval" $WORK/base_from/ && export BASE_FROM=$WORK/base_from
  fi
  echo "yardstick: arm ${ARM:-cpmobius}, seed ${SEED:-1}, $STEPS steps: $RUN_ARGS"
  exec bash "$0" start ;;

bench_start)  # the GPU step benchmark instead of the training pipeline: MODEL=qwen2.5-coder-1.5b
  prepare || exit $?
  # BENCH_ARGS: more options and Hydra overrides for benchmarks/bench_step_gpu.py.
  # shellcheck disable=SC2086
  # vLLM's INFO log names its start-up phases (weights, memory profile, CUDA graphs): bench_finish keeps those lines.
  VLLM_LOGGING_LEVEL=INFO setsid nohup python3 benchmarks/bench_step_gpu.py --out $WORK/bench ${BENCH_ARGS:-} > $WORK/bench.log 2>&1 < /dev/null &
  echo "benchmark started at $(date +%T)"; sleep 45; grep "^\[bench\]" $WORK/bench.log; tail -n 5 $WORK/bench.log ;;

bench_poll)  # wait for the benchmark to end (or SECONDS), printing its progress lines
  end=$(( $(date +%s) + ${2:-540} ))
  while [ "$(date +%s)" -lt $end ] && pgrep -f bench_step_gpu.py >/dev/null; do sleep 10; done
  grep "^\[bench\]" $WORK/bench.log; echo "--- last lines:"; tail -n 8 $WORK/bench.log
  bench_results_out  # with every poll: a machine lost between polls loses only the rest
  nvidia-smi --query-gpu=memory.used,utilization.gpu --format=csv,noheader ;;

rollout_bench)  # the HF rollout server on CUDA beside plain batched generate, on the staged model
  env_setup
  base=$(python3 -m cpmobius.models path "$MODEL") || exit 5
  for mode in "" --no-full-determinism; do  # per-request seeds (the backend's default), then the global RNG
    # shellcheck disable=SC2086
    python3 benchmarks/bench_rollout.py --model "$base" ${ROLLOUT_ARGS:---concurrency 128 --new-tokens 128 --repeats 2 --serial-requests 2} $mode
  done 2>&1 | grep -vE "it/s\]|Warning|warn" | tee "$OUT/bench_rollout_cuda.txt" ;;

gen_start)  # benchmarks/bench_generation_gpu.py on the converted model (after `bench_start`'s prepare or `start`'s)
  prepare || exit $?
  base=$(python3 -m cpmobius.models path "$MODEL") || exit 5
  # GEN_ARGS: more options for the benchmark (--setting NAME=JSON ..., --k, --max-new-tokens).
  # shellcheck disable=SC2086
  setsid nohup python3 benchmarks/bench_generation_gpu.py --model "$base" --data-dir $WORK/data/eval \
    --out $WORK/gen ${GEN_ARGS:-} > $WORK/gen.log 2>&1 < /dev/null &
  echo "generation benchmark started at $(date +%T)"; sleep 30; tail -n 3 $WORK/gen.log ;;

gen_poll)  # wait for the generation benchmark (or SECONDS); its table and runs' logs so far into $OUT
  end=$(( $(date +%s) + ${2:-540} ))
  while [ "$(date +%s)" -lt $end ] && pgrep -f bench_generation_gpu.py >/dev/null; do sleep 10; done
  grep "^\[bench\]" $WORK/gen.log | cut -c1-400; echo "--- last lines:"; tail -n 5 $WORK/gen.log
  cp $WORK/gen/bench_generation.md $WORK/gen/bench_generation.json "$OUT/" 2>/dev/null
  tar czf "$OUT/gen_logs.tar.gz" -C $WORK/gen --exclude='completions.jsonl' . 2>/dev/null
  cat $WORK/gen/bench_generation.md 2>/dev/null ;;

bench_finish)  # the table, its figures and the log (compressed) into $OUT; stops the benchmark if it still runs
  pgrep -f bench_step_gpu.py >/dev/null && { pkill -TERM -f bench_step_gpu.py; sleep 10; }
  bench_results_out
  gzip -c $WORK/bench.log > "$OUT/bench.log.gz"
  grep -E "took|Graph capturing|Memory profiling|KV cache|init engine|compil|Loading|Starting|Capturing CUDA graphs.*100%|\[bench\] start-up" $WORK/bench.log \
    | grep -v "it/s\]$" | cut -c1-300 > "$OUT/vllm_startup.txt"
  for f in $WORK/bench/profiles/*.txt; do [ -f "$f" ] && { echo "=== $f"; head -n 70 "$f"; }; done > "$OUT/init_profile.txt"
  ls -l "$OUT"; cat $WORK/bench/bench_step_gpu.md 2>/dev/null ;;

poll)
  env_setup
  end=$(( $(date +%s) + ${2:-540} ))
  while [ "$(date +%s)" -lt $end ]; do
    grep -q "pipeline done\|no Player checkpoint\|merge failed" $WORK/pipeline.log 2>/dev/null && break
    sleep 15
  done
  show_steps ;;

finish)  # collect what there is; the loop is stopped first if it still runs (its last checkpoint is evaluated
         # only by the pipeline, so call `finish` once `poll` shows "trained evaluation: exit")
  env_setup
  pgrep -f "cpmobius.main" >/dev/null && { pkill -TERM -f "cpmobius.main"; sleep 20; }
  pkill -f "nvidia-smi --query-gpu=memory.used" 2>/dev/null
  echo "peak GPU memory in use: $(sort -n $WORK/gpu_mem.csv | tail -1) MiB"
  python3 -m cpmobius.run_report $WORK/run --problems 10 --out $WORK/run_report.md && cp $WORK/run_report.md "$OUT/"
  for d in $WORK/eval_*_paired; do [ -f $d/results.md ] && cp $d/results.md "$OUT/$(basename $d).md"; done
  # The evaluations' completions come back too (gzip makes them a few MiB): whatever the GPU machine did
  # not finish scoring is scored here with `python -m cpmobius.eval --completions ...`.
  (cd $WORK && tar czf "$OUT/real_run.tar.gz" --exclude='*/global_step_*' --exclude='*/best_player' --exclude='*.safetensors' \
     train.log train_refused.log space.txt saves.txt pipeline.log merge.log gpu_mem.csv run_report.md run eval_* 2>/dev/null)
  ls -l "$OUT"; show_steps ;;

*) echo "usage: $0 stage FILE... | start | yardstick_start | poll [SECONDS] | finish | bench_start | bench_poll [SECONDS] | bench_finish"
   echo "   (pipeline and base_eval are started by start)"; exit 2 ;;
esac
