// Package fakeslack is an in-process Slack for tests and benchmarks: the Web API, Socket Mode over a real websocket,
// response URLs and files upload v2, with Slack's token rules, Block Kit limits, rate-limit tiers and ack timeouts, and injectable faults (Inject: Slack errors,
// HTTP errors, dropped connections, slow answers, before or after the call is served).
// The real slack-go client talks to it unchanged through slack.OptionAPIURL(srv.APIURL()); tests drive it and assert on what it recorded.
package fakeslack
