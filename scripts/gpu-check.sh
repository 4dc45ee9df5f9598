#!/usr/bin/env bash
# The one prepared GPU check, for a CUDA machine that may have only torch and no network (the lent H200:
# one GPU, Python 3.12), run from the repository root:
#   scripts/gpu-wheels.sh 3.12                     # here, once: the wheels it needs into .whl/ (carry .whl there)
#   bash scripts/gpu-check.sh [--quick] [OUT_DIR]  # there
#   bash scripts/gpu-check.sh --quick --plan       # only say what would run and what would skip, and why
# Inside NVIDIA's PyTorch container (nvcr.io/nvidia/pytorch, which carries Transformer Engine) every `te` step
# runs; on a torch-only box they skip and the check says so at its start (docs/testing.md, "The GPU check").
#
# It installs the carried wheels offline into a private folder (the box's own packages stay untouched), says
# whether Transformer Engine imports and which checks it will skip, checks that the labs and their imports load,
# and keeps every log under OUT_DIR. Steps that need a GPU (or 2 GPUs, or Transformer Engine) skip with the
# reason and do not fail the check; anything that does not install or import fails it.
#
# --quick: designed to finish within 8 minutes on one H200 (GPU_CHECK_BUDGET_S, default 480), the whole script
# inside it: every command, the install, plan, probe and refusal loop included, runs under `timeout` with what the
# budget has left, and nothing starts once it is spent. It runs: the probe; what one GPU can check of how the labs
# measure (tests/labs/test_gpu_measurements.py, its numbers in the log: FP32 GEMMs in TF32 under NGC's
# TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1 until the labs pin them, a rank bound to its GPU at init, the back-to-back
# CUDA-event loop against one call at a time); the other `gpu`- and `hta`-marked lab tests (tp-sweep TP=1 with
# ProfilerStep markers and TE parity among them); TE's fused delayed-scaling update against the emulation on a zero
# step, a spike and a margin (tests/labs/test_te_scale_update.py); fp8-step on te for each recipe the GPU supports,
# each other recipe refused with exit 2; a tp-sweep TP=1 run whose bundle is read for the precision it records,
# for its profiled window (one ProfilerStep per step, only that window's GEMMs: the timed steps ran unprofiled)
# and its NCCL kernels; the FP8 benchmark at a real layer size (hidden 4096, FFN 16384, 16k tokens, one layer).
# Without --quick: the same, then the full FP8 benchmark and bench/tp_overlap_gpu.py (each under its own cap).
# tests/labs/test_gpu_check.py runs this on a CPU machine: the full check from a fresh torch-only venv (slow),
# and --quick --plan with the project's own venv (seconds).
# The carried wheels fill what the box lacks: where the box's Python already has numpy or pandas (an NGC image
# builds its torch and TE against its own), the carried copies are set aside and the box's are used.
# Environment: PYTHON (default python3), WHL_DIR (default .whl), GPU_CHECK_SITE (default /tmp/gpu-check-site),
# GPU_CHECK_BUDGET_S (--quick only, default 480), GPU_CHECK_PROBE (with --plan: plan from that file, another
# machine's `python -m labs probe` output, instead of this machine).
set -uo pipefail
cd "$(dirname "$0")/.."
quick=0
plan_only=0
out_arg=
for arg in "$@"; do
  case "$arg" in
    --quick) quick=1 ;;
    --plan) plan_only=1 ;;
    -h | --help) sed -n '2,36p' "$0"; exit 0 ;;
    -*) echo "gpu-check: unknown option '$arg' (allowed: --quick, --plan, --help)" >&2; exit 2 ;;
    *) out_arg=$arg ;;
  esac
done
PY=${PYTHON:-python3}
out=${out_arg:-${OUT:-gpu-check-out}}
whl=${WHL_DIR:-.whl}
site=${GPU_CHECK_SITE:-/tmp/gpu-check-site}
budget=${GPU_CHECK_BUDGET_S:-480}
[[ "$budget" =~ ^[0-9]+$ ]] || { echo "gpu-check: GPU_CHECK_BUDGET_S: got '$budget', expected whole seconds" >&2; exit 2; }
if [ -n "${GPU_CHECK_PROBE:-}" ] && [ "$plan_only" = 0 ]; then
  echo "gpu-check: GPU_CHECK_PROBE (another machine's probe) is for --plan only; unset it to run the check" >&2
  exit 2
