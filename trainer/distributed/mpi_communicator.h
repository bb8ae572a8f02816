// MpiCommunicator: the Communicator of CPU ranks, on Open MPI.
//
// One background thread owns MPI: it initialises it (MPI_THREAD_FUNNELED), runs every
// collective in submission order with blocking MPI calls, and finalises it. The training
// thread only queues work and waits, so a bucket's allreduce runs while backward goes on (the
// Horovod pattern: one thread owns every collective, so ranks never disagree on order).
// Narrow wire dtypes (bf16, f16) are cast on that thread too, into a buffer planned once.
//
// Two ways to get one:
//  - FromWorld(): the process was started by mpirun (or is alone): MPI_COMM_WORLD.
//  - Connect(): ranks started independently (by Steadfast agents, possibly on different
//    machines) meet without mpirun or ssh. Rank 0 starts `ompi-server` (Open MPI's rendezvous
//    server for independently started jobs) as its child, and every rank learns its URI
//    through `rendezvous` (the master's TrialLink.Rendezvous in a trial). Each rank then starts
//    as an MPI singleton pointed at that server; rank 0 opens one MPI port per other rank,
//    publishes them in a second rendezvous round, and the ranks join one at a time
//    (MPI_Comm_accept / MPI_Comm_connect / MPI_Intercomm_merge), so the final communicator
//    orders them by rank. docs/distributed.md explains the choice.
//
// Errors: a collective that fails or does not finish within `timeout` breaks the communicator
// (see communicator.h). The bootstrap fails (kDeadlineExceeded) when the ranks do not meet
// within `timeout`. Construction and destruction happen on one thread. After a break the
// destructor does not wait for the MPI thread (it may be stuck in a collective a dead peer
// will never finish): callers exit the process.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "trainer/distributed/communicator.h"

namespace sf::dist {

struct MpiConnectOptions : RankOptions {
  // Where rank 0 keeps ompi-server's URI file and every rank its copy (created if missing).
  std::string work_dir = "/tmp";
  // True when the ranks run on different hosts (different HostKey(), host_network.h): MPI then
  // uses TCP only, never shared memory. False: every rank is on this host and MPI's TCP
  // connections use loopback only.
  bool across_machines = false;
  // The interfaces MPI's TCP connections may use, e.g. "10.0.0.0/24" or "eth1" (Open MPI's
  // btl_tcp_if_include); empty: loopback on one host, Open MPI's choice across hosts.
  std::string tcp_interfaces;
};

// Under mpirun (or as a lone process): MPI_COMM_WORLD.
Result<std::unique_ptr<Communicator>> MpiFromWorld(
    std::chrono::milliseconds timeout = std::chrono::minutes(5));

// Independently started ranks meeting through `options.rendezvous` (see above).
Result<std::unique_ptr<Communicator>> MpiConnect(const MpiConnectOptions& options);

// The path of Open MPI's ompi-server, or kNotFound naming what was searched.
Result<std::string> FindOmpiServer();

}  // namespace sf::dist
