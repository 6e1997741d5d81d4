// The servers' gRPC limits (see grpc_server_limits.h). gRPC's threads.
#include "runtime/common/grpc_server_limits.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "google/protobuf/descriptor.h"
#include "grpcpp/support/server_interceptor.h"

namespace mixnet {
namespace {

namespace gx = ::grpc::experimental;

// "/pkg.Service/Method" -> the request message's full name, or "" when the
// method is not a generated protobuf one.
std::string RequestTypeOf(const char* method) {
  std::string name(absl::StripPrefix(method, "/"));
  absl::StrReplaceAll({{"/", "."}}, &name);
  const google::protobuf::MethodDescriptor* m =
      google::protobuf::DescriptorPool::generated_pool()->FindMethodByName(name);
  return m == nullptr ? "" : m->input_type()->full_name();
}

// For unary and server-streaming calls gRPC parses the one request before
// the handler; a parse failure shows up here as a received message that is
// null, and the handler does not run. The status then sent (INTERNAL, no
// message) is replaced.
class MalformedRequestInterceptor final : public gx::Interceptor {
 public:
  explicit MalformedRequestInterceptor(gx::ServerRpcInfo* info) : info_(info) {}

  void Intercept(gx::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(gx::InterceptionHookPoints::POST_RECV_MESSAGE) &&
        methods->GetRecvMessage() == nullptr) {
      malformed_ = true;
    }
    if (malformed_ &&
        methods->QueryInterceptionHookPoint(gx::InterceptionHookPoints::PRE_SEND_STATUS)) {
      const std::string type = RequestTypeOf(info_->method());
      methods->ModifySendStatus(grpc::Status(
          grpc::StatusCode::INVALID_ARGUMENT,
          absl::StrCat("malformed request: the body of ", info_->method(), " is not a valid ",
                       type.empty() ? "request message" : type, " (protobuf parse failed)")));
    }
    methods->Proceed();
  }

 private:
  gx::ServerRpcInfo* const info_;
  bool malformed_ = false;
};

class MalformedRequestFactory final : public gx::ServerInterceptorFactoryInterface {
 public:
  gx::Interceptor* CreateServerInterceptor(gx::ServerRpcInfo* info) override {
    const gx::ServerRpcInfo::Type t = info->type();
    if (t != gx::ServerRpcInfo::Type::UNARY && t != gx::ServerRpcInfo::Type::SERVER_STREAMING) {
      return nullptr;  // a null message there is the end of the client's stream
    }
    return new MalformedRequestInterceptor(info);
  }
};

}  // namespace

void ApplyServerLimits(grpc::ServerBuilder& builder) {
  builder.AddChannelArgument(GRPC_ARG_MAX_METADATA_SIZE, kMaxTransportMetadataBytes);
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MAX_POLLERS,
                              kSyncServerIdlePollers);
  std::vector<std::unique_ptr<gx::ServerInterceptorFactoryInterface>> factories;
  factories.push_back(std::make_unique<MalformedRequestFactory>());
  builder.experimental().SetInterceptorCreators(std::move(factories));
}

size_t CallMetadataBytes(const grpc::ServerContextBase& context) {
  size_t bytes = 0;
  for (const auto& [key, value] : context.client_metadata())
    bytes += key.size() + value.size() + 32;
  return bytes;
}

grpc::Status CheckCallMetadata(const grpc::ServerContextBase& context) {
  const size_t bytes = CallMetadataBytes(context);
  if (bytes <= kMaxCallMetadataBytes) return grpc::Status::OK;
  return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                      absl::StrCat("request metadata of ", bytes, " bytes exceeds the limit of ",
                                   kMaxCallMetadataBytes, " bytes"));
}

}  // namespace mixnet
