#!/usr/bin/env bash
# bench/gpu/validate_checks.py, the GPU validation's judge, on the real files of an H200 run
# (tests/cli/gpu-h200): checks c (kernel counts) and i (CUDA graph replays) pass on them, and fail
# when the app's truth or the store's step is changed by one kernel. Its first GPU run judged
# check i wrongly (the set-up kernel divided over the steps): this keeps that from coming back.
. "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
D=$KERNALYSE_SRC/tests/cli/gpu-h200
CHK=$KERNALYSE_SRC/bench/gpu/validate_checks.py
cd "$TMP" || exit 1
verdict() { "$PY" -c 'import json, sys; d = json.load(sys.stdin); print(d["pass"], d.get("detail", ""))'; }
expect_eq "i on the H200 files" "$("$PY" "$CHK" graph "$D/graph-report.json" "$D/graph-summary.json" "$D/graph-step3.json" | verdict)" \
  "True rank 0: 523/523 own kernels, one step 46/46"
# The app claims one more GeLU per step: both the whole run and the step disagree.
"$PY" - "$D/graph-report.json" more.json <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); k = r["ranks"][0]["kernels_launched"]
k["vtp_gelu"] += r["steps"] + r["warmup"]; r["ranks"][0]["kernels_launched_total"] += r["steps"] + r["warmup"]
json.dump(r, open(sys.argv[2], "w"))
PY
out=$("$PY" "$CHK" graph more.json "$D/graph-summary.json" "$D/graph-step3.json")
expect_eq "i with one GeLU more per step" "$(echo "$out" | "$PY" -c 'import json, sys; d = json.load(sys.stdin); r = d["ranks"][0]; print(d["pass"], sorted(r["mismatches"]), sorted(r["step_mismatches"]))')" \
  "False ['vtp_gelu'] ['vtp_gelu']"
# The step's summary loses one RoPE kernel: only the step disagrees.
"$PY" - "$D/graph-step3.json" less.json <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
next(r for r in s["kernel_summary"] if r["kernel"] == "vtp_rope")["count"] -= 1
json.dump(s, open(sys.argv[2], "w"))
PY
expect_eq "i with a step one RoPE short" "$("$PY" "$CHK" graph "$D/graph-report.json" "$D/graph-summary.json" less.json | verdict)" \
  "False rank 0: 523/523 own kernels, one step 45/46"
expect_eq "c on the H200 files" "$("$PY" "$CHK" counts "$D/counts-report.json" "$D/counts-summary.json" | verdict)" "True "
# A kernel neither the app's nor NCCL's in a --gemm custom store fails check c.
"$PY" - "$D/counts-summary.json" extra.json <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
s["kernel_summary"].append(dict(s["kernel_summary"][0], kernel="stray_kernel", count=1))
json.dump(s, open(sys.argv[2], "w"))
PY
expect_eq "c with a stray kernel" "$("$PY" "$CHK" counts "$D/counts-report.json" extra.json | verdict)" "False "
finish
