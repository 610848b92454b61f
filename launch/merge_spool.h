// kernalyse-merge --spool DIR [--hang] [-o STORE] (and kernalyse-run's merge of a process tree,
// --from-run): the store from whatever the ranks' spool files hold.
#pragma once

#include "merge_flags.h"

namespace kernalyse {

// Exit status 0; throws Error (the caller prints its line and exits 2).
int run_spool(const Options& o);

}  // namespace kernalyse
