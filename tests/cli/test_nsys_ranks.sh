#!/usr/bin/env bash
# Ranks of multi-process Nsight Systems sets (issue 26; aggregator/src/nsys_ranks.cpp): a 9-process,
# 3-host set from kernalyse-tracegen --format nsys whose rank evidence is only what the flags plant
# (file names <report>_<host>_<pid>.sqlite, pids falling with the rank within each host, so (host,
# pid) order is not rank order). Each source is checked: nothing (every rank assumed, in (host,
# pid) order, one warning naming the 9 files), network marks on the cross-host ranks only, a
# launcher variable in the launched process's environment (two variables) and in the daemon's
# DeviceEnvironment list, NCCL's ncclCommInitRank payload, the file name; the rank that nothing
# names takes the free rank of its host's block; two processes claiming one rank lose the claim;
# one report per host holding 3 processes; the same process twice is refused. The real two-node
# pair in ../shared/traces/nsys takes its ranks from PMI_RANK when the folder is there.
source "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
cd "$TMP" || exit 1
gen() {  # gen DIR FLAGS...: the 9-process, 3-host set
  local d=$1
  shift
  kernalyse-tracegen --ranks 9 --kernels 300 --steps 3 --seed 5 --format nsys --ranks-per-host 3 \
    --out "$d" "$@" 2>/dev/null
}
# ranks JSON: per rank "rank host pid source" with the planted (true) rank from the pid
# (50000 + 1000 host + 10 (2 - local)), one line each.
ranks() {
  "$PY" - "$1" <<'PY'
import json, re, sys
d = json.load(open(sys.argv[1]))
for r in d["ranks"]:
    pid = int(re.search(r"(?:_|pid )(5\d{4})(?!\d)", r["source"]).group(1))
    true = 3 * ((pid - 50000) // 1000) + (2 - (pid % 1000) // 10)
    print(r["rank"], r["host"], pid, true, r["rank_source"])
PY
}

# 1. No rank anywhere: 9 ranks on 3 hosts, all assumed in (host, pid) order, one warning line.
gen none --nsys-names hostpid --nsys-env none
expect_eq "no evidence: 9 files" "$(ls none | wc -l)" "9"
kernalyse-merge none -q --json >none.json 2>none.err
expect_eq "no evidence: imports (exit code)" "$?" "0"
r=$(ranks none.json)
expect_eq "no evidence: 9 ranks, 3 hosts, all assumed" \
  "$(echo "$r" | awk '{print $5}' | sort | uniq -c | xargs) $(echo "$r" | awk '{print $2}' | sort -u | wc -l)" "9 assumed 3"
expect_eq "no evidence: ranks in (host, pid) order" \
  "$(echo "$r" | sort -k2,2 -k3,3n | awk '{printf "%s ", $1}')" "0 1 2 3 4 5 6 7 8 "
expect_eq "no evidence: one warning line" "$(grep -c 'ranks assumed' none.err) $(wc -l <none.err)" "1 1"
expect_eq "no evidence: the warning names the 9 files" \
  "$(for f in none/*.sqlite; do grep -c "$f" none.err; done | sort -u)" "1"

# 2. Evidence on some ranks: marks only on the cross-host ranks (0, 2, 3, 5, 6, 8), the
# launched process's OMPI_COMM_WORLD_RANK on rank 4 and PMI_RANK on rank 5 (beats its marks),
# ncclCommInitRank's payload on rank 1; rank 7 has nothing: its host's block [6, 9) leaves it 7.
gen some --nsys-names hostpid --nsys-env 4,5:PMI_RANK --nsys-payload 1 --nsys-marks cross-host
kernalyse-merge some -q --json >some.json 2>some.err
expect_eq "some evidence: imports (exit code)" "$?" "0"
r=$(ranks some.json)
expect_eq "some evidence: every rank is the planted one" \
  "$(echo "$r" | awk '$1 != $4' | wc -l) $(echo "$r" | wc -l)" "0 9"
expect_eq "some evidence: the source of each rank" "$(echo "$r" | awk '{printf "%s:%s ", $1, $5}')" \
  "0:network 1:nccl 2:network 3:network 4:env:OMPI_COMM_WORLD_RANK 5:env:PMI_RANK 6:network 7:assumed 8:network "
expect_eq "some evidence: the assumed rank named in one line" \
  "$(grep 'ranks assumed' some.err | grep -o 'rank [0-9]* [^ ]*sqlite' | xargs)" \
  "rank 7 some/report_tracegen-node2_52010.sqlite"
expect_contains "some evidence: the marks said so" "$(cat some.err)" "ranks taken from NCCL's network NVTX marks: rank 0 some/report_tracegen-node0_50020.sqlite"
# Independently of the importer: rank 1's payload is 3 ints after a 32-byte header, Rank first.
got=$("$PY" - some/report_tracegen-node0_50010.sqlite <<'PY'
import sqlite3, struct, sys
db = sqlite3.connect(sys.argv[1])
b = db.execute("select binaryData from NVTX_EVENTS where text = 'ncclCommInitRank'").fetchone()[0]
print(*struct.unpack_from("<ii", b, 32))
PY
)
expect_eq "some evidence: rank 1's payload (Rank, No. of ranks)" "$got" "1 9"

# 2b. The file name names rank 7; rank 3's DeviceEnvironment names SLURM_PROCID (beats marks).
mv some/report_tracegen-node2_52010.sqlite some/report_tracegen-node2_52010_rank-7.sqlite
"$PY" - some/report_tracegen-node1_51020.sqlite <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
db.execute("insert into TARGET_INFO_SYSTEM_ENV values (0, 'Global', 'DeviceEnvironment', 0, "
           "'PATH=/bin;SLURM_PROCID=3;HOME=/x')")
db.commit()
PY
kernalyse-merge some -q --json >some2.json 2>some2.err
expect_eq "file name, DeviceEnvironment: imports (exit code)" "$?" "0"
r=$(ranks some2.json)
expect_eq "file name, DeviceEnvironment: sources of ranks 3 and 7, all planted, none assumed" \
  "$(echo "$r" | awk '$1 == 3 || $1 == 7 {printf "%s:%s ", $1, $5}')$(echo "$r" | awk '$1 != $4' | wc -l) $(grep -c 'ranks assumed' some2.err)" \
  "3:env:SLURM_PROCID 7:file 0 0"

# 2c. Two processes claim rank 4 with the same variable: neither gets it (one warning); rank 3
# falls back to its marks, rank 4 to the free rank of its host's block.
"$PY" - some/report_tracegen-node1_51020.sqlite <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
db.execute("delete from TARGET_INFO_SYSTEM_ENV where name = 'DeviceEnvironment'")
db.execute("insert into META_DATA_CAPTURE values ('PROCESS_0:ENVIRONMENT_VARIABLE', "
           "'OMPI_COMM_WORLD_RANK=\"4\"')")
db.commit()
PY
kernalyse-merge some -q --json >some3.json 2>some3.err
expect_eq "one rank claimed twice: imports (exit code)" "$?" "0"
r=$(ranks some3.json)
expect_eq "one rank claimed twice: ranks 3 and 4 from marks and assumed, all planted" \
  "$(echo "$r" | awk '$1 == 3 || $1 == 4 {printf "%s:%s ", $1, $5}')$(echo "$r" | awk '$1 != $4' | wc -l)" \
  "3:network 4:assumed 0"
expect_contains "one rank claimed twice: said once" "$(grep -c 'rank evidence not used' some3.err) $(cat some3.err)" \
  "1 warning: rank evidence not used (one rank claimed twice): rank 4 (env:OMPI_COMM_WORLD_RANK) of"

# 3. One report per host with its 3 processes: split by pid into 9 ranks; all kernels kept.
gen hosts --nsys-per-host --nsys-marks cross-host
expect_eq "per host: 3 reports" "$(ls hosts | xargs)" \
  "report_tracegen-node0.sqlite report_tracegen-node1.sqlite report_tracegen-node2.sqlite"
kernalyse-merge hosts -q -o hosts.h5 2>hosts.err
expect_eq "per host: imports (exit code)" "$?" "0"
kernalyse-merge hosts.h5 -q --json >hosts.json
r=$(ranks hosts.json)
expect_eq "per host: 9 ranks, every one the planted one; marks, else assumed" \
  "$(echo "$r" | wc -l) $(echo "$r" | awk '$1 != $4' | wc -l) $(echo "$r" | awk '{printf "%s:%s ", $1, $5}')" \
  "9 0 0:network 1:assumed 2:network 3:network 4:assumed 5:network 6:network 7:assumed 8:network "
got=$("$PY" - hosts.h5 hosts <<'PY'
import glob, h5py, sqlite3, sys
f = h5py.File(sys.argv[1], "r")
k = f["activities"]["kind"][:] == 0
ranks = f["activities"]["rank"][:][k]
want = {}  # kernels per pid, by SQL
for p in glob.glob(sys.argv[2] + "/*.sqlite"):
    for g, n in sqlite3.connect(p).execute(
            "select globalPid, count(*) from CUPTI_ACTIVITY_KIND_KERNEL group by globalPid"):
        want[(g >> 24) & 0xFFFFFF] = n
src = [s.decode() if isinstance(s, bytes) else s for s in f["ranks"]["source"][:]]
pid_of = {int(r): int(s.split("(pid ")[1].rstrip(")")) for r, s in zip(f["ranks"]["rank"][:], src)}
print(all(int((ranks == r).sum()) == want[pid_of[r]] for r in pid_of), sum(want.values()), int(k.sum()))
PY
)
expect_eq "per host: each rank's kernels are its pid's (SQL), 2700 in all" "$got" "True 2700 2700"

# 4. The same process twice cannot be told apart: one line, exit 2, no output file.
mkdir twice && cp none/report_tracegen-node0_50000.sqlite twice/a.sqlite &&
  cp none/report_tracegen-node0_50000.sqlite twice/b.sqlite
err=$(kernalyse-merge twice -o twice.h5 2>&1)
expect_eq "same process twice: exit code" "$?" "2"
expect_eq "same process twice: one line" "$err" \
  "kernalyse-merge: twice/a.sqlite and twice/b.sqlite: the same process (host tracegen-node0, pid 50000) and no rank that tells them apart; give each process's report once"
expect_eq "same process twice: no output" "$([ -e twice.h5 ] && echo yes || echo no)" "no"

# 4b. A report's processes are bounded (docs/limits.md): 4,096 import, 4,097 are refused.
"$PY" - <<'PY'
import sqlite3
for n in (4096, 4097):
    db = sqlite3.connect(f"procs{n}.sqlite")
    db.executescript("create table StringIds (id integer primary key, value text not null);"
                     "insert into StringIds values (1, 'k');"
                     "create table CUPTI_ACTIVITY_KIND_KERNEL (start, end, deviceId, streamId,"
                     " correlationId, demangledName, shortName, globalPid);")
    db.executemany("insert into CUPTI_ACTIVITY_KIND_KERNEL values (?, ?, 0, 7, ?, 1, 1, ?)",
                   [(10 * i, 10 * i + 5, i, (i + 1) << 24) for i in range(n)])
    db.commit()
PY
kernalyse-merge procs4096.sqlite -q -o procs4096.h5 2>procs.err
expect_eq "4,096 processes in one report: 4,096 ranks, all assumed, one warning" \
  "$("$PY" -c 'import h5py; f = h5py.File("procs4096.h5", "r"); print(len(f["ranks"]["rank"]))') $(grep -c "ranks assumed" procs.err)" "4096 1"
err=$(kernalyse-merge procs4097.sqlite -q -o procs4097.h5 2>&1)
expect_eq "4,097 processes: refused in one line, exit 2" "$? $err" \
  "2 kernalyse-merge: procs4097.sqlite: GPU work of 4097 processes; a report of more than 4096 is not read (docs/limits.md)"

# 5. The real two-node pair: PMI_RANK in each launched process's environment (META_DATA_CAPTURE).
A="$TRACES/nsys/allreduce_2nodes_2gpus"
if [ -d "$A" ]; then
  want=$("$PY" - "$A" <<'PY'
import glob, sqlite3, sys
for p in sorted(glob.glob(sys.argv[1] + "/*.sqlite")):
    db = sqlite3.connect(p)
    v = db.execute("select value from META_DATA_CAPTURE where name like 'PROCESS_%:ENVIRONMENT_VARIABLE'"
                   " and value like 'PMI_RANK=%'").fetchone()[0]
    h = db.execute("select value from TARGET_INFO_SYSTEM_ENV where name = 'Hostname'").fetchone()[0]
    print(v.split("=")[1].strip('"'), h, "env:PMI_RANK")
PY
)
  got=$(kernalyse-merge "$A" -q --json --align off 2>&1 | "$PY" -c 'import json,sys; [print(r["rank"], r["host"], r["rank_source"]) for r in json.load(sys.stdin)["ranks"]]')
  expect_eq "real pair: ranks from PMI_RANK (as SQL reads it)" "$got" "$want"
  # The shape of the issue's public sets: the environment gone, then the marks too.
  mkdir pair && cp "$A"/*.sqlite pair/ && chmod u+w pair/*.sqlite
  "$PY" - pair <<'PY'
import glob, sqlite3, sys
for p in glob.glob(sys.argv[1] + "/*.sqlite"):
    db = sqlite3.connect(p)
    db.execute("delete from META_DATA_CAPTURE where name like '%ENVIRONMENT_VARIABLE'")
    db.execute("delete from TARGET_INFO_SYSTEM_ENV where name = 'DeviceEnvironment'")
    db.commit()
PY
  got=$(kernalyse-merge pair -q --json --align off 2>/dev/null | "$PY" -c 'import json,sys; [print(r["rank"], r["host"], r["rank_source"]) for r in json.load(sys.stdin)["ranks"]]')
  expect_eq "real pair without its environment: ranks from the network marks" "$got" \
    "$(echo "$want" | sed 's/env:PMI_RANK/network marks/')"
  "$PY" - pair <<'PY'
import glob, sqlite3, sys
for p in glob.glob(sys.argv[1] + "/*.sqlite"):
    db = sqlite3.connect(p)
    db.execute("update StringIds set value = 'x' where value like 'ncclNet%'")
    db.execute("delete from NVTX_EVENTS where text like 'ncclNet%'")
    db.commit()
PY
  got=$(kernalyse-merge pair -q --json --align off 2>pair.err | "$PY" -c 'import json,sys; [print(r["rank"], r["host"], r["rank_source"]) for r in json.load(sys.stdin)["ranks"]]')
  expect_eq "real pair without environment or marks: assumed in (host, pid) order, one warning" \
    "$got $(grep -c 'ranks assumed' pair.err)" "$(echo "$want" | sed 's/env:PMI_RANK/assumed/') 1"
else
  echo "SKIP: $A absent (the real pair's part)"
fi
finish
