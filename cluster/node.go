package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentlibos/libos/liberr"
	"github.com/agentlibos/libos/store"
)

// Defaults of Config.
const (
	DefaultStream     = "LIBOS"
	DefaultSubject    = "libos.proc"
	DefaultReplicas   = 3
	DefaultLeaseTTL   = 10 * time.Second
	DefaultAckTimeout = 5 * time.Second
)

// Message headers of a replicated batch.
const (
	HeaderPID   = "Libos-Pid"
	HeaderPrev  = "Libos-Prev"
	HeaderEpoch = "Libos-Epoch"
	HeaderHost  = "Libos-Host"
)

// Config configures a Node.
type Config struct {
	// Host names this host in leases and in `libos ps`; unique in the cluster. Required.
	Host string
	// URL is the NATS server this host talks to: its embedded server's ClientURL, or an
	// existing deployment's (several comma-separated URLs are tried in turn). Required.
	URL string
	// Token is presented to the server as this host's token (ServerConfig.Token); a
	// URL that carries credentials of its own does not take one. CheckToken says what
	// a token may be. A server that refuses the credentials fails Connect at once.
	Token string
	// Stream is the JetStream stream of the process logs (DefaultStream), 1 to 64 of
	// [A-Za-z0-9_-]; Subject the prefix of the process subjects (DefaultSubject), dot-
	// separated tokens of [A-Za-z0-9_-], at most 128 bytes: process P writes on
	// Subject.P. Anything else is invalid_config.
	Stream  string
	Subject string
	// Replicas of the stream and of the lease bucket: 3 by default; 1 for one host.
	Replicas int
	// LeaseTTL is how long a lease lives without a heartbeat (DefaultLeaseTTL): the
	// longest a process stays unserved after its host is lost, plus the takeover.
	LeaseTTL time.Duration
	// AckTimeout bounds the wait for the stream's acknowledgement of one batch.
	AckTimeout time.Duration
	// Serve says which processes this host may take over when their lease is free;
	// nil means all. Processes spawned here are served here regardless.
	Serve func(pid string) bool
	// Logf receives what the node does on its own (takeovers, lost leases); nil
	// discards it.
	Logf func(format string, args ...any)
}

// Host is what the node asks of the kernel: to start serving a process it took over
// (restore it from the store, its JIT tools, report its unsettled calls), and to stop
// serving one whose lease it lost. engine.Kernel implements it.
type Host interface {
	Adopt(ctx context.Context, pid string) error
	Release(pid string)
}

// Node is one host's membership in the cluster: the store's Replicator (every write
// batch goes to the stream first), the applier of every other host's batches, and the
// keeper of this host's leases.
type Node struct {
	cfg        Config
	nc         *nats.Conn
	js         jetstream.JetStream
	stream     jetstream.Stream
	kv         jetstream.KeyValue
	maxPayload int

	mu   sync.Mutex
	held map[string]*lease
	// epochs is the highest fencing token seen in the stream per process. A host that
	// follows the stream past another host's fence has the fence's position, so its
	// compare-and-set alone would pass: the token is what refuses it.
	epochs map[string]uint64

	st     *store.Store
	host   Host
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	errMu sync.Mutex
	err   error
}

// lease is a lease this host holds. epoch (the revision at which it was taken) is the
// fencing token its batches carry; rev is the latest revision (each renewal moves it).
type lease struct {
	epoch, rev uint64
	renewed    time.Time // when the request that set rev was sent
}

// leaseValue is a lease's value in the bucket.
type leaseValue struct {
	Host string `json:"host"`
}

