// Package harness assembles the end-to-end world the scenarios run in: the bot built once and started as real
// replica processes, a fake Slack, a fake AWS whose capacity changes add and remove kwok nodes in a real control
// plane, and a real Redis, with helpers that wait on what Slack shows, what Redis holds and what the API server has.
package harness
