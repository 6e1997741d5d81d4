// Test helpers for the daemons' Prometheus endpoints: Scrape() fetches
// http://ADDRESS/metrics with a plain HTTP/1.0 GET over a TCP socket (no
// client library, so the endpoint is tested as a scraper sees it), and
// MetricValue() reads one sample of the text format by its exact series
// ("name" or "name{a=\"x\",b=\"y\"}", labels in prometheus-cpp's order:
// sorted by name). Header-only; blocking (5 s socket timeouts), from the test
// thread.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <sstream>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace mixnet::testing {

// The body of GET /metrics from `address` ("127.0.0.1:PORT"); an error for
// a failed connection or a status other than 200.
inline absl::StatusOr<std::string> Scrape(const std::string& address,
                                          const std::string& path = "/metrics") {
  const size_t colon = address.rfind(':');
  int port = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(address.substr(colon + 1), &port)) {
    return absl::InvalidArgumentError(absl::StrCat("bad address ", address));
  }
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, address.substr(0, colon).c_str(), &sa.sin_addr) != 1) {
    return absl::InvalidArgumentError(absl::StrCat("bad address ", address));
  }
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket: ", strerror(errno)));
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) {
    const int err = errno;
    close(fd);
    return absl::UnavailableError(absl::StrCat("connect ", address, ": ", strerror(err)));
  }
  const std::string request =
      absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: ", address, "\r\nConnection: close\r\n\r\n");
  if (send(fd, request.data(), request.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(request.size())) {
    const int err = errno;
    close(fd);
    return absl::UnavailableError(absl::StrCat("send to ", address, ": ", strerror(err)));
  }
  std::string reply;
  char buf[8192];
  while (true) {
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n == 0) break;
    if (n < 0) {
      const int err = errno;
      close(fd);
      return absl::UnavailableError(absl::StrCat("recv from ", address, ": ", strerror(err)));
    }
    reply.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  const size_t body = reply.find("\r\n\r\n");
  if (reply.rfind("HTTP/1.", 0) != 0 || body == std::string::npos) {
    return absl::DataLossError(absl::StrCat("not an HTTP reply from ", address, ": ", reply));
  }
  const std::string status_line = reply.substr(0, reply.find("\r\n"));
  if (status_line.find(" 200") == std::string::npos) {
    return absl::UnavailableError(absl::StrCat(address, path, ": ", status_line));
  }
  return reply.substr(body + 4);
}

// The value of `series` in a scraped text, or nullopt when it is absent.
inline std::optional<double> MetricValue(const std::string& text, const std::string& series) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.size() <= series.size() || line.compare(0, series.size(), series) != 0 ||
        line[series.size()] != ' ') {
      continue;
    }
    std::string value = line.substr(series.size() + 1);
    if (const size_t sp = value.find(' '); sp != std::string::npos) value.resize(sp);  // timestamp
    double v = 0;
    if (absl::SimpleAtod(value, &v)) return v;
  }
  return std::nullopt;
}

}  // namespace mixnet::testing
