// The runtime's logger must coexist with a host process's own spdlog logger of
// the same name (spdlog's registry is process-wide; the NCCL plugin carries a
// second copy of the runtime into processes that may use it too).
#include "runtime/common/log.h"

#include <memory>

#include "gtest/gtest.h"
#include "spdlog/sinks/null_sink.h"
#include "spdlog/spdlog.h"

namespace mixnet {
namespace {

TEST(LogTest, CoexistsWithARegisteredLoggerOfTheSameName) {
  auto host_logger =
      std::make_shared<spdlog::logger>("mixnet", std::make_shared<spdlog::sinks::null_sink_mt>());
  spdlog::register_logger(host_logger);
  EXPECT_NO_THROW(log::Init());
  EXPECT_NO_THROW(log::Info("log test: {}", 1));
  EXPECT_EQ(spdlog::get("mixnet"), host_logger);  // the host's logger is left alone
  spdlog::drop("mixnet");
}

}  // namespace
}  // namespace mixnet
