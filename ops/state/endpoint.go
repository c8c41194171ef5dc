package state

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"

	"github.com/redis/go-redis/v9"

	"github.com/hyperops/hyperops/config/endpoint"
)

// CheckEndpoint reports what is wrong with e as a client would be built from it: its shape (endpoint.Check) and the
// client options of its URL (dial_timeout, pool_size, …), which go-redis reads here rather than in config, so that
// config, imported by every package, does not import go-redis. `hyperops validate-config` calls it after the
// configuration checks; NewClient runs the same checks.
func CheckEndpoint(e endpoint.Endpoint) error {
	_, err := clientOptions(e)
	return err
}

// clientOptions builds go-redis's options for e: *redis.Options, *redis.FailoverOptions or *redis.ClusterOptions.
func clientOptions(e endpoint.Endpoint) (any, error) {
	if err := e.Check(); err != nil {
		return nil, err
	}
	switch e.Kind {
	case endpoint.Sentinel:
		return failoverOptions(e)
	case endpoint.Cluster:
		return clusterOptions(e)
	}
	return nodeOptions(e)
}

// nodeOptions reads the client options the way go-redis's ParseURL reads a node URL's (the URL ParseURL always
// had), on a URL that carries only them; the address, credentials, database and TLS come from e, which
// endpoint.Parse read by ParseURL's rules.
func nodeOptions(e endpoint.Endpoint) (*redis.Options, error) {
	o, err := redis.ParseURL("redis://localhost/?" + e.Query.Encode())
	if err != nil {
		return nil, optionsError(err)
	}
	o.Addr, o.Username, o.Password, o.DB = e.Addrs[0], e.Username, e.Password, e.DB
	if e.TLS {
		// ParseURL names the host to verify; the other topologies leave it to crypto/tls (see tlsConfig).
		host, _, err := net.SplitHostPort(e.Addrs[0])
		if err != nil {
			return nil, err
		}
		o.TLSConfig = tlsConfig(e)
		o.TLSConfig.ServerName = host
	}
	return o, nil
}

func failoverOptions(e endpoint.Endpoint) (*redis.FailoverOptions, error) {
	// go-redis reads the client options; the rest is set from e's fields, which it would read differently.
	o, err := redis.ParseFailoverURL("redis://host:" + endpoint.DefaultSentinelPort + "/?" + e.Query.Encode())
	if err != nil {
		return nil, optionsError(err)
	}
	o.SentinelAddrs, o.MasterName, o.DB = slices.Clone(e.Addrs), e.MasterName, e.DB
	o.Username, o.Password = e.Username, e.Password
	o.SentinelUsername, o.SentinelPassword = e.SentinelUsername, e.SentinelPassword
	o.TLSConfig = tlsConfig(e)
	return o, nil
}

func clusterOptions(e endpoint.Endpoint) (*redis.ClusterOptions, error) {
	o, err := redis.ParseClusterURL("redis://host:" + endpoint.DefaultPort + "?" + e.Query.Encode())
	if err != nil {
		return nil, optionsError(err)
	}
	o.Addrs, o.Username, o.Password = slices.Clone(e.Addrs), e.Username, e.Password
	o.TLSConfig = tlsConfig(e)
	return o, nil
}

// optionsError says that go-redis refused an option after '?'. The URL it parsed holds only those options, never
// the password; a *url.Error would repeat it all the same, so only what is wrong is kept.
func optionsError(err error) error {
	if ue := (*url.Error)(nil); errors.As(err, &ue) {
		err = ue.Err
	}
	return fmt.Errorf("the client options after '?': %w", err)
}

// tlsConfig leaves ServerName empty so that crypto/tls checks each node's certificate against the host dialled: a
// Sentinel's master and a Cluster's nodes are other hosts than the addresses configured.
func tlsConfig(e endpoint.Endpoint) *tls.Config {
	if !e.TLS {
		return nil
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: e.SkipVerify} //nolint:gosec // asked for with skip_verify=true
}
