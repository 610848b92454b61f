// The analyses of one large trace a rank at a time (analyse_trace_by_rank, kernalyse/sliced.h).
#include <filesystem>

#include "kernalyse/error.h"
#include "kernalyse/import.h"
#include "kernalyse/kineto.h"
#include "kernalyse/sliced.h"
#include "temp_dir.h"

namespace fs = std::filesystem;

namespace kernalyse {

std::optional<SlicedAnalysis> analyse_trace_by_rank(const std::string& trace,
                                                    const std::vector<const Analysis*>& which,
                                                    const AnalysisOptions& opt,
                                                    const LoadOptions& lo) {
  if (!sliceable_any_size(which, opt) || whole_store_forced() ||
      trace_format(trace) != TraceFormat::Kineto)
    return std::nullopt;
  // Large: past the rows the streamed import keeps in memory (64 runs of chunk_rows rows), at
  // about 448 bytes of JSON a row (the benchmark's traces).
  if (static_cast<uint64_t>(std::max<int64_t>(input_bytes(trace), 0)) <=
      64 * 448 * static_cast<uint64_t>(lo.import.chunk_rows))
    return std::nullopt;
  const detail::TempDir dir;
  if (lo.info)
    lo.info(trace + ": a large trace: imported into a temporary store in " + dir.path() +
            " (removed after), then analysed a rank at a time");
  LoadOptions to_store = lo;
  to_store.output = (fs::path(dir.path()) / "trace.h5").string();
  to_store.output_only = true;
  to_store.force = false;
  if (lo.info)  // the import's lines, but not the temporary store's "wrote"
    to_store.info = [&lo, wrote = "wrote " + to_store.output](const std::string& line) {
      if (line != wrote) lo.info(line);
    };
  LoadedRun run = import_run({trace}, to_store);
  // The clocks are the import's (aligned as the in-memory import aligns them): not again.
  const ColumnSelection sel = columns_for_store(to_store.output, which, opt.compat, false);
  std::optional<SlicedAnalysis> out =
      analyse_by_rank(to_store.output, which, opt, sel, false, lo, nullptr);
  if (!out) throw Error(trace + ": internal error: its store cannot be read a rank at a time");
  if (!out->inference) out->inference = std::move(run.inference);
  return out;
}

}  // namespace kernalyse
