// The analyses run a rank at a time (issue 28): a store read through RankSlices, each analysis's
// SlicedRun (pipeline.h) fed one rank's rows after another, so that peak memory is a couple of
// slices plus the cross-rank rows, not the store. The cross-rank rows (the communication kernels
// and their /nccl rows, the NCCL message marks, the GPU memory and power peaks' counters) are
// gathered from every slice into one small store; the clock inference and the collective match
// run on it; the ledger's root-cause windows are filled from the slices after the match.
// The output is byte for byte the whole-store pipeline's (tests/cli/test_sliced.sh).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernalyse/clock_infer.h"
#include "kernalyse/export.h"
#include "kernalyse/html_report.h"
#include "kernalyse/load.h"
#include "kernalyse/pipeline.h"
#include "kernalyse/spread.h"

namespace kernalyse {

struct SlicedAnalysis {
  // Attributes, strings and /ranks of the store (clocks as aligned) and the cross-rank rows.
  Store header;
  std::optional<ClockInference> inference;       // when the clocks were inferred
  std::shared_ptr<const CollectiveMatch> match;  // the cross-rank rows' match, when made
  std::unique_ptr<AnalysisContext> ctx;          // over `header`: what the results render with
  std::unique_ptr<Store> whole;                  // read whole for an analysis that declined
  std::unique_ptr<AnalysisContext> whole_ctx;
  AnalysisResults results;  // rendered, in registry order
  bool writer = true;       // false on the MPI processes but the first: they write nothing
};

// KERNALYSE_WHOLE_STORE=1: every store read whole, as before the rank-at-a-time forms (the
// comparisons of tests and bench/).
bool whole_store_forced();

// Whether these analyses can run a rank at a time with these options: each has a sliced form,
// no --rank / --step filter, the store's own view (not --compat hta).
bool sliceable(const std::vector<const Analysis*>& which, const AnalysisOptions& opt);
// sliceable(), and none of them only for a large store (Analysis::sliced_when_large): what the
// routes that write a temporary store to analyse it a rank at a time ask.
bool sliceable_any_size(const std::vector<const Analysis*>& which, const AnalysisOptions& opt);

// The analyses on `file` a rank at a time, the columns `sel` read, the clocks aligned per
// lo.align when may_align (as read_run). Empty when they cannot (sliceable() false, or a store
// whose rows are not grouped by rank): the caller reads the store whole. page: the HTML page's
// variants of the analyses (AnalysisContext's page).
std::optional<SlicedAnalysis> analyse_by_rank(const std::string& file,
                                              std::vector<const Analysis*> which,
                                              const AnalysisOptions& opt,
                                              const ColumnSelection& sel, bool may_align,
                                              const LoadOptions& lo, const Spread* spread = nullptr,
                                              bool page = false);

// The analyses of one large Kineto trace (past the rows a streamed import keeps in memory) when
// they all run a rank at a time: the trace imported streamed into a temporary store (in TMPDIR,
// removed after), then analysed a rank at a time, so that memory does not grow with the trace.
// The report is the in-memory import's (the import's clock inference, its lines on lo.info but
// the temporary store's "wrote"). Empty otherwise (a small trace, another format, analyses
// without a rank-at-a-time form): the caller imports it in memory.
std::optional<SlicedAnalysis> analyse_trace_by_rank(const std::string& trace,
                                                    const std::vector<const Analysis*>& which,
                                                    const AnalysisOptions& opt,
                                                    const LoadOptions& lo);

// `mpirun -n P kernalyse-merge TRACES [analyses]` without -o, when the analyses all run a rank at
// a time: the processes import the traces into a temporary store (import_spread: each writes its
// ranks' rows) in a directory that all of them read (TMPDIR when they run on one host, else
// beside the inputs; removed after), then analyse it a rank at a time (analyse_by_rank), so that
// no process holds the run. The report (on the writer, process 0) is the one-process import's.
// Collective. Empty otherwise (analyses without that form, one file, no shared directory): the
// caller imports as before (process 0 holds the store).
std::optional<SlicedAnalysis> analyse_traces_spread(const std::vector<std::string>& files,
                                                    const std::vector<const Analysis*>& which,
                                                    const AnalysisOptions& opt,
                                                    const LoadOptions& lo, const Spread& spread);

// --export-kineto DIR of the store `file` a rank at a time (issue 28): two passes over the slices
// (their earliest time, the files' common origin; then each rank's file from its rows), so that
// peak memory is a slice, not the store. Under mpirun each process writes its slices' files (the
// first one also the files of ranks without rows); every process returns the run's totals. The
// files are export_kineto's of the whole store, byte for byte (clocks inferred from the cross-rank
// rows when may_align, per lo.align, calls for it). Empty when the store's rows are not grouped
// by rank: the caller reads the store whole. Throws Error (the same on every process) for an
// existing file.
std::optional<ExportStats> export_kineto_by_rank(const std::string& file, const std::string& dir,
                                                 const ExportOptions& eo, bool may_align,
                                                 const LoadOptions& lo,
                                                 const Spread* spread = nullptr);

// --perfetto FILE of the store `file` a rank at a time: a pass over the slices for the origin,
// the tracks and the cross-rank rows (the collective instances, their waits and flows; the clock
// inference), another for the tracks when a time window needs the origin, then each section's
// events, a pass over its table's slices (PerfettoParts, export.h). Peak memory is a slice and the
// cross-rank rows, not the store; the file is export_perfetto's of the whole store, byte for byte.
// Under mpirun (collective) each process plans and formats its slices' events (the Kineto
// export's split); the first one writes its own into the file and asks the others for theirs,
// section by section in the file's order, which they keep in an unlinked file in TMPDIR until
// asked and send in messages of at most 4 MiB; a failure on any process throws the same Error on
// every one (no file left). Empty when the store's rows are not grouped by
// rank: the caller reads it whole. Throws Error for an existing file.
std::optional<ExportStats> export_perfetto_by_rank(const std::string& file, const std::string& path,
                                                   const ExportOptions& eo, bool may_align,
                                                   const LoadOptions& lo,
                                                   const Spread* spread = nullptr);

// --html FILE of the store `file` a rank at a time: the page analyses' rank-at-a-time forms
// (analyse_by_rank with the page's variants, spread under mpirun), then, on the first process,
// the page's own reads of the rows in two passes over the slices (the origin, the GPU span and
// the rows per rank; then each rank's timeline lanes over the window), its counters from the
// cross-rank rows. The page is write_html_report's of the whole store, byte for byte. Empty when
// analyse_by_rank is (a filter, a store within the memory budget: the critical path's form, a
// store not grouped by rank): the caller reads it whole. On the other processes: no file, zero
// bytes. An existing file is the caller's to refuse, before.
std::optional<HtmlStats> write_html_by_rank(const std::string& file, const std::string& path,
                                            const HtmlOptions& opt, const ColumnSelection& sel,
                                            bool may_align, const LoadOptions& lo,
                                            const Spread* spread = nullptr);

}  // namespace kernalyse
