package endpoint

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Kind is the topology of the Redis the state store talks to.
type Kind string

// The topologies.
const (
	// Node is one Redis server (or a managed endpoint that fails over behind one address).
	Node Kind = "node"
	// Sentinel is a master and its replicas watched by Redis Sentinel: the client asks the sentinels for the master.
	Sentinel Kind = "sentinel"
	// Cluster is a Redis Cluster (ElastiCache with cluster mode on): the client learns the slots from the seed nodes.
	Cluster Kind = "cluster"
)

// Default ports, used when an address names none.
const (
	DefaultPort         = "6379"
	DefaultSentinelPort = "26379"
)

// Endpoint is where a Redis is and how to log in to it.
type Endpoint struct {
	Kind Kind
	// Addrs are host:port: the node (exactly one), the sentinels, or the cluster's seed nodes.
	Addrs []string
	// MasterName is the name the sentinels monitor the master under (Sentinel only).
	MasterName string
	// Username and Password log in to the data nodes (ACL user, or AUTH password alone).
	Username, Password string
	// SentinelUsername and SentinelPassword log in to the sentinels themselves; empty when they need no AUTH.
	SentinelUsername, SentinelPassword string
	// TLS turns on TLS to every node, verifying each against its own host name.
	TLS bool
	// DB is the database number (Node and Sentinel; a Cluster has only database 0).
	DB int
	// WaitReplicas is how many replicas must acknowledge each write (WAIT) before it counts as done; 0 does not wait.
	// On a Sentinel group or a Cluster, 1 keeps a failover from losing a write that was reported done.
	WaitReplicas int
	// WaitTimeout bounds that wait (default config.DefaultRedisWaitTimeout); a write not acknowledged in time fails
	// with state.ErrNotReplicated.
	WaitTimeout time.Duration

	// raw is the URL of a Node endpoint, handed to go-redis's ParseURL unchanged (as HyperOps always did).
	raw string
	// skipVerify is the skip_verify option of a Sentinel or Cluster URL: TLS without checking certificates.
	skipVerify bool
	// query holds go-redis's tuning options from a Sentinel or Cluster URL (dial_timeout, pool_size, …).
	query url.Values
}

// The URL schemes Parse reads.
var schemes = map[string]struct {
	kind Kind
	tls  bool
}{
	"redis":           {Node, false},
	"rediss":          {Node, true},
	"redis-sentinel":  {Sentinel, false},
	"rediss-sentinel": {Sentinel, true},
	"redis-cluster":   {Cluster, false},
	"rediss-cluster":  {Cluster, true},
}

// Parse reads a Redis URL:
//
//	redis://[user:password@]host[:port][/db][?option=…]                 one node (go-redis's ParseURL)
//	redis-sentinel://[user:password@]host[:port][,host[:port]…]/master[/db][?option=…]
//	redis-cluster://[user:password@]host[:port][,host[:port]…][?option=…]
//
// An "s" after "redis" (rediss://, rediss-sentinel://, rediss-cluster://) turns on TLS. The user and password are
// the data nodes'; sentinels that need their own take them as the sentinel_username and sentinel_password options.
// The other options are go-redis's (dial_timeout, read_timeout, pool_size, max_retries, …). Errors never include
// the password.
func Parse(raw string) (Endpoint, error) {
	scheme, rest, ok := strings.Cut(raw, "://")
	sc, known := schemes[strings.ToLower(scheme)]
	if !ok || !known {
		return Endpoint{}, fmt.Errorf("the scheme must be redis, rediss, redis-sentinel, rediss-sentinel, redis-cluster " +
			"or rediss-cluster (as in redis://host:6379/0)")
	}
	if sc.kind == Node {
		return parseNode(raw, sc.tls)
	}
	e := Endpoint{Kind: sc.kind, TLS: sc.tls}
	authority, tail := rest, ""
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		authority, tail = rest[:i], rest[i:]
	}
	if i := strings.LastIndex(authority, "@"); i >= 0 {
		u, err := url.Parse("redis://" + authority[:i+1] + "host")
		if err != nil {
			return Endpoint{}, errors.New("the user and password before '@' are not valid URL userinfo (percent-encode ':', '@' and '/' in them)")
		}
		e.Username = u.User.Username()
		e.Password, _ = u.User.Password()
		authority = authority[i+1:]
	}
	port := DefaultPort
	if sc.kind == Sentinel {
		port = DefaultSentinelPort
	}
	addrs, err := hostList(authority, port)
	if err != nil {
		return Endpoint{}, err
	}
	e.Addrs = addrs
	u, err := url.Parse("redis://host" + tail)
	if err != nil {
		return Endpoint{}, fmt.Errorf("the path or options after the hosts: %w", err)
	}
	if u.Fragment != "" {
		return Endpoint{}, errors.New("a '#' fragment means nothing in a Redis URL; remove it")
	}
	if err := e.readPath(u.EscapedPath()); err != nil {
		return Endpoint{}, err
	}
	if err := e.readQuery(u.Query()); err != nil {
		return Endpoint{}, err
	}
	if _, err := e.Options(); err != nil {
		return Endpoint{}, err
	}
	return e, nil
}

