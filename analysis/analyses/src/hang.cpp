// Hang and desync report from the spool's CollMark records (kernalyse/hang.h).
#include "kernalyse/hang.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <tuple>

#include "kernalyse/error.h"
#include "kernalyse/spool.h"
#include "kernalyse/spool_store.h"

namespace kernalyse {

std::string comm_name(uint64_t comm_hash) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%016llx", static_cast<unsigned long long>(comm_hash));
  return buf;
}

namespace {

std::string rank_list(const std::vector<int32_t>& ranks) {
  std::string s = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s;
}

std::string op_text(const std::string& op, int64_t bytes) {
  return (op.empty() ? std::string("?") : op) + " " + std::to_string(bytes) + " B";
}

}  // namespace

bool HangReport::hung() const {
  return std::any_of(comms.begin(), comms.end(),
                     [](const CommHang& c) { return c.stuck_seq >= 0 || !c.behind.empty(); });
}

HangReport hang_report_dir(const std::string& dir) {
  HangReport rep;
  rep.dir = dir;
  // Per communicator, per rank: entered and completed sequence numbers, and what was entered.
  struct Entered {
    std::string op;
    int64_t bytes;
  };
  struct PerRank {
    int32_t comm_rank = -1;
    std::map<int64_t, Entered> entered;
    std::map<int64_t, bool> completed;
  };
  struct PerComm {
    int32_t nranks = 0;
    std::map<int32_t, PerRank> ranks;
  };
  std::map<uint64_t, PerComm> comms;
  for (const auto& [file_rank, path] : list_spool_files(dir)) {
    const spool::Contents c = spool::read(path);
    const int32_t rank = c.has_meta ? c.meta.fixed.rank : file_rank;
    ++rep.ranks;
    rep.marks += static_cast<int64_t>(c.coll_marks.size());
    for (const spool::CollMark& m : c.coll_marks) {
      // The record is packed (spool.h): its fields are copied out by value, never bound to the
      // const references std::map and std::max take (misaligned: UB, UBSan's finding).
      const uint64_t hash = m.comm_hash;
      const int32_t nranks = m.nranks, comm_rank = m.comm_rank;
      const int64_t seq = m.seq, bytes = m.bytes;
      const auto collective = m.collective;
      PerComm& pc = comms[hash];
      pc.nranks = std::max(pc.nranks, nranks);
      PerRank& pr = pc.ranks[rank];
      pr.comm_rank = comm_rank;
      if (m.state == 0) {
        const std::string op = collective < c.strings.size() ? c.strings[collective] : "";
        pr.entered[seq] = Entered{op, bytes};
      } else {
        pr.completed[seq] = true;
      }
    }
  }
  for (const auto& [hash, pc] : comms) {
    CommHang h;
    h.comm_hash = hash;
    h.nranks = pc.nranks;
    h.unseen = std::max(0, pc.nranks - static_cast<int32_t>(pc.ranks.size()));
    int64_t stuck = -1;
    for (const auto& [rank, pr] : pc.ranks) {
      CommRankProgress p;
      p.rank = rank;
      p.comm_rank = pr.comm_rank;
      if (!pr.entered.empty()) {
        const auto& last = *pr.entered.rbegin();
        p.last_entered = last.first;
        p.last_entered_op = last.second.op;
        p.last_entered_bytes = last.second.bytes;
      }
      if (!pr.completed.empty()) p.last_completed = pr.completed.rbegin()->first;
      // The first collective this rank entered and never completed: it is waiting there.
      for (const auto& [seq, e] : pr.entered)
        if (!pr.completed.count(seq)) {
          p.waiting = true;
          if (stuck < 0 || seq < stuck) stuck = seq;
          break;
        }
      h.ranks.push_back(p);
    }
    h.stuck_seq = stuck;
    if (stuck >= 0) {
      for (const auto& [rank, pr] : pc.ranks) {
        auto it = pr.entered.find(stuck);
        if (it == pr.entered.end()) {
          h.never_entered.push_back(rank);
        } else if (!pr.completed.count(stuck)) {
          h.waiting.push_back(rank);
          if (h.stuck_op.empty()) h.stuck_op = it->second.op, h.stuck_bytes = it->second.bytes;
        }
      }
    }
    if (stuck < 0) {
      for (const auto& p : h.ranks) h.front_seq = std::max(h.front_seq, p.last_entered);
      for (const auto& p : h.ranks)
        if (p.last_entered < h.front_seq) h.behind.push_back(p.rank);
    }
    rep.comms.push_back(h);
    // Desyncs: the same sequence number entered with a different op or size.
    std::map<int64_t, std::map<std::pair<std::string, int64_t>, std::vector<int32_t>>> by_seq;
    for (const auto& [rank, pr] : pc.ranks)
      for (const auto& [seq, e] : pr.entered) by_seq[seq][{e.op, e.bytes}].push_back(rank);
    for (const auto& [seq, groups] : by_seq) {
      if (groups.size() < 2) continue;
      CollMismatch mm;
      mm.comm_hash = hash;
      mm.seq = seq;
      for (const auto& [key, ranks] : groups) mm.sides.push_back({key.first, key.second, ranks});
      std::stable_sort(mm.sides.begin(), mm.sides.end(), [](const auto& a, const auto& b) {
        return a.ranks.size() > b.ranks.size();
      });
      rep.mismatches.push_back(mm);
    }
  }
  return rep;
}

