package config

import _ "embed"

// Example is config/example.yaml: a commented configuration with every key, its default and its meaning. It
// validates, and tests elsewhere may Parse it as a realistic fixture.
//
//go:embed example.yaml
var Example []byte
