package endpoint

import (
	"slices"
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
		{"redis-sentinel://s1,s2:26380,[::1]/mymaster", Endpoint{Kind: Sentinel, MasterName: "mymaster",
			Addrs: []string{"s1:26379", "s2:26380", "[::1]:26379"}}},
		{"rediss-sentinel://:secret@s1:26379/my%2Fmaster/3?sentinel_password=sp&sentinel_username=su&dial_timeout=2s",
			Endpoint{Kind: Sentinel, MasterName: "my/master", DB: 3, Addrs: []string{"s1:26379"}, Password: "secret",
				SentinelUsername: "su", SentinelPassword: "sp", TLS: true}},
		{"redis-cluster://n1:7000,n2:7001", Endpoint{Kind: Cluster, Addrs: []string{"n1:7000", "n2:7001"}}},
		{"rediss-cluster://default:tok@clustercfg.example:6379/0?skip_verify=true",
			Endpoint{Kind: Cluster, Addrs: []string{"clustercfg.example:6379"}, Username: "default", Password: "tok", TLS: true}},
	}
	for _, c := range cases {
		t.Run(c.url, func(t *testing.T) {
			got, err := Parse(c.url)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if got.Kind != c.want.Kind || !slices.Equal(got.Addrs, c.want.Addrs) || got.MasterName != c.want.MasterName ||
				got.Username != c.want.Username || got.Password != c.want.Password || got.TLS != c.want.TLS ||
				got.DB != c.want.DB || got.SentinelUsername != c.want.SentinelUsername ||
				got.SentinelPassword != c.want.SentinelPassword {
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
		{"redis-sentinel://s1/m?bogus=1", "unexpected option: bogus"},
		{"redis-sentinel://s1/m?skip_verify=true", "applies to TLS only"},
		{"redis-sentinel://s1/m#frag", "fragment"},
		{"redis-cluster://n1:7000/1", "only database 0"},
		{"redis-cluster://n1:7000?dial_timeout=soon", "dial_timeout"},
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

func TestParseNeverEchoesThePassword(t *testing.T) {
	for _, u := range []string{"redis-sentinel://u:hunter2@s1/m?bogus=1", "redis-cluster://u:hunter2@n1:99999",
		"redis-sentinel://u:hunter2@s1/m?sentinel_password=hunter3&bogus=1"} {
		_, err := Parse(u)
		if err == nil || strings.Contains(err.Error(), "hunter") {
			t.Errorf("Parse(%q) error = %v: want an error without the password", u, err)
		}
	}
}

func TestCheck(t *testing.T) {
	for _, e := range []Endpoint{{Kind: Sentinel, Addrs: []string{"s:1"}}, {Kind: Sentinel, MasterName: "m"},
		{Kind: Cluster}, {Kind: Cluster, Addrs: []string{"n:1"}, DB: 1}, {Kind: Node}, {Kind: "ring"}} {
		if err := e.Check(); err == nil {
			t.Errorf("Check(%+v) = nil, want an error", e)
		}
	}
}
