// A whole store as bytes of an Archive (archive.h) and back: what a process of an MPI import
// sends to the first one (inputs.cpp). Every column of every table (store.h's lists), the
// strings, the ranks' fields and the attributes, so that the store read back equals the one put.
#pragma once

#include "kernalyse/archive.h"
#include "kernalyse/store.h"

namespace kernalyse {

void put_store(Archive& ar, const Store& s);
void get_store(Archive& ar, Store& s);
// Only the row tables' columns (for parts that share one header: the MPI analysis' cross-rank
// rows, sliced.cpp).
void put_tables(Archive& ar, const Store& s);
void get_tables(Archive& ar, Store& s);

}  // namespace kernalyse
