package endpoint

import (
	"cmp"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
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
	// SkipVerify is a TLS URL's skip_verify option: TLS without checking certificates.
	SkipVerify bool
	// DB is the database number (Node and Sentinel; a Cluster has only database 0).
	DB int
	// Query holds the URL's options that tune the client (dial_timeout, pool_size, max_retries, …): the ones Parse
	// does not read into the fields above. They are go-redis's to read, so ops/state checks them, not Parse.
	Query url.Values
	// WaitReplicas is how many replicas must acknowledge each write (WAIT) before it counts as done; 0 does not wait.
	// On a Sentinel group or a Cluster, 1 keeps a failover from losing a write that was reported done.
	WaitReplicas int
	// WaitTimeout bounds that wait (default config.DefaultRedisWaitTimeout); a write not acknowledged in time fails
	// with state.ErrNotReplicated.
	WaitTimeout time.Duration
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
//	redis://[user:password@][host][:port][/db][?option=…]                one node, as go-redis's ParseURL reads it
//	redis-sentinel://[user:password@]host[:port][,host[:port]…]/master[/db][?option=…]
//	redis-cluster://[user:password@]host[:port][,host[:port]…][?option=…]
//
// An "s" after "redis" (rediss://, rediss-sentinel://, rediss-cluster://) turns on TLS. The user and password are
// the data nodes'; sentinels that need their own take them as the sentinel_username and sentinel_password options.
// A node with no host is localhost, as go-redis has it. The other options are go-redis's (dial_timeout,
// read_timeout, pool_size, max_retries, …): Parse keeps them in Query and ops/state checks them when it builds the
// client (state.CheckEndpoint), since this package, under config, does not import go-redis. Errors never include
// the password.
func Parse(raw string) (Endpoint, error) {
	scheme, rest, ok := strings.Cut(raw, "://")
	sc, known := schemes[strings.ToLower(scheme)]
	if !ok || !known {
		return Endpoint{}, fmt.Errorf("the scheme must be redis, rediss, redis-sentinel, rediss-sentinel, redis-cluster " +
			"or rediss-cluster (as in redis://host:6379/0)")
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
	if e.Kind == Node {
		if err := e.readNode(authority, tail); err != nil {
			return Endpoint{}, err
		}
		return e, nil
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
	if err := e.Check(); err != nil {
		return Endpoint{}, err
	}
	return e, nil
}

// readNode reads the host, path and options of a redis:// or rediss:// URL (the userinfo already read) the way
// go-redis's ParseURL does, which is how HyperOps always read them: net/url parses them, so a host may be
// percent-encoded, and a '#' fragment is ignored.
func (e *Endpoint) readNode(authority, tail string) error {
	u, err := url.Parse("redis://" + authority + tail)
	if err != nil {
		// A *url.Error repeats the URL; what is wrong with it is enough (and the userinfo is already cut off).
		if ue := (*url.Error)(nil); errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("the host, path or options: %w", err)
	}
	// Like go-redis's ParseURL: no host is localhost (redis://, redis://:6380), no port (or "h:") is 6379.
	host, port := u.Hostname(), u.Port()
	if host == "" {
		host = "localhost"
	}
	if port == "" {
		port = DefaultPort
	}
	addr, err := Addr(net.JoinHostPort(host, port), DefaultPort)
	if err != nil {
		return err
	}
	e.Addrs = []string{addr}
	if err := e.readPath(u.Path); err != nil {
		return err
	}
	return e.readQuery(u.Query())
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

// readPath reads the path: a node's "/db", a Sentinel group's "/master-name[/db]", a Cluster's nothing (or "/0").
func (e *Endpoint) readPath(p string) error {
	parts := strings.FieldsFunc(p, func(r rune) bool { return r == '/' })
	switch e.Kind {
	case Node:
		// go-redis reads the number with strconv.Atoi, sign and all; a negative one selects database 0.
		if len(parts) > 1 {
			return fmt.Errorf("the path must be one database number such as /0, got %q", p)
		}
		if len(parts) == 1 {
			db, err := strconv.Atoi(parts[0])
			if err != nil {
				return fmt.Errorf("the path must be a database number such as /0, got %q", parts[0])
			}
			e.DB = db
		}
		return nil
	case Cluster:
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

// Options a Sentinel or Cluster URL says elsewhere, with where to say them. A node URL's go to go-redis, which
// reads db and refuses the others.
var placedElsewhere = map[string]string{
	"addr":        "list every host before the path, comma-separated",
	"master_name": "put the master name in the path (redis-sentinel://host:26379/master-name)",
	"username":    "put the user before '@' (redis-sentinel://user:password@host…)",
	"password":    "put the password before '@' (redis-sentinel://user:password@host…)",
	"db":          "put the database number in the path, after the master name",
}

// readQuery takes from q the options Parse reads into fields and leaves the rest, go-redis's, in Query.
func (e *Endpoint) readQuery(q url.Values) error {
	if e.Kind == Node {
		if err := e.readNodeDB(q); err != nil {
			return err
		}
	} else {
		for k := range q {
			if where, ok := placedElsewhere[k]; ok {
				return fmt.Errorf("the option %s is not read from the query: %s", k, where)
			}
		}
	}
	if e.Kind == Sentinel {
		e.SentinelUsername, e.SentinelPassword = q.Get("sentinel_username"), q.Get("sentinel_password")
		q.Del("sentinel_username")
		q.Del("sentinel_password")
	}
	if q.Has("skip_verify") {
		if !e.TLS {
			return errors.New("the option skip_verify applies to TLS only: use rediss://, rediss-sentinel:// or rediss-cluster://, or remove it")
		}
		// An empty value is false, as go-redis reads a node URL's skip_verify.
		v, err := strconv.ParseBool(cmp.Or(q.Get("skip_verify"), "false"))
		if err != nil {
			return fmt.Errorf("the option skip_verify must be true or false, got %q", q.Get("skip_verify"))
		}
		e.SkipVerify = v
		q.Del("skip_verify")
	}
	if len(q) > 0 {
		e.Query = q
	}
	return nil
}

// readNodeDB reads a node URL's db option, which go-redis still honours over the path (its last value, when not
// empty).
func (e *Endpoint) readNodeDB(q url.Values) error {
	vs := q["db"]
	q.Del("db")
	if len(vs) == 0 || vs[len(vs)-1] == "" {
		return nil
	}
	db, err := strconv.Atoi(vs[len(vs)-1])
	if err != nil {
		return fmt.Errorf("the option db must be a database number, got %q", vs[len(vs)-1])
	}
	e.DB = db
	return nil
}

// Check reports what is wrong with the shape of an endpoint, one built field by field (a Sentinel group or Cluster
// from configuration) among them: the kind, the addresses, the master name, the database, the replicas to wait for.
// The client options in Query are go-redis's, and ops/state checks them (state.CheckEndpoint).
func (e Endpoint) Check() error {
	switch e.Kind {
	case Node:
		if len(e.Addrs) != 1 {
			return fmt.Errorf("a single node has exactly one address, got %d", len(e.Addrs))
		}
	case Sentinel:
		if e.MasterName == "" {
			return errors.New("a Sentinel endpoint needs the master name the sentinels monitor")
		}
		if len(e.Addrs) == 0 {
			return errors.New("a Sentinel endpoint needs the address of at least one sentinel")
		}
	case Cluster:
		if len(e.Addrs) == 0 {
			return errors.New("a Cluster endpoint needs the address of at least one node")
		}
		if e.DB != 0 {
			return errors.New("a Redis Cluster has only database 0")
		}
	default:
		return fmt.Errorf("unknown kind %q: want node, sentinel or cluster", e.Kind)
	}
	if e.WaitReplicas < 0 {
		return fmt.Errorf("the number of replicas to wait for must be 0 or more, got %d", e.WaitReplicas)
	}
	return nil
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
