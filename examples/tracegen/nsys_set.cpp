// kernalyse-tracegen --format nsys --nsys-*: multi-host sets of Nsight Systems reports with
// chosen rank evidence, so tests can check each source of kernalyse's rank assignment
// (aggregator/src/nsys_ranks.cpp).
#include "nsys_set.h"

#include <filesystem>
#include <set>
#include <stdexcept>

#include "nsys_writer.h"

namespace {

// "all", "none"/"" or a comma list of ranks, each with an optional ":WORD"; rank → word ("" none).
std::vector<std::string> per_rank(const std::string& spec, int n, const std::string& dflt,
                                  const char* flag) {
  std::vector<std::string> out(static_cast<size_t>(n));
  if (spec.empty() || spec == "none") return out;
  if (spec == "all") return std::vector<std::string>(static_cast<size_t>(n), dflt);
  for (size_t p = 0; p <= spec.size();) {
    size_t e = std::min(spec.find(',', p), spec.size()), c = spec.find(':', p);
    std::string item = spec.substr(p, e - p), word = dflt;
    if (c < e) item = spec.substr(p, c - p), word = spec.substr(c + 1, e - c - 1);
    size_t used = 0;
    int r = -1;
    try {
      r = std::stoi(item, &used);
    } catch (const std::exception&) {
    }
    if (used != item.size() || r < 0 || r >= n || word.empty())
      throw std::invalid_argument(std::string("bad value for ") + flag + ": " + spec);
    out[static_cast<size_t>(r)] = word;
    p = e + 1;
  }
  return out;
}

}  // namespace

bool nsys_set_flag_has_value(const std::string& flag) { return flag != "--nsys-per-host"; }

bool parse_nsys_set_flag(const std::string& flag, const std::string& value, NsysSetOptions* o) {
  if (flag == "--nsys-names") {
    if (value != "rank" && value != "hostpid")
      throw std::invalid_argument("--nsys-names is rank or hostpid");
    o->names = value;
  } else if (flag == "--nsys-env") {
    o->env = value;
  } else if (flag == "--nsys-payload") {
    o->payload = value;
  } else if (flag == "--nsys-marks") {
    if (value != "none" && value != "all" && value != "cross-host")
      throw std::invalid_argument("--nsys-marks is none, all or cross-host");
    o->marks = value;
  } else if (flag == "--nsys-per-host") {
    o->per_host = true;
  } else {
    return false;
  }
  return true;
}

void write_nsys_set(const std::vector<kernalyse::Store>& ranks, int ranks_per_host,
                    const NsysSetOptions& o, const std::string& dir) {
  namespace fs = std::filesystem;
  const int n = static_cast<int>(ranks.size()), k = ranks_per_host > 0 ? ranks_per_host : 1;
  auto host_of = [&](int r) { return r / k; };
  const auto env = per_rank(o.env, n, "OMPI_COMM_WORLD_RANK", "--nsys-env");
  const auto payload = per_rank(o.payload, n, "1", "--nsys-payload");
  std::vector<NsysProcessOut> procs(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    NsysProcessOut& p = procs[static_cast<size_t>(r)];
    p.store = &ranks[static_cast<size_t>(r)];
    p.host = "tracegen-node" + std::to_string(host_of(r));
    p.pid = 50000 + 1000 * host_of(r) + 10 * (k - 1 - r % k);
    if (!env[static_cast<size_t>(r)].empty())
      p.env.emplace_back(env[static_cast<size_t>(r)], std::to_string(r));
    if (!payload[static_cast<size_t>(r)].empty()) p.comm_rank = r, p.comm_size = n;
    // Ring neighbours: r sends to r + 1; with cross-host only where the hosts differ.
    const int next = (r + 1) % n, prev = (r + n - 1) % n;
    if (n > 1 && (o.marks == "all" || (o.marks == "cross-host" && host_of(next) != host_of(r))))
      p.send_to = next;
    if (n > 1 && (o.marks == "all" || (o.marks == "cross-host" && host_of(prev) != host_of(r))))
      p.recv_from = prev;
  }
  fs::create_directories(dir);
  if (o.per_host) {
    for (int h = 0; h * k < n; ++h) {
      std::vector<NsysProcessOut> mine;
      for (int r = h * k; r < std::min(n, (h + 1) * k); ++r) {
        mine.push_back(procs[static_cast<size_t>(r)]);
        mine.back().env.clear();  // one environment per report: not the processes' own
      }
      const std::string path =
          (fs::path(dir) / ("report_tracegen-node" + std::to_string(h) + ".sqlite")).string();
      fs::remove(path);
      write_nsys_report(mine, path);
    }
    return;
  }
  for (int r = 0; r < n; ++r) {
    const NsysProcessOut& p = procs[static_cast<size_t>(r)];
    const std::string name = o.names == "hostpid"
                                 ? "report_" + p.host + "_" + std::to_string(p.pid) + ".sqlite"
                                 : "rank-" + std::to_string(r) + ".sqlite";
    const std::string path = (fs::path(dir) / name).string();
    fs::remove(path);
    write_nsys_report({p}, path);
  }
}