fi
mkdir -p "$out"
: >"$out/steps.log"
export PYTHONUNBUFFERED=1
status=0
started=$SECONDS
say() { echo "gpu-check: $*" | tee -a "$out/steps.log"; }
fail() { say "FAILED: $*"; status=1; }
# The timeout for a step: at most CAP seconds, and in --quick no more than the budget has left (less a reserve
# for the steps after it); 0 when too little is left to start it.
limit() {
  local cap=$1 reserve=${2:-0}
  if [ "$quick" = 0 ]; then echo "$cap"; return; fi
  local left=$((budget - (SECONDS - started) - reserve))
  if [ "$left" -lt 20 ]; then echo 0; elif [ "$left" -lt "$cap" ]; then echo "$left"; else echo "$cap"; fi
}
# bounded CAP RESERVE CMD...: CMD under `timeout` with its limit; 124 without running it when the budget is spent.
bounded() {
  local t
  t=$(limit "$1" "$2")
  shift 2
  if [ "$t" = 0 ]; then
    local what="$*"
    say "skipped '${what:0:60}': the ${budget} s budget of --quick is spent" >&2  # stdout may be a result file
    return 124
  fi
  timeout "$t" "$@"
}
# run_step NAME CAP RESERVE LOG CMD...: run CMD under its limit, tee'd into LOG; 0/1 as the command ended.
run_step() {
  local name=$1 cap=$2 reserve=$3 log=$4
  shift 4
  local t
  t=$(limit "$cap" "$reserve")
  if [ "$t" = 0 ]; then
    say "skipped $name: the ${budget} s budget of --quick is spent"
    return 0
  fi
  local t0=$SECONDS
  timeout "$t" "$@" 2>&1 | tee "$log"
  local rc=${PIPESTATUS[0]}
  say "$name: exit $rc after $((SECONDS - t0)) s (limit $t s)"
  [ "$rc" = 124 ] && say "$name ran past its $t s limit"
  return "$rc"
}