func parseNode(raw string, tls bool) (Endpoint, error) {
	opt, err := redis.ParseURL(raw)
	if err != nil {
		return Endpoint{}, err
	}
	return Endpoint{Kind: Node, Addrs: []string{opt.Addr}, Username: opt.Username, Password: opt.Password, TLS: tls,
		DB: opt.DB, raw: raw}, nil
}

// hostList reads "host[:port],host[:port]…".
func hostList(s, defaultPort string) ([]string, error) {
	if s == "" {
		return nil, errors.New("name at least one host:port after '//'")
	}
	var out []string
	for _, h := range strings.Split(s, ",") {
		addr, err := Addr(h, defaultPort)
		if err != nil {
			return nil, err
		}
		if slices.Contains(out, addr) {
			return nil, fmt.Errorf("%s is listed twice", addr)
		}
		out = append(out, addr)
	}
	return out, nil
}

// Addr checks a "host[:port]" and returns it as host:port, with defaultPort when it names none.
func Addr(s, defaultPort string) (string, error) {
	host, port := s, defaultPort
	if h, p, err := net.SplitHostPort(s); err == nil {
		host, port = h, p
	} else if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		host = s[1 : len(s)-1]
	} else if strings.Contains(s, ":") {
		return "", fmt.Errorf("%q is not host:port (write an IPv6 address in brackets: [::1]:6379)", s)
	}
	if host == "" || strings.ContainsAny(host, " /?#@,[]") {
		return "", fmt.Errorf("%q is not host:port (empty host, or a character a host cannot hold)", s)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("%q: the port must be a number from 1 to 65535", s)
	}
	return net.JoinHostPort(host, port), nil
}

func (e *Endpoint) readPath(p string) error {
	parts := strings.FieldsFunc(p, func(r rune) bool { return r == '/' })
	if e.Kind == Cluster {
		if len(parts) > 1 || len(parts) == 1 && parts[0] != "0" {
			return errors.New("a Redis Cluster has only database 0: remove the path after the hosts")
		}
		return nil
	}
	if len(parts) == 0 || len(parts) > 2 {
		return errors.New("the path must be /master-name or /master-name/db (the name the sentinels monitor the master under)")
	}
	name, err := url.PathUnescape(parts[0])
	if err != nil || name == "" {
		return errors.New("the master name in the path is not valid percent-encoding")
	}
	e.MasterName = name
	if len(parts) == 2 {
		db, err := strconv.Atoi(parts[1])
		if err != nil || db < 0 {
			return fmt.Errorf("the database number after the master name must be a number 0 or more, got %q", parts[1])
		}
		e.DB = db
	}
	return nil
}

// Options a Sentinel or Cluster URL says elsewhere, with where to say them.
var placedElsewhere = map[string]string{
	"addr":        "list every host before the path, comma-separated",
	"master_name": "put the master name in the path (redis-sentinel://host:26379/master-name)",
	"username":    "put the user before '@' (redis-sentinel://user:password@host…)",
	"password":    "put the password before '@' (redis-sentinel://user:password@host…)",
	"db":          "put the database number in the path, after the master name",
}

