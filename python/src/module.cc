// mixnet._C: the pybind11 extension under the Python package `mixnet`
// (python/mixnet/__init__.py is the public API). It knows nothing of torch:
// the Python layer hands over raw CPU buffers (data_ptr, byte counts) and
// keeps the tensors alive for the call. Errors are absl::Status values turned
// into Python exceptions here, in one place: mixnet._C.Error (a RuntimeError)
// with the status code name in `.code`, and subclasses that are also
// ValueError (INVALID_ARGUMENT), TimeoutError (DEADLINE_EXCEEDED) and
// ConnectionError (UNAVAILABLE).
//
// Threads: called from Python threads with the GIL held; blocking calls
// (init, collectives, close) release it.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "python/src/session.h"
#include "runtime/rendezvous/launcher_env.h"

namespace py = pybind11;

namespace mixnet::python {
namespace {

struct StatusException : std::exception {
  explicit StatusException(absl::Status s) : status(std::move(s)) {}
  const char* what() const noexcept override { return "mixnet status"; }
  absl::Status status;
};

void ThrowIfError(const absl::Status& s) {
  if (!s.ok()) throw StatusException(s);
}

template <typename T>
T ValueOrThrow(absl::StatusOr<T> v) {
  ThrowIfError(v.status());
  return *std::move(v);
}

// Exception types, owned by the module object (which outlives every call).
struct ErrorTypes {
  PyObject* base = nullptr;
  PyObject* invalid_argument = nullptr;
  PyObject* deadline_exceeded = nullptr;
  PyObject* unavailable = nullptr;
};
ErrorTypes g_errors;

PyObject* NewError(py::module_& m, const char* name, PyObject* bases) {
  const std::string qualified = absl::StrCat("mixnet._C.", name);
  PyObject* type = PyErr_NewException(qualified.c_str(), bases, nullptr);
  if (type == nullptr) throw py::error_already_set();
  m.attr(name) = py::reinterpret_steal<py::object>(type);
  return type;  // borrowed from the module
}

void RegisterErrors(py::module_& m) {
  g_errors.base = NewError(m, "Error", PyExc_RuntimeError);
  auto derived = [&](const char* name, PyObject* builtin) {
    py::tuple bases = py::make_tuple(py::handle(g_errors.base), py::handle(builtin));
    return NewError(m, name, bases.ptr());
  };
  g_errors.invalid_argument = derived("InvalidArgumentError", PyExc_ValueError);
  g_errors.deadline_exceeded = derived("DeadlineExceededError", PyExc_TimeoutError);
  g_errors.unavailable = derived("UnavailableError", PyExc_ConnectionError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const StatusException& e) {
      PyObject* type = g_errors.base;
      switch (e.status.code()) {
        case absl::StatusCode::kInvalidArgument:
          type = g_errors.invalid_argument;
          break;
        case absl::StatusCode::kDeadlineExceeded:
          type = g_errors.deadline_exceeded;
          break;
        case absl::StatusCode::kUnavailable:
          type = g_errors.unavailable;
          break;
        default:
          break;
      }
      py::object instance = py::handle(type)(std::string(e.status.message()));
      instance.attr("code") = absl::StatusCodeToString(e.status.code());
      PyErr_SetObject(type, instance.ptr());
    }
  });
}

// The Python-visible session: close() ends it before garbage collection does.
class PySession {
 public:
  explicit PySession(SessionOptions o) {
    py::gil_scoped_release nogil;
    session_ = ValueOrThrow(Session::Create(std::move(o)));
  }
  ~PySession() {
    py::gil_scoped_release nogil;
    session_.reset();
  }
  void Close() {
    std::unique_ptr<Session> s = std::move(session_);
    py::gil_scoped_release nogil;
    s.reset();
  }
  bool closed() const { return session_ == nullptr; }

  Session& get() {
    if (session_ == nullptr) {
      throw StatusException(
          absl::FailedPreconditionError("the MixNet session is closed (mixnet.finalize ran)"));
    }
    return *session_;
  }

  void Alltoallv(uintptr_t send, size_t send_bytes, const std::vector<size_t>& send_counts,
                 uintptr_t recv, size_t recv_bytes, const std::vector<size_t>& recv_counts) {
    Session& s = get();
    absl::Status st;
    {
      py::gil_scoped_release nogil;
      st = s.Alltoallv(reinterpret_cast<const void*>(send), send_bytes, send_counts,
                       reinterpret_cast<void*>(recv), recv_bytes, recv_counts);
    }
    ThrowIfError(st);
  }

  void Barrier() {
    Session& s = get();
    absl::Status st;
    {
      py::gil_scoped_release nogil;
      st = s.Barrier();
    }
    ThrowIfError(st);
  }

