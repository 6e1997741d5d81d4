// Helper program for nccl_net_load_test: checks that the plugin can be found
// the ways NCCL finds it, in a fresh process.
//   nccl_net_probe preload      -> the tables are already in the process (LD_PRELOAD)
//   nccl_net_probe open <name>  -> dlopen(<name>) resolves (by path, or by file
//                                  name through LD_LIBRARY_PATH as for
//                                  NCCL_NET_PLUGIN=mixnet)
// It then initialises v11 and prints "<table name> <ndev> <dev0 name>".
// Exit 0 on success. Single-threaded.
#include <dlfcn.h>

#include <cstdio>
#include <cstring>

#include "plugins/nccl_net/nccl_net_abi.h"

int main(int argc, char** argv) {
  namespace abi = mixnet::nccl_abi;
  void* scope = RTLD_DEFAULT;
  if (argc >= 3 && std::strcmp(argv[1], "open") == 0) {
    scope = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
    if (scope == nullptr) {
      std::fprintf(stderr, "dlopen %s: %s\n", argv[2], dlerror());
      return 2;
    }
  } else if (argc < 2 || std::strcmp(argv[1], "preload") != 0) {
    std::fprintf(stderr, "usage: %s preload | open <library>\n", argv[0]);
    return 64;
  }
  const char* names[] = {abi::kSymbolV8, abi::kSymbolV9, abi::kSymbolV10, abi::kSymbolV11};
  for (const char* n : names) {
    if (dlsym(scope, n) == nullptr) {
      std::fprintf(stderr, "%s not found\n", n);
      return 3;
    }
  }
  auto* net = static_cast<const abi::NetV11*>(dlsym(scope, abi::kSymbolV11));
  void* ctx = nullptr;
  abi::CommConfig config{abi::kTrafficClassUndef};
  int ndev = 0;
  abi::PropertiesV11 props{};
  if (net->init(&ctx, 1, &config, nullptr, nullptr) != abi::kSuccess ||
      net->devices(&ndev) != abi::kSuccess || ndev < 1 ||
      net->get_properties(0, &props) != abi::kSuccess || net->finalize(ctx) != abi::kSuccess) {
    std::fprintf(stderr, "init/devices/getProperties failed\n");
    return 4;
  }
  std::printf("%s %d %s\n", net->name, ndev, props.name);
  return 0;
}
