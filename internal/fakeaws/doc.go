// Package fakeaws is an in-process stand-in for the AWS APIs HyperOps calls: SageMaker HyperPod clusters and the
// training plans (reservations) their instance groups run on,
// EKS managed node groups and the Pricing API, spoken over real HTTP in their wire protocols (awsJson1_1 and
// REST-JSON) so the real aws-sdk-go-v2 clients, pointed at it with BaseEndpoint, run unchanged in tests.
package fakeaws
