package config_test

import (
	"errors"
	"fmt"

	"github.com/hyperops/hyperops/config"
)

// ExampleParse shows the one error Parse returns for a file with several problems: one line per problem, as
// file:line: path: message.
func ExampleParse() {
	_, err := config.Parse([]byte(`slack:
  channels: [C0123OPS]
clusters:
  - name: ml-dev
    namespaces: [ml]
    limits: {maxNodesPerGroup: -1}
    gpu nodes: {}
reports:
  - {name: nightly, schedule: "0 0 9 * * *", channel: C0123OPS}
`), "hyperops.yaml")
	var problems config.Problems
	if errors.As(err, &problems) {
		for _, p := range problems {
			fmt.Println(p)
		}
	}
	// Output:
	// hyperops.yaml:6: clusters[0].limits.maxNodesPerGroup: a limit must be ≥ 0 (0 forbids what it caps), got -1
	// hyperops.yaml:7: clusters[0]["gpu nodes"]: unknown key "gpu nodes" (allowed here: context, defaultNamespace, eks, environment, gpuNodes, hyperpod, images, impersonate, instanceTypes, kubeconfig, kueue, limits, name, namespaceEnvironments, namespaces, profiles, region, requestTimeout, requiredLabels, storageClasses, verify)
	// hyperops.yaml:9: reports[0].schedule: report "nightly": bad cron expression "0 0 9 * * *" (want 5 fields: minute hour day-of-month month day-of-week): expected exactly 5 fields, found 6: [0 0 9 * * *]
}

// ExampleConfig_CheckSlackTokens shows what run prints when the Slack tokens are not in the environment.
func ExampleConfig_CheckSlackTokens() {
	cfg, err := config.Parse(config.Example, "example.yaml")
	if err != nil {
		fmt.Println(err)
		return
	}
	cfg.Slack.AppToken, cfg.Slack.BotToken = "", "xoxb-1-2"
	fmt.Println(cfg.CheckSlackTokens())
	// Output:
	// Slack tokens are missing: slack.appToken (${SLACK_APP_TOKEN}) is empty.
	// How to get them:
	//   1. At https://api.slack.com/apps choose "Create New App" → "From an app manifest", pick the workspace, and paste
	//      deploy/slack-app-manifest.yaml.
	//   2. Under "Socket Mode", enable Socket Mode.
	//   3. Under "Basic Information" → "App-Level Tokens", generate a token with the connections:write scope:
	//      that is SLACK_APP_TOKEN (it starts with xapp-).
	//   4. Under "Install App", install the app to the workspace and copy the "Bot User OAuth Token":
	//      that is SLACK_BOT_TOKEN (it starts with xoxb-).
	//   5. export SLACK_APP_TOKEN=xapp-… SLACK_BOT_TOKEN=xoxb-…   and start hyperops again.
	// No Slack workspace, AWS account or cluster yet? Try HyperOps in a browser first: make playground (hyperops playground).
}
