package endpoint

import (
	"net/url"
	"reflect"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	cases := []struct {
		url  string
		want Endpoint
	}{
		{"redis://127.0.0.1:6390/2", Endpoint{Kind: Node, Addrs: []string{"127.0.0.1:6390"}, DB: 2}},
		{"rediss://u:p%40ss@cache.example:6380", Endpoint{Kind: Node, Addrs: []string{"cache.example:6380"}, Username: "u", Password: "p@ss", TLS: true}},
		// A node URL reads as go-redis's ParseURL reads it: no host is localhost, no port is 6379, db overrides the path.
		{"redis://", Endpoint{Kind: Node, Addrs: []string{"localhost:6379"}}},
		{"redis://:pw@:6380/1", Endpoint{Kind: Node, Addrs: []string{"localhost:6380"}, Password: "pw", DB: 1}},
		{"REDIS://h:/0", Endpoint{Kind: Node, Addrs: []string{"h:6379"}}},
		{"redis://[::1]", Endpoint{Kind: Node, Addrs: []string{"[::1]:6379"}}},
		{"redis://h//3/", Endpoint{Kind: Node, Addrs: []string{"h:6379"}, DB: 3}},
		{"redis://h/1?db=4", Endpoint{Kind: Node, Addrs: []string{"h:6379"}, DB: 4}},
		{"redis://h/0#ignored", Endpoint{Kind: Node, Addrs: []string{"h:6379"}}},
		{"rediss://h:6380/0?skip_verify=true&dial_timeout=2s&pool_size=5", Endpoint{Kind: Node, Addrs: []string{"h:6380"},
			TLS: true, SkipVerify: true, Query: url.Values{"dial_timeout": {"2s"}, "pool_size": {"5"}}}},
		{"redis-sentinel://s1,s2:26380,[::1]/mymaster", Endpoint{Kind: Sentinel, MasterName: "mymaster",
			Addrs: []string{"s1:26379", "s2:26380", "[::1]:26379"}}},
		{"rediss-sentinel://:secret@s1:26379/my%2Fmaster/3?sentinel_password=sp&sentinel_username=su&dial_timeout=2s",
			Endpoint{Kind: Sentinel, MasterName: "my/master", DB: 3, Addrs: []string{"s1:26379"}, Password: "secret",
				SentinelUsername: "su", SentinelPassword: "sp", TLS: true, Query: url.Values{"dial_timeout": {"2s"}}}},
		{"redis-cluster://n1:7000,n2:7001", Endpoint{Kind: Cluster, Addrs: []string{"n1:7000", "n2:7001"}}},
		{"rediss-cluster://default:tok@clustercfg.example:6379/0?skip_verify=true",
			Endpoint{Kind: Cluster, Addrs: []string{"clustercfg.example:6379"}, Username: "default", Password: "tok", TLS: true,
				SkipVerify: true}},
	}
	for _, c := range cases {
		t.Run(c.url, func(t *testing.T) {
			got, err := Parse(c.url)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("Parse = %+v, want %+v", got, c.want)
			}
		})
	}
}

func TestParseRefuses(t *testing.T) {
	cases := []struct{ url, want string }{
		{"http://host:6379", "the scheme must be"},
		{"host:6379", "the scheme must be"},
		{"redis://host:port", "invalid port"},
		{"redis://host:0", "port must be a number from 1 to 65535"},
		{"redis://a,b:6379", "a character a host cannot hold"},
		{"redis://h/db", "the path must be a database number"},
		{"redis://h/0/1", "the path must be one database number"},
		{"redis://h/0?db=x", "the option db must be a database number"},
		{"redis://h?skip_verify=true", "applies to TLS only"},
		{"rediss://h?skip_verify=maybe", "skip_verify must be true or false"},
		{"redis://u:p%zz@h", "not valid URL userinfo"},
		{"redis-sentinel://s1:26379", "the path must be /master-name"},
		{"redis-sentinel://s1:26379/m/x", "database number"},
		{"redis-sentinel://s1:26379/m/0/1", "the path must be"},
		{"redis-sentinel:///m", "at least one host"},
		{"redis-sentinel://s1:26379,s1:26379/m", "listed twice"},
		{"redis-sentinel://s1:0/m", "port must be a number from 1 to 65535"},
		{"redis-sentinel://::1/m", "IPv6 address in brackets"},
		{"redis-sentinel://s1,/m", "empty host"},
		{"redis-sentinel://s1/m?master_name=x", "put the master name in the path"},
		{"redis-sentinel://s1/m?addr=s2:26379", "list every host"},
		{"redis-sentinel://s1/m?password=x", "before '@'"},
		{"redis-sentinel://s1/m?skip_verify=true", "applies to TLS only"},
		{"redis-sentinel://s1/m#frag", "fragment"},
		{"redis-cluster://n1:7000/1", "only database 0"},
	}
	for _, c := range cases {
		t.Run(c.url, func(t *testing.T) {
			_, err := Parse(c.url)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Parse error = %v, want one saying %q", err, c.want)
			}
		})
	}
}

// TestParseLeavesClientOptionsToGoRedis: the client's own options, wrong ones included, are kept for ops/state,
// which checks them with go-redis (state.CheckEndpoint); this package does not import it.
func TestParseLeavesClientOptionsToGoRedis(t *testing.T) {
	for _, u := range []string{"redis://h:6379/0?dial_timeout=abc", "redis://h?bogus=1", "redis://h?password=x",
		"redis-sentinel://s1/m?bogus=1", "redis-cluster://n1:7000?dial_timeout=soon"} {
		e, err := Parse(u)
		if err != nil {
			t.Errorf("Parse(%q): %v", u, err)
			continue
		}
		if len(e.Query) != 1 {
			t.Errorf("Parse(%q).Query = %v, want the one option", u, e.Query)
		}
	}
}

func TestParseNeverEchoesThePassword(t *testing.T) {
	for _, u := range []string{"redis-sentinel://u:hunter2@s1/m?master_name=x", "redis-cluster://u:hunter2@n1:99999",
		"redis-sentinel://u:hunter2@s1/m?sentinel_password=hunter3&skip_verify=1", "redis://u:hunter2@h:notaport",
		"redis://u:hunter2@h/x", "redis://:hunter2@h:70000"} {
		_, err := Parse(u)
		if err == nil || strings.Contains(err.Error(), "hunter") {
			t.Errorf("Parse(%q) error = %v: want an error without the password", u, err)
		}
	}
}

func TestCheck(t *testing.T) {
	for _, e := range []Endpoint{{Kind: Sentinel, Addrs: []string{"s:1"}}, {Kind: Sentinel, MasterName: "m"},
		{Kind: Cluster}, {Kind: Cluster, Addrs: []string{"n:1"}, DB: 1}, {Kind: Node},
		{Kind: Node, Addrs: []string{"a:1", "b:1"}}, {Kind: Node, Addrs: []string{"a:1"}, WaitReplicas: -1}, {Kind: "ring"}} {
		if err := e.Check(); err == nil {
			t.Errorf("Check(%+v) = nil, want an error", e)
		}
	}
	for _, e := range []Endpoint{{Kind: Node, Addrs: []string{"a:1"}}, {Kind: Sentinel, MasterName: "m", Addrs: []string{"s:1"}},
		{Kind: Cluster, Addrs: []string{"n:1"}, WaitReplicas: 1}} {
		if err := e.Check(); err != nil {
			t.Errorf("Check(%+v) = %v, want nil", e, err)
		}
	}
}