  py::dict ReportGate(int layer, uintptr_t ids, bool is_int64, int64_t numel, int k,
                      int num_experts, int64_t hidden, int element_bytes, int micro_batch,
                      int64_t iteration, std::vector<int> expert_ranks, bool counts) {
    GateReport r;
    r.counts = counts;
    r.layer = layer;
    r.micro_batch = micro_batch;
    r.iteration = iteration;
    r.ids = reinterpret_cast<const void*>(ids);
    r.is_int64 = is_int64;
    r.numel = numel;
    r.k = k;
    r.num_experts = num_experts;
    r.hidden = hidden;
    r.element_bytes = element_bytes;
    r.expert_ranks = std::move(expert_ranks);
    GateRow row = ValueOrThrow(get().ReportGate(r));
    py::dict bytes;
    for (size_t i = 0; i < row.peer_hosts.size(); ++i)
      bytes[py::str(row.peer_hosts[i])] = row.bytes[i];
    py::dict out;
    out["layer"] = layer;
    out["micro_batch"] = micro_batch;
    out["iteration"] = iteration;
    out["bytes"] = bytes;
    out["sent"] = row.sent;
    return out;
  }

  py::dict Topology() {
    const TopologyView v = get().Topology();
    py::list circuits;
    for (const CircuitView& c : v.circuits) {
      py::dict d;
      d["switch"] = c.ocs_switch;
      d["ports"] = py::make_tuple(c.port_a, c.port_b);
      d["hosts"] = py::make_tuple(c.host_a, c.host_b);
      d["nics"] = py::make_tuple(c.nic_a, c.nic_b);
      circuits.append(d);
    }
    py::dict out;
    out["epoch"] = v.epoch;
    out["circuits"] = circuits;
    return out;
  }

  py::dict WarmPaths(double timeout_s) {
    Session& s = get();
    absl::StatusOr<mixnet::control::WarmOutcome> o;
    {
      py::gil_scoped_release nogil;
      o = s.WarmPaths(absl::Microseconds(static_cast<int64_t>(timeout_s * 1e6)));
    }
    const mixnet::control::WarmOutcome w = ValueOrThrow(std::move(o));
    py::dict d;
    d["enabled"] = w.enabled;
    d["complete"] = w.complete;
    d["timed_out"] = w.timed_out;
    d["rounds"] = w.rounds;
    d["planned"] = w.planned;
    d["reason"] = w.reason;
    d["waited_ms"] = absl::ToDoubleMilliseconds(w.waited);
    return d;
  }

  py::dict Stats() {
    const SessionStats s = get().Stats();
    py::dict out;
    out["epoch"] = s.epoch;
    out["direct_bytes_sent"] = s.direct_bytes_sent;
    out["pieces_resent"] = s.pieces_resent;
    out["topologies_installed"] = s.recorded_commits;
    if (s.has_agent) {
      py::dict a;
      a["registered"] = s.agent.registered;
      a["installed_epoch"] = s.agent.installed_epoch;
      a["prepares"] = s.agent.prepares;
      a["prepare_timeouts"] = s.agent.prepare_timeouts;
      a["commits"] = s.agent.commits;
      a["commit_errors"] = s.agent.commit_errors;
      a["aborts"] = s.agent.aborts;
      a["stale_events"] = s.agent.stale_events;
      a["reports_sent"] = s.agent.reports_sent;
      a["reports_dropped"] = s.agent.reports_dropped;
      a["reconnects"] = s.agent.reconnects;
      out["agent"] = a;
    } else {
      out["agent"] = py::none();
    }
    return out;
  }

 private:
  std::unique_ptr<Session> session_;
};

py::dict ControllerStatus(const std::string& target, int64_t timeout_ms) {
  absl::StatusOr<ControllerStatusView> v;
  {
    py::gil_scoped_release nogil;
    v = ReadControllerStatus(target, absl::Milliseconds(timeout_ms));
  }
  ThrowIfError(v.status());
  py::list circuits;
  for (const cluster::CircuitSpec& c : v->circuits) {
    py::dict d;
    d["switch"] = c.ocs_switch;
    d["ports"] = py::make_tuple(c.port_a, c.port_b);
    circuits.append(d);
  }
  py::list regions;
  uint64_t committed = 0, aborted = 0, skipped = 0;
  for (const ControllerRegionView& r : v->regions) {
    py::dict d;
    d["name"] = r.name;
    d["hosts"] = r.hosts;
    d["registered_workers"] = r.registered_workers;
    d["rounds_committed"] = r.rounds_committed;
    d["rounds_aborted"] = r.rounds_aborted;
    d["rounds_skipped"] = r.rounds_skipped;
    regions.append(d);
    committed += r.rounds_committed;
    aborted += r.rounds_aborted;
    skipped += r.rounds_skipped;
  }
  py::dict out;
  out["controller_id"] = v->controller_id;
  out["highest_epoch"] = v->highest_epoch;
  out["epoch"] = v->topology_epoch;
  out["circuits"] = circuits;
  out["regions"] = regions;
  out["rounds_committed"] = committed;
  out["rounds_aborted"] = aborted;
  out["rounds_skipped"] = skipped;
  out["fenced"] = v->fenced;
  return out;
}

}  // namespace
}  // namespace mixnet::python

