// The plugin's edge: the one place where absl::Status becomes ncclResult_t,
// and the logger that routes plugin messages to NCCL's (or to spdlog before
// NCCL handed us one). Any thread.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "plugins/nccl_net/nccl_net_abi.h"

namespace mixnet::nccl {

// Status code -> NCCL result:
//   OK -> Success; InvalidArgument -> InvalidArgument (misuse: NULL/closed/
//   foreign pointers, bad handle, n > maxRecvs);
//   FailedPrecondition, OutOfRange, Unimplemented -> InvalidUsage (size
//   mismatch, unsupported memory type);
//   Unavailable, DeadlineExceeded, Cancelled, Aborted -> RemoteError (peer lost);
//   Internal, ResourceExhausted -> InternalError; anything else -> SystemError.
// A failure is logged as a warning naming `call`.
nccl_abi::Result ToNcclResult(const absl::Status& status, const char* call);

void SetNcclLogger(nccl_abi::Logger logger);
void LogInfo(const std::string& message);
void LogWarn(const std::string& message);

}  // namespace mixnet::nccl
