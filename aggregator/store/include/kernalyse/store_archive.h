// A whole store as bytes of an Archive (archive.h) and back: what a process of an MPI import
// sends to the first one (inputs.cpp). Every column of every table (store.h's lists), the
// strings, the ranks' fields and the attributes, so that the store read back equals the one put.
#pragma once

#include "kernalyse/archive.h"
#include "kernalyse/spread.h"
#include "kernalyse/store.h"

namespace kernalyse {

void put_store(Archive& ar, const Store& s);
void get_store(Archive& ar, Store& s);
// Only the row tables' columns (for parts that share one header: the MPI analysis' cross-rank
// rows, sliced.cpp).
void put_tables(Archive& ar, const Store& s);
void get_tables(Archive& ar, Store& s);

// Every process's rows of every table, in process order, on every process (collective over the
// spread): the row counts in one small exchange, then each column in one all-gather straight into
// the whole column. Each process's /nccl rows index its own activities: they are moved past the
// processes before it. (An archive of every column, unpacked into a store per process and copied
// into the whole, was half of the 256-rank store's 0.4 s exchange: docs/benchmarks.md.)
void all_gather_tables(Store& s, const Spread& spread);

}  // namespace kernalyse