PYBIND11_MODULE(_C, m) {
  using mixnet::python::PySession;
  using mixnet::python::SessionOptions;
  m.doc() = "MixNet runtime bindings (use the `mixnet` package, not this module)";
  mixnet::python::RegisterErrors(m);
  py::class_<PySession>(m, "Session")
      .def(py::init([](int rank, int world_size, std::string store, std::string spec,
                       std::string host, std::string controller, std::string job,
                       int64_t timeout_ms, int64_t connect_timeout_ms) {
             SessionOptions o;
             o.rank = rank;
             o.world_size = world_size;
             o.store = std::move(store);
             o.spec_path = std::move(spec);
             o.host = std::move(host);
             o.controller = std::move(controller);
             o.job = std::move(job);
             o.timeout_ms = timeout_ms;
             o.connect_timeout_ms = connect_timeout_ms;
             return std::make_unique<PySession>(std::move(o));
           }),
           py::arg("rank"), py::arg("world_size"), py::arg("store"), py::arg("spec") = "",
           py::arg("host") = "", py::arg("controller") = "", py::arg("job") = "mixnet-python",
           py::arg("timeout_ms") = 0, py::arg("connect_timeout_ms") = 0)
      .def("close", &PySession::Close)
      .def_property_readonly("closed", &PySession::closed)
      .def_property_readonly("rank", [](PySession& s) { return s.get().rank(); })
      .def_property_readonly("world_size", [](PySession& s) { return s.get().size(); })
      .def_property_readonly("local_rank", [](PySession& s) { return s.get().local_rank(); })
      .def_property_readonly("host", [](PySession& s) { return s.get().host(); })
      .def_property_readonly("controller", [](PySession& s) { return s.get().controller(); })
      .def_property_readonly("has_agent", [](PySession& s) { return s.get().has_agent(); })
      .def("host_of",
           [](PySession& s, int rank) {
             mixnet::python::Session& x = s.get();
             if (rank < 0 || rank >= x.size()) {
               throw py::index_error(absl::StrCat("rank ", rank, " outside [0, ", x.size(), ")"));
             }
             return x.host_of(rank);
           })
      .def("alltoallv", &PySession::Alltoallv, py::arg("send_ptr"), py::arg("send_bytes"),
           py::arg("send_counts"), py::arg("recv_ptr"), py::arg("recv_bytes"),
           py::arg("recv_counts"))
      .def("barrier", &PySession::Barrier)
      .def("record_trace",
           [](PySession& s, const std::string& path) {
             mixnet::python::ThrowIfError(s.get().RecordTrace(path));
           })
      .def("flush_trace", [](PySession& s) { mixnet::python::ThrowIfError(s.get().FlushTrace()); })
      .def("report_gate", &PySession::ReportGate, py::arg("layer"), py::arg("ids_ptr"),
           py::arg("is_int64"), py::arg("numel"), py::arg("k"), py::arg("num_experts"),
           py::arg("hidden"), py::arg("element_bytes"), py::arg("micro_batch"),
           py::arg("iteration"), py::arg("expert_ranks"), py::arg("counts") = false)
      .def("epoch", [](PySession& s) { return s.get().epoch(); })
      .def("topology", &PySession::Topology)
      .def("stats", &PySession::Stats)
      .def("warm_paths", &PySession::WarmPaths, py::arg("timeout_s"));
  m.def("controller_status", &mixnet::python::ControllerStatus, py::arg("target"),
        py::arg("timeout_ms") = 5000);
  // What a launcher's environment says (runtime/rendezvous/launcher_env.h):
  // (launcher, rank, world_size, local_rank or -1, store or ""), or None
  // without one. need_store=False: the caller has its own store.
  m.def(
      "launch_from_environment",
      [](bool need_store) -> py::object {
        absl::StatusOr<mixnet::rendezvous::LaunchInfo> li =
            mixnet::rendezvous::LaunchFromEnvironment(
                mixnet::rendezvous::ProcessEnvironment(), mixnet::GetSettings(),
                need_store ? mixnet::rendezvous::StoreNeed::kRequired
                           : mixnet::rendezvous::StoreNeed::kOptional);
        if (absl::IsNotFound(li.status())) return py::none();
        mixnet::python::ThrowIfError(li.status());
        return py::make_tuple(li->launcher, li->rank, li->world, li->local_rank, li->store);
      },
      py::arg("need_store") = true);
}