if ls "$whl"/*.whl >/dev/null 2>&1; then
  rm -rf "$site"
  # --target installs every requirement from the carried wheels alone (pip ignores what the box has), so a
  # dependency missing from .whl/ stops the check here rather than on the first import.
  if ! bounded 240 300 "$PY" -m pip install -q --disable-pip-version-check --no-index --find-links "$whl" \
    --no-compile --no-cache-dir --target "$site" -r scripts/gpu-check-requirements.txt >"$out/pip.log" 2>&1 \
    || ! bounded 120 300 "$PY" -m pip install -q --disable-pip-version-check --no-index --find-links "$whl" \
      --no-compile --no-cache-dir --no-deps --target "$site" -r scripts/gpu-check-nodeps.txt >>"$out/pip.log" 2>&1; then
    fail "the carried wheels in $whl do not install offline (see $out/pip.log)"
    tail -5 "$out/pip.log"
    exit 1
  fi
  # Run by the box's own Python before PYTHONPATH names the site: what it has of numpy and pandas wins.
  bounded 60 300 "$PY" scripts/gpu_check_prefer_image.py "$site" numpy pandas 2>&1 | while IFS= read -r line; do say "$line"; done
  export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
  say "installed $(ls "$whl"/*.whl | wc -l) carried wheels into $site"
else
  say "no wheels in $whl: using the packages $PY already has"
fi

# What this machine can run, said before anything runs: the GPU, whether Transformer Engine imports (imported
# here on its own: the probe only tries it where CUDA is up), the recipes TE allows, and every check that will
# skip with the reason. plan.json keeps the same for the steps below.
bounded 90 240 "$PY" - "$out" "$quick" >"$out/plan.txt" 2>"$out/plan.err" <<'PYEOF' || { cat "$out/plan.err"; fail "the plan (python -m labs probe's checks) failed: see $out/plan.err"; }
import json, os, sys
from pathlib import Path

from labs import catalog, env

out, quick = Path(sys.argv[1]), sys.argv[2] == "1"
given = os.environ.get("GPU_CHECK_PROBE")
if given:  # another machine's `python -m labs probe`: what the check would do there
    report = json.loads(Path(given).read_text())
    te = bool(report["transformer_engine"]["available"])
    version = report["versions"].get("transformer_engine")
    te_words = f"imports (version {version})" if te else f"does not import ({report['transformer_engine']['reason']})"
else:
    report = env.probe()
    try:
        import transformer_engine
        import transformer_engine.pytorch  # noqa: F401

        te = True
        te_words = f"imports (version {getattr(transformer_engine, '__version__', 'unknown')})"
    except Exception as exc:  # ImportError, or a CUDA library mismatch at import
        te = False
        te_words = f"does not import ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})"
cuda = report["device"]["type"] == "cuda"
gpus = int(report["device"].get("count") or 0) if cuda else 0
recipes = report["fp8_recipes"]
runs = [r for r, v in recipes.items() if v["supported"]] if cuda and te else []
refused = {r: v["reason"] for r, v in recipes.items() if not v["supported"]} if cuda and te else {}
no_gpu = "no CUDA GPU"
no_te = "Transformer Engine " + te_words
skips = []
if not cuda:
    skips += [
        ("the gpu-marked lab tests", f"{no_gpu}: each says so in pytest's skip summary"),
        ("the timing loop, precision and device binding on a GPU (tests/labs/test_gpu_measurements.py)", no_gpu),
        ("TE's fused scale update against the emulation", no_gpu),
        ("fp8-step on te, per recipe", no_gpu),
        ("tp-sweep TP=1 on the GPU (precision, the profiled window apart from the timed steps, TE parity)", no_gpu),
        ("the FP8 benchmark", no_gpu),
    ]
elif not te:
    skips += [
        ("TE's fused scale update against the emulation", no_te),
        ("fp8-step on te, per recipe", no_te),
        ("tp-sweep's TE block and its parity (the sweep runs on torch-cuda)", no_te),
        ("the FP8 benchmark", no_te),
    ]
if cuda and gpus < 2:
    nccl = [name for name, spec in catalog.LABS.items() if spec.nccl_run is not None]
    nccl_words = f"{', '.join(nccl[:-1])} and {nccl[-1]}" if len(nccl) > 1 else "".join(nccl)
    skips.append(
        (
            f"the two-rank checks (overlap-trace, tp-sweep TP=2 and up, and the {nccl_words} runs on NCCL)",
            f"{gpus} GPU visible, they need 2",
        )
    )
if quick:
    skips.append(("bench/tp_overlap_gpu.py", "full mode only: run without --quick"))
lines = [
    "mode: " + ("quick (designed for 8 minutes on one H200)" if quick else "full"),
    "GPU: "
    + (
        f"{report['device']['name']} (compute capability {report['device']['compute_capability']}), {gpus} visible"
        if cuda
        else "none (no CUDA GPU: every GPU step skips)"
    ),
    f"Transformer Engine: {te_words}",
    "fp8-step on te will run: " + (", ".join(runs) if runs else "no recipe"),
]
lines += [f"fp8-step on te must refuse {r} with exit 2: {why}" for r, why in refused.items()]
lines += [f"will skip: {what} ({why})" for what, why in skips]
for line in lines:
    print(line)
plan = {"cuda": cuda, "gpus": gpus, "te": te, "recipes_run": runs, "recipes_refused": sorted(refused)}
(out / "plan.json").write_text(json.dumps(plan, indent=1))
PYEOF
while IFS= read -r line; do say "$line"; done <"$out/plan.txt"
if [ "$plan_only" = 1 ]; then
  say "plan only (--plan): nothing was run; status $status"
  exit $status
fi
plan() { timeout 30 "$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$out/plan.json" "$1" 2>/dev/null; }
plan_list() { timeout 30 "$PY" -c 'import json,sys; print(" ".join(json.load(open(sys.argv[1]))[sys.argv[2]]))' "$out/plan.json" "$1" 2>/dev/null; }

bounded 60 240 "$PY" - >"$out/versions.txt" 2>&1 <<'PYEOF' || fail "an import the labs need is missing (see $out/versions.txt)"
import importlib, platform
print("python", platform.python_version())
for name in ("torch", "pydantic", "jsonschema", "pytest", "nvtx", "pandas", "plotly", "hta.trace_analysis"):
    mod = importlib.import_module(name)
    print(name, getattr(mod, "__version__", "(no __version__)"))
PYEOF
if command -v nvidia-smi >/dev/null 2>&1; then
  bounded 20 240 nvidia-smi -L >"$out/nvidia-smi.txt" 2>&1 || fail "nvidia-smi"
  bounded 20 240 nvidia-smi --query-gpu=name,driver_version,mig.mode.current --format=csv >>"$out/nvidia-smi.txt" 2>&1 || true
else
  say "skipped nvidia-smi: no NVIDIA driver on this machine"
fi
bounded 90 240 "$PY" -m labs probe >"$out/probe.json" 2>"$out/probe.err" || fail "python -m labs probe (see $out/probe.err)"
bounded 90 240 "$PY" -m labs check >"$out/labs-check.log" 2>&1 || fail "a lab runner does not import (see $out/labs-check.log)"
[ -s "$out/probe.json" ] && say "probe: $(timeout 30 "$PY" -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["backend"], "-", r["device"]["name"], "-", r["label"])' "$out/probe.json" 2>&1)"

# The tests need no database: --noconftest leaves out the app's fixtures. First what one GPU can check of how the
# labs measure, with its numbers printed (-s); then the other gpu- and hta-marked tests, tp-sweep's single-GPU
# test (ProfilerStep per step, TE parity) and TE's fused update against the emulation among them.
run_step "timing loop and precision on this GPU" 120 240 "$out/pytest-measurements.log" \
  "$PY" -m pytest -q -s -p no:cacheprovider --noconftest -rs tests/labs/test_gpu_measurements.py \
  || fail "the GPU measurement checks (see $out/pytest-measurements.log)"
run_step "gpu/hta tests" 300 150 "$out/pytest-gpu.log" \
  "$PY" -m pytest -q -p no:cacheprovider --noconftest -m "gpu or hta" -rs tests/labs \
  --ignore=tests/labs/test_gpu_measurements.py \
  || fail "gpu/hta tests (see $out/pytest-gpu.log)"

if [ "$(plan cuda)" = True ] && [ "$(plan te)" = True ]; then
  # Small enough to take seconds, and whole 128-tiles for the block recipe (seq 128).
  fp8_params='{"steps": 8, "batch": 1, "seq": 128, "d_model": 128, "n_heads": 4, "ffn": 256, "vocab": 32'
  for recipe in $(plan_list recipes_run); do
    run_step "fp8-step te $recipe" 90 120 "$out/fp8-step-$recipe.log" \
      "$PY" -m labs run fp8-step --backend te --params "$fp8_params, \"recipe\": \"$recipe\"}" \
      --out "$out/fp8-step-$recipe" || fail "fp8-step on te with the $recipe recipe (see $out/fp8-step-$recipe.log)"
  done
  for recipe in $(plan_list recipes_refused); do
    bounded 90 120 "$PY" -m labs run fp8-step --backend te --params "$fp8_params, \"recipe\": \"$recipe\"}" \
      --out "$out/fp8-step-$recipe" >"$out/fp8-step-$recipe.log" 2>&1
    rc=$?
    if [ "$rc" = 124 ] && [ "$(limit 90 120)" = 0 ]; then
      continue  # bounded said the budget is spent
    elif [ "$rc" = 2 ]; then
      say "fp8-step te $recipe: refused with exit 2, as the plan said: $(tail -1 "$out/fp8-step-$recipe.log")"
    else
      fail "fp8-step te $recipe: expected a refusal (exit 2), got exit $rc (see $out/fp8-step-$recipe.log)"
    fi
  done
fi

if [ "$(plan cuda)" = True ]; then
  # One TP=1 run through the CLI (te where TE imports, else torch-cuda), its bundle read for what the learner's page
  # rests on: the precision the ranks ran in; a profiled window of one ProfilerStep per step holding that window's
  # GEMMs and no others (six aten::mm per Megatron step: warm-up and the timed steps ran unprofiled before it);
  # and the NCCL kernels in it (a TP=1 step has no collective, so a count above zero means something outside the
  # step leaked into the profiled window).
  tp_params='{"degrees": [1], "tokens": 256, "hidden": 256, "ffn": 1024, "steps": 4, "warmup": 1}'
  if run_step "tp-sweep TP=1" 120 90 "$out/tp-sweep.log" \
    "$PY" -m labs run tp-sweep --backend auto --params "$tp_params" --out "$out/tp-sweep"; then
    bounded 60 90 "$PY" - "$out/tp-sweep" <<'PYEOF' 2>&1 | tee -a "$out/steps.log" || fail "tp-sweep TP=1's bundle (see $out/steps.log)"
import json, re, sys
from pathlib import Path

folder = Path(sys.argv[1])
result = json.loads((folder / "result.json").read_text())
steps = result["params"]["steps"]
traces = sorted(folder.glob("profile_tp1_rank*.json"))
assert traces, "no profiler trace for TP=1"
events = json.loads(traces[0].read_text()).get("traceEvents", [])
windows = sorted(
    (int(e["name"].split("#")[1]), e["ts"], e["ts"] + e.get("dur", 0))
    for e in events
    if str(e.get("name", "")).startswith("ProfilerStep#") and e.get("ph") == "X"
)
kernels = [e for e in events if e.get("cat") == "kernel"]
nccl = [e for e in kernels if re.search("nccl", str(e.get("name", "")), re.I)]
gemms = [e["ts"] for e in events if e.get("ph") == "X" and e.get("name") == "aten::mm"]
inside = sum(any(a <= t <= b for _, a, b in windows) for t in gemms)
precision = result["environment"].get("precision") or {}
degree = result["results"]["degrees"][0]
print(f"gpu-check: tp-sweep TP=1: {len(windows)} ProfilerStep windows for {steps} steps, {len(gemms)} aten::mm "
      f"({inside} inside them), {len(kernels)} GPU kernels, {len(nccl)} of them NCCL, backend "
      f"{result['environment']['backend']}")
print(f"gpu-check: tp-sweep TP=1: step {degree['step_ms']:.4f} ms (timed alone); precision {json.dumps(precision)}")
if "te" in degree:
    print(f"gpu-check: tp-sweep TP=1: TE parity {json.dumps(degree['te'].get('parity'))}")
assert [n for n, _, _ in windows] == list(range(steps)), f"expected ProfilerStep#0..{steps - 1}, found {windows}"
assert len(gemms) == 6 * steps == inside, f"expected {6 * steps} aten::mm, all in the window; found {len(gemms)}, {inside} inside"
assert precision.get("fp32_matmul") == "ieee" and precision.get("checked_in") == "every rank", precision
assert kernels, "the trace holds no GPU kernel"
assert not nccl, f"{len(nccl)} NCCL kernels in a TP=1 profiled window"
PYEOF
  else
    fail "tp-sweep TP=1 (see $out/tp-sweep.log)"
  fi
fi

if [ "$(plan cuda)" = True ] && [ "$(plan gpus)" -ge 2 ] 2>/dev/null; then
  # Each lab's two-rank run on NCCL that its spec names (LabSpec.nccl_run: `python -m labs list --nccl-runs`; their
  # gpu-marked tests above ran the same paths): unverified on a GPU until this step passes somewhere.
  bounded 60 60 "$PY" -m labs list --nccl-runs >"$out/nccl-runs.txt" 2>&1 || fail "python -m labs list --nccl-runs (see $out/nccl-runs.txt)"
  while read -r lab params; do
    [ -n "$lab" ] || continue
    run_step "$lab on NCCL" 120 60 "$out/$lab.log" \
      "$PY" -m labs run "$lab" --backend torch-cuda --params "$params" --out "$out/$lab" </dev/null \
      || fail "$lab on two GPUs (see $out/$lab.log)"
  done <"$out/nccl-runs.txt"
fi

if [ "$quick" = 1 ]; then
  # A real layer size (hidden 4096, FFN 16384, 16k tokens) with one layer and few iterations.
  run_step "FP8 benchmark" 150 0 "$out/bench-fp8.log" \
    "$PY" bench/fp8_step_gpu.py --layers 1 --warmup 3 --iters 10 || fail "bench/fp8_step_gpu.py"
  say "skipped bench/tp_overlap_gpu.py: full mode only"
else
  timeout 300 "$PY" bench/fp8_step_gpu.py 2>&1 | tee "$out/bench-fp8.log"
  [ "${PIPESTATUS[0]}" = 0 ] || fail "bench/fp8_step_gpu.py"
  timeout 420 "$PY" bench/tp_overlap_gpu.py --out "$out/tp-bundles" 2>&1 | tee "$out/bench-tp.log"
  [ "${PIPESTATUS[0]}" = 0 ] || fail "bench/tp_overlap_gpu.py"
fi
say "finished with status $status after $((SECONDS - started)) s; logs in $out"
exit $status
