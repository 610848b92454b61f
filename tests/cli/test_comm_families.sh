#!/usr/bin/env bash
# Communication kernels of libraries other than NCCL (DeepEP, vLLM / SGLang custom all-reduce,
# TensorRT-LLM all-reduce; aggregator/importers/src/classify.cpp, docs/analyses.md) count as communication by
# default in the summary, the overlap and the breakdown. A hand-built one-rank Kineto trace plants
# the intervals (µs): computation gemm [0,100) and [200,300) on stream 7; on stream 20 DeepEP's
# internode::dispatch [50,150), vLLM's cross_device_reduce_1stage [250,260), TensorRT-LLM's
# oneShotAllReduceKernel [400,450), and an unknown my_exchange_kernel [500,520) (computation unless
# --comm-regex names it). Planted: communication 160 µs, of which 60 overlapped by computation
# (37.5 %), 100 exposed; computation 220; span 520; busy 320, idle 200. --comm-regex still extends
# the list (communication 180).
. "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
cd "$TMP" || exit 1
k() {  # k NAME STREAM TS DUR CORR
  printf '{"ph": "X", "cat": "kernel", "name": "%s", "pid": 0, "tid": %s, "ts": %s, "dur": %s, "args": {"device": 0, "stream": %s, "correlation": %s}}' \
    "$1" "$2" "$3" "$4" "$2" "$5"
}
{
  echo '{"distributedInfo": {"rank": 0, "world_size": 1}, "traceEvents": ['
  k "gemm_kernel" 7 1000 100 1; echo ,
  k "gemm_kernel" 7 1200 100 2; echo ,
  k "void deep_ep::internode::dispatch<true, 8>(int4*, float*)" 20 1050 100 3; echo ,
  k "void vllm::cross_device_reduce_1stage<c10::BFloat16, 8>(vllm::RankData*, vllm::RankSignals, vllm::Signal*, c10::BFloat16*, int, int)" 20 1250 10 4; echo ,
  k "void tensorrt_llm::kernels::oneShotAllReduceKernel<__nv_bfloat16, 8>(tensorrt_llm::kernels::AllReduceParams)" 20 1400 50 5; echo ,
  k "my_exchange_kernel" 20 1500 20 6
  echo ']}'
} >rank-0.json
kernalyse-merge rank-0.json --summary --overlap --breakdown --json -q >out.json 2>err.txt
expect_eq "exit code" "$?" "0"
got=$("$PY" - <<'PY'
import json
j = json.load(open("out.json"))
cat = {r["kernel"]: r["category"] for r in j["kernel_summary"]}
o, b = j["overlap"][0], j["breakdown"][0]
print(cat["deep_ep::internode::dispatch"], cat["vllm::cross_device_reduce_1stage"],
      cat["tensorrt_llm::kernels::oneShotAllReduceKernel"], cat["gemm_kernel"],
      cat["my_exchange_kernel"])
print(round(o["comm_us"], 3), round(o["overlap_us"], 3), round(o["overlap_pct"], 3),
      round(o["exposed_comm_us"], 3))
print(round(b["compute_us"], 3), round(b["comm_us"], 3), round(b["idle_us"], 3),
      round(b["span_us"], 3))
PY
)
expect_eq "summary: DeepEP, vLLM and TensorRT-LLM kernels are communication" "$(echo "$got" | sed -n 1p)" \
  "communication communication communication computation computation"
expect_eq "overlap: comm, overlapped, %, exposed (µs)" "$(echo "$got" | sed -n 2p)" "160.0 60.0 37.5 100.0"
expect_eq "breakdown: compute, exposed comm, idle, span (µs)" "$(echo "$got" | sed -n 3p)" \
  "220.0 100.0 200.0 520.0"
kernalyse-merge rank-0.json --overlap --comm-regex '^my_exchange' --json -q >ext.json 2>err.txt
expect_eq "--comm-regex: exit code" "$?" "0"
expect_eq "--comm-regex extends the built-in families" "$("$PY" -c '
import json; o = json.load(open("ext.json"))["overlap"][0]; print(round(o["comm_us"], 3))')" "180.0"
finish
