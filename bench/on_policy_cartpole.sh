#!/bin/bash
# issue 15 benchmarks (results and figures: bench/README.md, "a2c and trpo"): trpo CartPole-v1 100k seeds 0-4, then a2c CartPole-v1 8 envs 500k seeds 0-4.
cd "$(dirname "$0")/.."
D=bench/runs/issue15
export TF_CPP_MIN_LOG_LEVEL=2
one() {  # alg seed steps extra...
  alg=$1; seed=$2; steps=$3; shift 3
  name=${alg}_s${seed}
  t0=$(date +%s)
  .venv/bin/python -m run --alg=$alg --env=CartPole-v1 --num_timesteps=$steps --seed=$seed "$@" \
      --save_path=$D/$name.zip --log_path=$D/$name --log_format=csv,log --no_progress > $D/$name.train.txt 2>&1
  rc=$?; t1=$(date +%s)
  .venv/bin/python -m run --alg=$alg --env=CartPole-v1 --load_path=$D/$name.zip --num_timesteps=0 \
      --eval_episodes=10 > $D/$name.eval.txt 2>&1
  echo "$alg seed $seed steps $steps rc $rc train_s $((t1-t0)) eval: $(grep -v '^I0000\|^W0000\|^E0000\|WARNING\|^To enable' $D/$name.eval.txt | tail -1)"
}
for s in 0 1 2 3 4; do one trpo $s 100000; done
for s in 0 1 2 3 4; do one a2c $s 500000 --num_env=8; done
echo done
