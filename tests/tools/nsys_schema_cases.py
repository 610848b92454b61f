#!/usr/bin/python3
"""Nsight Systems exports with hostile *schemas* (issue 30), for tests/cli/test_nsys_schema.sh and
as fuzz seeds (tests/fuzz/make_corpus.sh): byte mutation almost never builds a valid schema
object, so these are written whole. Each file is a small valid export (the one of
tests/cli/test_nsys_hostile.sh, good rows only) with one change. The file name says what the
importer must do: refuse-*.sqlite (one line, exit 2), read-*.sqlite (imports).

Usage: nsys_schema_cases.py OUT_DIR [--small]
  --small: leave out the cases that need a large file (fuzz seeds: libFuzzer's input length is
           the largest seed's).
Needs Debian's /usr/bin/python3 (its sqlite3 module has FTS5; without it that case is skipped).
"""
import os
import sqlite3
import sys

BASE = """
create table StringIds (id integer primary key, value text not null);
insert into StringIds values (1, 'void gemm<float>(float*)'), (2, 'gemm'),
  (3, 'ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)'),
  (4, 'cudaLaunchKernel_v7000'), (5, 'ProfilerStep#4');
create table CUPTI_ACTIVITY_KIND_KERNEL (start integer not null, end integer not null,
  deviceId integer not null, streamId integer not null, correlationId integer,
  demangledName integer not null, shortName integer not null);
insert into CUPTI_ACTIVITY_KIND_KERNEL values (1000, 2000, 0, 7, 10, 1, 2),
  (3000, 4000, 0, 13, 11, 3, 3);
create table CUPTI_ACTIVITY_KIND_RUNTIME (start, end, globalTid, correlationId, nameId);
insert into CUPTI_ACTIVITY_KIND_RUNTIME values (900, 950, 16777217, 10, 4);
create table NVTX_EVENTS (start, end, eventType, text, textId, domainId, globalTid);
insert into NVTX_EVENTS values (500, 5000, 59, null, 5, 0, 16777217);
"""

# An endless row source: SQLite evaluates a recursive CTE lazily, one row per step, for ever.
ENDLESS = "with recursive n(i) as (select 1 union all select i + 1 from n)"
KCOLS = "start, end, deviceId, streamId, correlationId, demangledName, shortName"


def replace_table(name, real, create):
    """The table `name` renamed to `real`, and `create` (a view or other object) in its place."""
    return f"alter table {name} rename to {real};\n{create}"


REFUSE = {
    # The case: the kernel table behind a view over an endless recursive CTE.
    "view-kernels": replace_table(
        "CUPTI_ACTIVITY_KIND_KERNEL", "K_REAL",
        f"create view CUPTI_ACTIVITY_KIND_KERNEL as {ENDLESS} select {KCOLS} from n, "
        "(select * from K_REAL limit 1);"),
    "view-stringids": replace_table(
        "StringIds", "S_REAL",
        f"create view StringIds as {ENDLESS} select s.id as id, s.value as value from n, S_REAL s;"),
    # An optional table is checked as much as the kernel table.
    "view-nvtx": replace_table(
        "NVTX_EVENTS", "N_REAL",
        f"create view NVTX_EVENTS as {ENDLESS} select n_real.* from n, N_REAL;"),
    "view-lowercase-name": replace_table(
        "CUPTI_ACTIVITY_KIND_RUNTIME", "R_REAL",
        "create view cupti_activity_kind_runtime as select * from R_REAL;"),
    # Names of other schema objects where a table is expected.
    "trigger-memcpy": "create trigger CUPTI_ACTIVITY_KIND_MEMCPY after insert on StringIds "
                      "begin select 1; end;",
    "index-memset": "create index CUPTI_ACTIVITY_KIND_MEMSET on StringIds(value);",
    # A generated column runs the file's SQL on every row read.
    "generated-column": replace_table(
        "CUPTI_ACTIVITY_KIND_KERNEL", "K_REAL",
        "create table CUPTI_ACTIVITY_KIND_KERNEL (start integer, end integer as "
        "(start + length(hex(zeroblob(100000)))), deviceId, streamId, correlationId, "
        "demangledName, shortName);\n"
        f"insert into CUPTI_ACTIVITY_KIND_KERNEL (start, deviceId, streamId, correlationId, "
        f"demangledName, shortName) select start, deviceId, streamId, correlationId, "
        f"demangledName, shortName from K_REAL;"),
    # A column whose collation this SQLite lacks (prepare fails): one line, not a crash.
    "unknown-collation": "create table TARGET_INFO_SYSTEM_ENV (name text, value text);\n"
                         "insert into TARGET_INFO_SYSTEM_ENV values ('RANK', '0');\n"
                         "pragma writable_schema = on;\n"
                         "update sqlite_schema set sql = 'CREATE TABLE TARGET_INFO_SYSTEM_ENV "
                         "(name text collate evil, value text)' "
                         "where name = 'TARGET_INFO_SYSTEM_ENV';\n"
                         "pragma writable_schema = off;",
}

