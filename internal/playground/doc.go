// Package playground runs the real HyperOps bot against the fake Slack, the fake AWS and a Kubernetes API (the
// local control plane with kwok GPU nodes, or a given kubeconfig), and serves a local page that renders what the bot
// posts, lets a person act as an engineer, a lead, a bystander or an agent, and shows the simulated world.
package playground
