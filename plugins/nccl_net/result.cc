// Status -> ncclResult_t and logging (see result.h). Any thread.
#include "plugins/nccl_net/result.h"

#include <atomic>

#include "runtime/common/log.h"

namespace mixnet::nccl {
namespace {

std::atomic<nccl_abi::Logger> g_logger{nullptr};

void Log(nccl_abi::LogLevel level, unsigned long flags, const std::string& message) {
  nccl_abi::Logger logger = g_logger.load();
  if (logger != nullptr) {
    logger(level, flags, __FILE_NAME__, __LINE__, "NET/mixnet: %s", message.c_str());
    return;
  }
  if (level == nccl_abi::kLogWarn) {
    log::Warn("NET/mixnet: {}", message);
  } else {
    log::Debug("NET/mixnet: {}", message);
  }
}

}  // namespace

nccl_abi::Result ToNcclResult(const absl::Status& status, const char* call) {
  if (status.ok()) return nccl_abi::kSuccess;
  LogWarn(std::string(call) + ": " + status.ToString());
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
      return nccl_abi::kInvalidArgument;
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kUnimplemented:
      return nccl_abi::kInvalidUsage;
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kCancelled:
    case absl::StatusCode::kAborted:
      return nccl_abi::kRemoteError;
    case absl::StatusCode::kInternal:
    case absl::StatusCode::kResourceExhausted:
      return nccl_abi::kInternalError;
    default:
      return nccl_abi::kSystemError;
  }
}

void SetNcclLogger(nccl_abi::Logger logger) {
  if (logger != nullptr) g_logger.store(logger);
}

void LogInfo(const std::string& message) {
  Log(nccl_abi::kLogInfo, nccl_abi::kLogSubsysInit | nccl_abi::kLogSubsysNet, message);
}

void LogWarn(const std::string& message) {
  Log(nccl_abi::kLogWarn, nccl_abi::kLogSubsysAll, message);
}

}  // namespace mixnet::nccl