READ = {
    # Another tool's views beside the tables (Extra-P adds EXTRAP_* views): never read, so fine.
    "unrelated-view": f"create view EXTRAP_ENDLESS as {ENDLESS} select i from n;",
    # A trigger on a table never fires for a reader.
    "trigger-on-kernels": "create trigger t after insert on CUPTI_ACTIVITY_KIND_KERNEL "
                          "begin delete from StringIds; end;",
    # WITHOUT ROWID tables: the same rows through a clustered index.
    "without-rowid": replace_table(
        "StringIds", "S_OLD",
        "create table StringIds (id integer primary key, value text not null) without rowid;\n"
        "insert into StringIds select * from S_OLD; drop table S_OLD;\n") + "\n" + replace_table(
        "CUPTI_ACTIVITY_KIND_KERNEL", "K_OLD",
        f"create table CUPTI_ACTIVITY_KIND_KERNEL ({KCOLS}, primary key (start, correlationId)) "
        "without rowid;\n"
        "insert into CUPTI_ACTIVITY_KIND_KERNEL select * from K_OLD; drop table K_OLD;"),
    # The right names with the wrong column types: text affinity stores every time as text, so
    # no row has integer times: each is a malformed row (counted), as a text cell always was.
    "text-times": replace_table(
        "CUPTI_ACTIVITY_KIND_KERNEL", "K_OLD",
        "create table CUPTI_ACTIVITY_KIND_KERNEL (start text, end text, deviceId, streamId, "
        "correlationId, demangledName, shortName);\n"
        "insert into CUPTI_ACTIVITY_KIND_KERNEL select * from K_OLD; drop table K_OLD;\n"
        "insert into CUPTI_ACTIVITY_KIND_KERNEL values (x'0102', 5000.5, 0, 7, 12, 1, 2);"),
    # A virtual table's shadow tables are plain tables; an unused FTS5 table is never read.
    "unrelated-fts5": "create virtual table NOTES using fts5(body);\n"
                      "insert into NOTES values ('a note');",
}

LARGE = {
    # StringIds without a key on id: each name lookup scans the table, so distinct names times
    # strings steps. 20,000 of each is 4e8 row visits from a 1 MB file: past the step budget.
    "refuse-unindexed-strings": replace_table(
        "StringIds", "S_OLD",
        "create table StringIds (id integer, value text);\n"
        "insert into StringIds select * from S_OLD; drop table S_OLD;\n"
        f"insert into StringIds {ENDLESS} select i + 100, 'kernel_' || i from n limit 20000;\n"
        f"insert into CUPTI_ACTIVITY_KIND_KERNEL {ENDLESS} "
        "select 10000 + i, 10001 + i, 0, 7, 100 + i, i + 100, i + 100 from n limit 20000;"),
    # One 1 MB string named by 50,000 NVTX ranges and one 1 MB NCCL kernel name by 50,000
    # kernels: the work per row must not grow with the string (it did: 1 MB copied per row).
    "read-one-name-many-rows": "insert into StringIds values (90, 'r' || hex(zeroblob(500000))),\n"
                               "  (91, 'ncclDevKernel_AllReduce_Sum_f32_RING_LL_' || "
                               "hex(zeroblob(500000)));\n"
                               f"insert into NVTX_EVENTS {ENDLESS} "
                               "select 10 * i, 10 * i + 5, 59, null, 90, 0, 1 from n limit 50000;\n"
                               f"insert into CUPTI_ACTIVITY_KIND_KERNEL {ENDLESS} "
                               "select 10 * i, 10 * i + 5, 0, 7, i, 91, 91 from n limit 50000;",
    # A step-like NVTX name of 100,000 digits: std::regex recursed once per character.
    "read-long-step-name": "insert into StringIds values (92, 'ProfilerStep#' || "
                           "replace(hex(zeroblob(50000)), '0', '1'));\n"
                           "insert into NVTX_EVENTS values (1, 2, 59, null, 92, 0, 1);",
    # A huge string table: 50,000 unused strings and one 2 MB kernel name that is used.
    "read-huge-strings": f"insert into StringIds {ENDLESS} "
                         "select i + 100, printf('unused_%d_%.40c', i, 'x') from n limit 50000;\n"
                         "insert into StringIds values (99, 'k' || hex(zeroblob(1000000)));\n"
                         "insert into CUPTI_ACTIVITY_KIND_KERNEL values "
                         "(5000, 6000, 0, 7, 12, 99, 99);",
}


def fts5_available():
    try:
        sqlite3.connect(":memory:").execute("create virtual table f using fts5(a)")
        return True
    except sqlite3.OperationalError:
        return False


def write(path, change):
    if os.path.exists(path):
        os.remove(path)
    db = sqlite3.connect(path)
    db.execute("pragma page_size = 512")  # small seeds: libFuzzer mutates every byte
    db.executescript(BASE)
    db.executescript(change)
    db.commit()
    db.close()


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    cases = {f"refuse-{k}": v for k, v in REFUSE.items()}
    cases.update({f"read-{k}": v for k, v in READ.items()})
    if fts5_available():
        cases["refuse-fts5-stringids"] = replace_table(
            "StringIds", "S_REAL", "create virtual table StringIds using fts5(id, value);\n"
            "insert into StringIds select id, value from S_REAL;")
    else:
        del cases["read-unrelated-fts5"]
        print("nsys_schema_cases.py: no FTS5 in this sqlite3 module; its cases left out",
              file=sys.stderr)
    if "--small" not in sys.argv[2:]:
        cases.update(LARGE)
    for name, change in cases.items():
        write(os.path.join(out, f"{name}_rank-0.sqlite"), change)


if __name__ == "__main__":
    main()
