package config

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

func TestDurationYAML(t *testing.T) {
	tests := []struct {
		in      string
		want    time.Duration
		out     string
		wantErr string
	}{
		{"30m", 30 * time.Minute, "30m", ""},
		{"1h", time.Hour, "1h", ""},
		{"720h", 720 * time.Hour, "720h", ""},
		{"1h30m", 90 * time.Minute, "1h30m", ""},
		{"45s", 45 * time.Second, "45s", ""},
		{"1m30s", 90 * time.Second, "1m30s", ""},
		{"1.5h", 90 * time.Minute, "1h30m", ""},
		{`""`, 0, "0s", ""},
		{"30", 0, "", `line 1: invalid duration "30"`},
		{"1d", 0, "", `invalid duration "1d"`},
		{"[1h]", 0, "", "want a duration"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			var v struct {
				D Duration `yaml:"d"`
			}
			err := yaml.Unmarshal([]byte("d: "+tt.in), &v)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if v.D.Std() != tt.want {
				t.Errorf("decoded %v, want %v", v.D.Std(), tt.want)
			}
			out, err := yaml.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.TrimSpace(string(out)); got != "d: "+tt.out {
				t.Errorf("marshalled %q, want %q", got, "d: "+tt.out)
			}
		})
	}
}

func TestDurationJSON(t *testing.T) {
	in := Duration(90 * time.Minute)
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `"1h30m"` {
		t.Errorf("json = %s", b)
	}
	var out Duration
	if err := json.Unmarshal(b, &out); err != nil || out != in {
		t.Errorf("round trip = %v, %v", out, err)
	}
	if err := json.Unmarshal([]byte(`"soon"`), &out); err == nil {
		t.Error("bad duration text accepted")
	}
}

// TestConfigRoundTrip checks that a loaded configuration marshals back to YAML that loads to the same values.
func TestConfigRoundTrip(t *testing.T) {
	cfg := parseExample(t)
	out, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	again, err := Parse(out, "marshalled")
	if err != nil {
		t.Fatalf("marshalled config does not parse:\n%v\n%s", err, out)
	}
	if again.Redis.RequestTTL != cfg.Redis.RequestTTL || again.Approvals.Rules[1].ExpiresAfter != cfg.Approvals.Rules[1].ExpiresAfter ||
		again.Clusters[0].HyperPod.Templates["gpu-small"].InstanceGroups[1].VolumeSizeGB != 500 {
		t.Errorf("values changed in the round trip:\n%s", out)
	}
}
