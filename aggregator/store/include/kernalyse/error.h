// The one error type: every problem with an input or output (store, trace, spool, export) surfaces
// as kernalyse::Error with a one-line message naming the file. Its own header so that code which
// only throws or catches it needs neither the store I/O nor HDF5.
#pragma once

#include <stdexcept>

namespace kernalyse {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace kernalyse
