// mixnetctl: the MixNet operator CLI. Today: `mixnetctl ocs info|get|apply|
// watch|health --target ADDR` against an OCS driver daemon (see README.md).
// Main thread only.
#include <cstdio>
#include <iostream>

#include "CLI/CLI.hpp"
#include "ocs_driver/client/ocs_commands.h"

int main(int argc, char** argv) {
  CLI::App app{"mixnetctl: MixNet control CLI"};
  app.require_subcommand(1);
  std::function<int()> run_ocs = mixnet::ocs::AddOcsCommands(&app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : mixnet::ocs::kExitUsage;
  }
  return run_ocs();
}