// Connect connects to the NATS server of cfg and makes sure the stream and the lease
// bucket exist. It waits (within ctx) for JetStream to be ready: a cluster that is
// still electing its leader answers after a few seconds.
func Connect(ctx context.Context, cfg Config) (*Node, error) {
	if cfg.Host == "" || cfg.URL == "" {
		return nil, errorf(CodeInvalidConfig, nil, "a cluster node needs a host name and a NATS URL")
	}
	if !hostName().MatchString(cfg.Host) {
		return nil, errorf(CodeInvalidConfig, nil, "host name %q must match ^[A-Za-z0-9_-]{1,64}$", cfg.Host)
	}
	if cfg.Stream == "" {
		cfg.Stream = DefaultStream
	}
	if !hostName().MatchString(cfg.Stream) {
		// The lease bucket is Stream_LEASES, and a bucket's name takes only these.
		return nil, errorf(CodeInvalidConfig, nil, "stream name %q must match ^[A-Za-z0-9_-]{1,64}$", liberr.Clip(cfg.Stream, 80))
	}
	if cfg.Subject == "" {
		cfg.Subject = DefaultSubject
	}
	if !subjectPrefix().MatchString(cfg.Subject) || len(cfg.Subject) > 128 {
		// Literal tokens only: a wildcard or an empty token would make the stream
		// take other subjects, or none.
		return nil, errorf(CodeInvalidConfig, nil, "subject prefix %q must be up to 128 bytes of dot-separated tokens of [A-Za-z0-9_-]", liberr.Clip(cfg.Subject, 80))
	}
	if cfg.Replicas == 0 {
		cfg.Replicas = DefaultReplicas
	}
	if cfg.Replicas < 1 || cfg.Replicas > 5 {
		return nil, errorf(CodeInvalidConfig, nil, "replicas must be 1 to 5, not %d", cfg.Replicas)
	}
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = DefaultLeaseTTL
	}
	if cfg.LeaseTTL < time.Second {
		return nil, errorf(CodeInvalidConfig, nil, "lease TTL %v is under a second", cfg.LeaseTTL)
	}
	if cfg.AckTimeout <= 0 {
		cfg.AckTimeout = DefaultAckTimeout
	}
	opts := []nats.Option{nats.Name("libos-" + cfg.Host), nats.MaxReconnects(-1),
		nats.ReconnectWait(200 * time.Millisecond), nats.RetryOnFailedConnect(true)}
	if cfg.Token != "" {
		if err := tokenFits(cfg.Token, cfg.URL); err != nil {
			return nil, err
		}
		opts = append(opts, nats.Token(cfg.Token))
	}
	nc, err := nats.Connect(cfg.URL, opts...)
	if err != nil {
		return nil, errorf(CodeReplicationFailed, redactCause(err, cfg.URL), "connect to %s: %s", RedactURL(cfg.URL), redactText(err.Error(), cfg.URL))
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, errorf(CodeReplicationFailed, err, "JetStream: %v", err)
	}
	n := &Node{cfg: cfg, nc: nc, js: js, held: map[string]*lease{}, epochs: map[string]uint64{}, maxPayload: int(nc.MaxPayload())}
	err = retry(ctx, func(ctx context.Context) error {
		// The connection retries on its own; credentials the server refused are
		// not worth the wait.
		if aerr := authRefused(nc); aerr != nil {
			return aerr
		}
		n.stream, err = js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
			Name:        cfg.Stream,
			Description: "libOS process logs: one message per durable write batch of a process",
			Subjects:    []string{cfg.Subject + ".>"},
			Replicas:    cfg.Replicas,
			Storage:     jetstream.FileStorage,
			Duplicates:  2 * time.Minute,
		})
		if err != nil {
			return err
		}
		n.kv, err = js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket:      cfg.Stream + "_LEASES",
			Description: "libOS process leases: owner host, revision as fencing token",
			TTL:         cfg.LeaseTTL,
			History:     1,
			Replicas:    cfg.Replicas,
			Storage:     jetstream.FileStorage,
		})
		return err
	})
	if err != nil {
		nc.Close()
		return nil, errorf(CodeReplicationFailed, err, "create stream %s and its lease bucket: %v", cfg.Stream, err)
	}
	if mp := n.nc.MaxPayload(); mp > 0 {
		n.maxPayload = int(mp)
	}
	return n, nil
}

// refusedError is a failure that trying again cannot mend: the server refused the
// host's credentials.
type refusedError struct{ err error }

func (e *refusedError) Error() string { return e.err.Error() }
func (e *refusedError) Unwrap() error { return e.err }

// authRefused reports whether the server refused nc's credentials (a missing or wrong
// token), as a refusedError.
func authRefused(nc *nats.Conn) error {
	if err := nc.LastError(); refusedCredentials(err) {
		return &refusedError{fmt.Errorf("%s: %w", refusedText, err)}
	}
	return nil
}

// refusedText says what a refusal of the credentials means here.
const refusedText = "the NATS server refused the credentials: a missing or wrong cluster token"

// refusedCredentials reports whether err is the server refusing a connection's
// credentials.
func refusedCredentials(err error) bool {
	return err != nil && (errors.Is(err, nats.ErrAuthorization) || errors.Is(err, nats.ErrAuthExpired) || errors.Is(err, nats.ErrAuthRevoked) ||
		strings.Contains(strings.ToLower(err.Error()), "authorization violation"))
}

