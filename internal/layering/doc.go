// Package layering holds no code: its test reads the package comment of every package of the module and fails when a
// package links what its comment forbids ("It never imports Slack, Redis or `ops/state`."), so the docs that say
// how the house is laid out cannot drift from the imports. It imports nothing.
package layering
