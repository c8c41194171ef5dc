// Package approvals is the approval policy of HyperOps: it decides who may ask for an operation, how many approvals
// a plan needs and from which approver group (the first matching rule of config), and whether a person may vote.
// Approver groups are Slack user IDs plus Slack user groups, resolved through a Directory the bot implements.
package approvals