// tokenFits checks a token given beside url: it is a possible token, and url carries
// no credentials of its own (the server would be offered both).
func tokenFits(token, url string) error {
	if err := CheckToken(token); err != nil {
		return err
	}
	for _, u := range strings.Split(url, ",") {
		if s, _ := userinfo(u); s >= 0 {
			return errorf(CodeInvalidConfig, nil, "%s carries credentials of its own; a cluster token does not go with them", RedactURL(url))
		}
	}
	return nil
}

// retry runs fn until it succeeds or ctx ends (at most 30s), waiting between tries. A
// refusedError ends it at once.
func retry(ctx context.Context, fn func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		actx, acancel := context.WithTimeout(ctx, time.Second)
		err := fn(actx)
		acancel()
		if err == nil {
			return nil
		}
		if errors.As(err, new(*refusedError)) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func (n *Node) logf(format string, args ...any) {
	if n.cfg.Logf != nil {
		n.cfg.Logf("cluster %s: "+format, append([]any{n.cfg.Host}, args...)...)
	}
}

// HostName is this host's name.
func (n *Node) HostName() string { return n.cfg.Host }

// hostName is the form of a host's name, and of a stream's (its lease bucket's name
// takes no more).
var hostName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`) })

var subjectPrefix = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$`) })

var plainToken = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_-]{1,200}$`) })

// Subject is the subject of pid's batches: the PID itself when it is a plain token
// (pid_ + hex always is), else "=" and its unpadded base64url, which no plain token
// starts with.
func (n *Node) Subject(pid string) string {
	if plainToken().MatchString(pid) {
		return n.cfg.Subject + "." + pid
	}
	return n.cfg.Subject + ".=" + base64.RawURLEncoding.EncodeToString([]byte(pid))
}

func (n *Node) leaseKey(pid string) string {
	// Bucket keys allow [-/_=.a-zA-Z0-9]: the subject's last token fits.
	s := n.Subject(pid)
	return "p." + s[len(n.cfg.Subject)+1:]
}

// Start attaches the node to the store it replicates for and the kernel it serves:
// it applies the stream to st from where st left off, keeps this host's leases alive,
// and takes over free processes (those cfg.Serve accepts). st must have been opened
// with the node as its Replicator.
func (n *Node) Start(st *store.Store, h Host) {
	n.st, n.host = st, h
	n.ctx, n.cancel = context.WithCancel(context.Background())
	n.wg.Add(3)
	go n.consume()
	go n.renewals()
	go n.takeovers()
}

// Err returns what stopped the node applying the stream, nil while it applies.
func (n *Node) Err() error {
	n.errMu.Lock()
	defer n.errMu.Unlock()
	return n.err
}

// Close stops the node: it stops applying, gives up its leases (so that other hosts
// take the processes over at once) and disconnects.
func (n *Node) Close() error {
	n.stop()
	n.mu.Lock()
	held := n.held
	n.held = map[string]*lease{}
	n.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for pid, l := range held {
		_ = n.kv.Delete(ctx, n.leaseKey(pid), jetstream.LastRevision(l.rev))
	}
	n.nc.Close()
	return nil
}

// Abandon stops the node as a crash would: no lease is given up (they expire), the
// connection is dropped.
func (n *Node) Abandon() {
	n.stop()
	n.nc.Close()
}

func (n *Node) stop() {
	if n.cancel != nil {
		n.cancel()
		n.wg.Wait()
	}
}

// valid returns pid's lease when this host holds it and, by its own clock, it has not
// expired: a renewal is trusted for three quarters of the TTL from when it was sent.
func (n *Node) valid(pid string) (*lease, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	l := n.held[pid]
	if l == nil || time.Since(l.renewed) > n.cfg.LeaseTTL*3/4 {
		return nil, false
	}
	c := *l
	return &c, true
}

// Holds reports whether this host holds pid's lease.
func (n *Node) Holds(pid string) bool {
	_, ok := n.valid(pid)
	return ok
}

// lose drops pid's lease: the kernel stops serving the process and the lease is given
// up (when it is still this host's) so that a host that has caught up takes it.
func (n *Node) lose(pid, why string) {
	n.mu.Lock()
	l := n.held[pid]
	delete(n.held, pid)
	n.mu.Unlock()
	if l == nil {
		return
	}
	n.logf("lost the lease of %s: %s", pid, why)
	if n.host != nil {
		go n.host.Release(pid)
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = n.kv.Delete(ctx, n.leaseKey(pid), jetstream.LastRevision(l.rev))
	}()
}

// giveUp drops the lease l of pid, whose process was killed: no host serves a killed
// process, so the kernel has released it already and the lease goes.
func (n *Node) giveUp(pid string, l *lease) {
	n.mu.Lock()
	if n.held[pid] != l {
		n.mu.Unlock()
		return
	}
	delete(n.held, pid)
	n.mu.Unlock()
	n.logf("gave up the lease of %s: the process was killed", pid)
	ctx, cancel := context.WithTimeout(n.ctx, 2*time.Second)
	defer cancel()
	_ = n.kv.Delete(ctx, n.leaseKey(pid), jetstream.LastRevision(l.rev))
}

// acquire takes pid's lease when it is free and returns it.
func (n *Node) acquire(ctx context.Context, pid string) (*lease, error) {
	val, _ := json.Marshal(leaseValue{Host: n.cfg.Host})
	sent := time.Now()
	rev, err := n.kv.Create(ctx, n.leaseKey(pid), val)
	if err != nil {
		return nil, err
	}
	l := &lease{epoch: rev, rev: rev, renewed: sent}
	n.mu.Lock()
	n.held[pid] = l
	n.mu.Unlock()
	return l, nil
}

func batchID(pid string, prev, epoch uint64, ops []byte) string {
	h := sha256.New()
	h.Write([]byte(pid))
	h.Write([]byte{0})
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], prev)
	binary.BigEndian.PutUint64(b[8:], epoch)
	h.Write(b[:])
	h.Write(ops)
	return hex.EncodeToString(h.Sum(nil))
}

// headerRoom is what a batch message's headers and subject may take of the bound.
const headerRoom = 1024

func isWrongLast(err error) bool {
	var api *jetstream.APIError
	return errors.As(err, &api) && (api.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		api.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// Replicate publishes b as one message on the subject of its process, with
// compare-and-set on that subject's last sequence (the process's position here) and
// the batch's hash as message ID, and returns once JetStream has acknowledged it. A
// batch that also creates new processes (a fork) goes on the subject of the one that
// exists; a new process's lease is taken here.
func (n *Node) Replicate(ctx context.Context, b *store.Batch) (string, uint64, error) {
	pid, prev, epoch, err := n.place(ctx, b)
	if err != nil {
		return "", 0, err
	}
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), n.cfg.AckTimeout)
	defer cancel()
	seq, err := n.publish(actx, pid, prev, epoch, b.Ops)
	return pid, seq, n.published(pid, err)
}

// Submit is Replicate with the acknowledgement awaited by wait: the message is
// published (in the order Submit is called) without waiting, so batches of different
// processes are in flight together. The store submits at most one batch per process
// at a time, so each process's compare-and-set still sees its previous batch.
func (n *Node) Submit(ctx context.Context, b *store.Batch) (func() (string, uint64, error), error) {
	pid, prev, epoch, err := n.place(ctx, b)
	if err != nil {
		return nil, err
	}
	m := n.message(pid, prev, epoch, b.Ops)
	fut, err := n.js.PublishMsgAsync(m, jetstream.WithExpectLastSequencePerSubject(prev),
		jetstream.WithMsgID(batchID(pid, prev, epoch, b.Ops)))
	if err != nil {
		return nil, errorf(CodeReplicationFailed, err, "publish a batch of %s: %v", pid, err)
	}
	return func() (string, uint64, error) {
		t := time.NewTimer(n.cfg.AckTimeout)
		defer t.Stop()
		select {
		case ack := <-fut.Ok():
			return pid, ack.Sequence, nil
		case err := <-fut.Err():
			return "", 0, n.published(pid, err)
		case <-t.C:
			return "", 0, n.published(pid, context.DeadlineExceeded)
		}
	}, nil
}

// place checks b and this host's right to write it, and returns the process whose
// subject it goes on, that process's position here and the fencing token.
func (n *Node) place(ctx context.Context, b *store.Batch) (pid string, prev, epoch uint64, err error) {
	idx := -1
	for i, pos := range b.Positions {
		if pos > 0 {
			if idx >= 0 {
				return "", 0, 0, errorf(CodeCrossProcessBatch, nil, "one batch writes two existing processes, %s and %s: one message cannot compare-and-set both logs", b.PIDs[idx], b.PIDs[i])
			}
			idx = i
		}
	}
	if idx < 0 {
		idx = 0
	}
	pid, prev = b.PIDs[idx], b.Positions[idx]
	if len(b.Ops)+len(n.Subject(pid))+headerRoom > n.maxPayload {
		return "", 0, 0, errorf(CodeBatchTooLarge, nil, "a write batch of %s is %d bytes; one message of the stream holds at most %d", pid, len(b.Ops), n.maxPayload-headerRoom)
	}
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), n.cfg.AckTimeout)
	defer cancel()
	for i, p := range b.PIDs {
		if b.Positions[i] > 0 || n.Holds(p) {
			continue
		}
		if _, err := n.acquire(actx, p); err != nil {
			if errors.Is(err, jetstream.ErrKeyExists) {
				return "", 0, 0, errorf(CodeLeaseLost, err, "process %s is leased by another host", p)
			}
			return "", 0, 0, errorf(CodeReplicationFailed, err, "take the lease of new process %s: %v", p, err)
		}
	}
	l, ok := n.valid(pid)
	if !ok {
		return "", 0, 0, errorf(CodeLeaseLost, nil, "this host (%s) does not hold the lease of %s", n.cfg.Host, pid)
	}
	// The store calls under its write lock, and the applier notes a message's token
	// before it applies the message under the same lock: a fence this host has
	// applied is known here.
	n.mu.Lock()
	newer := n.epochs[pid] > l.epoch
	n.mu.Unlock()
	if newer {
		n.lose(pid, "another host took it over")
		return "", 0, 0, errorf(CodeLeaseLost, nil, "process %s was taken over by another host after this host (%s) took its lease", pid, n.cfg.Host)
	}
	return pid, prev, l.epoch, nil
}

// published turns the outcome of a publish of pid's batch into the node's error.
func (n *Node) published(pid string, err error) error {
	if err == nil {
		return nil
	}
	if isWrongLast(err) {
		n.lose(pid, "another host appended to its log")
		return errorf(CodeLeaseLost, err, "the log of %s moved on without this host (%s): it lost the lease", pid, n.cfg.Host)
	}
	return errorf(CodeReplicationFailed, err, "the stream did not acknowledge a batch of %s: %v", pid, err)
}

func (n *Node) message(pid string, prev, epoch uint64, ops []byte) *nats.Msg {
	m := nats.NewMsg(n.Subject(pid))
	m.Data = ops
	m.Header.Set(HeaderPID, pid)
	m.Header.Set(HeaderPrev, strconv.FormatUint(prev, 10))
	m.Header.Set(HeaderEpoch, strconv.FormatUint(epoch, 10))
	m.Header.Set(HeaderHost, n.cfg.Host)
	return m
}

func (n *Node) publish(ctx context.Context, pid string, prev, epoch uint64, ops []byte) (uint64, error) {
	m := n.message(pid, prev, epoch, ops)
	ack, err := n.js.PublishMsg(ctx, m, jetstream.WithExpectLastSequencePerSubject(prev),
		jetstream.WithMsgID(batchID(pid, prev, epoch, ops)))
	if err != nil {
		return 0, err
	}
	return ack.Sequence, nil
}

// consume applies the stream to the store in order, from the store's applied position
// on, until the node stops. A consumer that fails is created again.
func (n *Node) consume() {
	defer n.wg.Done()
	for n.ctx.Err() == nil {
		if err := n.consumeOnce(); err != nil {
			if n.ctx.Err() != nil {
				return
			}
			if errors.Is(err, store.ErrCorrupt) || errors.Is(err, store.ErrIO) || errors.Is(err, store.ErrClosed) {
				n.errMu.Lock()
				n.err = err
				n.errMu.Unlock()
				n.logf("stopped applying the stream: %v", err)
				return
			}
			select {
			case <-n.ctx.Done():
				return
			case <-time.After(250 * time.Millisecond):
			}
		}
	}
}

func (n *Node) consumeOnce() error {
	applied, err := n.st.Applied()
	if err != nil {
		return err
	}
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{n.cfg.Subject + ".>"}, DeliverPolicy: jetstream.DeliverAllPolicy}
	if applied > 0 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, applied+1
	}
	cctx, cancel := context.WithTimeout(n.ctx, 5*time.Second)
	cons, err := n.js.OrderedConsumer(cctx, n.cfg.Stream, cfg)
	cancel()
	if err != nil {
		return err
	}
	it, err := cons.Messages()
	if err != nil {
		return err
	}
	defer it.Stop()
	stop := context.AfterFunc(n.ctx, it.Stop)
	defer stop()
	for {
		m, err := it.Next()
		if err != nil {
			return err
		}
		md, err := m.Metadata()
		if err != nil {
			return err
		}
		if err := n.apply(md.Sequence.Stream, m.Subject(), m.Headers(), m.Data()); err != nil {
			return err
		}
	}
}

// apply applies the message at seq of the stream to the store, or refuses it.
//
// Any client that may publish on the subjects can put a message there that is not a
// batch at all (a test tool, another program sharing the server). Such a message is
// refused with invalid_batch, alike on every host, since it is judged only by what it
// holds and by the stream: its subject must be a process's, its headers that
// process's and well formed, its chain position (Libos-Prev) its subject's previous
// message, and its writes of the form the store reads. A refused message is logged;
// nothing of it is written, but its process's position moves to it, as the
// compare-and-set of the process's next batch expects. The applier then goes on.
//
// Hosts trust each other's well-formed batches (CLUSTER.md): a fencing token is not
// judged here. A token older than one seen before could not be told apart alike on
// every host (a host that restarted has not seen it), and refusing a batch that the
// stream acknowledged would lose it.
//
// An error returned is the store's or the stream's: the applier stops on it or tries
// again.
func (n *Node) apply(seq uint64, subject string, h nats.Header, data []byte) error {
	pid, ok := n.subjectPID(subject)
	if !ok {
		// No process's position to move: the applied position moves past it with
		// the next batch applied (until then, a restart judges it again, alike).
		n.refuse(seq, errorf(CodeInvalidBatch, nil, "message %d of the stream is on %q, the subject of no process", seq, liberr.Clip(subject, 120)))
		return nil
	}
	prev, epoch, bad, err := n.check(seq, pid, subject, h, data)
	if err != nil {
		return err
	}
	if bad != nil {
		n.refuse(seq, bad)
		_, err := n.st.ApplyReplicated(n.ctx, store.Replicated{Pos: seq, PID: pid, Skip: true})
		return err
	}
	// The token is noted before the batch is applied: a host whose store has applied
	// another host's fence knows the fence's token when it next writes (see place).
	n.mu.Lock()
	if epoch > n.epochs[pid] {
		n.epochs[pid] = epoch
	}
	n.mu.Unlock()
	_, err = n.st.ApplyReplicated(n.ctx, store.Replicated{Pos: seq, PID: pid, Prev: prev, Ops: data})
	return err
}

// check judges the message at seq on pid's subject. It returns the message's chain
// position and fencing token, or why the message is refused; an error when the stream
// cannot be asked.
func (n *Node) check(seq uint64, pid, subject string, h nats.Header, data []byte) (prev, epoch uint64, bad *liberr.Error, err error) {
	refused := func(format string, args ...any) (uint64, uint64, *liberr.Error, error) {
		return 0, 0, errorf(CodeInvalidBatch, nil, "message %d of the stream on %q: "+format, append([]any{seq, liberr.Clip(subject, 120)}, args...)...), nil
	}
	if got := h.Get(HeaderPID); got != pid {
		return refused("%s %q is not the process of its subject", HeaderPID, liberr.Clip(got, 120))
	}
	prev, perr := strconv.ParseUint(h.Get(HeaderPrev), 10, 64)
	if perr != nil || prev >= seq {
		return refused("%s %q is not a position before it", HeaderPrev, liberr.Clip(h.Get(HeaderPrev), 40))
	}
	epoch, eerr := strconv.ParseUint(h.Get(HeaderEpoch), 10, 64)
	if eerr != nil || epoch == 0 {
		return refused("%s %q is not a fencing token", HeaderEpoch, liberr.Clip(h.Get(HeaderEpoch), 40))
	}
	if !hostName().MatchString(h.Get(HeaderHost)) {
		return refused("%s %q is not a host name", HeaderHost, liberr.Clip(h.Get(HeaderHost), 80))
	}
	if err := store.CheckOps(data); err != nil {
		return refused("its writes are not a batch the store reads: %v", err)
	}
	have, err := n.st.Position(pid)
	if err != nil {
		return 0, 0, nil, err
	}
	if seq > have && prev != have {
		// Either the header does not say where the message is (refused), or this
		// copy missed a message of the subject: the store then refuses the batch
		// as a fork, and the applier stops.
		ok, err := n.precededBy(subject, seq, prev)
		if err != nil {
			return 0, 0, nil, err
		}
		if !ok {
			return refused("it follows position %d, which is not the previous message of its subject", prev)
		}
	}
	return prev, epoch, nil, nil
}

// precededBy reports whether the message before seq on subject is at prev (0: none).
func (n *Node) precededBy(subject string, seq, prev uint64) (bool, error) {
	ctx, cancel := context.WithTimeout(n.ctx, n.cfg.AckTimeout)
	defer cancel()
	if prev > 0 {
		m, err := n.stream.GetMsg(ctx, prev)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		if m.Subject != subject {
			return false, nil
		}
	}
	m, err := n.stream.GetMsg(ctx, prev+1, jetstream.WithGetMsgSubject(subject))
	if err != nil {
		return false, err
	}
	return m.Sequence == seq, nil
}

// subjectPID returns the process whose subject subject is, if any (see Subject).
func (n *Node) subjectPID(subject string) (string, bool) {
	tok, ok := strings.CutPrefix(subject, n.cfg.Subject+".")
	if !ok {
		return "", false
	}
	pid := tok
	if enc, ok := strings.CutPrefix(tok, "="); ok {
		b, err := base64.RawURLEncoding.DecodeString(enc)
		if err != nil {
			return "", false
		}
		pid = string(b)
	}
	// An ID the store takes, whose subject is this one (not another spelling of it).
	if store.CheckPID(pid) != nil || n.Subject(pid) != subject {
		return "", false
	}
	return pid, true
}

// refuse reports a message of the stream that no host applies.
func (n *Node) refuse(seq uint64, e *liberr.Error) {
	n.logf("refused message %d of the stream (%s): %s", seq, e.Code, e.Message)
}

// waitApplied waits until the store has applied the stream up to pos.
func (n *Node) waitApplied(ctx context.Context, pos uint64) error {
	for {
		a, err := n.st.Applied()
		if err != nil {
			return err
		}
		if a >= pos {
			return nil
		}
		if err := n.Err(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return errorf(CodeReplicationFailed, ctx.Err(), "the store applied the stream to %d, not yet %d", a, pos)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// renewals renews this host's leases every quarter TTL. It runs on its own: a
// takeover (a fence, the kernel restoring a process) or cfg.Serve may take longer
// than a lease lives, and the leases held meanwhile must not lapse.
func (n *Node) renewals() {
	defer n.wg.Done()
	n.every(n.cfg.LeaseTTL/4, n.renew)
}

// takeovers takes over free processes every quarter TTL.
func (n *Node) takeovers() {
	defer n.wg.Done()
	n.every(n.cfg.LeaseTTL/4, n.adoptFree)
}

// every runs fn now and then every d until the node stops.
func (n *Node) every(d time.Duration, fn func()) {
	tick := time.NewTicker(d)
	defer tick.Stop()
	for {
		fn()
		select {
		case <-n.ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (n *Node) renew() {
	n.mu.Lock()
	pids := make([]string, 0, len(n.held))
	for pid := range n.held {
		pids = append(pids, pid)
	}
	n.mu.Unlock()
	val, _ := json.Marshal(leaseValue{Host: n.cfg.Host})
	for _, pid := range pids {
		n.mu.Lock()
		l := n.held[pid]
		n.mu.Unlock()
		if l == nil {
			continue
		}
		if p, err := n.st.Process(pid); err == nil && p.State == "killed" {
			n.giveUp(pid, l)
			continue
		}
		if time.Since(l.renewed) > n.cfg.LeaseTTL*3/4 {
			n.lose(pid, "it expired before a heartbeat got through")
			continue
		}
		sent := time.Now()
		ctx, cancel := context.WithTimeout(n.ctx, n.cfg.LeaseTTL/4)
		rev, err := n.kv.Update(ctx, n.leaseKey(pid), val, l.rev)
		cancel()
		switch {
		case err == nil:
			n.mu.Lock()
			if cur := n.held[pid]; cur == l {
				l.rev, l.renewed = rev, sent
			}
			n.mu.Unlock()
		case isWrongLast(err) || errors.Is(err, jetstream.ErrKeyNotFound):
			n.lose(pid, "another host holds it")
		}
	}
}

// adoptFree takes over every process this host may serve whose lease is free.
func (n *Node) adoptFree() {
	procs, err := n.st.Processes()
	if err != nil {
		return
	}
	for _, p := range procs {
		if n.ctx.Err() != nil {
			return
		}
		if p.State == "killed" || (n.cfg.Serve != nil && !n.cfg.Serve(p.PID)) {
			continue
		}
		n.mu.Lock()
		_, mine := n.held[p.PID]
		n.mu.Unlock()
		if mine {
			continue
		}
		ctx, cancel := context.WithTimeout(n.ctx, n.cfg.LeaseTTL/2)
		_, err := n.kv.Get(ctx, n.leaseKey(p.PID))
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			if err := n.takeover(ctx, p.PID); err != nil {
				n.logf("take over %s: %v", p.PID, err)
			}
		}
		cancel()
	}
}

// Takeover takes pid's lease when it is free, catches the store up with the stream,
// fences the previous owner out (a batch on pid's subject that any later append of
// the previous owner cannot compare-and-set past), and has the kernel serve it.
func (n *Node) Takeover(ctx context.Context, pid string) error { return n.takeover(ctx, pid) }

func (n *Node) takeover(ctx context.Context, pid string) error {
	l, err := n.acquire(ctx, pid)
	if err != nil {
		return err
	}
	if err := n.fence(ctx, pid, l); err != nil {
		n.lose(pid, "the takeover failed: "+err.Error())
		return err
	}
	n.logf("took over %s at epoch %d", pid, l.epoch)
	if n.host != nil {
		if err := n.host.Adopt(ctx, pid); err != nil {
			n.lose(pid, "the kernel could not serve it: "+err.Error())
			return err
		}
	}
	return nil
}

func (n *Node) fence(ctx context.Context, pid string, l *lease) error {
	for attempt := 0; ; attempt++ {
		last := uint64(0)
		m, err := n.stream.GetLastMsgForSubject(ctx, n.Subject(pid))
		switch {
		case err == nil:
			last = m.Sequence
		case errors.Is(err, jetstream.ErrMsgNotFound):
		default:
			return err
		}
		if err := n.waitApplied(ctx, last); err != nil {
			return err
		}
		seq, err := n.publish(ctx, pid, last, l.epoch, store.EmptyBatch())
		if err == nil {
			return n.waitApplied(ctx, seq)
		}
		if !isWrongLast(err) || attempt >= 4 {
			return err
		}
	}
}

// Placement is where a process is served: the host holding its lease, and the
// lease's revision.
type Placement struct {
	PID      string `json:"pid"`
	Host     string `json:"host"`
	Revision uint64 `json:"revision"`
}

// Placements lists the leases of the cluster, sorted by PID.
func (n *Node) Placements(ctx context.Context) ([]Placement, error) {
	lister, err := n.kv.ListKeys(ctx)
	if err != nil {
		if errors.Is(err, jetstream.ErrNoKeysFound) {
			return nil, nil
		}
		return nil, errorf(CodeReplicationFailed, err, "list leases: %v", err)
	}
	defer lister.Stop()
	var out []Placement
	for k := range lister.Keys() {
		e, err := n.kv.Get(ctx, k)
		if err != nil {
			continue
		}
		var v leaseValue
		_ = json.Unmarshal(e.Value(), &v)
		out = append(out, Placement{PID: pidOfKey(k), Host: v.Host, Revision: e.Revision()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].PID < out[j].PID })
	return out, nil
}

func pidOfKey(k string) string {
	k = strings.TrimPrefix(k, "p.")
	if strings.HasPrefix(k, "=") {
		if b, err := base64.RawURLEncoding.DecodeString(k[1:]); err == nil {
			return string(b)
		}
	}
	return k
}

// ReadPlacements connects to the NATS deployment at url and lists where each process
// of stream (DefaultStream when empty) is served, creating and changing nothing: for
// `libos ps` on any machine that reaches the cluster.
func ReadPlacements(ctx context.Context, url, stream string) ([]Placement, error) {
	return ReadPlacementsWithToken(ctx, url, stream, "")
}

// ReadPlacementsWithToken is ReadPlacements presenting token (ServerConfig.Token) to
// the server; "" presents none.
func ReadPlacementsWithToken(ctx context.Context, url, stream, token string) ([]Placement, error) {
	if stream == "" {
		stream = DefaultStream
	}
	opts := []nats.Option{nats.Name("libos-ps")}
	if token != "" {
		if err := tokenFits(token, url); err != nil {
			return nil, err
		}
		opts = append(opts, nats.Token(token))
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		why := redactText(err.Error(), url)
		if refusedCredentials(err) {
			why = refusedText + " (" + why + ")"
		}
		return nil, errorf(CodeReplicationFailed, redactCause(err, url), "connect to %s: %s", RedactURL(url), why)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, errorf(CodeReplicationFailed, err, "JetStream: %v", err)
	}
	kv, err := js.KeyValue(ctx, stream+"_LEASES")
	if err != nil {
		return nil, errorf(CodeReplicationFailed, err, "the lease bucket of %s: %v", stream, err)
	}
	return (&Node{kv: kv}).Placements(ctx)
}
