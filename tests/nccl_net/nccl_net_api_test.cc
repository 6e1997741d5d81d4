// NCCL net plugin API surface: the four exported tables (nm -D and dlsym),
// loading by absolute path, by file name through the loader path (what
// NCCL_NET_PLUGIN=mixnet does) and under LD_PRELOAD, device properties in
// every version's layout, NULL profiler callbacks, non-blocking connect, and
// misuse (NULL, foreign and closed objects, bad handles, n > maxRecvs), which
// must return ncclInvalidArgument without crashing.
#include <unistd.h>

#include <array>
#include <cstdio>
#include <string>

#include "gtest/gtest.h"
#include "mixnet_build_paths.h"  // MIXNET_NCCL_PROBE_PATH
#include "tests/nccl_net/plugin_harness.h"

namespace mixnet::nccl_test {
namespace {

// Runs a shell command; returns its exit status and stdout.
std::pair<int, std::string> Shell(const std::string& cmd) {
  std::string out;
  // In sanitizer builds the preloaded plugin carries the ASan runtime, which
  // then is not first in the library list; that is fine for this probe.
  const char* asan = getenv("ASAN_OPTIONS");
  const std::string defaults =
      absl::StrCat("env -u MIXNET_SOCKET_IFNAME -u MIXNET_TRANSPORT ASAN_OPTIONS=",
                   asan != nullptr ? absl::StrCat(asan, ":") : "", "verify_asan_link_order=0 ");
  FILE* f = popen((defaults + cmd).c_str(), "r");
  if (f == nullptr) return {-1, ""};
  char buf[512];
  while (fgets(buf, sizeof(buf), f) != nullptr) out += buf;
  int st = pclose(f);
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, out};
}

std::string Dir(const std::string& path) { return path.substr(0, path.rfind('/')); }
std::string Base(const std::string& path) { return path.substr(path.rfind('/') + 1); }

TEST(NcclNetApi, ExportsTheFourTablesAndNothingElse) {
  auto [rc, out] = Shell("nm -D --defined-only " + PluginPath() + " 2>&1");
  if (rc == 127) GTEST_SKIP() << "nm is not installed";
  ASSERT_EQ(rc, 0) << out;
  for (const char* s :
       {"ncclNetPlugin_v8", "ncclNetPlugin_v9", "ncclNetPlugin_v10", "ncclNetPlugin_v11"}) {
    EXPECT_NE(out.find(std::string(" D ") + s + "\n"), std::string::npos) << s << " in\n" << out;
  }
  // Our static runtime stays private (no absl/mixnet symbols leak out).
  EXPECT_EQ(out.find("mixnet"), std::string::npos) << out;
  EXPECT_EQ(out.find("absl"), std::string::npos) << out;
}

TEST(NcclNetApi, LoadsByAbsolutePathByNameAndUnderPreload) {
  const std::string probe = MIXNET_NCCL_PROBE_PATH, lib = PluginPath();
  ASSERT_EQ(Base(lib), "libnccl-net-mixnet.so");
  auto [rc1, out1] = Shell(probe + " open " + lib);
  EXPECT_EQ(rc1, 0) << out1;
  EXPECT_EQ(out1.rfind("mixnet 1 mixnet", 0), 0u) << out1;
  auto [rc2, out2] =
      Shell("LD_LIBRARY_PATH=" + Dir(lib) + " " + probe + " open libnccl-net-mixnet.so");
  EXPECT_EQ(rc2, 0) << out2;
  auto [rc3, out3] = Shell("LD_PRELOAD=" + lib + " " + probe + " preload");
  EXPECT_EQ(rc3, 0) << out3;
  // Preloaded, NCCL_NET_PLUGIN=mixnet finds the loaded copy by its soname.
  auto [rc5, out5] = Shell("LD_PRELOAD=" + lib + " " + probe + " open libnccl-net-mixnet.so");
  EXPECT_EQ(rc5, 0) << out5;
  auto [rc4, out4] = Shell(probe + " preload 2>&1");  // control: not there without preload
  EXPECT_NE(rc4, 0) << out4;
}

TEST(NcclNetApi, PropertiesInEveryVersion) {
  absl::Status s = RunRanks(1, [](int, Board*) -> absl::Status {
    ASSIGN_OR_RETURN(Loaded lib, LoadPlugin(PluginPath()));
    NT_REQUIRE(lib.v8 && lib.v9 && lib.v10 && lib.v11, "a table is missing");
    for (const char* name : {lib.v8->name, lib.v9->name, lib.v10->name, lib.v11->name}) {
      NT_REQUIRE(std::string(name) == "mixnet", "table name ", name);
    }
    NT_NCCL_OK(lib.v8->init(nullptr));
    NT_NCCL_OK(lib.v9->init(nullptr));
    NT_NCCL_OK(lib.v10->init(nullptr, nullptr));  // NULL profiler callback
    void* ctx = nullptr;
    NT_NCCL_OK(lib.v11->init(&ctx, 7, nullptr, nullptr, nullptr));
    int ndev = 0;
    NT_NCCL_OK(lib.v11->devices(&ndev));
    NT_REQUIRE(ndev == 1, "default settings give one device (lo), got ", ndev);
    abi::PropertiesV8 p8;
    std::memset(&p8, 0x5a, sizeof(p8));
    NT_NCCL_OK(lib.v8->get_properties(0, &p8));
    NT_REQUIRE(std::string(p8.name) == "mixnet" && p8.ptr_support == abi::kPtrHost &&
                   p8.max_recvs >= 1 && p8.device_type == abi::kDeviceHost &&
                   p8.device_version == 0 && p8.speed > 0 && p8.max_comms > 0,
               "bad v8 properties");
    abi::PropertiesV9 p9;
    std::memset(&p9, 0x5a, sizeof(p9));
    NT_NCCL_OK(lib.v10->get_properties(0, &p9));
    NT_REQUIRE(p9.vprops.ndevs == 1 && p9.vprops.devs[0] == 0 && p9.force_flush == 0 &&
                   p9.max_p2p_bytes >= 1 && p9.max_p2p_bytes <= abi::kMaxNetSizeBytes &&
                   p9.max_coll_bytes >= 1 && p9.max_recvs == p8.max_recvs,
               "bad v9/v10 properties");
    abi::PropertiesV11 p11;
    std::memset(&p11, 0x5a, sizeof(p11));
    NT_NCCL_OK(lib.v11->get_properties(0, &p11));
    NT_REQUIRE(p11.max_multi_request_size == 1 && p11.guid == p9.guid && p11.pci_path == nullptr,
               "bad v11 properties");
    NT_REQUIRE(lib.v11->make_vdevice == nullptr && lib.v11->get_device_mr == nullptr &&
                   lib.v11->irecv_consumed == nullptr && lib.v11->finalize != nullptr,
               "optional members");
    abi::NetAttr attr;
    std::memset(&attr, 0xff, sizeof(attr));
    NT_NCCL_OK(lib.v11->set_net_attr(ctx, &attr));
    NT_NCCL_OK(lib.v11->finalize(ctx));
    return absl::OkStatus();
  });
  EXPECT_TRUE(s.ok()) << s;
}

TEST(NcclNetApi, ConnectAndAcceptNeverBlock) {
  absl::Status s = RunRanks(1, [](int, Board*) -> absl::Status {
    ASSIGN_OR_RETURN(Net net, OpenNet());
    std::array<char, abi::kHandleMaxSize> h{};
    void *listen = nullptr, *send = nullptr, *recv = nullptr;
    NT_NCCL_OK(net.api->listen(net.ctx, 0, h.data(), &listen));
    // Nobody accepts for a while: connect must keep returning at once.
    for (int i = 0; i < 50; ++i) {
      const absl::Time t0 = absl::Now();
      NT_NCCL_OK(net.api->connect(net.ctx, 0, h.data(), &send, nullptr));
      NT_REQUIRE(absl::Now() - t0 < absl::Milliseconds(100), "connect blocked");
      NT_REQUIRE(send == nullptr, "connected before any accept");
      usleep(2000);
    }
    // Accept with no dial pending returns at once too.
    void* other = nullptr;
    std::array<char, abi::kHandleMaxSize> h2{};
    NT_NCCL_OK(net.api->listen(net.ctx, 0, h2.data(), &other));
    const absl::Time t0 = absl::Now();
    NT_NCCL_OK(net.api->accept(other, &recv, nullptr));
    NT_REQUIRE(recv == nullptr && absl::Now() - t0 < absl::Milliseconds(100), "accept blocked");
    NT_NCCL_OK(net.api->close_listen(other));
    RETURN_IF_ERROR(ConnectAccept(net, h.data(), &send, listen, &recv));
    NT_NCCL_OK(net.api->close_listen(listen));
    NT_NCCL_OK(net.api->close_send(send));
    NT_NCCL_OK(net.api->close_recv(recv));
    return absl::OkStatus();
  });
  EXPECT_TRUE(s.ok()) << s;
}

TEST(NcclNetApi, MisuseIsInvalidArgumentNotACrash) {
  absl::Status s = RunRanks(1, [](int, Board*) -> absl::Status {
    ASSIGN_OR_RETURN(Loaded lib, LoadPlugin(PluginPath()));
    const abi::NetV11* api = lib.v11;
    constexpr int kInval = abi::kInvalidArgument;
    // Before init.
    int ndev = 0;
    NT_REQUIRE(api->devices(&ndev) == kInval, "devices before init");
    void* ctx = nullptr;
    NT_NCCL_OK(api->init(&ctx, 1, nullptr, nullptr, nullptr));
    Net net{lib, api, ctx};
    int stack_object = 0;
    void* foreign = &stack_object;
    void* out = nullptr;
    int done = 0;
    std::array<char, abi::kHandleMaxSize> h{};
    NT_REQUIRE(api->devices(nullptr) == kInval, "devices(NULL)");
    abi::PropertiesV11 props;
    NT_REQUIRE(api->get_properties(5, &props) == kInval, "bad dev");
    NT_REQUIRE(api->get_properties(-1, &props) == kInval, "negative dev");
    NT_REQUIRE(api->get_properties(0, nullptr) == kInval, "NULL props");
    NT_REQUIRE(api->listen(nullptr, 0, h.data(), &out) == kInval, "listen with NULL ctx");
    NT_REQUIRE(api->listen(foreign, 0, h.data(), &out) == kInval, "listen with foreign ctx");
    NT_REQUIRE(api->listen(ctx, 3, h.data(), &out) == kInval, "listen on bad dev");
    NT_REQUIRE(api->listen(ctx, 0, nullptr, &out) == kInval, "listen with NULL handle");
    // A handle that listen did not write.
    std::array<char, abi::kHandleMaxSize> junk;
    junk.fill(0x42);
    NT_REQUIRE(api->connect(ctx, 0, junk.data(), &out, nullptr) == kInval, "junk handle");
    junk.fill(0);
    NT_REQUIRE(api->connect(ctx, 0, junk.data(), &out, nullptr) == kInval, "zero handle");
    NT_REQUIRE(api->connect(ctx, 0, nullptr, &out, nullptr) == kInval, "NULL handle");
    NT_REQUIRE(out == nullptr, "connect set a comm on failure");
    NT_REQUIRE(api->accept(nullptr, &out, nullptr) == kInval, "accept(NULL)");
    NT_REQUIRE(api->accept(foreign, &out, nullptr) == kInval, "accept(foreign)");
    // NULL and foreign comms and requests everywhere.
    size_t size = 4;
    int tag = 0;
    void* data = &stack_object;
    for (void* bad : {static_cast<void*>(nullptr), foreign}) {
      NT_REQUIRE(api->isend(bad, data, 4, 0, nullptr, nullptr, &out) == kInval, "isend");
      NT_REQUIRE(api->irecv(bad, 1, &data, &size, &tag, nullptr, nullptr, &out) == kInval, "irecv");
      NT_REQUIRE(api->test(bad, &done, nullptr) == kInval, "test");
      NT_REQUIRE(api->iflush(bad, 1, &data, nullptr, nullptr, &out) == kInval, "iflush");
      NT_REQUIRE(api->reg_mr(bad, data, 4, abi::kPtrHost, &out) == kInval, "regMr");
      NT_REQUIRE(api->dereg_mr(bad, bad) == kInval, "deregMr");
      NT_REQUIRE(api->close_send(bad) == kInval, "closeSend");
      NT_REQUIRE(api->close_recv(bad) == kInval, "closeRecv");
      NT_REQUIRE(api->close_listen(bad) == kInval, "closeListen");
    }
    // Real comms, then wrong kinds, bad n, bad memory handles, and closed comms.
    void *listen = nullptr, *send = nullptr, *recv = nullptr;
    NT_NCCL_OK(api->listen(ctx, 0, h.data(), &listen));
    RETURN_IF_ERROR(ConnectAccept(net, h.data(), &send, listen, &recv));
    NT_REQUIRE(api->isend(recv, data, 4, 0, nullptr, nullptr, &out) == kInval, "isend on recv");
    NT_REQUIRE(api->irecv(send, 1, &data, &size, &tag, nullptr, nullptr, &out) == kInval,
               "irecv on send comm");
    NT_REQUIRE(api->close_send(recv) == kInval, "closeSend(recv comm)");
    NT_REQUIRE(api->close_listen(send) == kInval, "closeListen(send comm)");
    abi::PropertiesV11 p;
    NT_NCCL_OK(api->get_properties(0, &p));
    std::vector<void*> datas(p.max_recvs + 1, data);
    std::vector<size_t> sizes(p.max_recvs + 1, 4);
    std::vector<int> tags(p.max_recvs + 1, 0);
    out = reinterpret_cast<void*>(abi::kOptionalRecvCompletion);
    NT_REQUIRE(api->irecv(recv, p.max_recvs + 1, datas.data(), sizes.data(), tags.data(), nullptr,
                          nullptr, &out) == kInval,
               "n > maxRecvs");
    NT_REQUIRE(out == nullptr, "irecv must always write *request");
    NT_REQUIRE(api->irecv(recv, 0, datas.data(), sizes.data(), tags.data(), nullptr, nullptr,
                          &out) == kInval,
               "n = 0");
    void* mh = foreign;
    NT_REQUIRE(api->isend(send, data, 4, 0, mh, nullptr, &out) == kInval, "foreign mhandle");
    NT_REQUIRE(api->reg_mr(send, data, 4, abi::kPtrCuda, &out) == abi::kInvalidUsage,
               "CUDA memory is not supported here");
    NT_REQUIRE(api->reg_mr(send, data, 4, 0x40, &out) == kInval, "unknown memory type");
    NT_NCCL_OK(api->reg_mr(send, data, 4, abi::kPtrHost, &mh));
    NT_NCCL_OK(api->dereg_mr(send, mh));
    NT_REQUIRE(api->dereg_mr(send, mh) == kInval, "double deregMr");
    NT_REQUIRE(api->test(nullptr, &done, nullptr) == kInval, "test(NULL)");
    // A send that completes, then a test of the finished request.
    void* req = nullptr;
    NT_NCCL_OK(api->isend(send, data, 4, 0, nullptr, nullptr, &req));
    void* rreq = nullptr;
    NT_NCCL_OK(api->irecv(recv, 1, &data, &size, &tag, nullptr, nullptr, &rreq));
    ASSIGN_OR_RETURN(int rc, WaitRequest(net, req, nullptr));
    NT_REQUIRE(rc == 0, "send failed");
    NT_REQUIRE(api->test(req, &done, nullptr) == kInval, "test after done");
    ASSIGN_OR_RETURN(rc, WaitRequest(net, rreq, nullptr));
    NT_NCCL_OK(api->close_listen(listen));
    NT_REQUIRE(api->close_listen(listen) == kInval, "double closeListen");
    NT_REQUIRE(api->accept(listen, &out, nullptr) == kInval, "accept on closed listen comm");
    NT_NCCL_OK(api->close_send(send));
    NT_NCCL_OK(api->close_recv(recv));
    NT_REQUIRE(api->isend(send, data, 4, 0, nullptr, nullptr, &out) == kInval, "closed send");
    NT_REQUIRE(api->irecv(recv, 1, &data, &size, &tag, nullptr, nullptr, &out) == kInval,
               "closed recv");
    NT_REQUIRE(api->close_send(send) == kInval, "double closeSend");
    NT_REQUIRE(api->close_recv(recv) == kInval, "double closeRecv");
    NT_REQUIRE(api->set_net_attr(foreign, nullptr) == kInval, "setNetAttr(foreign)");
    NT_NCCL_OK(api->finalize(nullptr));  // allowed after a failed init
    NT_NCCL_OK(api->finalize(ctx));
    NT_REQUIRE(api->finalize(ctx) == kInval, "double finalize");
    NT_REQUIRE(api->listen(ctx, 0, h.data(), &out) == kInval, "listen on finalized ctx");
    return absl::OkStatus();
  });
  EXPECT_TRUE(s.ok()) << s;
}

}  // namespace
}  // namespace mixnet::nccl_test
