// Command hyperops is the HyperOps bot: `run` connects to Slack over Socket Mode and serves the guarded operations,
// `validate-config` checks a configuration file and prints every problem at once, and `version` prints the build.
package main