std::vector<std::string> HangReport::lines() const {
  std::vector<std::string> out;
  out.push_back("collective progress in " + dir + ": " + std::to_string(ranks) + " rank(s), " +
                std::to_string(comms.size()) + " communicator(s), " + std::to_string(marks) +
                " enter/complete records");
  if (comms.empty()) out.push_back("no collective recorded (no CollMark records in the spool)");
  for (const CommHang& c : comms) {
    const std::string name =
        "communicator " + comm_name(c.comm_hash) + " (" + std::to_string(c.nranks) + " ranks)";
    if (c.stuck_seq >= 0) {
      std::string l = "HANG: " + name + ": " + rank_list(c.waiting) + " wait in collective #" +
                      std::to_string(c.stuck_seq) + " (" + op_text(c.stuck_op, c.stuck_bytes) + ")";
      if (!c.never_entered.empty())
        l += "; " + rank_list(c.never_entered) + (c.never_entered.size() == 1 ? " has" : " have") +
             " not entered it";
      if (c.unseen > 0)
        l += "; " + std::to_string(c.unseen) + " member(s) recorded nothing on this communicator";
      out.push_back(l);
    } else if (!c.behind.empty()) {
      std::vector<int32_t> front;
      for (const auto& p : c.ranks)
        if (p.last_entered == c.front_seq) front.push_back(p.rank);
      out.push_back("BEHIND: " + name + ": " + rank_list(front) + " entered collective #" +
                    std::to_string(c.front_seq) + "; " + rank_list(c.behind) +
                    (c.behind.size() == 1 ? " has" : " have") + " not entered it");
    } else {
      int64_t lo = -1, hi = -1;
      for (const auto& p : c.ranks) {
        lo = lo < 0 ? p.last_completed : std::min(lo, p.last_completed);
        hi = std::max(hi, p.last_completed);
      }
      out.push_back(name + ": no rank waiting; last completed #" + std::to_string(lo) +
                    (hi != lo ? " to #" + std::to_string(hi) + " (ranks ended apart)" : ""));
    }
    for (const auto& p : c.ranks)
      out.push_back(
          "  rank " + std::to_string(p.rank) + " (comm rank " + std::to_string(p.comm_rank) +
          "): last entered #" + std::to_string(p.last_entered) +
          (p.last_entered >= 0 ? " (" + op_text(p.last_entered_op, p.last_entered_bytes) + ")"
                               : "") +
          ", last completed #" + std::to_string(p.last_completed) + (p.waiting ? ", waiting" : ""));
  }
  for (const CollMismatch& m : mismatches) {
    std::string l = "MISMATCH: communicator " + comm_name(m.comm_hash) + " collective #" +
                    std::to_string(m.seq) + ":";
    for (size_t i = 0; i < m.sides.size(); ++i) {
      if (i) l += ";";
      l.append(" ").append(rank_list(m.sides[i].ranks)).append(" ");
      l.append(op_text(m.sides[i].op, m.sides[i].bytes));
    }
    out.push_back(l);
  }
  return out;
}

nlohmann::json hang_json(const HangReport& h) {
  nlohmann::json comms = nlohmann::json::array();
  for (const auto& c : h.comms) {
    nlohmann::json ranks = nlohmann::json::array();
    for (const auto& p : c.ranks)
      ranks.push_back({{"rank", p.rank},
                       {"comm_rank", p.comm_rank},
                       {"last_entered", p.last_entered},
                       {"last_entered_op", p.last_entered_op},
                       {"last_entered_bytes", p.last_entered_bytes},
                       {"last_completed", p.last_completed},
                       {"waiting", p.waiting}});
    comms.push_back({{"comm", comm_name(c.comm_hash)},
                     {"nranks", c.nranks},
                     {"stuck_seq", c.stuck_seq},
                     {"stuck_op", c.stuck_op},
                     {"stuck_bytes", c.stuck_bytes},
                     {"waiting", c.waiting},
                     {"never_entered", c.never_entered},
                     {"unseen", c.unseen},
                     {"front_seq", c.front_seq},
                     {"behind", c.behind},
                     {"ranks", ranks}});
  }
  nlohmann::json mism = nlohmann::json::array();
  for (const auto& m : h.mismatches) {
    nlohmann::json sides = nlohmann::json::array();
    for (const auto& sd : m.sides)
      sides.push_back({{"op", sd.op}, {"bytes", sd.bytes}, {"ranks", sd.ranks}});
    mism.push_back({{"comm", comm_name(m.comm_hash)}, {"seq", m.seq}, {"sides", sides}});
  }
  return nlohmann::json{{"spool", h.dir},    {"ranks", h.ranks}, {"marks", h.marks},
                        {"hung", h.hung()},  {"comms", comms},   {"mismatches", mism},
                        {"lines", h.lines()}};
}

}  // namespace kernalyse