func (e *Endpoint) readQuery(q url.Values) error {
	for k := range q {
		if where, ok := placedElsewhere[k]; ok {
			return fmt.Errorf("the option %s is not read from the query: %s", k, where)
		}
	}
	if e.Kind == Sentinel {
		e.SentinelUsername, e.SentinelPassword = q.Get("sentinel_username"), q.Get("sentinel_password")
		q.Del("sentinel_username")
		q.Del("sentinel_password")
	}
	if q.Has("skip_verify") {
		if !e.TLS {
			return errors.New("the option skip_verify applies to TLS only: use rediss-sentinel:// or rediss-cluster://, or remove it")
		}
		v, err := strconv.ParseBool(q.Get("skip_verify"))
		if err != nil {
			return fmt.Errorf("the option skip_verify must be true or false, got %q", q.Get("skip_verify"))
		}
		e.skipVerify = v
		q.Del("skip_verify")
	}
	e.query = q
	return nil
}

// Check reports what is wrong with an endpoint built field by field (a Sentinel group or Cluster from
// configuration): the kind, the addresses, the master name.
func (e Endpoint) Check() error {
	_, err := e.Options()
	return err
}

// Options builds go-redis's options: *redis.Options, *redis.FailoverOptions or *redis.ClusterOptions.
func (e Endpoint) Options() (any, error) {
	switch e.Kind {
	case Node:
		if e.raw != "" {
			return redis.ParseURL(e.raw)
		}
		if len(e.Addrs) != 1 {
			return nil, fmt.Errorf("a single node has exactly one address, got %d", len(e.Addrs))
		}
		o := &redis.Options{Addr: e.Addrs[0], Username: e.Username, Password: e.Password, DB: e.DB}
		if e.TLS {
			o.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		return o, nil
	case Sentinel:
		return e.failoverOptions()
	case Cluster:
		return e.clusterOptions()
	}
	return nil, fmt.Errorf("unknown kind %q: want node, sentinel or cluster", e.Kind)
}

func (e Endpoint) failoverOptions() (*redis.FailoverOptions, error) {
	if e.MasterName == "" {
		return nil, errors.New("a Sentinel endpoint needs the master name the sentinels monitor")
	}
	if len(e.Addrs) == 0 {
		return nil, errors.New("a Sentinel endpoint needs the address of at least one sentinel")
	}
	// go-redis reads the tuning options; the rest is set from the fields, which it would read differently.
	o, err := redis.ParseFailoverURL("redis://host:" + DefaultSentinelPort + "/?" + e.query.Encode())
	if err != nil {
		return nil, err
	}
	o.SentinelAddrs, o.MasterName, o.DB = slices.Clone(e.Addrs), e.MasterName, e.DB
	o.Username, o.Password = e.Username, e.Password
	o.SentinelUsername, o.SentinelPassword = e.SentinelUsername, e.SentinelPassword
	o.TLSConfig = e.tlsConfig()
	return o, nil
}

func (e Endpoint) clusterOptions() (*redis.ClusterOptions, error) {
	if len(e.Addrs) == 0 {
		return nil, errors.New("a Cluster endpoint needs the address of at least one node")
	}
	if e.DB != 0 {
		return nil, errors.New("a Redis Cluster has only database 0")
	}
	o, err := redis.ParseClusterURL("redis://host:" + DefaultPort + "?" + e.query.Encode())
	if err != nil {
		return nil, err
	}
	o.Addrs, o.Username, o.Password = slices.Clone(e.Addrs), e.Username, e.Password
	o.TLSConfig = e.tlsConfig()
	return o, nil
}

// tlsConfig leaves ServerName empty so that crypto/tls checks each node's certificate against the host dialled: a
// Sentinel's master and a Cluster's nodes are other hosts than the addresses configured.
func (e Endpoint) tlsConfig() *tls.Config {
	if !e.TLS {
		return nil
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: e.skipVerify} //nolint:gosec // asked for with skip_verify=true
}

// String names the endpoint for logs and errors, without credentials.
func (e Endpoint) String() string {
	switch e.Kind {
	case Sentinel:
		return fmt.Sprintf("sentinel master %q via %s", e.MasterName, strings.Join(e.Addrs, ","))
	case Cluster:
		return "cluster via " + strings.Join(e.Addrs, ",")
	}
	return strings.Join(e.Addrs, ",")
}
