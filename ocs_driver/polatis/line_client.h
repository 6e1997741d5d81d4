// LineClient: a newline-framed command/reply client over TCP, the transport of
// the Polatis SCPI (port 5025) and TL1 (port 3082) backends.
//
// One command per line; replies are read line by line with a deadline. The
// client connects lazily (on the first command and again on the first command
// of an operation after the connection was lost, see AllowReconnect), paces commands (a minimum gap
// between the starts of two consecutive commands, or only after a command that gets no reply,
// because some switch firmware misbehaves under fast command streams) and closes the connection
// whenever the byte stream can no longer be trusted (I/O error, peer closed, reply timeout: a late
// reply would otherwise be taken for the answer to the next command). Every error names host:port,
// the command and, for system call failures, errno.
//
// Threading: not thread-safe; the owning backend calls it from one thread at a
// time (the service serialises backend calls).
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace mixnet::ocs {

struct LineClientOptions {
  std::string host;
  int port = 0;
  absl::Duration connect_timeout = absl::Seconds(5);
  absl::Duration command_pacing = absl::ZeroDuration();  // min gap between command starts
  // Whether the gap is kept before every command (false) or only after a
  // command the peer did not answer (true): a command sent once the reply to
  // the previous one has arrived is not delayed (the peer is done with it).
  bool pace_only_after_unanswered = false;
  absl::Duration reply_timeout = absl::Seconds(5);  // default wait for one reply line
  std::string line_ending = "\n";                   // appended to every command
  size_t max_line_bytes = 1 << 20;                  // longer replies are garbage
};

// Splits a device address "HOST", "HOST:PORT", "[IPV6]" or "[IPV6]:PORT"
// (a bare IPv6 address without brackets is taken whole, with the default
// port). InvalidArgument naming the text when it is malformed.
absl::Status ParseHostPort(absl::string_view device, int default_port, std::string& host,
                           int& port);

class LineClient {
 public:
  explicit LineClient(LineClientOptions options);
  ~LineClient();
  LineClient(const LineClient&) = delete;
  LineClient& operator=(const LineClient&) = delete;

  // Sends one command line (connecting first when needed). Bytes the peer
  // sent unasked since the last reply are discarded (and logged) first, so a
  // stray line cannot be mistaken for the reply to this command.
  // `shown` replaces the command in error messages when given (secrets).
  absl::Status Send(absl::string_view command, absl::string_view shown = {});

  // Reads the next reply line (without the line ending) to `command` (used
  // only in error messages), waiting at most `timeout`. On timeout the
  // connection is closed and DeadlineExceeded returned.
  absl::StatusOr<std::string> ReadLine(absl::string_view command, absl::Duration timeout);

  // Send, then ReadLine with `timeout` (reply_timeout when infinite/zero).
  absl::StatusOr<std::string> Query(absl::string_view command,
                                    absl::Duration timeout = absl::ZeroDuration());

  // Lets the next Send (re)connect when the connection is closed. The client
  // never reconnects silently in the middle of an operation (a new session
  // would not see the commands and errors of the lost one): after the first
  // successful Send, a lost connection fails every further Send with
  // Unavailable until the owner calls AllowReconnect again (at the start of
  // each backend call). Initially allowed.
  void AllowReconnect() { may_connect_ = true; }
  void DisallowReconnect() { may_connect_ = false; }

  // Counts successful connects: a protocol with a login (TL1) logs in again
  // when this changed.
  int generation() const { return generation_; }
  // Counts commands sent (successful Sends) over the client's life.
  uint64_t commands_sent() const { return commands_sent_; }

  // Drops bytes the peer sent unasked (logging them) and closes the
  // connection if the peer has closed it. Send does this first.
  void DiscardUnsolicited();

  // Opens the connection now if it is not open (and reconnecting is allowed).
  absl::Status EnsureConnected();
  void Close();
  bool connected() const { return fd_ >= 0; }
  const std::string& peer() const { return peer_; }  // "host:port"
  const LineClientOptions& options() const { return options_; }

 private:
  absl::Status Connect();
  absl::Status WriteAll(absl::string_view command, absl::string_view bytes);
  // Fails the stream: closes the connection and returns `s`.
  absl::Status Fail(absl::Status s);

  LineClientOptions options_;
  std::string peer_;
  int fd_ = -1;
  std::string buffer_;  // received bytes not yet returned as lines
  absl::Time last_command_ = absl::InfinitePast();
  bool last_answered_ = true;  // a reply line arrived after the last command
  uint64_t commands_sent_ = 0;
  bool may_connect_ = true;
  int generation_ = 0;
};

}  // namespace mixnet::ocs
