#!/usr/bin/env bash
# Everything grist checks and measures on the GPU machine, in one call (device time is scarce):
#   scripts/gpu/run_all.sh loader|ckpt|labs|encoder|scaling|ab|all
# `ab` (not part of `all`) compares the carried build with an earlier binary carried in
# .devcarry/base/grist: 8 interleaved 16-thread builds of the issue-14 config each
# (scripts/gpu/build_ab.py), then, with PERF_DIR set (scripts/gpu/timeline.sh), the on-CPU timeline
# of one 16-thread build of each. CORPUS: ../shared/corpus, else .corpus-cache/corpus.
# Expects the carried build in .devcarry/build and its libraries in .devcarry/lib (scripts/gpu/carry.sh
# or scripts/gpu/pack_build.sh). Results go to $GRIST_GPU_OUT (default gpu-out).
set -uo pipefail
cd "$(dirname "$0")/../.."
export GRIST_GPU_OUT=${GRIST_GPU_OUT:-gpu-out}
mkdir -p "$GRIST_GPU_OUT"
export LD_LIBRARY_PATH="$(pwd)/.devcarry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PYTHONPATH="$(pwd)/.devcarry/build/python${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
# The carried build has the test hooks (carry.sh, pack_build.sh): a crash-point test fails, never
# skips, without them.
export GRIST_REQUIRE_TEST_HOOKS=1
what=${1:-all}
failed=0
date -u
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.cuda.is_available())'
if [[ $what == loader || $what == all ]]; then
  scripts/gpu/loader.sh .devcarry/build
  echo "== SIGKILL/resume proof on cuda"
  GRIST_TEST_DEVICE=cuda python3 -m unittest -v tests/python/test_train_resume.py 2>&1 | tee "$GRIST_GPU_OUT/train_resume_cuda.txt"
  if [[ ${PIPESTATUS[0]} -ne 0 ]]; then
    echo "run_all: tests/python/test_train_resume.py failed on cuda" >&2
    failed=1
  fi
fi
if [[ $what == ckpt || $what == all ]]; then
  echo "== ckptio tests on the GPU machine"
  .devcarry/build/tests/ckptio/ckptio_test --gtest_brief=1 2>&1 | tail -5 | tee "$GRIST_GPU_OUT/ckptio_test.txt"
  if [[ ${PIPESTATUS[0]} -ne 0 ]]; then
    echo "run_all: ckptio_test failed" >&2
    failed=1
  fi
  python3 -m unittest -v tests/python/test_ckpt.py 2>&1 | tail -8 | tee "$GRIST_GPU_OUT/test_ckpt_py.txt"
  if [[ ${PIPESTATUS[0]} -ne 0 ]]; then
    echo "run_all: tests/python/test_ckpt.py failed" >&2
    failed=1
  fi
  echo "== CUDA checkpoint round trip (a skip is a failure here)"
  log="$GRIST_GPU_OUT/test_ckpt_cuda_$(date -u +%Y%m%d).txt"
  GRIST_REQUIRE_CUDA=1 python3 -m unittest -v tests/python/test_ckpt_cuda.py 2>&1 | tee "$log"
  if [[ ${PIPESTATUS[0]} -ne 0 ]] || grep -q "skipped" "$log"; then
    echo "run_all: test_ckpt_cuda.py failed or skipped" >&2
    failed=1
  fi
  GRIST_BUILD_DIR=.devcarry/build CKPT_GIB=${CKPT_GIB:-8} scripts/gpu/ckpt.sh 2>&1 | tee "$GRIST_GPU_OUT/ckpt.txt"
  echo "== FSDP2 + grist.ckpt on the GPUs: resume at another world size"
  scripts/gpu/ckpt_fsdp.sh 2>&1 | tee "$GRIST_GPU_OUT/ckpt_fsdp_run.txt"
  echo "== sharded checkpoint bench beside DCP / torch.save / safetensors (GPU ranks, then CPU ranks)"
  bdir=${CKPT_BENCH_DIR:-/tmp/grist-ckpt-dist-bench}
  python3 bench/python/gpu/ckpt_dist_bench.py --world "$(nvidia-smi -L | wc -l)" --device cuda \
    --mib "${CKPT_DIST_MIB:-4096}" --dir "$bdir" 2>&1 | grep -v Warning | tee "$GRIST_GPU_OUT/ckpt_dist_bench_cuda.txt"
  python3 bench/python/gpu/ckpt_dist_bench.py --world 4 --device cpu --mib 1024 --dir "$bdir" 2>&1 \
    | grep -v Warning | tee "$GRIST_GPU_OUT/ckpt_dist_bench_cpu.txt"
  rm -rf "$bdir"
fi
if [[ $what == labs || $what == all ]]; then
  echo "== week-13 pipeline benches (bench build, pack, all --quick)"
  scripts/gpu/labs.sh .devcarry/build 2>&1 | tee "$GRIST_GPU_OUT/labs.txt"
fi
if [[ $what == encoder || $what == all ]]; then
  echo "== issue 14: BPE encoder scaling 1-16 threads, build at 1/4/16 threads (identical bytes)"
  scripts/gpu/encoder.sh .devcarry/build/grist 2>&1 | tee "$GRIST_GPU_OUT/encoder.txt"
fi
if [[ $what == scaling || $what == all ]]; then
  echo "== issue 14: per-stage scaling of grist build, 1-16 threads (Amdahl fit, identical bytes)"
  scripts/gpu/scaling.sh .devcarry/build/grist || failed=1
fi
if [[ $what == ab ]]; then
  C=${CORPUS:-../shared/corpus}
  [[ -d $C ]] || C=.corpus-cache/corpus
  source scripts/gpu/lib.sh
  write_corpus_config "$GRIST_GPU_OUT/ab.toml" "$(realpath "$C")" \
    "$(realpath "$C/tokenizers/mistral-v1-spm-32k/tokenizer.model.v1")"
  echo "== issue 14: A/B of .devcarry/base/grist and .devcarry/build/grist, 16-thread builds"
  python3 scripts/gpu/build_ab.py "$GRIST_GPU_OUT/ab.toml" "${GRIST_AB_THREADS:-16}" \
    "${GRIST_AB_ROUNDS:-8}" base=.devcarry/base/grist new=.devcarry/build/grist \
    2>&1 | tee "$GRIST_GPU_OUT/build_ab.txt"
  [[ ${PIPESTATUS[0]} -eq 0 ]] || failed=1
  if [[ -n ${PERF_DIR:-} ]]; then
    for b in base build; do
      scripts/gpu/timeline.sh "$GRIST_GPU_OUT/timeline_$b" ".devcarry/$b/grist" build \
        --config "$GRIST_GPU_OUT/ab.toml" --output "/tmp/grist_tl_$b" --restart --quiet \
        --threads "${GRIST_AB_THREADS:-16}" || failed=1
    done
  fi
fi
exit $failed
