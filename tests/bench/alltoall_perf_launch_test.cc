// mixnet_alltoall_perf started the way nccl-tests are (label cpu): by
// `mpirun -np 4` with no rank flags (Open MPI's environment gives rank, world
// size and local rank; the store goes on 127.0.0.1, every rank being on this
// host), and by a torchrun-style environment (RANK, WORLD_SIZE, LOCAL_RANK,
// MASTER_ADDR, MASTER_PORT) in 4 processes. Each run must check and time
// every size and print rank 0's JSON lines for 4 ranks (or, without --json,
// its table with the column header). A partial environment must fail at
// once naming what is missing. `--peers --mpirun PATH` hands PATH to the
// Open MPI peers. Skips when mpirun is not installed. Runs on the test
// thread (the ranks are child processes).
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "mixnet_build_paths.h"  // MIXNET_ALLTOALL_PERF_BINARY
#include "nlohmann/json.hpp"
#include "tests/common/run_binary.h"

namespace mixnet::testing {
namespace {

const char* const kBench = MIXNET_ALLTOALL_PERF_BINARY;

// A TCP port free on 127.0.0.1 now (0 if none could be found).
int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  close(fd);
  return port;
}

// Rank 0's JSON lines: one per size, each for 4 ranks.
void ExpectFourRankResults(const BinaryRun& r) {
  ASSERT_EQ(r.exit_code, 0) << "stdout:\n" << r.out << "\nstderr:\n" << r.err;
  std::vector<size_t> sizes;
  for (absl::string_view line : absl::StrSplit(r.out, '\n', absl::SkipWhitespace())) {
    if (line.empty() || line[0] != '{') continue;
    nlohmann::json j = nlohmann::json::parse(line);
    EXPECT_EQ(j["ranks"], 4) << line;
    EXPECT_GT(j["time_us"].get<double>(), 0) << line;
    sizes.push_back(j["bytes_per_peer"].get<size_t>());
  }
  EXPECT_EQ(sizes, (std::vector<size_t>{65536, 1048576})) << "stdout:\n" << r.out;
}

TEST(AlltoallPerfLaunch, MpirunWithoutRankFlags) {
  if (system("command -v mpirun >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "mpirun not installed (apt-get install openmpi-bin)";
  }
  // Root needs Open MPI's consent; --oversubscribe: 4 ranks on fewer cores.
  BinaryRun r = RunBinary("mpirun",
                          absl::StrCat("--allow-run-as-root --oversubscribe -np 4 ", kBench,
                                       " --sizes 64K,1M --iters 2 --warmup 1 --json"),
                          120);
  ExpectFourRankResults(r);
}

// The table a job launcher's ranks print starts with its column header, as
// in --ranks mode.
TEST(AlltoallPerfLaunch, MpirunTableHasItsHeader) {
  if (system("command -v mpirun >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "mpirun not installed (apt-get install openmpi-bin)";
  }
  BinaryRun r = RunBinary("mpirun",
                          absl::StrCat("--allow-run-as-root --oversubscribe -np 2 ", kBench,
                                       " --sizes 64K --iters 1 --warmup 0"),
                          120);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const size_t header = r.out.find("bytes/peer");
  const size_t row = r.out.find("65536");
  ASSERT_NE(header, std::string::npos) << "no column header:\n" << r.out;
  ASSERT_NE(row, std::string::npos) << r.out;
  EXPECT_LT(header, row) << r.out;
}

// --mpirun goes to the Open MPI peers: theirs runs with a real mpirun, and
// fails (left out of the report) with one that does not exist.
TEST(AlltoallPerfLaunch, PeersTakeTheMpirunGiven) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "under ASan the Open MPI peer fails on Open MPI's own leaks (LeakSanitizer); "
                  "the plain build runs this";
#endif
  BinaryRun which = RunBinary("sh", "-c 'command -v mpirun'", 10);
  std::string mpirun(absl::StripAsciiWhitespace(which.out));
  if (which.exit_code != 0 || mpirun.empty()) {
    GTEST_SKIP() << "mpirun not installed (apt-get install openmpi-bin)";
  }
  const std::string args = " --ranks 2 --sizes 4K --iters 1 --warmup 0 --json --peers --mpirun ";
  BinaryRun good = RunBinary(kBench, absl::StrCat(args, mpirun), 180);
  ASSERT_EQ(good.exit_code, 0) << good.out << good.err;
  if (good.err.find("mixnet_alltoall_mpi\" not built") != std::string::npos) {
    GTEST_SKIP() << "the Open MPI peer is not built (no Open MPI development files)";
  }
  EXPECT_NE(good.out.find("\"mpi_busbw_GBps\""), std::string::npos) << good.out << good.err;
  BinaryRun bad = RunBinary(kBench, absl::StrCat(args, "/nonexistent/mpirun"), 180);
  ASSERT_EQ(bad.exit_code, 0) << bad.out << bad.err;
  EXPECT_EQ(bad.out.find("\"mpi_busbw_GBps\""), std::string::npos) << bad.out;
}

TEST(AlltoallPerfLaunch, TorchrunStyleEnvironment) {
  // A port free now for the store (MASTER_PORT + 1): rank 0 binds it.
  const int port = FreePort();
  ASSERT_GT(port, 1) << "no free port on 127.0.0.1";
  std::string script = "pids=''; ";
  for (int r = 0; r < 4; ++r) {
    absl::StrAppend(&script, "RANK=", r, " WORLD_SIZE=4 LOCAL_RANK=", r,
                    " MASTER_ADDR=127.0.0.1 MASTER_PORT=", port - 1, " ", kBench,
                    " --sizes 64K,1M --iters 2 --warmup 1 --json & pids=\"$pids $!\"; ");
  }
  absl::StrAppend(&script, "rc=0; for p in $pids; do wait $p || rc=1; done; exit $rc");
  BinaryRun r = RunBinary("sh", absl::StrCat("-c '", script, "'"), 120);
  ExpectFourRankResults(r);
}

// Rank without world size, or both without a store or a master host: exit
// 2 naming what is missing (LOCAL_RANK is optional, as for env://).
TEST(AlltoallPerfLaunch, PartialEnvironmentNamesWhatIsMissing) {
  BinaryRun r = RunBinary("env", absl::StrCat("RANK=1 ", kBench, " --sizes 64K"), 30);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("WORLD_SIZE not"), std::string::npos) << r.err;
  r = RunBinary("env", absl::StrCat("RANK=1 WORLD_SIZE=4 ", kBench, " --sizes 64K"), 30);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("MASTER_ADDR"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace mixnet::testing
