// Which network a CPU rank's collectives travel on.
//
// Open MPI's TCP transport, left alone, opens connections on every interface it finds and
// stripes large messages across them. An interface that goes away mid-run (a container bridge,
// a VPN, a test's network namespace) then takes half of a message with it, and both ranks wait
// inside the allreduce until the collective timeout: a hang, not an error. So the trainer
// names the network itself:
//  - ranks on one host (one kernel and one network namespace: equal HostKey()) use loopback;
//  - ranks on different hosts use the interface each one reaches the master through
//    (RouteInterface), unless SF_DIST_TCP_INTERFACES names others.
#pragma once

#include <string>

namespace sf::dist {

// Identifies this kernel boot and network namespace. Two processes with the same key can reach
// each other over 127.0.0.1. Never empty (falls back to the host name).
std::string HostKey();

// The name of the local interface the kernel would send to `host_port` ("HOST:PORT", "[V6]:PORT"
// or a gRPC target such as "dns:///HOST:PORT") through, found without sending anything (a
// connected UDP socket's source address, matched against the interfaces' addresses). Empty when
// it cannot tell, or when that interface is loopback (the peer is this host, which says nothing
// about the route to other hosts).
std::string RouteInterface(const std::string& host_port);

}  // namespace sf::dist
