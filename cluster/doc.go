// Package cluster is the replicated mode of the libOS: processes that survive the loss
// of their machine, on NATS JetStream.
//
// It owns the embedded NATS server of a host (StartServer: client port, cluster routes,
// leaf node remotes, JetStream on the host's own directory), the host's connection to
// it or to an existing deployment, the stream of process logs and the bucket of
// process leases (Connect), and the Node that ties a host's store and kernel to them.
// It must not hold policy (what a process may do is the engine's) nor know Pebble's
// keys: it moves write batches in the store's portable encoding.
//
// Data flow. The store hands every durable write batch to the Node (store.Replicator)
// under its write lock, before applying it. The Node publishes it as one message on
// the process's subject (Subject: <prefix>.<pid>) with compare-and-set on that
// subject's last sequence (the process's position in the local store) and the batch's
// hash as Nats-Msg-Id, and returns after JetStream's acknowledgement; only then does
// the store apply the batch to Pebble and acknowledge the caller. Every host applies
// every message of the stream in order to its own store (store.ApplyReplicated), so
// any host can serve any process.
//
// Leases. A process is served by the one host holding its key in the lease bucket
// (value: the host's name; TTL: Config.LeaseTTL; renewed every quarter TTL). The
// revision at which a host took the lease is its fencing token, carried by each of its
// messages (Libos-Epoch). A host taking over a process whose lease expired first
// catches its store up with the stream, then publishes an empty batch on the
// process's subject (the fence): a previous owner's append, whose compare-and-set
// expects the older last sequence, fails from then on, and that host stops serving
// the process (lease_lost). Only then does the kernel adopt the process (JIT bindings,
// approvals, unsettled calls reported as unknown settlement, never replayed).
//
// A lease is given up, not renewed, once its process is killed: a killed process is
// served by no host (and no host takes it over), so its lease must not outlive it.
//
// Trust. The hosts of a cluster trust each other's batches. ServerConfig.Token keeps
// everyone else out of the embedded server: clients, routes and leaf nodes that do not
// present the cluster's token are refused before they can publish, join the Raft group
// or write the lease bucket; Config.Token is what a host presents. The token is never
// written to an error or a log.
//
// Errors are liberr.Error values of layer "cluster": lease_lost, batch_too_large,
// cross_process_batch, replication_failed, invalid_config.
package cluster
