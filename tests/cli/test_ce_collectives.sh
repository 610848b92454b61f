#!/usr/bin/env bash
# Copy-engine collectives (NCCL >= 2.29 runs some collectives as copies, no kernel): with
# kernalyse-tracegen --nccl-ops --ce-collectives every step has an all-gather that is a
# device-to-device copy carrying NCCL metadata (Kineto) or an NCCL_GPU_OPERATIONS row (nsys). Its
# time is communication, not memory and not idle, in the overlap and the breakdown, the ledger
# matches it across ranks, and the critical path runs; per-rank communication time against the
# truth file (|U(comm)| with the copies).
. "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
cd "$TMP" || exit 1
for fmt in json nsys; do
  kernalyse-tracegen --nccl-ops --ce-collectives --ranks 4 --steps 6 --format "$fmt" --out "$fmt" \
    --truth "$fmt.truth" 2>/dev/null
  expect_eq "$fmt: tracegen exit code" "$?" "0"
  kernalyse-merge "$fmt" --overlap --breakdown --stragglers --critical-path --json -q >out.json 2>err.txt
  expect_eq "$fmt: kernalyse-merge exit code ($(head -c 200 err.txt))" "$?" "0"
  got=$("$PY" - out.json "$fmt.truth" <<'PY'
import json, sys
j, t = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
ov = {r["rank"]: r for r in j["overlap"]}
bd = {r["rank"]: r for r in j["breakdown"]}
ok_comm = all(abs(ov[r]["comm_us"] - t["comm_us"][r]) < 0.01 for r in range(t["ranks"]))
ok_mem = all(abs(bd[r]["memory_us"]) < 0.01 for r in range(t["ranks"]))
ce = [c for c in j["stragglers"]["collectives"] if "gather" in c["op"].lower()]
print(ok_comm, ok_mem, len(ce), all(c["ranks"] == t["ranks"] for c in ce), t["ce_us"][0] > 0)
print(" ".join("%.3f/%.3f" % (ov[r]["comm_us"], t["comm_us"][r]) for r in range(t["ranks"])))
PY
)
  expect_eq "$fmt: comm time = planted (copies included), no memory time, 6 CE all-gathers matched on 4 ranks ($(echo "$got" | sed -n 2p))" \
    "$(echo "$got" | sed -n 1p)" "True True 6 True True"
done
finish
