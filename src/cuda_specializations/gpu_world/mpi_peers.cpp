// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// moonep/gpu_world_mpi.hpp: the WorldPeers of a GPU world over MPI, with
// every collective bounded in time, and the descriptors of the ranks'
// chunks (and of a multicast object) handed over Unix sockets
// (SCM_RIGHTS): MPI carries bytes, not file descriptors.
#include "moonep/gpu_world_mpi.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "moonep/error.hpp"
#include "../host_checks.hpp"
#include "moonep/mpi_world.hpp"
#include "peers.hpp"

namespace moonep::cuda {
namespace {

const char* const kWho = "moonep::cuda::GpuWorld (one process per rank)";

// A socket closed with the object.
struct Socket {
  int fd = -1;
  Socket() = default;
  explicit Socket(int f) : fd(f) {}
  Socket(Socket&& o) noexcept : fd(o.fd) { o.fd = -1; }
  Socket& operator=(Socket&& o) noexcept {
    std::swap(fd, o.fd);
    return *this;
  }
  ~Socket() {
    if (fd >= 0) ::close(fd);
  }
};

class MpiPeers final : public impl::WorldPeers {
 public:
  MpiPeers(MPI_Comm comm, double timeout_s) : timeout_s_(timeout_s) {
    MPI_Request req = MPI_REQUEST_NULL;
    MPI_Comm_idup(comm, &comm_, &req);
    wait(req, "joining the world");
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    // Descriptors cannot cross nodes: every process must share this one.
    MPI_Comm node = MPI_COMM_NULL;
    MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    int on_node = 0;
    MPI_Comm_size(node, &on_node);
    MPI_Comm_free(&node);
    if (on_node != size_) {
      throw RuntimeError(std::string(kWho) + ": the processes span nodes (" + std::to_string(on_node) + " of " +
                         std::to_string(size_) + " on this one); this world needs every rank on one node");
    }
  }
  ~MpiPeers() override {
    // With a collective still pending (a peer never came) the buffers and
    // the communicator are left to MPI_Finalize: freeing them would let
    // the late exchange write into freed memory.
    if (broken_) {
      new std::vector<char>(std::move(send_));  // deliberately never freed
      new std::vector<char>(std::move(recv_));
      return;
    }
    if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void allgather(const void* mine, std::size_t bytes, void* all) override {
    // Through buffers of this object: after a timeout the exchange is
    // still pending and will write into them, so they must outlive it.
    send_.assign(static_cast<const char*>(mine), static_cast<const char*>(mine) + bytes);
    recv_.assign(bytes * static_cast<std::size_t>(size_), 0);
    MPI_Request req = MPI_REQUEST_NULL;
    MPI_Iallgather(send_.data(), static_cast<int>(bytes), MPI_BYTE, recv_.data(), static_cast<int>(bytes), MPI_BYTE,
                   comm_, &req);
    wait(req, "exchanging the ranks' state");
    std::memcpy(all, recv_.data(), recv_.size());
  }
  void barrier() override {
    MPI_Request req = MPI_REQUEST_NULL;
    MPI_Ibarrier(comm_, &req);
    wait(req, "a barrier");
  }

  std::vector<int> exchange_descriptors(int mine) override {
    Socket listener = listen_here();
    // Connect to every other process (queued in its backlog at once), then
    // answer everyone who connected to us with our descriptor, then read
    // theirs: no process waits on one that waits on it.
    std::vector<Socket> to(static_cast<std::size_t>(size_));
    for (int p = 0; p < size_; ++p) {
      if (p == rank_) continue;
      to[p] = connect_to(p);
    }
    for (int i = 0; i < size_ - 1; ++i) {
      poll_for(listener.fd, "another process to connect");
      Socket c(::accept4(listener.fd, nullptr, nullptr, SOCK_CLOEXEC));
      if (c.fd < 0) fail("accept");
      send_descriptor(c.fd, mine);
    }
    std::vector<int> fds(static_cast<std::size_t>(size_), -1);
    fds[rank_] = mine;
    for (int p = 0; p < size_; ++p) {
      if (p == rank_) continue;
      poll_for(to[p].fd, "another process's chunk");
      fds[p] = receive_descriptor(to[p].fd);
    }
    barrier();  // every socket is done before any is closed
    return fds;
  }

  int share_descriptor(int mine) override {
    // Every process connects to rank 0 only, which answers each with its
    // descriptor; every wait is bounded as in exchange_descriptors.
    Socket listener = listen_here();
    int fd = mine;
    if (rank_ == 0) {
      for (int i = 0; i < size_ - 1; ++i) {
        poll_for(listener.fd, "another process to connect");
        Socket c(::accept4(listener.fd, nullptr, nullptr, SOCK_CLOEXEC));
        if (c.fd < 0) fail("accept");
        send_descriptor(c.fd, mine);
      }
    } else {
      Socket to = connect_to(0);
      poll_for(to.fd, "rank 0's multicast object");
      fd = receive_descriptor(to.fd);
    }
    barrier();  // every socket is done before any is closed
    return fd;
  }

 private:
  // Waits for a collective. A peer may come late by its own kernel's
  // bounded waits (a rank that never launched makes the others wait
  // timeout_s in their kernels before they reach check()), so the bound
  // here is longer. After a timeout the request stays pending (MPI cannot
  // cancel a collective): this world is broken, and says so from then on.
  void wait(MPI_Request& req, const char* what) {
    if (broken_) throw RuntimeError(std::string(kWho) + ": an earlier exchange between the processes never completed");
    const double bound = 3 * timeout_s_ + 1;
    if (!mpi_wait_for(req, bound)) {
      broken_ = true;
      pending_ = req;
      throw RuntimeError(std::string(kWho) + ": not every process came within " + seconds(bound) + " (" + what +
                         "); this world cannot be used any more");
    }
  }
  static std::string seconds(double s) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g s", s);
    return buf;
  }
  // A name for this hand-over's sockets, from rank 0 (abstract namespace:
  // nothing in the file system to clean up; a count keeps two hand-overs
  // of one world apart), and this process's socket listening under it
  // once every process listens.
  Socket listen_here() {
    char token[64] = {};
    if (rank_ == 0) {
      const auto now = std::chrono::steady_clock::now().time_since_epoch().count();
      std::snprintf(token, sizeof token, "moonep-gpuworld-%ld-%lld-%d", static_cast<long>(::getpid()),
                    static_cast<long long>(now), handovers_);
    }
    ++handovers_;
    MPI_Request req = MPI_REQUEST_NULL;
    MPI_Ibcast(token, sizeof token, MPI_CHAR, 0, comm_, &req);
    wait(req, "naming the world's sockets");
    token_ = token;
    Socket listener(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (listener.fd < 0) fail("socket");
    const sockaddr_un mine_addr = address(token_.c_str(), rank_);
    if (::bind(listener.fd, reinterpret_cast<const sockaddr*>(&mine_addr), sizeof mine_addr) != 0) fail("bind");
    if (::listen(listener.fd, size_) != 0) fail("listen");
    barrier();  // everyone listens
    return listener;
  }
  Socket connect_to(int p) const {
    Socket s(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    const sockaddr_un a = address(token_.c_str(), p);
    if (s.fd < 0 || ::connect(s.fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0) fail("connect");
    return s;
  }
  [[noreturn]] void fail(const char* call) const {
    throw RuntimeError(std::string(kWho) + ": " + call + " failed while handing over the chunks: " +
                       std::strerror(errno));
  }
  static sockaddr_un address(const char* token, int rank) {
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    const std::string name = std::string(token) + "-" + std::to_string(rank);
    std::memcpy(a.sun_path + 1, name.data(), std::min(name.size(), sizeof a.sun_path - 2));  // sun_path[0] = 0: abstract
    return a;
  }
  void poll_for(int fd, const char* what) const {
    pollfd p{fd, POLLIN, 0};
    const int n = ::poll(&p, 1, static_cast<int>(timeout_s_ * 1000));
    if (n <= 0) {
      throw RuntimeError(std::string(kWho) + ": waited " + seconds(timeout_s_) + " for " + what);
    }
  }
  // One byte with room for one descriptor beside it (SCM_RIGHTS).
  struct OneDescriptor {
    char byte = 'c';
    iovec io{};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    msghdr m{};
    OneDescriptor(const OneDescriptor&) = delete;
    OneDescriptor() {
      io = iovec{&byte, 1};
      m.msg_iov = &io;
      m.msg_iovlen = 1;
      m.msg_control = control;
      m.msg_controllen = sizeof control;
    }
  };
  void send_descriptor(int sock, int fd) const {
    OneDescriptor d;
    cmsghdr* c = CMSG_FIRSTHDR(&d.m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &fd, sizeof fd);
    if (::sendmsg(sock, &d.m, MSG_NOSIGNAL) != 1) fail("sendmsg");
  }
  int receive_descriptor(int sock) const {
    OneDescriptor d;
    if (::recvmsg(sock, &d.m, MSG_CMSG_CLOEXEC) != 1) fail("recvmsg");
    cmsghdr* c = CMSG_FIRSTHDR(&d.m);
    if (!c || c->cmsg_type != SCM_RIGHTS) {
      throw RuntimeError(std::string(kWho) + ": another process sent no chunk");
    }
    int fd = -1;
    std::memcpy(&fd, CMSG_DATA(c), sizeof fd);
    return fd;
  }

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  double timeout_s_;
  std::vector<char> send_, recv_;  // the allgather's buffers (see allgather)
  bool broken_ = false;
  MPI_Request pending_ = MPI_REQUEST_NULL;  // a collective that timed out
  int handovers_ = 0;   // descriptor hand-overs so far (names their sockets apart)
  std::string token_;   // the current hand-over's socket name
};

}  // namespace

std::unique_ptr<GpuWorld> make_mpi_gpu_world(const Config& config, MPI_Comm comm, int device,
                                             const WorldOptions& options) {
  validate(config);
  int size = 0;
  MPI_Comm_size(comm, &size);
  if (size != config.ranks) {
    throw InputError(std::string(kWho) + ": " + std::to_string(size) + " processes for " +
                     std::to_string(config.ranks) + " ranks (one process per rank)");
  }
  impl::timeout_ns_of(options.timeout_s, kWho);  // the peers wait with it before the world checks it
  return impl::WorldFactory::over(config, device, std::make_unique<MpiPeers>(comm, options.timeout_s), options);
}

}  // namespace moonep::cuda
