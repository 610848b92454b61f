// The KERNALYSE_* environment table (collector/include/kernalyse/run_env.h): names unique and
// well-formed, each spelt nowhere else in the launcher and collector sources (they use
// env_name()), and each documented in docs/collector.md.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "kernalyse/run_env.h"

using namespace kernalyse;
namespace fs = std::filesystem;

namespace {
std::string slurp(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}
}  // namespace

TEST(RunEnv, NamesUniqueAndLookedUpByEnum) {
  std::set<std::string> seen;
  for (const RunEnvVar& v : kRunEnvVars) {
    const std::string name = v.name;
    EXPECT_EQ(name.rfind("KERNALYSE_", 0), 0u) << name;
    EXPECT_TRUE(seen.insert(name).second) << name << " twice";
    EXPECT_STREQ(env_name(v.id), v.name);
  }
  EXPECT_STREQ(env_name(RunEnv::Tree), "KERNALYSE_TREE");
  EXPECT_STREQ(env_name(RunEnv::CuptiFlushMs), "KERNALYSE_CUPTI_FLUSH_MS");
}

TEST(RunEnv, NoNameSpeltOutsideTheTable) {
  const fs::path src = KERNALYSE_SOURCE_DIR;
  const std::regex literal("\"KERNALYSE_[A-Z0-9_]+\"");
  size_t files = 0;
  for (const char* dir : {"collector", "launch"})
    for (const auto& e : fs::recursive_directory_iterator(src / dir)) {
      const std::string ext = e.path().extension().string();
      if (ext != ".cpp" && ext != ".h" && ext != ".c") continue;
      if (e.path().filename() == "run_env.h") continue;
      ++files;
      const std::string text = slurp(e.path());
      std::smatch m;
      EXPECT_FALSE(std::regex_search(text, m, literal))
          << e.path() << " spells " << m.str() << ": use env_name(RunEnv::...) (run_env.h)";
    }
  EXPECT_GT(files, 5u);
}

TEST(RunEnv, EveryVariableDocumented) {
  const std::string doc = slurp(fs::path(KERNALYSE_SOURCE_DIR) / "docs" / "collector.md");
  ASSERT_FALSE(doc.empty());
  for (const RunEnvVar& v : kRunEnvVars)
    EXPECT_NE(doc.find(std::string("`") + v.name + "`"), std::string::npos)
        << v.name << " not in docs/collector.md";
}
