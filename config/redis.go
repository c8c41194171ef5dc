package config

import (
	"fmt"
	"strings"
	"time"

	"github.com/hyperops/hyperops/config/endpoint"
)

// maxWaitReplicas caps redis.waitReplicas: more replicas than this acknowledging every write is a typo.
const maxWaitReplicas = 16

// maxWaitTimeout caps redis.waitTimeout below go-redis's default read timeout (3 s), which bounds the wait.
const maxWaitTimeout = Duration(2 * time.Second)

// Embedded reports whether no Redis is configured, so that the bot starts its embedded one.
func (r *Redis) Embedded() bool {
	return r.URL == "" && !r.sentinelSet() && !r.clusterSet()
}

func (r *Redis) sentinelSet() bool {
	s := r.Sentinel
	return s.MasterName != "" || len(s.Addrs) > 0 || s.Username != "" || s.Password != ""
}

func (r *Redis) clusterSet() bool { return len(r.Cluster.Addrs) > 0 }

// Endpoint is where the state store's Redis is, with redis.waitReplicas and redis.waitTimeout applied. Call it on
// a validated configuration that is not Embedded.
func (r *Redis) Endpoint() (endpoint.Endpoint, error) {
	var e endpoint.Endpoint
	switch {
	case r.URL != "":
		var err error
		if e, err = endpoint.Parse(r.URL); err != nil {
			return endpoint.Endpoint{}, fmt.Errorf("redis.url: %s", redactURLError(err, r.URL))
		}
	case r.sentinelSet():
		e = endpoint.Endpoint{Kind: endpoint.Sentinel, MasterName: r.Sentinel.MasterName,
			SentinelUsername: r.Sentinel.Username, SentinelPassword: r.Sentinel.Password}
		for _, a := range r.Sentinel.Addrs {
			addr, err := endpoint.Addr(a, endpoint.DefaultSentinelPort)
			if err != nil {
				return endpoint.Endpoint{}, fmt.Errorf("redis.sentinel.addrs: %w", err)
			}
			e.Addrs = append(e.Addrs, addr)
		}
	case r.clusterSet():
		e = endpoint.Endpoint{Kind: endpoint.Cluster}
		for _, a := range r.Cluster.Addrs {
			addr, err := endpoint.Addr(a, endpoint.DefaultPort)
			if err != nil {
				return endpoint.Endpoint{}, fmt.Errorf("redis.cluster.addrs: %w", err)
			}
			e.Addrs = append(e.Addrs, addr)
		}
	default:
		return endpoint.Endpoint{}, fmt.Errorf("redis: no url, sentinel or cluster is set (the embedded Redis has no endpoint)")
	}
	if r.URL == "" {
		e.Username, e.Password, e.TLS = r.Username, r.Password, r.TLS
	}
	e.WaitReplicas = r.waitReplicas(e.Kind)
	e.WaitTimeout = r.WaitTimeout.Std()
	return e, nil
}

// waitReplicas is redis.waitReplicas, or its default for the topology.
func (r *Redis) waitReplicas(k endpoint.Kind) int {
	if r.WaitReplicas != nil {
		return *r.WaitReplicas
	}
	if k == endpoint.Node {
		return 0
	}
	return 1
}

func (r *Redis) validate(l *problemList) {
	r.validateTopology(l)
	if !keyPrefixChars.MatchString(r.KeyPrefix) {
		l.add("redis.keyPrefix", "must be letters, digits, '_', '.', ':' or '-', got %q", r.KeyPrefix)
	}
	checkPositive(l, "redis.requestTTL", r.RequestTTL)
	checkPositive(l, "redis.dedupeTTL", r.DedupeTTL)
	if n := r.WaitReplicas; n != nil && (*n < 0 || *n > maxWaitReplicas) {
		l.add("redis.waitReplicas", "must be 0 (do not wait) to %d replicas, got %d", maxWaitReplicas, *n)
	}
	if r.WaitTimeout <= 0 || r.WaitTimeout > maxWaitTimeout {
		l.add("redis.waitTimeout", "must be a duration above 0 and at most %s (the client's read timeout bounds it), got %q",
			maxWaitTimeout, r.WaitTimeout.String())
	}
}

// validateTopology checks that at most one of url, sentinel and cluster is set, and that the one set is whole.
func (r *Redis) validateTopology(l *problemList) {
	var set []string
	if r.URL != "" {
		set = append(set, "redis.url")
	}
	if r.sentinelSet() {
		set = append(set, "redis.sentinel")
	}
	if r.clusterSet() {
		set = append(set, "redis.cluster")
	}
	if len(set) > 1 {
		l.add(set[1], "is set together with %s: give one of redis.url, redis.sentinel and redis.cluster", set[0])
		return
	}
	if r.URL != "" || len(set) == 0 {
		for _, f := range []struct {
			key string
			set bool
		}{{"redis.username", r.Username != ""}, {"redis.password", r.Password != ""}, {"redis.tls", r.TLS}} {
			if f.set {
				l.add(f.key, "applies to redis.sentinel and redis.cluster only: a URL carries its own (rediss://user:password@host…)")
			}
		}
	}
	if r.URL != "" {
		// Parse checks the URL but for its go-redis client options (dial_timeout, pool_size, …): ops/state checks
		// those (state.CheckEndpoint, run by state.NewClient and by `hyperops validate-config`), since config
		// does not import go-redis.
		if _, err := endpoint.Parse(r.URL); err != nil {
			// The URL may hold a password: name the problem, never echo the value.
			l.add("redis.url", "must be a Redis URL such as redis://host:6379/0, rediss://user:password@host:6380, "+
				"redis-sentinel://host:26379,host2:26379/master-name or redis-cluster://host:6379,host2:6379: %s",
				redactURLError(err, r.URL))
		}
		return
	}
	if r.sentinelSet() {
		if r.Sentinel.MasterName == "" {
			l.add("redis.sentinel.masterName", "is required: the name in the sentinels' \"sentinel monitor\" line")
		}
		checkAddrs(l, "redis.sentinel.addrs", r.Sentinel.Addrs, endpoint.DefaultSentinelPort)
	}
	if r.clusterSet() {
		checkAddrs(l, "redis.cluster.addrs", r.Cluster.Addrs, endpoint.DefaultPort)
	}
}

func checkAddrs(l *problemList, at string, addrs []string, defaultPort string) {
	if len(addrs) == 0 {
		l.add(at, "name at least one host:port")
	}
	seen := map[string]bool{}
	for i, a := range addrs {
		addr, err := endpoint.Addr(strings.TrimSpace(a), defaultPort)
		switch {
		case err != nil:
			l.add(fmt.Sprintf("%s[%d]", at, i), "%v", err)
		case seen[addr]:
			l.add(fmt.Sprintf("%s[%d]", at, i), "%s is listed twice", addr)
		}
		seen[addr] = true
	}
}
