package state

import (
	"reflect"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/hyperops/hyperops/config/endpoint"
)

// TestNodeURLReadsAsGoRedisDoes: a redis:// or rediss:// URL gives the client options go-redis's ParseURL gives,
// which is how HyperOps read a node URL before config/endpoint parsed it itself.
func TestNodeURLReadsAsGoRedisDoes(t *testing.T) {
	for _, u := range []string{
		"redis://h:6379/0",
		"redis://",
		"redis://:pw@:6380/1",
		"redis://user@h",
		"rediss://u:p%40ss@cache.example:6380/2?skip_verify=true&dial_timeout=2s&pool_size=5&max_retries=-1",
		"rediss://h?skip_verify=false",
		"rediss://[::1]:6380",
		"redis://[::1]",
		"redis://h/1?db=4",
		"redis://h:/0",
		"redis://h//3/",
		"redis://h/-1",
		"redis://h/0#ignored",
		"redis://h?protocol=3&client_name=hyperops&read_timeout=0&conn_max_idle_time=5m&pool_fifo=1",
	} {
		want, err := redis.ParseURL(u)
		if err != nil {
			t.Fatalf("go-redis refuses %s: %v", u, err)
		}
		e, err := endpoint.Parse(u)
		if err != nil {
			t.Errorf("Parse(%q): %v", u, err)
			continue
		}
		got, err := clientOptions(e)
		if err != nil {
			t.Errorf("clientOptions(%q): %v", u, err)
			continue
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got %+v\nwant %+v", u, got, want)
		}
	}
}

// TestCheckEndpointRefuses: what go-redis refuses in a URL is refused, by endpoint.Parse when it reads that part
// itself and by CheckEndpoint (and so NewClient and `hyperops validate-config`) for the client options.
func TestCheckEndpointRefuses(t *testing.T) {
	cases := []struct{ url, want string }{
		{"redis://h:6379/0?dial_timeout=abc", "invalid dial_timeout duration"},
		{"redis://h?bogus=1", "unexpected option: bogus"},
		{"redis://h?password=x", "unexpected option: password"},
		{"redis://h?sentinel_username=x", "unexpected option: sentinel_username"},
		{"redis-sentinel://s1/m?bogus=1", "unexpected option: bogus"},
		{"redis-cluster://n1:7000?dial_timeout=soon", "dial_timeout"},
		{"rediss-cluster://n1:7000?pool_size=many", "pool_size"},
	}
	for _, c := range cases {
		t.Run(c.url, func(t *testing.T) {
			e, err := endpoint.Parse(c.url)
			if err != nil {
				t.Fatalf("Parse: %v (the client options are go-redis's to check)", err)
			}
			err = CheckEndpoint(e)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "after '?'") {
				t.Fatalf("CheckEndpoint error = %v, want one about the options after '?' saying %q", err, c.want)
			}
			if _, err := NewClient(e); err == nil {
				t.Fatalf("NewClient made a client from %s", c.url)
			}
		})
	}
	// go-redis refuses these too; endpoint.Parse says why first.
	for _, u := range []string{"redis://host:port", "redis://h/x", "redis://h/0/1", "redis://h?db=x", "redis://h?skip_verify=true"} {
		if _, err := redis.ParseURL(u); err == nil {
			t.Errorf("go-redis reads %s: drop it from this list", u)
		}
		if _, err := endpoint.Parse(u); err == nil {
			t.Errorf("Parse(%q) = nil error, want the refusal go-redis gives", u)
		}
	}
}

func TestCheckEndpointNeverEchoesThePassword(t *testing.T) {
	for _, u := range []string{"redis-sentinel://u:hunter2@s1/m?sentinel_password=hunter3&bogus=1",
		"rediss://u:hunter2@h?dial_timeout=x", "redis-cluster://:hunter2@n1?max_retries=y"} {
		e, err := endpoint.Parse(u)
		if err != nil {
			t.Fatalf("Parse(%q): %v", u, err)
		}
		if err := CheckEndpoint(e); err == nil || strings.Contains(err.Error(), "hunter") {
			t.Errorf("CheckEndpoint(%q) = %v: want an error without the password", u, err)
		}
	}
}
